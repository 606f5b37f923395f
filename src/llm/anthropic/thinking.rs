//! Extended thinking: the budget of each reasoning effort, and whether a request may think.
//!
//! `reasoning_effort` maps to `thinking: {"type": "enabled", "budget_tokens": N}` with
//! [`LOW_BUDGET`], [`MEDIUM_BUDGET`] or [`HIGH_BUDGET`]; `reasoning_budget_tokens` overrides
//! the number (and alone turns thinking on); `off` (or neither) sends no `thinking`. The
//! budget must stay below `max_tokens`, which is raised to `budget + max_tokens` when it is
//! not. The API refuses thinking in three situations, where the request is sent without it
//! (and the reason logged) rather than failing:
//!
//! - a forced tool (`tool_choice` `any` or `tool`, which typed output uses);
//! - a tool loop whose last assistant message does not start with a thinking block the API
//!   can verify: a history written by another provider or model, or by this model without
//!   thinking ("a final assistant message must start with a thinking block");
//! - (not decided here) sampling: `temperature` is left out, and `top_p` below 0.95.

use crate::vocab::{ReasoningEffort, RequestOptions};

/// `budget_tokens` for `low`.
pub const LOW_BUDGET: u32 = 2048;
/// `budget_tokens` for `medium`.
pub const MEDIUM_BUDGET: u32 = 8192;
/// `budget_tokens` for `high`.
pub const HIGH_BUDGET: u32 = 24576;

/// The thinking budget `options` ask for, if any.
pub(crate) fn requested_budget(options: &RequestOptions) -> Option<u32> {
    let effort_budget = match options.reasoning_effort {
        Some(ReasoningEffort::Off) => return None,
        Some(ReasoningEffort::Low) => Some(LOW_BUDGET),
        Some(ReasoningEffort::Medium) => Some(MEDIUM_BUDGET),
        Some(ReasoningEffort::High) => Some(HIGH_BUDGET),
        None => None,
    };
    options.reasoning_budget_tokens.or(effort_budget)
}

/// `max_tokens` for a request that thinks with `budget`: the budget must be below it.
pub(crate) fn max_tokens_with(budget: u32, max_tokens: u32) -> u32 {
    if budget < max_tokens {
        max_tokens
    } else {
        budget.saturating_add(max_tokens)
    }
}

/// Why a request must not think, if it must not: in a tool loop (the last user message holds
/// tool results) the last assistant message must start with a thinking block.
pub(crate) fn refusal(
    in_tool_loop: bool,
    has_reply: bool,
    reply_leads_with_thinking: bool,
) -> Option<&'static str> {
    if !in_tool_loop || !has_reply || reply_leads_with_thinking {
        return None;
    }
    Some(
        "the tool loop's last assistant message has no thinking block of this model (a history from another provider or model, or written without thinking)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn efforts_map_to_budgets_and_an_explicit_budget_wins() {
        let options = |effort, budget| RequestOptions {
            reasoning_effort: effort,
            reasoning_budget_tokens: budget,
            ..RequestOptions::default()
        };
        assert_eq!(requested_budget(&options(None, None)), None);
        assert_eq!(
            requested_budget(&options(Some(ReasoningEffort::Off), Some(5000))),
            None
        );
        assert_eq!(
            requested_budget(&options(Some(ReasoningEffort::Low), None)),
            Some(2048)
        );
        assert_eq!(
            requested_budget(&options(Some(ReasoningEffort::Medium), None)),
            Some(8192)
        );
        assert_eq!(
            requested_budget(&options(Some(ReasoningEffort::High), None)),
            Some(24576)
        );
        assert_eq!(
            requested_budget(&options(Some(ReasoningEffort::High), Some(3000))),
            Some(3000)
        );
        assert_eq!(requested_budget(&options(None, Some(3000))), Some(3000));
        assert_eq!(max_tokens_with(2048, 8192), 8192);
        assert_eq!(max_tokens_with(24576, 8192), 32768);
    }

    #[test]
    fn a_tool_loop_without_a_leading_thinking_block_may_not_think() {
        assert_eq!(refusal(true, true, true), None);
        assert!(refusal(true, true, false).is_some());
        // A new user turn after such a history is fine, and so is a history without replies.
        assert_eq!(refusal(false, true, false), None);
        assert_eq!(refusal(true, false, false), None);
    }
}
