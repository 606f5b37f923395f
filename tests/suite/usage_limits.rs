//! Usage and budgets (issue 14, item 2) through `OpenAiClient` against a local fake server:
//! usage summed per run and per conversation, limits crossed mid-run end the run with a typed
//! error carrying the usage so far, and the history stays valid and resumable.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::support;

use std::sync::atomic::Ordering;

use agcore::llm::{CycleConfig, LlmError, Prices, RunUsage, StreamEvent, UsageLimit, UsageLimits};
use futures::StreamExt;
use support::control::{FakeModel, Reply, assert_valid_history, registry};

fn config(limits: UsageLimits) -> CycleConfig {
    let mut config = CycleConfig::new("fake-model");
    config.usage_limits = limits;
    config
}

#[tokio::test]
async fn a_token_limit_stops_the_run_before_the_next_request_and_the_history_resumes() {
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "echo", r#"{"text":"a"}"#)]).usage(100, 20, 40, 8),
        Reply::calls(&[
            ("call_2", "echo", r#"{"text":"b"}"#),
            ("call_3", "fail", "{}"),
        ])
        .usage(130, 20, 100, 0),
        Reply::text("done").usage(160, 10, 0, 0),
    ])
    .await;
    let (registry, runs) = registry();
    let mut cycle = model.cycle(config(UsageLimits {
        max_total_tokens: Some(150),
        ..UsageLimits::default()
    }));
    let error = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap_err();
    let LlmError::UsageLimitExceeded {
        limit,
        usage,
        history,
    } = error
    else {
        panic!("expected a usage limit, got {error:?}");
    };
    assert_eq!(limit, UsageLimit::TotalTokens(150));
    assert_eq!(usage.requests, 2);
    assert_eq!(usage.tool_calls, 3);
    assert_eq!((usage.input_tokens(), usage.output_tokens()), (230, 40));
    assert_eq!(usage.tokens.cached_tokens, Some(140));
    assert_eq!(usage.tokens.reasoning_tokens, Some(8));
    // The second tool turn ran (its reply arrived) and is committed; no third request.
    assert_eq!(runs.load(Ordering::SeqCst), 2);
    assert_eq!(model.received().len(), 2);
    assert_eq!(history.as_slice(), cycle.messages());
    assert_valid_history(cycle.messages());
    assert_eq!(cycle.messages().len(), 1 + 2 + 3);
    assert_eq!(cycle.last_run_usage(), usage);

    // Raise the limit and continue: the next request goes out from the committed history.
    cycle.config_mut().usage_limits = UsageLimits::default();
    let reply = cycle.resume_with_tools(&registry).await.unwrap();
    assert_eq!(reply.text(), "done");
    assert_valid_history(cycle.messages());
    let sent = &model.received()[2]["messages"];
    assert_eq!(sent.as_array().unwrap().len(), 6, "{sent}");
    assert_eq!(cycle.last_run_usage().requests, 1);
    assert_eq!(cycle.last_run_usage().tool_calls, 0);
    let total = cycle.usage();
    assert_eq!((total.requests, total.tool_calls), (3, 3));
    assert_eq!(total.input_tokens(), 390);
}

#[tokio::test]
async fn a_turn_over_max_tool_calls_runs_none_of_its_calls() {
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "echo", r#"{"text":"a"}"#)]),
        Reply::calls(&[
            ("call_2", "echo", r#"{"text":"b"}"#),
            ("call_3", "echo", r#"{"text":"c"}"#),
        ]),
    ])
    .await;
    let (registry, runs) = registry();
    let mut cycle = model.cycle(config(UsageLimits {
        max_tool_calls: Some(2),
        ..UsageLimits::default()
    }));
    let mut events = cycle
        .submit_stream_with_tools("go".into(), &registry)
        .await
        .unwrap();
    let mut error = None;
    while let Some(event) = events.next().await {
        if let StreamEvent::Error { kind, message } = event {
            error = Some((kind, message));
        }
    }
    drop(events);
    let (kind, message) = error.unwrap();
    assert_eq!(kind, agcore::llm::ErrorKind::UsageLimitExceeded);
    assert!(message.contains("max_tool_calls = 2"), "{message}");
    assert!(message.contains("2 requests, 1 tool call,"), "{message}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    // The first turn is committed; the refused turn is not in the history.
    assert_valid_history(cycle.messages());
    assert_eq!(cycle.messages().len(), 3);
    assert_eq!(cycle.last_run_usage().tool_calls, 1);
}

#[tokio::test]
async fn cost_is_priced_per_token_kind_and_max_cost_stops_the_run() {
    let prices = Prices {
        input: 2.0,
        cached_input: 1.0,
        output: 10.0,
        ..Prices::default()
    };
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "echo", r#"{"text":"a"}"#)])
            .usage(1_000_000, 100_000, 500_000, 0),
    ])
    .await;
    let (registry, _) = registry();
    let mut config = config(UsageLimits {
        max_cost: Some(2.0),
        ..UsageLimits::default()
    });
    config.prices = Some(prices);
    let mut cycle = model.cycle(config);
    let error = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap_err();
    let LlmError::UsageLimitExceeded { limit, usage, .. } = error else {
        panic!("expected a usage limit, got {error:?}");
    };
    assert_eq!(limit, UsageLimit::Cost(2.0));
    // 0.5 M uncached × 2 + 0.5 M cached × 1 + 0.1 M output × 10 = 2.5.
    assert!((usage.cost(&prices) - 2.5).abs() < 1e-9);
    assert_valid_history(cycle.messages());
}

#[tokio::test]
async fn max_requests_counts_this_run_only_and_a_final_answer_is_never_thrown_away() {
    let model = FakeModel::start(vec![
        Reply::text("one").usage(500, 500, 0, 0),
        Reply::calls(&[("call_1", "echo", r#"{"text":"a"}"#)]),
    ])
    .await;
    let (registry, runs) = registry();
    let mut cycle = model.cycle(config(UsageLimits {
        max_requests: Some(1),
        max_total_tokens: Some(100),
        ..UsageLimits::default()
    }));
    // The reply goes over max_total_tokens, but it is the final answer: returned.
    let reply = cycle
        .submit_with_tools("first".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "one");
    cycle.config_mut().usage_limits.max_total_tokens = None;
    // A new run starts from zero: one request allowed; its tool turn runs, then the limit.
    let error = cycle
        .submit_with_tools("second".into(), &registry)
        .await
        .unwrap_err();
    assert!(
        matches!(
            error,
            LlmError::UsageLimitExceeded {
                limit: UsageLimit::Requests(1),
                usage: RunUsage {
                    requests: 1,
                    tool_calls: 1,
                    ..
                },
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_valid_history(cycle.messages());
    assert_eq!(cycle.usage().requests, 2);
}
