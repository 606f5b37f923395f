//! Input that streams: a tool that opts in ([`crate::tools::BaseTool::supports_input_streaming`])
//! receives a call's arguments while the model is still writing them, to prepare and report
//! (e.g. `edit_file` shows its diff growing) — never to act.
//!
//! # Why a tool cannot act before its input is approved
//! [`crate::tools::BaseTool::watch_input`] is handed a [`StreamingInput`], and nothing else:
//! - the partial values are [`PartialInput`]s, read-only snapshots of JSON that has not been
//!   validated (a shared `Arc<Value>`; there is no way to get the final value out of one);
//! - the final input is reachable only through [`StreamingInput::approved`], a future the
//!   registry resolves *after* the call passed validation, permissions, rules and approval,
//!   immediately before it executes — and resolves with `None` when the call was refused (or
//!   the model's reply was discarded), so a watcher that waits for it learns that it must not
//!   act;
//! - the action itself stays in [`crate::tools::BaseTool::execute`], which the registry calls
//!   only after the same gates, with the validated input.
//!
//! The watcher runs on its own task, inside the call's [`crate::tools::ToolContext`] (so its
//! [`crate::tools::context::report`]s reach the caller), and is aborted when the call ends.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{oneshot, watch};

/// A partial value of a call's arguments: what the model has streamed so far, parsed as far as
/// it goes (an unfinished string holds its text so far). Read-only and not validated: use it to
/// prepare and to report, never to act.
#[derive(Debug, Clone, PartialEq)]
pub struct PartialInput(Arc<Value>);

impl PartialInput {
    /// The partial value.
    pub fn value(&self) -> &Value {
        &self.0
    }
}

impl std::ops::Deref for PartialInput {
    type Target = Value;

    fn deref(&self) -> &Value {
        &self.0
    }
}

/// A call's input as it streams, handed to [`crate::tools::BaseTool::watch_input`] (see the
/// module docs).
#[derive(Debug)]
pub struct StreamingInput {
    call_id: String,
    partials: watch::Receiver<Option<PartialInput>>,
    approved: oneshot::Receiver<Value>,
}

impl StreamingInput {
    /// The call id.
    pub fn call_id(&self) -> &str {
        &self.call_id
    }

    /// The next partial value, newer than the last one returned; `None` once the model has
    /// finished the call's arguments (or its reply was discarded). Values come in the order
    /// the model wrote them; a watcher slower than the stream skips to the newest.
    pub async fn next_partial(&mut self) -> Option<PartialInput> {
        if self.partials.changed().await.is_err() {
            return None;
        }
        self.partials.borrow_and_update().clone()
    }

    /// The final input, once the call passed validation, permissions, rules and approval and
    /// is about to execute; `None` when it was refused or never ran.
    pub async fn approved(self) -> Option<Value> {
        self.approved.await.ok()
    }
}

/// The run's end of one call's [`StreamingInput`].
#[derive(Debug)]
pub(crate) struct InputFeed {
    partials: watch::Sender<Option<PartialInput>>,
    approved: Option<oneshot::Sender<Value>>,
}

impl InputFeed {
    /// A feed and the input it feeds, for call `call_id`.
    pub(crate) fn new(call_id: impl Into<String>) -> (InputFeed, StreamingInput) {
        let (partials, partials_rx) = watch::channel(None);
        let (approved, approved_rx) = oneshot::channel();
        (
            InputFeed {
                partials,
                approved: Some(approved),
            },
            StreamingInput {
                call_id: call_id.into(),
                partials: partials_rx,
                approved: approved_rx,
            },
        )
    }

    /// Hand the watcher a newer partial value.
    pub(crate) fn partial(&self, value: Value) {
        self.partials
            .send_replace(Some(PartialInput(Arc::new(value))));
    }

    /// The model finished the arguments: no more partial values. (Keeps the approval end.)
    pub(crate) fn finish_partials(self) -> ApprovalFeed {
        ApprovalFeed {
            approved: self.approved,
        }
    }
}

/// What resolves a watcher's [`StreamingInput::approved`]: handed to the registry, which sends
/// the input after the gates; dropped unsent, the call was refused.
#[derive(Debug)]
pub struct ApprovalFeed {
    approved: Option<oneshot::Sender<Value>>,
}

impl ApprovalFeed {
    /// The gates passed: give the watcher the approved input.
    pub(crate) fn approve(mut self, input: &Value) {
        if let Some(sender) = self.approved.take() {
            let _ = sender.send(input.clone());
        }
    }
}
