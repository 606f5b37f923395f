//! [`ToolContext`]: what a tool can know about the call it is running — its id and its
//! idempotency key — without a change to [`crate::tools::BaseTool::execute`]'s signature.
//!
//! The registry runs each call of a run inside its context (a task-local); a tool asks
//! [`ToolContext::current`]. Outside a registry call, or for a call outside a run (the design's
//! `invoke`), there is none.

use std::future::Future;

/// The `_meta` key of an MCP `tools/call` request that holds the call's idempotency key.
pub const MCP_META_KEY: &str = "io.agcore/idempotency-key";

/// The environment variable `run_command` hands a command its call's idempotency key in.
pub const IDEMPOTENCY_ENV: &str = "AGCORE_IDEMPOTENCY_KEY";

/// The HTTP header a tool sends the key in (the IETF httpapi draft's `Idempotency-Key`).
pub const IDEMPOTENCY_HEADER: &str = "Idempotency-Key";

/// The call a tool is running for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolContext {
    call_id: String,
    idempotency_key: String,
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
        }
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
