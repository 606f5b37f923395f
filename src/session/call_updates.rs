//! [`call_updates`]: the updates a session's calls reported ([`crate::tools::ToolCallUpdate`],
//! journaled as `call_update` steps), for a UI that redraws a reopened conversation —
//! `agcore chat --session`, an editor's ACP `session/load` — with
//! [`crate::run::replay::replay_with_updates`].

use serde_json::Value;

use crate::session::journal::CALL_UPDATE;
use crate::session::record::Session;
use crate::tools::event::ToolCallUpdate;

/// One stored update: the call it belongs to and what it said.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredCallUpdate {
    /// The call id.
    pub call_id: String,
    /// The update.
    pub update: ToolCallUpdate,
}

/// The updates `session`'s top-level calls reported, in the order they were recorded. A step
/// that does not parse is skipped (it is for display only; the run never reads it).
pub fn call_updates(session: &Session) -> Vec<StoredCallUpdate> {
    session
        .steps
        .iter()
        .filter(|step| step.kind == CALL_UPDATE)
        .filter_map(|step| {
            let call_id = step.payload.get("call_id").and_then(Value::as_str)?;
            let update = serde_json::from_value(step.payload.get("update")?.clone()).ok()?;
            Some(StoredCallUpdate {
                call_id: call_id.to_owned(),
                update,
            })
        })
        .collect()
}
