//! How a tool turn is journaled in two commits: the run state before the batch, with the
//! starts of the calls that will not ask anyone marked in it, and the next record after the
//! batch (the history before the next request, or the run state when it suspends), which
//! holds the answer of the call that finished last.
//!
//! The crash guarantees stay those of one record per start and per answer:
//! - a call's start is durable before its tool runs — in the run state written before the
//!   batch, or, for a call that may ask the approver (a person may take minutes, and a crash
//!   meanwhile must not turn an unasked call into an interrupted one), in its own record just
//!   before its tool runs;
//! - a call that finishes while others still run records its answer at once, so a crash
//!   during a slower call keeps it; only the batch's last answer waits for the next record,
//!   which comes right after it with nothing effectful in between.
//!
//! A call whose start was marked ahead but which never started (a crash before it did) is
//! answered as interrupted on resume, with its idempotency key: the safe reading of "may
//! have run".

use crate::run::state::RunState;
use crate::run::step::ToolBatch;
use crate::tools::registry::{Gated, ToolCallRequest, ToolRegistry};

/// For each call that runs in `batch` (by index in `batch.run`): whether its start is marked
/// in the run state written before the batch. With no journal, none (nothing is written).
/// A call that needs its gates to decide is passed through them here, once: its result lands
/// in `gated` (by index in `batch.run`), for the call to run with.
pub(crate) fn starts_ahead<'a>(
    registry: &'a ToolRegistry,
    batch: &ToolBatch,
    journaled: bool,
    gated: &mut [Option<Gated<'a>>],
) -> Vec<bool> {
    batch
        .run
        .iter()
        .zip(gated.iter_mut())
        .map(|(&position, gated)| {
            journaled
                && (batch.approved.contains(&position)
                    || batch.calls.get(position).is_some_and(|call| {
                        !gated
                            .get_or_insert_with(|| registry.gate(&ToolCallRequest::from(call)))
                            .may_ask()
                    }))
        })
        .collect()
}

/// The run state as journaled before the batch: without its history, and with the starts
/// marked ahead (`ahead`, by index in `positions`) set.
pub(crate) fn state_with_starts(state: &RunState, positions: &[usize], ahead: &[bool]) -> RunState {
    let mut journaled = state.without_messages();
    for (&position, _) in positions.iter().zip(ahead).filter(|(_, ahead)| **ahead) {
        journaled.mark_started(position);
    }
    journaled
}
