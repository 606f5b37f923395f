//! What a run spent, for people (`usage: …` on stderr, chat `/usage`) and machines
//! (`{"type":"usage", …}` with `--json`); the budget from flags and `[limits]`.

use agcore::llm::{Prices, RunUsage, UsageLimits};
use serde_json::{Value, json};

use crate::cli::ModelArgs;
use crate::config::AgcoreConfig;

/// The most model requests one prompt makes when neither `--max-requests` nor
/// `limits.max_requests` says: a team's fan-out multiplies requests (a model can ask for many
/// sub-agents that each ask for many), and the root's limit bounds the whole tree.
pub const DEFAULT_MAX_REQUESTS: u32 = 200;

/// The usage limits: the flags, over `[limits]` of the config, with at most
/// [`DEFAULT_MAX_REQUESTS`] requests when neither sets a number.
pub fn limits(args: &ModelArgs, config: &AgcoreConfig) -> UsageLimits {
    let mut limits = config.limits;
    limits.max_requests = args
        .max_requests
        .or(limits.max_requests)
        .or(Some(DEFAULT_MAX_REQUESTS));
    limits.max_total_tokens = args.max_total_tokens.or(limits.max_total_tokens);
    limits.max_cost = args.max_cost.or(limits.max_cost);
    limits
}

/// `usage: 2 requests, 1 tool call, 120 input tokens, 30 output tokens · $0.000123`.
pub fn line(usage: &RunUsage, prices: Option<&Prices>) -> String {
    match prices {
        Some(prices) => format!("usage: {usage} · ${:.6}", usage.cost(prices)),
        None => format!("usage: {usage}"),
    }
}

/// The `{"type":"usage", …}` event: counts, tokens by kind — `input_tokens` (cache reads and
/// writes included), `cached_tokens` (cache reads), `cache_write_tokens`, `output_tokens`
/// (reasoning included), `reasoning_tokens` — and the cost when the model is priced.
pub fn event(usage: &RunUsage, prices: Option<&Prices>) -> Value {
    json!({
        "type": "usage",
        "requests": usage.requests,
        "tool_calls": usage.tool_calls,
        "input_tokens": usage.input_tokens(),
        "cached_tokens": usage.tokens.cached_tokens,
        "cache_write_tokens": usage.tokens.cache_write_tokens,
        "output_tokens": usage.output_tokens(),
        "reasoning_tokens": usage.tokens.reasoning_tokens,
        "total_tokens": usage.total_tokens(),
        "cost_usd": prices.map(|prices| usage.cost(prices)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use agcore::llm::Usage;

    #[test]
    fn flags_override_the_config_limits() {
        let config =
            AgcoreConfig::parse("[limits]\nmax_requests = 5\nmax_output_tokens = 7\n").unwrap();
        let args = ModelArgs {
            max_requests: Some(2),
            max_cost: Some(0.5),
            ..ModelArgs::default()
        };
        let limits = limits(&args, &config);
        assert_eq!(limits.max_requests, Some(2));
        assert_eq!(limits.max_output_tokens, Some(7));
        assert_eq!(limits.max_cost, Some(0.5));
        assert!(AgcoreConfig::parse("[limits]\nmax_request = 5\n").is_err());
    }

    #[test]
    fn a_prompt_has_a_request_ceiling_by_default() {
        let limits = limits(&ModelArgs::default(), &AgcoreConfig::default());
        assert_eq!(limits.max_requests, Some(DEFAULT_MAX_REQUESTS));
    }

    #[test]
    fn the_line_shows_the_cost_only_when_priced() {
        let usage = RunUsage {
            requests: 2,
            tool_calls: 1,
            tokens: Usage {
                prompt_tokens: 1_000,
                completion_tokens: 100,
                total_tokens: 1_100,
                ..Usage::default()
            },
        };
        assert_eq!(
            line(&usage, None),
            "usage: 2 requests, 1 tool call, 1000 input tokens, 100 output tokens"
        );
        let prices = Prices {
            input: 1.0,
            cached_input: 0.5,
            output: 10.0,
            ..Prices::default()
        };
        assert!(line(&usage, Some(&prices)).ends_with("· $0.002000"));
        assert_eq!(event(&usage, Some(&prices))["cost_usd"], json!(0.002));
    }
}
