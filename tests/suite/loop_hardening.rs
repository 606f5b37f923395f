//! Issue 10, items 16 and 17: a cancelled first turn keeps what ran, and the repeated-call guard
//! counts turns, not parallel calls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agcore::llm::testing::ScriptedModel;
use agcore::llm::{
    CycleConfig, LlmCycle, LlmError, OpenaiChatMessage, RepeatedCallAction, StreamEvent, ToolCall,
};
use agcore::tools::prelude::*;
use futures::{Stream, StreamExt};
use tokio::sync::Notify;

/// Generous bound for anything that should take milliseconds.
const BOUND: Duration = Duration::from_secs(20);

/// Returns at once.
struct Fast;

#[async_trait]
impl BaseTool for Fast {
    fn name(&self) -> &str {
        "fast"
    }
    fn description(&self) -> &str {
        "Returns at once"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("fast done"))
    }
}

/// Signals when it starts, then sleeps far longer than any test waits.
struct Slow {
    started: Arc<Notify>,
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl BaseTool for Slow {
    fn name(&self) -> &str {
        "slow"
    }
    fn description(&self) -> &str {
        "Takes a minute"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        self.started.notify_one();
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("slow done"))
    }
}

/// Counts its runs; answers with the arguments it got.
struct Echo {
    runs: Arc<AtomicUsize>,
}

#[async_trait]
impl BaseTool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echo the arguments"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(args)
    }
}

struct Tools {
    registry: ToolRegistry,
    slow_started: Arc<Notify>,
    slow_runs: Arc<AtomicUsize>,
    echo_runs: Arc<AtomicUsize>,
}

fn tools() -> Tools {
    let slow_started = Arc::new(Notify::new());
    let slow_runs = Arc::new(AtomicUsize::new(0));
    let echo_runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new();
    registry
        .register_all(vec![
            Arc::new(Fast),
            Arc::new(Slow {
                started: slow_started.clone(),
                runs: slow_runs.clone(),
            }),
            Arc::new(Echo {
                runs: echo_runs.clone(),
            }),
        ])
        .unwrap();
    Tools {
        registry,
        slow_started,
        slow_runs,
        echo_runs,
    }
}

fn call(id: &str, name: &str) -> ToolCall {
    ToolCall::new(id, name, "{}")
}

/// Wire validity: every assistant tool call answered by exactly one `tool` message right after
/// it, in call order, and no `tool` message that answers nothing.
fn assert_history_valid(messages: &[OpenaiChatMessage]) {
    let mut answers: HashMap<&str, usize> = HashMap::new();
    let mut i = 0;
    while i < messages.len() {
        let calls = messages[i].tool_calls();
        i += 1;
        for call in calls {
            match messages.get(i) {
                Some(OpenaiChatMessage::Tool { tool_call_id, .. }) => {
                    assert_eq!(tool_call_id, &call.id);
                    *answers.entry(tool_call_id.as_str()).or_default() += 1;
                }
                other => panic!("call {} unanswered; next message: {other:?}", call.id),
            }
            i += 1;
        }
        if let Some(OpenaiChatMessage::Tool { tool_call_id, .. }) = messages.get(i) {
            panic!("tool message {tool_call_id} answers no call");
        }
    }
    assert!(answers.values().all(|&n| n == 1), "{answers:?}");
}

fn roles(cycle: &LlmCycle) -> Vec<&str> {
    cycle.messages().iter().map(|m| m.role()).collect()
}

/// Poll `stream` (ignoring its events) until `signal` fires; the stream must not end first.
async fn poll_until(stream: &mut (impl Stream<Item = StreamEvent> + Unpin), signal: &Notify) {
    let drained = async {
        while let Some(event) = stream.next().await {
            if let StreamEvent::Error { message, .. } = event {
                panic!("the call failed: {message}");
            }
        }
        panic!("the stream ended before the signal");
    };
    tokio::time::timeout(BOUND, async {
        tokio::select! {
            () = signal.notified() => {}
            () = drained => {}
        }
    })
    .await
    .expect("the slow tool never started");
}

// ---- Item 16: cancelling the first turn while its tools run ----

#[tokio::test]
async fn cancelling_the_first_turn_while_its_only_tool_runs_keeps_the_prompt_and_the_turn() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("s1", "slow")])
        .reply_text("never reached");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    {
        let mut stream = cycle
            .submit_stream_with_tools("start the slow job".into(), &tools.registry)
            .await
            .unwrap();
        poll_until(&mut stream, &tools.slow_started).await;
        // Dropped here, the slow tool in flight: Ctrl-C in a UI.
    }
    assert_eq!(tools.slow_runs.load(Ordering::SeqCst), 1);
    assert_eq!(roles(&cycle), ["user", "assistant", "tool"]);
    assert_eq!(
        cycle.messages()[0].text().as_deref(),
        Some("start the slow job")
    );
    assert_history_valid(cycle.messages());
    let answer = cycle.messages()[2].text().unwrap();
    assert!(answer.starts_with("Error: cancelled"), "{answer}");
    // Only the model's one request: nothing was sent after the cancel.
    assert_eq!(model.requests().len(), 1);
}

#[tokio::test]
async fn cancelling_the_first_turn_after_a_fast_call_finished_answers_the_slow_one_as_cancelled() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("s1", "slow"), call("f1", "fast")])
        .reply_text("never reached");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let mut seen = Vec::new();
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &tools.registry)
            .await
            .unwrap();
        // Up to the slow call's ToolExecutionStarted...
        while let Some(event) = stream.next().await {
            let slow_started =
                matches!(&event, StreamEvent::ToolExecutionStarted { id, .. } if id == "s1");
            seen.push(event);
            if slow_started {
                break;
            }
        }
        // ...then on until the slow tool is really running.
        poll_until(&mut stream, &tools.slow_started).await;
    }
    assert_eq!(roles(&cycle), ["user", "assistant", "tool", "tool"]);
    assert_history_valid(cycle.messages());
    let slow = cycle.messages()[2].text().unwrap();
    assert!(slow.starts_with("Error: cancelled"), "{slow}");
    assert_eq!(cycle.messages()[3].text().as_deref(), Some("fast done"));
}

#[tokio::test]
async fn cancelled_calls_that_never_started_say_so() {
    // With one call at a time, the second call is still queued when the first is cancelled.
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("s1", "slow"), call("e1", "echo")])
        .reply_text("never reached");
    let mut tools = tools();
    tools.registry = tools.registry.with_concurrency_limit(1);
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &tools.registry)
            .await
            .unwrap();
        poll_until(&mut stream, &tools.slow_started).await;
    }
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 0);
    assert_eq!(roles(&cycle), ["user", "assistant", "tool", "tool"]);
    assert_history_valid(cycle.messages());
    let queued = cycle.messages()[3].text().unwrap();
    assert!(
        queued.starts_with("Error: cancelled before the tool started"),
        "{queued}"
    );
}

#[tokio::test]
async fn cancelling_the_blocking_first_turn_while_a_tool_runs_keeps_the_turn_too() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("s1", "slow")])
        .reply_text("never reached");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let started = tools.slow_started.clone();
    tokio::time::timeout(BOUND, async {
        tokio::select! {
            _ = cycle.submit_with_tools("go".into(), &tools.registry) => panic!("the call ended"),
            () = started.notified() => {}
        }
    })
    .await
    .unwrap();
    assert_eq!(roles(&cycle), ["user", "assistant", "tool"]);
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn cancelling_during_the_first_model_reply_leaves_the_history_as_it_was() {
    // Documented contract: nothing ran, so the prompt and its turn are dropped.
    let model = ScriptedModel::new()
        .with_chunk_size(1)
        .with_chunk_delay(Duration::from_millis(50))
        .reply_text("a long answer that streams slowly");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    {
        let mut stream = cycle
            .submit_stream_with_tools("hello".into(), &tools.registry)
            .await
            .unwrap();
        let first = tokio::time::timeout(BOUND, stream.next()).await.unwrap();
        assert!(
            matches!(first, Some(StreamEvent::AssistantTextDelta { .. })),
            "{first:?}"
        );
    }
    assert!(cycle.messages().is_empty(), "{:?}", cycle.messages());
}

#[tokio::test]
async fn a_cancelled_and_kept_first_turn_can_be_continued() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("s1", "slow")])
        .reply_text("never reached");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &tools.registry)
            .await
            .unwrap();
        poll_until(&mut stream, &tools.slow_started).await;
    }
    let model_2 = ScriptedModel::new().reply_text("it was cancelled");
    let mut cycle_2 = LlmCycle::from_history(
        model_2.clone(),
        CycleConfig::new("m"),
        cycle.messages().to_vec(),
    );
    let reply = cycle_2
        .submit_with_tools("what happened?".into(), &tools.registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "it was cancelled");
    assert_eq!(model_2.requests()[0].messages.len(), 4);
    assert_history_valid(cycle_2.messages());
}

// ---- Item 17: the repeated-call guard counts consecutive turns ----

#[tokio::test]
async fn three_identical_parallel_calls_in_one_turn_run() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            ToolCall::new("a", "echo", r#"{"x":1}"#),
            ToolCall::new("b", "echo", r#"{"x":1}"#),
            ToolCall::new("c", "echo", r#"{ "x": 1 }"#),
        ])
        .reply_text("done");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let reply = cycle
        .submit_with_tools("go".into(), &tools.registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 3);
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn many_identical_calls_in_one_turn_each_turn_count_once() {
    // Two turns of four identical calls each: two occurrences, under the default limit of 3.
    let batch = |turn: &str| {
        (0..4)
            .map(|i| ToolCall::new(format!("{turn}{i}"), "echo", r#"{"x":1}"#))
            .collect::<Vec<_>>()
    };
    let model = ScriptedModel::new()
        .reply_tool_calls(batch("a"))
        .reply_tool_calls(batch("b"))
        .reply_text("done");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let reply = cycle
        .submit_with_tools("go".into(), &tools.registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 8);
}

#[tokio::test]
async fn the_same_call_in_three_consecutive_turns_stops_the_run() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            ToolCall::new("a", "echo", r#"{"x":1}"#),
            ToolCall::new("a2", "fast", "{}"),
        ])
        .reply_tool_calls(vec![
            ToolCall::new("b2", "fast", r#"{"other":true}"#),
            ToolCall::new("b", "echo", r#"{"x":1}"#),
        ])
        .reply_tool_calls(vec![ToolCall::new("c", "echo", r#"{"x": 1}"#)])
        .reply_text("never reached");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let error = cycle
        .submit_with_tools("go".into(), &tools.registry)
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::RepeatedToolCall { tool, times: 3 } if tool == "echo"),
        "{error}"
    );
    // The first two turns ran and are kept; the third was not run.
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 2);
    assert_eq!(
        roles(&cycle),
        [
            "user",
            "assistant",
            "tool",
            "tool",
            "assistant",
            "tool",
            "tool"
        ]
    );
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn a_turn_without_the_call_resets_its_count() {
    let echo = || ToolCall::new("e", "echo", r#"{"x":1}"#);
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![echo()])
        .reply_tool_calls(vec![echo()])
        .reply_tool_calls(vec![call("f", "fast")])
        .reply_tool_calls(vec![echo()])
        .reply_tool_calls(vec![echo()])
        .reply_text("done");
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let reply = cycle
        .submit_with_tools("go".into(), &tools.registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 4);
}

#[tokio::test]
async fn telling_the_model_answers_every_copy_of_the_repeated_call_in_the_turn() {
    let pair = |turn: &str| {
        vec![
            ToolCall::new(format!("{turn}1"), "echo", r#"{"x":1}"#),
            ToolCall::new(format!("{turn}2"), "echo", r#"{"x":1}"#),
        ]
    };
    let model = ScriptedModel::new()
        .reply_tool_calls(pair("a"))
        .reply_tool_calls(pair("b"))
        .reply_text("ok, stopping");
    let mut config = CycleConfig::new("m");
    config.repeated_call_guard.limit = Some(2);
    config.repeated_call_guard.action = RepeatedCallAction::TellModel;
    let tools = tools();
    let mut cycle = LlmCycle::new(model.clone(), config);
    let reply = cycle
        .submit_with_tools("go".into(), &tools.registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "ok, stopping");
    // The first turn ran both copies; the second ran none.
    assert_eq!(tools.echo_runs.load(Ordering::SeqCst), 2);
    let told: Vec<String> = cycle.messages()[5..7]
        .iter()
        .map(|m| m.text().unwrap())
        .collect();
    for text in &told {
        assert!(text.contains("in 2 turns in a row"), "{text}");
    }
    assert_history_valid(cycle.messages());
}
