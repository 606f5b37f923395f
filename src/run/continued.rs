//! Calls that go on where an earlier attempt left off: a tool that records a continuation
//! while it runs ([`crate::run::JournalEntry::CallContinues`] — an MCP task's id, a
//! multi-round-trip request's state) is, in a restored run, run again *with* it, so it
//! continues (polls the same task, retries with the stored state) instead of starting over or
//! being answered as interrupted.

use serde_json::Value;

use crate::run::state::RunState;

/// Clear `started` on the unfinished calls of a restored tool turn that recorded a
/// continuation: they run again, continued from it.
pub(crate) fn rerun_continued(state: &mut RunState) {
    if let Some(turn) = state.turn_mut() {
        for call in &mut turn.calls {
            if call.started && call.answer.is_none() && call.continuation.is_some() {
                call.started = false;
            }
        }
    }
}

/// The continuations of the calls at `positions` of the current tool turn.
pub(crate) fn of_batch(state: &RunState, positions: &[usize]) -> Vec<Option<Value>> {
    let calls = match &state.phase {
        crate::run::state::Phase::AwaitingTools { turn }
        | crate::run::state::Phase::AwaitingApproval { turn, .. } => &turn.calls[..],
        _ => &[],
    };
    positions
        .iter()
        .map(|&position| {
            calls
                .get(position)
                .and_then(|call| call.continuation.clone())
        })
        .collect()
}
