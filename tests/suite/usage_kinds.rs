//! Usage by token kind — input (cache reads and writes included), cache reads, cache writes,
//! output (reasoning included), reasoning — from the replies into `RunUsage`, the budgets,
//! the cost at `Prices` (cache writes at `cache_write`), and the GenAI spans
//! (`gen_ai.usage.cache_read.input_tokens`, `gen_ai.usage.cache_creation.input_tokens`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use agcore::llm::testing::{ScriptedModel, ScriptedReply};
use agcore::llm::{CycleConfig, LlmCycle, LlmError, Prices, Usage, UsageLimit, UsageLimits};
use futures::StreamExt;

/// An Anthropic-like turn: 1,000 input tokens = 100 uncached + 600 read + 300 written.
fn turn_usage() -> Usage {
    Usage {
        prompt_tokens: 1_000,
        completion_tokens: 100,
        total_tokens: 1_100,
        cached_tokens: Some(600),
        reasoning_tokens: Some(40),
        cache_write_tokens: Some(300),
        web_search_requests: None,
    }
}

fn model() -> ScriptedModel {
    ScriptedModel::new()
        .reply(ScriptedReply::text("one").with_usage(turn_usage()))
        .reply(ScriptedReply::text("two").with_usage(turn_usage()))
        .with_provider("anthropic")
}

#[tokio::test]
async fn every_token_kind_is_summed_priced_and_limited() {
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    let prices = Prices {
        input: 3.0,
        cached_input: 0.3,
        cache_write: Some(3.75),
        output: 15.0,
        web_searches_per_thousand: 0.0,
    };
    config.prices = Some(prices);
    let mut cycle = LlmCycle::new(model(), config);
    let events: Vec<_> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    assert!(!events.is_empty());
    cycle.submit("again".into()).await.unwrap();
    let total = cycle.usage();
    assert_eq!(total.input_tokens(), 2_000);
    assert_eq!(total.cached_tokens(), 1_200);
    assert_eq!(total.cache_write_tokens(), 600);
    assert_eq!(total.uncached_input_tokens(), 200);
    assert_eq!(total.output_tokens(), 200);
    assert_eq!(total.tokens.reasoning_tokens, Some(80));
    let expected = (200.0 * 3.0 + 1_200.0 * 0.3 + 600.0 * 3.75 + 200.0 * 15.0) / 1e6;
    assert!(
        (total.cost(&prices) - expected).abs() < 1e-12,
        "{}",
        total.cost(&prices)
    );
    assert!(
        total
            .to_string()
            .contains("(1200 cached, 600 written to cache)"),
        "{total}"
    );
}

#[tokio::test]
async fn input_budgets_count_cache_reads_and_writes() {
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    // One turn's uncached input is 100 tokens; with the cache reads and writes it is 1,000.
    config.usage_limits = UsageLimits {
        max_input_tokens: Some(1_000),
        ..UsageLimits::default()
    };
    let call = agcore::llm::ToolCall::new("call_1", "nothing", "{}");
    let model = ScriptedModel::new()
        .reply(ScriptedReply::tool_calls(vec![call]).with_usage(turn_usage()))
        .reply(ScriptedReply::text("never"));
    let mut cycle = LlmCycle::new(model.clone(), config);
    let registry = agcore::tools::ToolRegistry::new();
    let error = cycle
        .submit_with_tools("hi".into(), &registry)
        .await
        .unwrap_err();
    match error {
        LlmError::UsageLimitExceeded { limit, .. } => {
            assert_eq!(limit, UsageLimit::InputTokens(1_000));
        }
        other => panic!("expected the input budget, got {other:?}"),
    }
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn the_spans_carry_cache_reads_and_writes() {
    let (subscriber, recorded) = support::trace::recording();
    let _guard = crate::support::trace::scoped(subscriber);
    let mut cycle = LlmCycle::new(model(), CycleConfig::new("claude-sonnet-4-5"));
    cycle.submit("hi".into()).await.unwrap();
    let recorded = recorded.lock().unwrap();
    let chat = recorded
        .spans
        .iter()
        .find(|span| span.name == "chat claude-sonnet-4-5")
        .expect("a chat span");
    let field = |name: &str| chat.fields.get(name).map(String::as_str);
    assert_eq!(field("gen_ai.provider.name"), Some("anthropic"));
    assert_eq!(field("gen_ai.usage.input_tokens"), Some("1000"));
    assert_eq!(field("gen_ai.usage.output_tokens"), Some("100"));
    assert_eq!(field("gen_ai.usage.cache_read.input_tokens"), Some("600"));
    assert_eq!(
        field("gen_ai.usage.cache_creation.input_tokens"),
        Some("300")
    );
    let agent = recorded
        .spans
        .iter()
        .find(|span| span.name.starts_with("invoke_agent"))
        .expect("a run span");
    assert_eq!(
        agent
            .fields
            .get("gen_ai.usage.cache_creation.input_tokens")
            .map(String::as_str),
        Some("300"),
        "{agent:?}"
    );
}
