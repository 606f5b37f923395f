//! The usage limits of a run ([`crate::run::UsageLimits`]), as two checks the step function
//! makes: before each model request, and when a reply asks for tools.
//!
//! A reply that arrived is never thrown away for its tokens: a final answer is returned, and
//! a tool turn runs and is committed; the run then stops before the next request if the
//! tokens (or their cost) leave no room for it. Tool calls are counted before they run, so a
//! turn that would go over `max_tool_calls` runs none of its calls.

use crate::run::error::LlmError;
use crate::run::state::{RunState, ToolTurn};
use crate::run::usage::{RunUsage, UsageLimit};

/// What the run spent so far.
pub(crate) fn run_usage(state: &RunState) -> RunUsage {
    RunUsage {
        requests: state.turns.saturating_add(state.extra_requests),
        tool_calls: state.tool_calls,
        tokens: state.usage.unwrap_or_default(),
    }
}

/// Before a model request: is there room for one more?
pub(crate) fn admit_request(state: &RunState) -> Result<(), LlmError> {
    match state
        .rules
        .usage_limits
        .crossed(&run_usage(state), state.rules.prices.as_ref())
    {
        Some(limit) => Err(exceeded(state, limit)),
        None => Ok(()),
    }
}

/// Before a tool turn runs: count the calls it will run, unless that goes over
/// `max_tool_calls`.
pub(crate) fn admit_tool_turn(state: &mut RunState, turn: &ToolTurn) -> Result<(), LlmError> {
    let to_run = turn
        .calls
        .iter()
        .filter(|call| call.answer.is_none())
        .count();
    let total = u32::try_from(to_run)
        .unwrap_or(u32::MAX)
        .saturating_add(state.tool_calls);
    if let Some(max) = state.rules.usage_limits.max_tool_calls
        && total > max
    {
        return Err(exceeded(state, UsageLimit::ToolCalls(max)));
    }
    state.tool_calls = total;
    Ok(())
}

fn exceeded(state: &RunState, limit: UsageLimit) -> LlmError {
    LlmError::UsageLimitExceeded {
        limit,
        usage: run_usage(state),
        history: state.committed_messages().to_vec(),
    }
}
