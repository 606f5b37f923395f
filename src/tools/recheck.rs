//! [`recheck`]: rules on arguments for a value a tool arrives at while it runs — a redirect
//! target of `fetch_url` — so that a rule holds for what the tool really reaches, not only
//! for what the model wrote.
//!
//! The registry runs each call with its rules at hand (a task-local, set only when there are
//! rules); a tool asks [`recheck`] before it acts on a new value of one of its arguments.
//! Outside a registry call (a tool run directly) there is nothing to check and it says yes.

use std::future::Future;
use std::sync::Arc;

use serde_json::Value;

use crate::tools::base::BaseTool;
use crate::tools::rules::{ArgumentRules, RuleAction};

/// A value a tool arrived at mid-call is refused by the rules on its arguments.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} as {tool}.{argument}: {because}")]
pub struct RecheckRefusal {
    /// The tool.
    pub tool: String,
    /// The argument.
    pub argument: String,
    /// The value refused (e.g. the redirect target).
    pub value: String,
    /// Why: the rules that refused it, or the allow rule it leaves.
    pub because: String,
}

/// The rules of the call running on this task.
#[derive(Clone)]
pub(crate) struct CallRules {
    pub rules: Arc<ArgumentRules>,
    pub tool: Arc<dyn BaseTool>,
    pub input: Value,
    /// The allow rules that let the call run without the approval its permission asks for;
    /// a new value must keep to them.
    pub allowed_by: Option<String>,
}

tokio::task_local! {
    static CALL: CallRules;
}

/// Run `future` (a call's execution) with `call`'s rules for [`recheck`].
pub(crate) async fn scope<F: Future>(call: CallRules, future: F) -> F::Output {
    CALL.scope(call, future).await
}

/// Whether the rules on arguments let the running call act on `value` as its `argument`
/// (e.g. `fetch_url` following a redirect to `value`). The call's other arguments stay as
/// they were. Refused: a deny or ask rule matches it (nobody can be asked mid-call), or the
/// call ran without asking because an allow rule matched its first value and none matches
/// this one.
///
/// # Errors
/// [`RecheckRefusal`] naming the rules.
pub fn recheck(argument: &str, value: &str) -> Result<(), RecheckRefusal> {
    CALL.try_with(|call| call.check(argument, value))
        .unwrap_or(Ok(()))
}

impl CallRules {
    fn check(&self, argument: &str, value: &str) -> Result<(), RecheckRefusal> {
        let mut input = self.input.clone();
        if let Some(object) = input.as_object_mut() {
            object.insert(argument.to_owned(), Value::String(value.to_owned()));
        }
        let verdict = self.rules.evaluate_for(self.tool.as_ref(), &input);
        let refuse = |because: String| RecheckRefusal {
            tool: self.tool.name().to_owned(),
            argument: argument.to_owned(),
            value: value.to_owned(),
            because,
        };
        match (verdict.action, &self.allowed_by) {
            (Some(RuleAction::Deny), _) => Err(refuse(verdict.explain())),
            (Some(RuleAction::Ask), _) => Err(refuse(format!(
                "{}, and nobody can be asked while the call runs",
                verdict.explain()
            ))),
            (None, Some(allowed_by)) => Err(refuse(format!(
                "it leaves what let the call run without asking ({allowed_by})"
            ))),
            _ => Ok(()),
        }
    }
}
