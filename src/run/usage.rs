//! Usage and budgets: what a run spent ([`RunUsage`]), the limits it may not cross
//! ([`UsageLimits`]), and what tokens cost ([`Prices`]).
//!
//! Set on [`crate::run::CycleConfig`] (`usage_limits`, `prices`). A run checks its limits
//! before each model request and after each reply; crossing one ends it with
//! [`crate::run::LlmError::UsageLimitExceeded`], which carries the usage so far. The history
//! keeps every completed turn and is valid to continue from (raise the limit, then
//! `resume_with_tools`).
//!
//! ```
//! use agcore::llm::{CycleConfig, Prices, UsageLimits};
//!
//! let mut config = CycleConfig::new("gpt-4o-mini");
//! config.usage_limits = UsageLimits {
//!     max_requests: Some(5),
//!     max_total_tokens: Some(20_000),
//!     max_cost: Some(0.05),
//!     ..UsageLimits::default()
//! };
//! config.prices = Some(Prices { input: 0.15, cached_input: 0.075, output: 0.60, ..Prices::default() });
//! ```

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::vocab::Usage;

/// What a run (or a whole conversation) spent: model requests, tool calls and tokens.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunUsage {
    /// Model requests made (each retry of one request counts once).
    pub requests: u32,
    /// Tool calls run (calls the run answered itself, such as a repeated call, do not count).
    pub tool_calls: u32,
    /// Tokens, summed over the replies that reported usage.
    pub tokens: Usage,
}

impl RunUsage {
    /// Tokens of the prompt (input), cache reads and writes included.
    pub fn input_tokens(&self) -> u64 {
        self.tokens.prompt_tokens
    }

    /// Input tokens read from the server's prompt cache (0 when none were reported).
    pub fn cached_tokens(&self) -> u64 {
        self.tokens.cached_tokens.unwrap_or(0)
    }

    /// Input tokens written to the server's prompt cache (0 when none were reported).
    pub fn cache_write_tokens(&self) -> u64 {
        self.tokens.cache_write_tokens.unwrap_or(0)
    }

    /// Web searches the provider ran for a hosted web search tool (0 when none were
    /// reported).
    pub fn web_search_requests(&self) -> u64 {
        self.tokens.web_search_requests.unwrap_or(0)
    }

    /// Input tokens neither read from nor written to the prompt cache.
    pub fn uncached_input_tokens(&self) -> u64 {
        self.input_tokens()
            .saturating_sub(self.cached_tokens())
            .saturating_sub(self.cache_write_tokens())
    }

    /// Tokens generated (output), reasoning included.
    pub fn output_tokens(&self) -> u64 {
        self.tokens.completion_tokens
    }

    /// Input plus output tokens (the server's total when it reported one).
    pub fn total_tokens(&self) -> u64 {
        self.tokens
            .total_tokens
            .max(self.input_tokens().saturating_add(self.output_tokens()))
    }

    /// What the tokens cost at `prices`, in the prices' currency (USD in the CLI): each kind
    /// of input at its price (cache reads at `cached_input`, cache writes at `cache_write`,
    /// the rest at `input`), output — reasoning included — at `output`.
    pub fn cost(&self, prices: &Prices) -> f64 {
        // A server that reports more cached tokens than input tokens is not trusted beyond
        // the input: reads first, then writes, within the input.
        let input = self.input_tokens();
        let cached = self.cached_tokens().min(input);
        let written = self.cache_write_tokens().min(input - cached);
        let uncached = input - cached - written;
        (uncached as f64 * prices.input
            + cached as f64 * prices.cached_input
            + written as f64 * prices.cache_write.unwrap_or(prices.input)
            + self.output_tokens() as f64 * prices.output)
            / 1_000_000.0
            + self.web_search_requests() as f64 * prices.web_searches_per_thousand / 1_000.0
    }
}

impl std::ops::AddAssign for RunUsage {
    fn add_assign(&mut self, other: RunUsage) {
        self.requests = self.requests.saturating_add(other.requests);
        self.tool_calls = self.tool_calls.saturating_add(other.tool_calls);
        self.tokens += other.tokens;
    }
}

/// `3 requests, 2 tool calls, 1200 input tokens (300 cached), 80 output tokens (20
/// reasoning)`.
impl fmt::Display for RunUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: u32| if n == 1 { "" } else { "s" };
        write!(
            f,
            "{} request{}, {} tool call{}, {} input tokens",
            self.requests,
            plural(self.requests),
            self.tool_calls,
            plural(self.tool_calls),
            self.input_tokens()
        )?;
        match (self.tokens.cached_tokens, self.tokens.cache_write_tokens) {
            (Some(cached), Some(written)) => {
                write!(f, " ({cached} cached, {written} written to cache)")?;
            }
            (Some(cached), None) => write!(f, " ({cached} cached)")?,
            (None, Some(written)) => write!(f, " ({written} written to cache)")?,
            (None, None) => {}
        }
        write!(f, ", {} output tokens", self.output_tokens())?;
        if let Some(reasoning) = self.tokens.reasoning_tokens {
            write!(f, " ({reasoning} reasoning)")?;
        }
        if let Some(searches) = self.tokens.web_search_requests {
            write!(
                f,
                ", {searches} web search{}",
                if searches == 1 { "" } else { "es" }
            )?;
        }
        Ok(())
    }
}

/// What a conversation spent: its last run, and all its runs.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UsageTally {
    pub(crate) last_run: RunUsage,
    pub(crate) total: RunUsage,
}

impl UsageTally {
    /// Record a run that ended (finished, failed or cancelled).
    pub(crate) fn record(&mut self, run: RunUsage) {
        self.last_run = run;
        self.total += run;
    }

    /// Record requests made outside a run (a compaction on demand): they count in the total.
    pub(crate) fn charge(&mut self, requests: u32, tokens: Option<Usage>) {
        self.total += RunUsage {
            requests,
            tokens: tokens.unwrap_or_default(),
            ..RunUsage::default()
        };
    }
}

/// The most a run may spend; `None` (the default) is no limit. Token and cost limits count
/// what the server reported: a server that reports no usage is limited by requests and tool
/// calls only.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UsageLimits {
    /// Model requests in one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_requests: Option<u32>,
    /// Input tokens summed over the run's requests.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
    /// Output tokens summed over the run's replies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// Input plus output tokens summed over the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_total_tokens: Option<u64>,
    /// Tool calls run in one run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tool_calls: Option<u32>,
    /// What the run's tokens may cost at the configured [`Prices`] (ignored without prices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_cost: Option<f64>,
}

impl UsageLimits {
    /// The first limit `usage` has reached (requests, then input, output and total tokens,
    /// then cost — with `prices`), or `None` while there is room for another request.
    pub fn crossed(&self, usage: &RunUsage, prices: Option<&Prices>) -> Option<UsageLimit> {
        let at = |max: Option<u64>, used: u64| max.filter(|&max| used >= max);
        self.max_requests
            .filter(|&max| usage.requests >= max)
            .map(UsageLimit::Requests)
            .or_else(|| {
                at(self.max_input_tokens, usage.input_tokens()).map(UsageLimit::InputTokens)
            })
            .or_else(|| {
                at(self.max_output_tokens, usage.output_tokens()).map(UsageLimit::OutputTokens)
            })
            .or_else(|| {
                at(self.max_total_tokens, usage.total_tokens()).map(UsageLimit::TotalTokens)
            })
            .or_else(|| {
                let prices = prices?;
                self.max_cost
                    .filter(|&max| usage.cost(prices) >= max)
                    .map(UsageLimit::Cost)
            })
    }

    /// Whether no limit is set.
    pub fn is_none(&self) -> bool {
        *self == UsageLimits::default()
    }
}

/// Prices per million tokens (in one currency, USD in the CLI), by token kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prices {
    /// Per million input tokens neither read from nor written to the prompt cache.
    pub input: f64,
    /// Per million input tokens read from the prompt cache.
    #[serde(default)]
    pub cached_input: f64,
    /// Per million input tokens written to the prompt cache (Anthropic bills them above
    /// `input`); `None`: at `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write: Option<f64>,
    /// Per million output tokens (reasoning included).
    pub output: f64,
    /// Per thousand web searches of a hosted web search tool (Anthropic and OpenAI bill
    /// them apart from tokens); 0 when unset.
    #[serde(default)]
    pub web_searches_per_thousand: f64,
}

/// Which limit of [`UsageLimits`] a run crossed, with its configured value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "limit", content = "max")]
#[non_exhaustive]
pub enum UsageLimit {
    /// `max_requests`.
    Requests(u32),
    /// `max_input_tokens`.
    InputTokens(u64),
    /// `max_output_tokens`.
    OutputTokens(u64),
    /// `max_total_tokens`.
    TotalTokens(u64),
    /// `max_tool_calls`.
    ToolCalls(u32),
    /// `max_cost`.
    Cost(f64),
}

impl fmt::Display for UsageLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsageLimit::Requests(max) => write!(f, "max_requests = {max}"),
            UsageLimit::InputTokens(max) => write!(f, "max_input_tokens = {max}"),
            UsageLimit::OutputTokens(max) => write!(f, "max_output_tokens = {max}"),
            UsageLimit::TotalTokens(max) => write!(f, "max_total_tokens = {max}"),
            UsageLimit::ToolCalls(max) => write!(f, "max_tool_calls = {max}"),
            UsageLimit::Cost(max) => write!(f, "max_cost = {max}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn usage(input: u64, cached: Option<u64>, output: u64) -> RunUsage {
        RunUsage {
            requests: 1,
            tool_calls: 0,
            tokens: Usage {
                prompt_tokens: input,
                completion_tokens: output,
                total_tokens: input + output,
                cached_tokens: cached,
                reasoning_tokens: None,
                cache_write_tokens: None,
                web_search_requests: None,
            },
        }
    }

    #[test]
    fn cost_prices_cached_input_apart() {
        let prices = Prices {
            input: 2.0,
            cached_input: 0.5,
            output: 8.0,
            ..Prices::default()
        };
        let cost = usage(1_000_000, Some(400_000), 250_000).cost(&prices);
        assert!(
            (cost - (0.6 * 2.0 + 0.4 * 0.5 + 0.25 * 8.0)).abs() < 1e-9,
            "{cost}"
        );
        // A server that reports more cached than input tokens is not trusted below zero.
        assert!(usage(10, Some(50), 0).cost(&prices) >= 0.0);
    }

    #[test]
    fn cache_writes_are_priced_apart_and_at_input_by_default() {
        // Anthropic: 1,000 input in all = 100 uncached + 600 read + 300 written.
        let mut spent = usage(1_000_000, Some(600_000), 100_000);
        spent.tokens.cache_write_tokens = Some(300_000);
        spent.tokens.reasoning_tokens = Some(40_000);
        assert_eq!(spent.uncached_input_tokens(), 100_000);
        let prices = Prices {
            input: 3.0,
            cached_input: 0.3,
            cache_write: Some(3.75),
            output: 15.0,
            web_searches_per_thousand: 0.0,
        };
        let cost = spent.cost(&prices);
        let expected = 0.1 * 3.0 + 0.6 * 0.3 + 0.3 * 3.75 + 0.1 * 15.0;
        assert!((cost - expected).abs() < 1e-9, "{cost} != {expected}");
        let unpriced = Prices {
            cache_write: None,
            ..prices
        };
        let expected = 0.1 * 3.0 + 0.6 * 0.3 + 0.3 * 3.0 + 0.1 * 15.0;
        assert!((spent.cost(&unpriced) - expected).abs() < 1e-9);
        // Over-reported cache counts stay within the input.
        spent.tokens.cache_write_tokens = Some(5_000_000);
        assert!(spent.cost(&prices) <= (0.6 * 0.3 + 0.4 * 3.75 + 0.1 * 15.0) / 1.0 + 1e-9);
        assert_eq!(
            spent.to_string(),
            "1 request, 0 tool calls, 1000000 input tokens (600000 cached, 5000000 written to cache), 100000 output tokens (40000 reasoning)"
        );
        let parsed: Prices =
            serde_json::from_str(r#"{"input": 3, "cache_write": 3.75, "output": 15}"#).unwrap();
        assert_eq!(parsed.cache_write, Some(3.75));
    }

    #[test]
    fn usage_reads_like_a_sentence() {
        let mut total = usage(1200, Some(300), 80);
        total += RunUsage {
            requests: 2,
            tool_calls: 2,
            tokens: Usage::default(),
        };
        assert_eq!(
            total.to_string(),
            "3 requests, 2 tool calls, 1200 input tokens (300 cached), 80 output tokens"
        );
    }
}
