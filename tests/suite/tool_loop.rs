//! The automatic tool loop (issue 4, design §6, acceptance criteria 10–13) against the scripted model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::Duration;

use agcore::llm::testing::{ScriptedModel, ScriptedReply};
use agcore::llm::{
    CycleConfig, ErrorKind, FinishReason, LlmCycle, LlmError, OpenaiChatMessage,
    RepeatedCallAction, StreamEvent, ToolCall, Usage, replay,
};
use agcore::tools::prelude::*;
use agcore::tools::{PermissionChecker, PermissionConfig};
use futures::StreamExt;

struct Weather;

#[async_trait]
impl BaseTool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Network]
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let city = args["city"].as_str().unwrap_or_default();
        if city == "Atlantis" {
            return Err(ToolError::ExecutionFailed(
                "get_weather".into(),
                "no such city".into(),
            ));
        }
        Ok(json!({"city": city, "temperature": 22}))
    }
}

/// Sleeps `ms` from its arguments, then returns a text.
struct Sleep;

#[async_trait]
impl BaseTool for Sleep {
    fn name(&self) -> &str {
        "sleep"
    }
    fn description(&self) -> &str {
        "Sleep"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"ms": {"type": "integer"}}, "required": ["ms"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        tokio::time::sleep(Duration::from_millis(args["ms"].as_u64().unwrap_or(0))).await;
        Ok(json!(format!("slept {}", args["ms"])))
    }
}

struct Panics;

#[async_trait]
impl BaseTool for Panics {
    fn name(&self) -> &str {
        "panics"
    }
    fn description(&self) -> &str {
        "Always panics"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        panic!("boom")
    }
}

struct Shell;

#[async_trait]
impl BaseTool for Shell {
    fn name(&self) -> &str {
        "shell"
    }
    fn description(&self) -> &str {
        "Run a command"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"cmd": {"type": "string"}}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Shell]
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        panic!("a denied tool must never run")
    }
}

struct Big;

#[async_trait]
impl BaseTool for Big {
    fn name(&self) -> &str {
        "big"
    }
    fn description(&self) -> &str {
        "Large output"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!(format!("START{}END", "x".repeat(200_000))))
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_default_timeout(Duration::from_millis(500));
    registry
        .register_all(vec![
            Arc::new(Weather),
            Arc::new(Sleep),
            Arc::new(Panics),
            Arc::new(Shell),
            Arc::new(Big),
        ])
        .unwrap();
    registry
}

fn call(id: &str, name: &str, args: &str) -> ToolCall {
    ToolCall::new(id, name, args)
}

fn cycle(model: &ScriptedModel) -> LlmCycle {
    LlmCycle::new(model.clone(), CycleConfig::new("test-model"))
}

/// Every assistant tool call is answered by exactly one following tool message, in call order,
/// before the next assistant or user message (what OpenAI requires of a history).
fn assert_history_valid(messages: &[OpenaiChatMessage]) {
    let mut i = 0;
    while i < messages.len() {
        let calls = messages[i].tool_calls();
        i += 1;
        for call in calls {
            match messages.get(i) {
                Some(OpenaiChatMessage::Tool { tool_call_id, .. }) => {
                    assert_eq!(tool_call_id, &call.id)
                }
                other => panic!("call {} unanswered; next message: {other:?}", call.id),
            }
            i += 1;
        }
        if let Some(OpenaiChatMessage::Tool { tool_call_id, .. }) = messages.get(i) {
            panic!("tool message {tool_call_id} answers no call");
        }
    }
}

fn history_json(cycle: &LlmCycle) -> Value {
    serde_json::to_value(cycle.messages()).unwrap()
}

#[tokio::test]
async fn single_tool_turn_runs_the_tool_and_feeds_the_result_back() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("call_1", "get_weather", r#"{"city":"Paris"}"#)])
        .reply_text("It is 22 degrees in Paris.");
    let mut cycle = cycle(&model);
    let response = cycle
        .submit_with_tools("Weather in Paris?".into(), &registry())
        .await
        .unwrap();
    assert_eq!(response.text(), "It is 22 degrees in Paris.");
    assert_eq!(response.stop_reason, Some(FinishReason::Stop));
    assert_eq!(
        history_json(&cycle),
        json!([
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_1", "content": "{\"city\":\"Paris\",\"temperature\":22}"},
            {"role": "assistant", "content": "It is 22 degrees in Paris."}
        ])
    );
    // Turn 2 as the model received it: tools offered, the tool message after its assistant, ids matching.
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    // `shell` is registered but not offered: the default checker denies Shell, so the
    // permission gate hides it (it is still refused with PermissionDenied if named anyway).
    assert_eq!(
        requests[0].tool_names(),
        vec!["get_weather", "sleep", "panics", "big"]
    );
    assert_eq!(requests[1].messages.len(), 3);
    assert_eq!(requests[1].messages[1].tool_calls()[0].id, "call_1");
    assert!(
        matches!(&requests[1].messages[2], OpenaiChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_1")
    );
}

#[tokio::test]
async fn criterion_10_a_conversation_with_tools_runs_for_several_turns() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#)])
        .reply_tool_calls(vec![call("c2", "get_weather", r#"{"city":"Rome"}"#)])
        .reply_tool_calls(vec![call("c3", "sleep", r#"{"ms":1}"#)])
        .reply_text("Paris and Rome are both 22 degrees.");
    let mut cycle = cycle(&model);
    let response = cycle
        .submit_with_tools("Compare".into(), &registry())
        .await
        .unwrap();
    assert_eq!(response.text(), "Paris and Rome are both 22 degrees.");
    assert_eq!(model.requests().len(), 4);
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(
        roles,
        [
            "user",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant"
        ]
    );
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn parallel_calls_run_concurrently_and_are_answered_in_call_order() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            call("slow", "sleep", r#"{"ms":200}"#),
            call("fast", "sleep", r#"{"ms":1}"#),
            call("w", "get_weather", r#"{"city":"Oslo"}"#),
        ])
        .reply_text("done");
    let mut cycle = cycle(&model);
    let registry = registry();
    let mut events = Vec::new();
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &registry)
            .await
            .unwrap();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
    }
    let completed: Vec<String> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::ToolExecutionCompleted { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    // Completion events come as tools finish: the 200 ms call last, so they overlapped.
    assert_eq!(completed.last().map(String::as_str), Some("slow"));
    let answered: Vec<&str> = cycle
        .messages()
        .iter()
        .filter_map(|m| match m {
            OpenaiChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(answered, ["slow", "fast", "w"]);
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn criterion_11_max_turns_ends_with_a_typed_error_and_a_history_valid_to_continue() {
    let model = ScriptedModel::from_fn(|request| {
        let n = request.messages.len();
        ScriptedReply::tool_calls(vec![call(
            &format!("c{n}"),
            "sleep",
            &format!(r#"{{"ms":{n}}}"#),
        )])
    });
    let mut config = CycleConfig::new("m");
    config.max_turns = Some(3);
    let mut cycle = LlmCycle::new(model.clone(), config);
    let error = cycle
        .submit_with_tools("loop".into(), &registry())
        .await
        .unwrap_err();
    match &error {
        LlmError::MaxTurnsExceeded { turns, history } => {
            assert_eq!(*turns, 3);
            assert_eq!(history.as_slice(), cycle.messages());
        }
        other => panic!("expected MaxTurnsExceeded, got {other}"),
    }
    assert_eq!(model.requests().len(), 3);
    assert_eq!(cycle.messages().len(), 1 + 3 * 2);
    assert_history_valid(cycle.messages());

    // Continue from there: the next request carries the whole valid history.
    model.push(ScriptedReply::text("finally"));
    let response = cycle.resume_with_tools(&registry()).await.unwrap();
    assert_eq!(response.text(), "finally");
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn max_turns_zero_makes_no_request_and_the_error_history_matches_messages() {
    let model = ScriptedModel::new().reply_text("never asked");
    let mut config = CycleConfig::new("m");
    config.max_turns = Some(0);
    let mut cycle = LlmCycle::new(model.clone(), config).with_system_prompt("sys");
    let error = cycle
        .submit_with_tools("hi".into(), &registry())
        .await
        .unwrap_err();
    match &error {
        LlmError::MaxTurnsExceeded { turns: 0, history } => {
            assert_eq!(history.as_slice(), cycle.messages());
        }
        other => panic!("expected MaxTurnsExceeded, got {other}"),
    }
    assert_eq!(cycle.messages().len(), 1);
    assert!(model.requests().is_empty());
}

#[tokio::test]
async fn max_turns_defaults_to_ten() {
    let model = ScriptedModel::from_fn(|request| {
        let n = request.messages.len();
        ScriptedReply::tool_calls(vec![call(
            &format!("c{n}"),
            "sleep",
            &format!(r#"{{"ms":{n}}}"#),
        )])
    });
    let mut cycle = cycle(&model);
    let error = cycle
        .submit_with_tools("loop".into(), &registry())
        .await
        .unwrap_err();
    assert!(matches!(
        error,
        LlmError::MaxTurnsExceeded { turns: 10, .. }
    ));
    assert_eq!(model.requests().len(), 10);
}

#[tokio::test]
async fn every_tool_failure_is_fed_back_and_the_model_recovers() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            call("denied", "shell", r#"{"cmd":"rm -rf /"}"#),
            call("unknown", "no_such_tool", "{}"),
            call("badjson", "get_weather", r#"{"city": "Par"#),
            call("schema", "get_weather", r#"{"town":"Paris"}"#),
            call("failed", "get_weather", r#"{"city":"Atlantis"}"#),
            call("timeout", "sleep", r#"{"ms":5000}"#),
            call("panic", "panics", "{}"),
            call("ok", "get_weather", r#"{"city":"Lima"}"#),
        ])
        .reply_text("Recovered.");
    let mut cycle = cycle(&model);
    let registry = registry();
    let mut completed = Vec::new();
    {
        let mut stream = cycle
            .submit_stream_with_tools("try everything".into(), &registry)
            .await
            .unwrap();
        while let Some(event) = stream.next().await {
            if let StreamEvent::ToolExecutionCompleted {
                id,
                is_error,
                output,
                ..
            } = event
            {
                completed.push((id, is_error, output));
            }
        }
    }
    assert_eq!(completed.len(), 8);
    for (id, is_error, output) in &completed {
        assert_eq!(*is_error, id != "ok", "{id}: {output}");
    }
    let content = |id: &str| -> String {
        cycle
            .messages()
            .iter()
            .find_map(|m| match m {
                OpenaiChatMessage::Tool {
                    tool_call_id,
                    content,
                    ..
                } if tool_call_id == id => Some(content.text()),
                _ => None,
            })
            .unwrap()
    };
    assert!(
        content("denied").starts_with("Error: permission denied: tool 'shell' requires Shell"),
        "{}",
        content("denied")
    );
    assert!(content("unknown").contains("'no_such_tool' is not registered"));
    assert!(content("badjson").contains("not valid JSON"));
    assert!(content("schema").contains("city"), "{}", content("schema"));
    assert!(content("failed").contains("no such city"));
    assert!(content("timeout").contains("timed out"));
    assert!(content("panic").contains("panicked") && content("panic").contains("boom"));
    assert_eq!(content("ok"), r#"{"city":"Lima","temperature":22}"#);
    assert_eq!(
        cycle.messages().last().unwrap().text().as_deref(),
        Some("Recovered.")
    );
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn criterion_12_streaming_events_come_in_the_documented_order() {
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_calls(vec![call("call_1", "get_weather", r#"{"city":"Beijing"}"#)])
                .with_text("Let me check the weather in Beijing...")
                .with_usage(Usage {
                    prompt_tokens: 10,
                    completion_tokens: 5,
                    total_tokens: 15,
                    ..Usage::default()
                }),
        )
        .reply(
            ScriptedReply::text("Beijing is 22 °C today.").with_usage(Usage {
                prompt_tokens: 30,
                completion_tokens: 7,
                total_tokens: 37,
                ..Usage::default()
            }),
        );
    let mut cycle = cycle(&model);
    let registry = registry();
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("Weather?".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| match e {
            StreamEvent::AssistantTextDelta { .. } => "text",
            StreamEvent::ToolCallDelta { .. } => "call_delta",
            StreamEvent::ToolCallReady { .. } => "call_ready",
            StreamEvent::ToolExecutionStarted { .. } => "started",
            StreamEvent::TurnComplete {
                reason: FinishReason::ToolCalls,
                ..
            } => "turn_tool_calls",
            StreamEvent::TurnComplete {
                reason: FinishReason::Stop,
                ..
            } => "turn_stop",
            StreamEvent::ToolExecutionCompleted { .. } => "completed",
            _ => "other",
        })
        .collect();
    let mut compact: Vec<&str> = kinds.clone();
    compact.dedup();
    assert_eq!(
        compact,
        [
            "text",
            "call_delta",
            "call_ready",
            "started",
            "turn_tool_calls",
            "completed",
            "text",
            "turn_stop"
        ]
    );
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        text,
        "Let me check the weather in Beijing...Beijing is 22 °C today."
    );
    match events.last().unwrap() {
        StreamEvent::TurnComplete {
            usage: Some(usage), ..
        } => assert_eq!(usage.total_tokens, 52),
        other => panic!("last event {other:?}"),
    }
    match events
        .iter()
        .find(|e| matches!(e, StreamEvent::ToolExecutionCompleted { .. }))
        .unwrap()
    {
        StreamEvent::ToolExecutionCompleted {
            id,
            tool_name,
            output,
            is_error,
            ..
        } => {
            assert_eq!(
                (id.as_str(), tool_name.as_str(), *is_error),
                ("call_1", "get_weather", false)
            );
            assert_eq!(output, &json!({"city": "Beijing", "temperature": 22}));
        }
        _ => unreachable!(),
    }
}

#[tokio::test]
async fn criterion_13_tool_messages_are_appended_to_the_history() {
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_calls(vec![
                call("a", "get_weather", r#"{"city":"Paris"}"#),
                call("b", "sleep", r#"{"ms":1}"#),
            ])
            .with_reasoning("I need two tools.")
            .with_text("Checking."),
        )
        .reply_text("Done.");
    let mut cycle = cycle(&model).with_system_prompt("Be brief.");
    cycle
        .submit_with_tools("Do it".into(), &registry())
        .await
        .unwrap();
    assert_eq!(
        history_json(&cycle),
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Do it"},
            {"role": "assistant", "content": "Checking.", "reasoning_content": "I need two tools.", "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "b", "type": "function", "function": {"name": "sleep", "arguments": "{\"ms\":1}"}}
            ]},
            {"role": "tool", "tool_call_id": "a", "content": "{\"city\":\"Paris\",\"temperature\":22}"},
            {"role": "tool", "tool_call_id": "b", "content": "slept 1"},
            {"role": "assistant", "content": "Done."}
        ])
    );
}

#[tokio::test]
async fn dropping_the_stream_during_tool_execution_leaves_no_unanswered_calls() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#)])
        .reply_tool_calls(vec![call("c2", "sleep", r#"{"ms":400}"#)])
        .reply_text("never reached");
    let mut cycle = cycle(&model);
    let registry = ToolRegistry::new();
    let mut registry = registry;
    registry
        .register_all(vec![Arc::new(Weather), Arc::new(Sleep)])
        .unwrap();
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &registry)
            .await
            .unwrap();
        // Read until the second turn's tool starts, then drop the stream (cancel).
        while let Some(event) = stream.next().await {
            if matches!(&event, StreamEvent::ToolExecutionStarted { id, .. } if id == "c2") {
                break;
            }
        }
    }
    // The first turn completed and stays; the cancelled one is gone.
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn a_failed_first_request_leaves_the_history_as_it_was() {
    let model = ScriptedModel::new().reply_text("first").reply_error(|| {
        agcore::llm::ProviderError::BadRequest {
            status: 400,
            message: "nope".into(),
        }
    });
    let mut cycle = cycle(&model);
    cycle.submit("one".into()).await.unwrap();
    let before = history_json(&cycle);
    let error = cycle
        .submit_with_tools("two".into(), &registry())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::BadRequest { .. }));
    assert_eq!(history_json(&cycle), before);
}

#[tokio::test]
async fn a_mid_stream_error_ends_the_stream_with_one_error_event() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("c1", "sleep", r#"{"ms":1}"#)])
        .reply(ScriptedReply::Deltas(vec![
            Ok(agcore::llm::ModelDelta::Text("partial".into())),
            Err("server overloaded".into()),
        ]));
    // Without a retry budget (a broken stream is retried within it, see `stream_retry.rs`).
    let mut config = CycleConfig::new("test-model");
    config.retry = agcore::llm::RetryPolicy::none();
    let mut cycle = LlmCycle::new(model.clone(), config);
    let registry = registry();
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("go".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    let errors: Vec<&StreamEvent> = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::Error { .. }))
        .collect();
    assert_eq!(errors.len(), 1);
    assert!(
        matches!(events.last().unwrap(), StreamEvent::Error { kind: ErrorKind::Stream, message } if message.contains("overloaded"))
    );
    // The completed tool turn stays; the broken one is not in the history.
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
}

#[tokio::test]
async fn repeated_identical_calls_stop_the_loop_by_default() {
    let model = ScriptedModel::from_fn(|request| {
        ScriptedReply::tool_calls(vec![call(
            &format!("c{}", request.messages.len()),
            "get_weather",
            r#"{"city":"Paris"}"#,
        )])
    });
    let mut cycle = cycle(&model);
    let error = cycle
        .submit_with_tools("again and again".into(), &registry())
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::RepeatedToolCall { tool, times: 3 } if tool == "get_weather"),
        "{error}"
    );
    // Two calls ran and are answered; the third was not run.
    assert_eq!(
        cycle
            .messages()
            .iter()
            .filter(|m| m.role() == "tool")
            .count(),
        2
    );
    assert_history_valid(cycle.messages());
}

#[tokio::test]
async fn the_repeated_call_guard_can_tell_the_model_instead() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#)])
        .reply_tool_calls(vec![call("c2", "get_weather", r#"{"city": "Paris"}"#)])
        .reply_text("ok, stopping");
    let mut config = CycleConfig::new("m");
    config.repeated_call_guard.limit = Some(2);
    config.repeated_call_guard.action = RepeatedCallAction::TellModel;
    let mut cycle = LlmCycle::new(model.clone(), config);
    let response = cycle
        .submit_with_tools("go".into(), &registry())
        .await
        .unwrap();
    assert_eq!(response.text(), "ok, stopping");
    let last_tool = cycle
        .messages()
        .iter()
        .rev()
        .find(|m| m.role() == "tool")
        .unwrap();
    assert!(last_tool.text().unwrap().contains("in 2 turns in a row"));
}

#[tokio::test]
async fn large_output_is_cut_for_the_model_but_kept_whole_in_the_event() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![call("c1", "big", "{}")])
        .reply_text("ok");
    let mut config = CycleConfig::new("m");
    config.tool_output_limit = 1_000;
    let mut cycle = LlmCycle::new(model.clone(), config);
    let registry = registry();
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("go".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    let full = events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ToolExecutionCompleted { output, .. } => output.as_str().map(str::len),
            _ => None,
        })
        .unwrap();
    assert_eq!(full, 200_008);
    let sent = model.requests()[1].messages[2].text().unwrap();
    assert!(sent.len() < 1_200 && sent.starts_with("START") && sent.ends_with("END"));
    assert!(sent.contains("bytes cut"));
}

#[tokio::test]
async fn tool_calls_cut_by_the_token_limit_are_reported_not_run() {
    let model = ScriptedModel::new().reply(
        ScriptedReply::tool_calls(vec![call("c1", "shell", r#"{"cmd": "rm -r"#)])
            .with_finish(FinishReason::Length),
    );
    let mut cycle = cycle(&model);
    let error = cycle
        .submit_with_tools("go".into(), &registry())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::TruncatedToolCalls));
    assert!(cycle.messages().is_empty());
}

#[tokio::test]
async fn usage_is_summed_over_turns() {
    let usage = |n| Usage {
        prompt_tokens: n,
        completion_tokens: 1,
        total_tokens: n + 1,
        ..Usage::default()
    };
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_calls(vec![call("c1", "sleep", r#"{"ms":1}"#)])
                .with_usage(usage(10)),
        )
        .reply(ScriptedReply::text("done").with_usage(usage(20)));
    let response = cycle(&model)
        .submit_with_tools("go".into(), &registry())
        .await
        .unwrap();
    assert_eq!(response.usage.unwrap().prompt_tokens, 30);
    assert_eq!(response.usage.unwrap().total_tokens, 32);
}

#[tokio::test]
async fn a_saved_history_restores_continues_and_replays() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            call("c1", "get_weather", r#"{"city":"Paris"}"#),
            call("c2", "shell", "{}"),
        ])
        .reply_text("Paris is 22.");
    let mut cycle = cycle(&model);
    let registry = registry();
    let live: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("go".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    let saved = serde_json::to_string(cycle.messages()).unwrap();

    // Replay gives the same tool calls, outputs (as the model saw them) and error flags.
    let restored: Vec<OpenaiChatMessage> = serde_json::from_str(&saved).unwrap();
    let replayed = replay(&restored);
    let summary = |events: &[StreamEvent]| -> Vec<(String, bool)> {
        events
            .iter()
            .filter_map(|e| match e {
                StreamEvent::ToolExecutionCompleted { id, is_error, .. } => {
                    Some((id.clone(), *is_error))
                }
                _ => None,
            })
            .collect()
    };
    let mut live_summary = summary(&live);
    live_summary.sort();
    assert_eq!(summary(&replayed), live_summary);
    assert!(
        replayed.iter().any(
            |e| matches!(e, StreamEvent::AssistantTextDelta { text } if text == "Paris is 22.")
        )
    );

    // Continue the restored conversation with a new model.
    let next = ScriptedModel::new().reply_text("Still 22.");
    let mut resumed = LlmCycle::from_history(next.clone(), CycleConfig::new("m"), restored);
    resumed
        .submit_with_tools("And now?".into(), &registry)
        .await
        .unwrap();
    assert_eq!(next.requests()[0].messages.len(), 6);
    assert_history_valid(resumed.messages());
}

#[tokio::test]
async fn reasoning_is_kept_on_its_assistant_message_within_the_turn() {
    let model = ScriptedModel::new()
        .reply(
            ScriptedReply::tool_calls(vec![call("c1", "sleep", r#"{"ms":1}"#)])
                .with_reasoning("think"),
        )
        .reply_text("done");
    let mut cycle = cycle(&model);
    cycle
        .submit_with_tools("go".into(), &registry())
        .await
        .unwrap();
    assert_eq!(model.requests()[1].messages[1].reasoning(), Some("think"));
}

#[tokio::test]
async fn a_cancelled_turn_in_which_a_tool_already_ran_is_kept_with_the_rest_marked_cancelled() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            call("fast", "get_weather", r#"{"city":"Paris"}"#),
            call("slow", "sleep", r#"{"ms":5000}"#),
        ])
        .reply_text("never reached");
    let mut cycle = cycle(&model);
    let mut registry = ToolRegistry::new();
    registry
        .register_all(vec![Arc::new(Weather), Arc::new(Sleep)])
        .unwrap();
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &registry)
            .await
            .unwrap();
        // Cancel as soon as the fast tool has finished (it ran: its effects happened).
        while let Some(event) = stream.next().await {
            if matches!(&event, StreamEvent::ToolExecutionCompleted { id, .. } if id == "fast") {
                break;
            }
        }
    }
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool"]);
    assert_history_valid(cycle.messages());
    assert_eq!(
        cycle.messages()[2].text().unwrap(),
        r#"{"city":"Paris","temperature":22}"#
    );
    let cancelled = cycle.messages()[3].text().unwrap();
    assert!(cancelled.starts_with("Error: cancelled"), "{cancelled}");
}

#[tokio::test]
async fn a_cancelled_turn_in_which_every_call_was_refused_is_dropped() {
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            call("denied", "shell", "{}"),
            call("slow", "sleep", r#"{"ms":5000}"#),
        ])
        .reply_text("never reached");
    let mut cycle = cycle(&model);
    let registry = registry();
    {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &registry)
            .await
            .unwrap();
        while let Some(event) = stream.next().await {
            if matches!(&event, StreamEvent::ToolExecutionCompleted { id, .. } if id == "denied") {
                break;
            }
        }
    }
    assert!(cycle.messages().is_empty(), "{:?}", cycle.messages());
}
