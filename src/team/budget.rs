//! One budget for a tree of runs: a sub-agent may spend what its own limits allow and what
//! its parent has left, whichever is less; what it spent counts in its parent's run.

use crate::run::state::RunState;
use crate::run::usage::{RunUsage, UsageLimits};

/// The most sub-agents one run runs at once (the rest of a turn's sub-agent calls wait for a
/// place): a model asking for a hundred children at once gets them eight at a time.
pub const MAX_CONCURRENT_CHILDREN: usize = 8;

/// The limits of a child started now by the run in `parent`: its own, tightened by what is
/// left of the parent's.
///
/// `siblings` children start together (one tool turn's sub-agent calls): each is given an equal
/// share of what is left, reserved before any of them starts, so together they cannot spend
/// more than the parent had left — and, share within share, the root's limits bound the whole
/// tree whatever its fan-out and depth. (A child whose request share is 0 fails at once with
/// [`crate::run::LlmError::UsageLimitExceeded`], which its parent reads as the call's error.)
pub(crate) fn child_limits(own: &UsageLimits, parent: &RunState, siblings: usize) -> UsageLimits {
    let limits = &parent.rules.usage_limits;
    let used = crate::run::budget::run_usage(parent);
    let siblings = siblings.max(1);
    let shares64 = u64::try_from(siblings).unwrap_or(u64::MAX);
    let shares32 = u32::try_from(siblings).unwrap_or(u32::MAX);
    let left64 = |max: Option<u64>, used: u64| max.map(|max| max.saturating_sub(used) / shares64);
    let left32 = |max: Option<u32>, used: u32| max.map(|max| max.saturating_sub(used) / shares32);
    let tighter64 = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let tighter32 = |a: Option<u32>, b: Option<u32>| match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    };
    let cost_left = match (limits.max_cost, parent.rules.prices.as_ref()) {
        (Some(max), Some(prices)) => Some((max - used.cost(prices)).max(0.0) / siblings as f64),
        (max, _) => max.map(|max| max / siblings as f64),
    };
    UsageLimits {
        max_requests: tighter32(own.max_requests, left32(limits.max_requests, used.requests)),
        max_input_tokens: tighter64(
            own.max_input_tokens,
            left64(limits.max_input_tokens, used.input_tokens()),
        ),
        max_output_tokens: tighter64(
            own.max_output_tokens,
            left64(limits.max_output_tokens, used.output_tokens()),
        ),
        max_total_tokens: tighter64(
            own.max_total_tokens,
            left64(limits.max_total_tokens, used.total_tokens()),
        ),
        max_tool_calls: tighter32(
            own.max_tool_calls,
            left32(limits.max_tool_calls, used.tool_calls),
        ),
        max_cost: match (own.max_cost, cost_left) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
    }
}

/// Count what a child spent in its parent's run.
pub(crate) fn charge(parent: &mut RunState, child: RunUsage) {
    parent.extra_requests = parent.extra_requests.saturating_add(child.requests);
    parent.tool_calls = parent.tool_calls.saturating_add(child.tool_calls);
    let mut usage = parent.usage.unwrap_or_default();
    usage += child.tokens;
    parent.usage = Some(usage);
}
