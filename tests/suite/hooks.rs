//! Hooks (issue 14, item 3) through `OpenAiClient` against a local fake server: hooks that
//! edit the request, deny a call, rewrite arguments (validated again), rewrite the answer,
//! compose in order, panic and time out — and the run goes on with a valid history.
#![allow(clippy::unwrap_used, clippy::panic)]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{ChatResponse, CycleConfig, LlmError, OpenaiChatMessage, ToolCall, UsageLimits};
use agcore::run::hooks::{HookChain, HookRequest, Hooks, ToolCallDecision};
use agcore::vocab::ToolAnswer;
use async_trait::async_trait;
use serde_json::json;
use support::control::{FakeModel, Reply, assert_valid_history, registry};

/// The `tool` messages of the last request the server received.
fn tool_messages(model: &FakeModel) -> Vec<String> {
    let received = model.received();
    received.last().unwrap()["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .collect()
}

type Decide = Box<dyn Fn(&ToolCall) -> ToolCallDecision + Send + Sync>;
type Edit<T> = Box<dyn Fn(&mut T) + Send + Sync>;

/// A hook built from closures over the events the tests use.
#[derive(Default)]
struct Scripted {
    name: &'static str,
    decide: Option<Decide>,
    rewrite_answer: Option<Edit<ToolAnswer>>,
    edit_request: Option<Edit<HookRequest>>,
    seen_calls: Mutex<Vec<String>>,
    replies: AtomicUsize,
    errors: Mutex<Vec<String>>,
    sleep: Option<Duration>,
}

#[async_trait]
impl Hooks for Scripted {
    fn name(&self) -> &str {
        self.name
    }
    async fn before_model_request(&self, request: &mut HookRequest) {
        if let Some(edit) = &self.edit_request {
            edit(request);
        }
    }
    async fn after_model_response(&self, _reply: &ChatResponse) {
        self.replies.fetch_add(1, Ordering::SeqCst);
    }
    async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
        self.seen_calls
            .lock()
            .unwrap()
            .push(call.function.arguments.clone());
        if let Some(sleep) = self.sleep {
            tokio::time::sleep(sleep).await;
        }
        match &self.decide {
            Some(decide) => decide(call),
            None => ToolCallDecision::Allow,
        }
    }
    async fn after_tool_call(&self, _call: &ToolCall, answer: &mut ToolAnswer) {
        if let Some(rewrite) = &self.rewrite_answer {
            rewrite(answer);
        }
    }
    async fn on_error(&self, error: &LlmError) {
        self.errors.lock().unwrap().push(error.to_string());
    }
}

fn echo_turn(arguments: &'static str) -> Vec<Reply> {
    vec![
        Reply::calls(&[("call_1", "echo", arguments)]),
        Reply::text("done"),
    ]
}

async fn run_with(
    hooks: HookChain,
    replies: Vec<Reply>,
) -> (FakeModel, usize, agcore::llm::LlmCycle) {
    let model = FakeModel::start(replies).await;
    let (registry, runs) = registry();
    let mut config = CycleConfig::new("fake-model");
    config.hooks = hooks;
    let mut cycle = model.cycle(config);
    let reply = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    assert_valid_history(cycle.messages());
    let runs = runs.load(Ordering::SeqCst);
    (model, runs, cycle)
}

#[tokio::test]
async fn a_denied_call_is_not_run_and_the_model_reads_the_reason() {
    let guard = Arc::new(Scripted {
        name: "guard",
        decide: Some(Box::new(|_| {
            ToolCallDecision::deny("echoes are off today.")
        })),
        ..Scripted::default()
    });
    let (model, runs, _) = run_with(
        HookChain::new().with(guard.clone()),
        echo_turn(r#"{"text":"a"}"#),
    )
    .await;
    assert_eq!(runs, 0);
    assert_eq!(
        tool_messages(&model),
        [
            "Error: tool 'echo' was blocked by hook 'guard': echoes are off today. Do not retry this call as it is."
        ]
    );
    assert_eq!(guard.replies.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn rewritten_arguments_run_and_are_validated_again() {
    let rewrite = Scripted {
        name: "rewrite",
        decide: Some(Box::new(|_| ToolCallDecision::Rewrite {
            arguments: json!({"text": "rewritten"}),
        })),
        ..Scripted::default()
    };
    let (model, runs, cycle) = run_with(
        HookChain::new().with(Arc::new(rewrite)),
        echo_turn(r#"{"text":"a"}"#),
    )
    .await;
    assert_eq!(runs, 1);
    assert_eq!(tool_messages(&model), [r#"{"echo":"rewritten"}"#]);
    // The history keeps the call as the model sent it.
    let OpenaiChatMessage::Assistant { tool_calls, .. } = &cycle.messages()[1] else {
        panic!("{:?}", cycle.messages());
    };
    assert_eq!(tool_calls[0].function.arguments, r#"{"text":"a"}"#);

    // A rewrite that breaks the schema is refused by the registry's validation.
    let invalid = Scripted {
        name: "invalid",
        decide: Some(Box::new(|_| ToolCallDecision::Rewrite {
            arguments: json!({"text": 5}),
        })),
        ..Scripted::default()
    };
    let (model, runs, _) = run_with(
        HookChain::new().with(Arc::new(invalid)),
        echo_turn(r#"{"text":"a"}"#),
    )
    .await;
    assert_eq!(runs, 0);
    let answer = &tool_messages(&model)[0];
    assert!(
        answer.starts_with("Error: ") && answer.contains("text"),
        "{answer}"
    );
}

#[tokio::test]
async fn hooks_compose_in_order_and_the_answer_can_be_rewritten() {
    let first = Arc::new(Scripted {
        name: "first",
        decide: Some(Box::new(|_| ToolCallDecision::Rewrite {
            arguments: json!({"text": "from first"}),
        })),
        rewrite_answer: Some(Box::new(|answer| answer.content.push_str(" [first]"))),
        ..Scripted::default()
    });
    let second = Arc::new(Scripted {
        name: "second",
        rewrite_answer: Some(Box::new(|answer| answer.content.push_str(" [second]"))),
        ..Scripted::default()
    });
    let hooks = HookChain::new().with(first.clone()).with(second.clone());
    let (model, runs, _) = run_with(hooks, echo_turn(r#"{"text":"a"}"#)).await;
    assert_eq!(runs, 1);
    assert_eq!(
        *second.seen_calls.lock().unwrap(),
        [r#"{"text":"from first"}"#]
    );
    assert_eq!(
        tool_messages(&model),
        [r#"{"echo":"from first"} [first] [second]"#]
    );
}

#[tokio::test]
async fn a_request_edit_is_sent_but_the_history_keeps_the_original() {
    let redact = Scripted {
        name: "redact",
        edit_request: Some(Box::new(|request| {
            request
                .messages
                .insert(0, OpenaiChatMessage::system("Be brief."));
        })),
        ..Scripted::default()
    };
    let (model, _, cycle) = run_with(
        HookChain::new().with(Arc::new(redact)),
        echo_turn(r#"{"text":"a"}"#),
    )
    .await;
    for body in model.received() {
        assert_eq!(
            body["messages"][0],
            json!({"role": "system", "content": "Be brief."})
        );
    }
    assert!(matches!(
        cycle.messages()[0],
        OpenaiChatMessage::User { .. }
    ));
}

#[tokio::test]
async fn a_panicking_hook_is_isolated_and_fails_closed_before_a_call() {
    let panics = Scripted {
        name: "panics",
        decide: Some(Box::new(|_| panic!("the hook broke"))),
        rewrite_answer: Some(Box::new(|_| panic!("never reached"))),
        edit_request: Some(Box::new(|_| panic!("the request hook broke"))),
        ..Scripted::default()
    };
    let after = Arc::new(Scripted {
        name: "after",
        ..Scripted::default()
    });
    let hooks = HookChain::new().with(Arc::new(panics)).with(after.clone());
    let (model, runs, _) = run_with(hooks, echo_turn(r#"{"text":"a"}"#)).await;
    assert_eq!(runs, 0);
    let answer = &tool_messages(&model)[0];
    assert!(
        answer.contains("blocked by hook 'panics'")
            && answer.contains("panicked on before_tool_call: the hook broke"),
        "{answer}"
    );
    // The request went out unedited, and the hooks after the broken one still ran.
    assert_eq!(model.received()[0]["messages"][0]["role"], "user");
    assert_eq!(after.replies.load(Ordering::SeqCst), 2);

    // After a call, a panicking hook leaves the answer as it was.
    let after_only = Scripted {
        name: "after-panics",
        rewrite_answer: Some(Box::new(|answer| {
            answer.content.clear();
            panic!("halfway")
        })),
        ..Scripted::default()
    };
    let (model, runs, _) = run_with(
        HookChain::new().with(Arc::new(after_only)),
        echo_turn(r#"{"text":"a"}"#),
    )
    .await;
    assert_eq!(runs, 1);
    assert_eq!(tool_messages(&model), [r#"{"echo":"a"}"#]);
}

#[tokio::test]
async fn a_hook_that_times_out_denies_the_call() {
    let slow = Scripted {
        name: "slow",
        sleep: Some(Duration::from_secs(600)),
        ..Scripted::default()
    };
    let hooks = HookChain::new()
        .with(Arc::new(slow))
        .with_timeout(Duration::from_millis(50));
    let (model, runs, _) = run_with(hooks, echo_turn(r#"{"text":"a"}"#)).await;
    assert_eq!(runs, 0);
    let answer = &tool_messages(&model)[0];
    assert!(
        answer.contains("hook 'slow' took longer than 50ms on before_tool_call"),
        "{answer}"
    );
}

#[tokio::test]
async fn on_error_sees_the_error_the_run_returns() {
    let watcher = Arc::new(Scripted {
        name: "watcher",
        ..Scripted::default()
    });
    let model = FakeModel::start(echo_turn(r#"{"text":"a"}"#)).await;
    let (registry, _) = registry();
    let mut config = CycleConfig::new("fake-model");
    config.hooks = HookChain::new().with(watcher.clone());
    config.usage_limits = UsageLimits {
        max_requests: Some(1),
        ..UsageLimits::default()
    };
    let mut cycle = model.cycle(config);
    let error = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap_err();
    assert_eq!(*watcher.errors.lock().unwrap(), [error.to_string()]);
}
