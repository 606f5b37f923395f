//! Anthropic's `usage` objects into [`Usage`] by token kind.
//!
//! Anthropic counts input in three disjoint parts — `input_tokens` (after the last cache
//! breakpoint), `cache_read_input_tokens` and `cache_creation_input_tokens` — so
//! `prompt_tokens` is their sum; `cached_tokens` is the reads and `cache_write_tokens` the
//! writes. `output_tokens` includes thinking (`output_tokens_details.thinking_tokens`).
//! The `usage` of `message_delta` is a running total of the reply so far: each one replaces
//! what came before, field by field (a field it leaves out keeps its earlier value).

use serde_json::Value;

use crate::vocab::Usage;

/// The usage of one reply as reported so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ReplyUsage {
    input: Option<u64>,
    cache_read: Option<u64>,
    cache_write: Option<u64>,
    output: Option<u64>,
    thinking: Option<u64>,
    web_search: Option<u64>,
}

impl ReplyUsage {
    /// Take the counts a `usage` object reports, replacing earlier ones (running totals).
    pub(crate) fn update(&mut self, usage: &Value) {
        let count = |key: &str| usage.get(key).and_then(Value::as_u64);
        let replace = |slot: &mut Option<u64>, value: Option<u64>| {
            if value.is_some() {
                *slot = value;
            }
        };
        replace(&mut self.input, count("input_tokens"));
        replace(&mut self.cache_read, count("cache_read_input_tokens"));
        replace(&mut self.cache_write, count("cache_creation_input_tokens"));
        replace(&mut self.output, count("output_tokens"));
        replace(
            &mut self.thinking,
            usage
                .pointer("/output_tokens_details/thinking_tokens")
                .and_then(Value::as_u64),
        );
        replace(
            &mut self.web_search,
            usage
                .pointer("/server_tool_use/web_search_requests")
                .and_then(Value::as_u64),
        );
    }

    /// Whether any count was reported.
    pub(crate) fn is_reported(&self) -> bool {
        self.input.is_some() || self.output.is_some()
    }

    /// The counts as a [`Usage`].
    pub(crate) fn usage(&self) -> Usage {
        let prompt_tokens = self
            .input
            .unwrap_or(0)
            .saturating_add(self.cache_read.unwrap_or(0))
            .saturating_add(self.cache_write.unwrap_or(0));
        let completion_tokens = self.output.unwrap_or(0);
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: prompt_tokens.saturating_add(completion_tokens),
            cached_tokens: self.cache_read,
            reasoning_tokens: self.thinking,
            cache_write_tokens: self.cache_write,
            web_search_requests: self.web_search,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn input_is_the_sum_of_its_three_parts() {
        let mut usage = ReplyUsage::default();
        usage.update(&json!({"input_tokens": 10, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 30000, "output_tokens": 1}));
        let total = usage.usage();
        assert_eq!(total.prompt_tokens, 32010);
        assert_eq!(total.cached_tokens, Some(30000));
        assert_eq!(total.cache_write_tokens, Some(2000));
        assert_eq!(total.completion_tokens, 1);
    }

    #[test]
    fn message_delta_usage_replaces_and_never_adds() {
        let mut usage = ReplyUsage::default();
        usage.update(&json!({"input_tokens": 377, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1}));
        usage.update(&json!({"output_tokens": 40}));
        usage.update(
            &json!({"output_tokens": 65, "output_tokens_details": {"thinking_tokens": 20}}),
        );
        let total = usage.usage();
        assert_eq!(total.prompt_tokens, 377);
        assert_eq!(total.completion_tokens, 65);
        assert_eq!(total.total_tokens, 442);
        assert_eq!(total.reasoning_tokens, Some(20));
        assert_eq!(total.cached_tokens, Some(0));
        // A count that is not a number is ignored, not a panic.
        usage.update(&json!({"output_tokens": "many", "input_tokens": -1}));
        assert_eq!(usage.usage().completion_tokens, 65);
    }
}
