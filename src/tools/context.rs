//! [`ToolContext`]: what a tool can know about the call it is running — its id and its
//! idempotency key — and how it talks while it works — [`ToolContext::report`] (title, text,
//! diffs, locations, progress: [`ToolCallUpdate`]) and [`ToolContext::authorize`] (ask mid-run)
//! — without a change to [`crate::tools::BaseTool::execute`]'s signature.
//!
//! The registry runs each call of a run inside its context (a task-local); a tool asks
//! [`ToolContext::current`]. Outside a registry call, or for a call outside a run (the design's
//! `invoke`), there is none, and [`report`] does nothing. A tool that spawns a task of its
//! own hands the context over (`context.scope(future)`): task-locals do not cross `spawn`.
//!
//! ```
//! use agcore::tools::prelude::*;
//! use agcore::tools::ToolContext;
//! use agcore::tools::event::ToolCallUpdate;
//!
//! struct Deploy;
//!
//! #[async_trait]
//! impl BaseTool for Deploy {
//!     fn name(&self) -> &str { "deploy" }
//!     fn description(&self) -> &str { "Deploy the site" }
//!     fn parameters(&self) -> Value { json!({"type": "object"}) }
//!     async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
//!         agcore::tools::context::report(ToolCallUpdate::title("Deploying the site"));
//!         // Ask before the step that cannot be undone: the same approver as before a call.
//!         ToolContext::authorize("overwrite the production site").await?;
//!         agcore::tools::context::report(ToolCallUpdate::progress(1, Some(1), None));
//!         Ok(json!("deployed"))
//!     }
//! }
//! ```

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::mpsc;

use crate::tools::error::ToolError;
use crate::tools::event::{MAX_UPDATES_PER_CALL, ToolCallUpdate};
use crate::tools::streaming::ApprovalFeed;

/// The `_meta` key of an MCP `tools/call` request that holds the call's idempotency key.
pub const MCP_META_KEY: &str = "io.agcore/idempotency-key";

/// The environment variable `run_command` hands a command its call's idempotency key in.
pub const IDEMPOTENCY_ENV: &str = "AGCORE_IDEMPOTENCY_KEY";

/// The HTTP header a tool sends the key in (the IETF httpapi draft's `Idempotency-Key`).
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

/// The call a tool is running for, and where its updates go.
#[derive(Clone)]
pub struct ToolContext {
    call_id: String,
    idempotency_key: String,
    events: Option<ToolEvents>,
    /// Resolves a watcher's approved input (taken once, by the registry, after the gates).
    approval: Option<Arc<std::sync::Mutex<Option<ApprovalFeed>>>>,
}

impl std::fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolContext")
            .field("call_id", &self.call_id)
            .field("idempotency_key", &self.idempotency_key)
            .field("events", &self.events.is_some())
            .finish()
    }
}

/// Two contexts are equal when they are for the same call with the same key (wherever their
/// updates go).
impl PartialEq for ToolContext {
    fn eq(&self, other: &Self) -> bool {
        self.call_id == other.call_id && self.idempotency_key == other.idempotency_key
    }
}

impl Eq for ToolContext {}

/// Where the updates of calls go: the sending half of a channel of `(call id, update)`, in the
/// order each call reports them. The run makes one per run and turns what arrives into
/// [`crate::llm::StreamEvent::ToolCallUpdate`]s (journaled); a caller of the registry without a
/// run can make its own with [`ToolEvents::channel`].
#[derive(Clone)]
pub struct ToolEvents {
    sender: mpsc::UnboundedSender<(String, ToolCallUpdate)>,
    /// Updates sent for this context's call (bounded by [`MAX_UPDATES_PER_CALL`]).
    sent: Arc<AtomicUsize>,
}

impl std::fmt::Debug for ToolEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolEvents")
            .field("sent", &self.sent.load(Ordering::Relaxed))
            .finish()
    }
}

/// The receiving half of [`ToolEvents::channel`].
pub type ToolEventReceiver = mpsc::UnboundedReceiver<(String, ToolCallUpdate)>;

impl ToolEvents {
    /// A sink and the receiver its updates arrive on.
    pub fn channel() -> (ToolEvents, ToolEventReceiver) {
        let (sender, receiver) = mpsc::unbounded_channel();
        (
            ToolEvents {
                sender,
                sent: Arc::new(AtomicUsize::new(0)),
            },
            receiver,
        )
    }

    /// A sink sending into the same channel with its own count (one per call).
    pub fn for_call(&self) -> ToolEvents {
        ToolEvents {
            sender: self.sender.clone(),
            sent: Arc::new(AtomicUsize::new(0)),
        }
    }

    /// Send `update` for `call_id` (bounded); false when it was dropped (over the limit, or
    /// nobody receives any more).
    pub fn send(&self, call_id: &str, update: ToolCallUpdate) -> bool {
        if update.is_empty() || self.sent.fetch_add(1, Ordering::Relaxed) >= MAX_UPDATES_PER_CALL {
            return false;
        }
        self.sender
            .send((call_id.to_owned(), update.bounded()))
            .is_ok()
    }
}

tokio::task_local! {
    static CURRENT: ToolContext;
}

impl ToolContext {
    /// A context for call `call_id` with its idempotency key.
    pub fn new(call_id: impl Into<String>, idempotency_key: impl Into<String>) -> Self {
        ToolContext {
            call_id: call_id.into(),
            idempotency_key: idempotency_key.into(),
            events: None,
            approval: None,
        }
    }

    /// This context with the end of a watcher's [`crate::tools::StreamingInput::approved`],
    /// which the registry resolves once the call passed its gates.
    pub(crate) fn with_approval_feed(mut self, feed: ApprovalFeed) -> Self {
        self.approval = Some(Arc::new(std::sync::Mutex::new(Some(feed))));
        self
    }

    /// The approval end of the call's watcher, once.
    pub(crate) fn take_approval_feed(&self) -> Option<ApprovalFeed> {
        let slot = self.approval.as_ref()?;
        slot.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// Where this call's updates go, if anywhere.
    pub fn events(&self) -> Option<&ToolEvents> {
        self.events.as_ref()
    }

    /// This context with its updates going to `events`.
    pub fn with_events(mut self, events: ToolEvents) -> Self {
        self.events = Some(events);
        self
    }

    /// Report `update` for this call: the run's caller receives it as
    /// [`crate::llm::StreamEvent::ToolCallUpdate`] (in the order reported) and the run's journal
    /// keeps it for replay. Never blocks; does nothing when nobody listens. Texts are cut to
    /// [`crate::tools::event::MAX_PART_BYTES`], and a call's updates beyond
    /// [`MAX_UPDATES_PER_CALL`] are dropped. Returns whether it was delivered.
    pub fn report(&self, update: ToolCallUpdate) -> bool {
        match &self.events {
            Some(events) => events.send(&self.call_id, update),
            None => false,
        }
    }

    /// Ask, in the middle of this task's call, whether it may go on: `reason` says what it is
    /// about to do (e.g. "delete 3 files outside src/"). Asked through the registry's approver
    /// — the same as an approval before the call (the CLI's prompt, a library
    /// [`crate::tools::Approver`], an editor over ACP) — as an
    /// [`crate::tools::ApprovalRequest`] for this call with `reason` in its reason. An "allow
    /// for the session" answer is remembered as before a call.
    ///
    /// Without an approver it is refused unless an allow rule on the tool's arguments matches
    /// the call; an approver that defers (nobody can answer now) refuses it with
    /// [`ToolError::ApprovalDeferred`]. It never widens anything: a tool asks only on top of
    /// the gates its call already passed.
    ///
    /// # Errors
    /// [`ToolError::ApprovalDenied`] when refused (return it: the model reads why), or when
    /// called outside a registry call; [`ToolError::ApprovalDeferred`] when deferred.
    pub async fn authorize(reason: impl Into<String>) -> Result<(), ToolError> {
        crate::tools::authorize::authorize(reason.into()).await
    }

    /// The context of the call running on this task, if any.
    pub fn current() -> Option<ToolContext> {
        CURRENT.try_with(Clone::clone).ok()
    }

    /// Run `future` (a call) in this context.
    pub async fn scope<F: Future>(self, future: F) -> F::Output {
        CURRENT.scope(self, future).await
    }

    /// The call id the model gave.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The call's idempotency key: the same on every retry and resumption of this call, in
    /// any process, and different for every other call (see [`crate::run::idempotency`]).
    /// Hand it to the service the tool calls so that a call repeated after a crash is
    /// recognised there.
    pub fn idempotency_key(&self) -> &str {
        &self.idempotency_key
    }
}

/// Report `update` for the call running on this task ([`ToolContext::report`]); nothing
/// outside a call of a run. Returns whether it was delivered.
pub fn report(update: ToolCallUpdate) -> bool {
    CURRENT
        .try_with(|context| context.report(update))
        .unwrap_or(false)
}

/// Whether the call running on this task has anyone to report to: check it before building
/// an update that costs something (a copy of a file for a diff).
pub fn listening() -> bool {
    CURRENT
        .try_with(|context| context.events.is_some())
        .unwrap_or(false)
}
