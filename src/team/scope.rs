//! Which agent of a team the code running now works for: hooks, tools and approvers can ask
//! [`current_agent_path`] (e.g. to log or gate by agent).

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::Stream;

tokio::task_local! {
    static AGENT_PATH: Arc<str>;
}

/// The path of the team's agent the current task works for (`main`, `main/researcher`), or
/// `None` outside a team's run.
pub fn current_agent_path() -> Option<Arc<str>> {
    AGENT_PATH.try_with(Arc::clone).ok()
}

/// The agent a run works for now (a handoff changes it), shared by the driver and the stream
/// that scopes its polls.
pub(crate) type AgentCell = Arc<std::sync::Mutex<Option<Arc<str>>>>;

/// A stream polled as the agent in its [`AgentCell`]'s: everything it runs while polled
/// (hooks, tools, the approver) sees that agent's path.
pub(crate) struct AgentScoped<S> {
    agent: AgentCell,
    inner: Pin<Box<S>>,
}

impl<S> AgentScoped<S> {
    pub(crate) fn new(agent: AgentCell, inner: S) -> Self {
        AgentScoped {
            agent,
            inner: Box::pin(inner),
        }
    }
}

impl<S: Stream> Stream for AgentScoped<S> {
    type Item = S::Item;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let path = self
            .agent
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone();
        match path {
            Some(path) => AGENT_PATH.sync_scope(path, || self.inner.as_mut().poll_next(cx)),
            None => self.inner.as_mut().poll_next(cx),
        }
    }
}
