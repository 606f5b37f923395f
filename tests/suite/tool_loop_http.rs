//! The tool loop (issue 4) through `OpenAiClient` against a local fake OpenAI server that answers
//! turn by turn in the real wire format: SSE chunks ending with `[DONE]`, or one JSON reply.
//!
//! Every request the server receives is recorded and checked: each assistant tool call is
//! answered by exactly one `tool` message, in call order, right after its assistant message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::types::ToolChoice;
use agcore::llm::{
    CycleConfig, FinishReason, LlmCycle, LlmError, OpenAiClient, OpenAiConfig, StreamEvent,
};
use agcore::tools::prelude::*;
use futures::StreamExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------------------------------------
// The fake server.

/// One tool call in a scripted reply; `id: None` means the server sends no id.
#[derive(Clone)]
struct Call {
    id: Option<&'static str>,
    name: &'static str,
    arguments: &'static str,
}

fn call(id: &'static str, name: &'static str, arguments: &'static str) -> Call {
    Call {
        id: Some(id),
        name,
        arguments,
    }
}

/// How the reply is shaped on the wire.
#[derive(Clone, Copy, PartialEq)]
enum Style {
    /// OpenAI: arguments split over chunks, `finish_reason: "tool_calls"`, a usage chunk.
    OpenAi,
    /// Ollama: each tool call whole in one chunk, `finish_reason: "stop"`, no usage.
    Ollama,
}

/// A scripted model reply, rendered as SSE or JSON depending on the request's `stream`.
#[derive(Clone)]
struct Turn {
    text: Option<&'static str>,
    reasoning: Option<&'static str>,
    /// The field the reasoning is sent in (`reasoning_content` or `reasoning`).
    reasoning_field: &'static str,
    calls: Vec<Call>,
    style: Style,
    usage: (u64, u64),
}

impl Turn {
    fn text(text: &'static str) -> Self {
        Turn {
            text: Some(text),
            reasoning: None,
            reasoning_field: "reasoning_content",
            calls: Vec::new(),
            style: Style::OpenAi,
            usage: (10, 5),
        }
    }

    fn calls(calls: Vec<Call>) -> Self {
        Turn {
            text: None,
            calls,
            ..Turn::text("")
        }
    }

    fn with_text(mut self, text: &'static str) -> Self {
        self.text = Some(text);
        self
    }

    fn with_reasoning(mut self, reasoning: &'static str) -> Self {
        self.reasoning = Some(reasoning);
        self
    }

    /// Reasoning in the `reasoning` field (Groq, Cerebras, OpenRouter, Ollama).
    fn with_reasoning_field(mut self, reasoning: &'static str) -> Self {
        self.reasoning = Some(reasoning);
        self.reasoning_field = "reasoning";
        self
    }

    fn ollama(mut self) -> Self {
        self.style = Style::Ollama;
        self
    }

    fn finish_reason(&self) -> &'static str {
        if self.calls.is_empty() || self.style == Style::Ollama {
            "stop"
        } else {
            "tool_calls"
        }
    }

    fn wire_calls(&self) -> Vec<Value> {
        self.calls
            .iter()
            .enumerate()
            .map(|(index, c)| {
                let mut call = json!({"index": index, "type": "function",
                    "function": {"name": c.name, "arguments": c.arguments}});
                if let Some(id) = c.id {
                    call["id"] = json!(id);
                }
                call
            })
            .collect()
    }

    fn usage(&self) -> Value {
        let (prompt, completion) = self.usage;
        json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion})
    }

    /// The non-streaming `chat.completion` body.
    fn json(&self, seq: usize) -> String {
        let mut message = json!({"role": "assistant", "content": self.text, "refusal": null});
        if let Some(reasoning) = self.reasoning {
            message[self.reasoning_field] = json!(reasoning);
        }
        if !self.calls.is_empty() {
            let calls: Vec<Value> = self
                .wire_calls()
                .into_iter()
                .map(|mut c| {
                    c.as_object_mut().unwrap().remove("index");
                    c
                })
                .collect();
            message["tool_calls"] = json!(calls);
        }
        let mut body = json!({
            "id": format!("chatcmpl-{seq}"), "object": "chat.completion", "created": 1_732_963_500,
            "model": "fake-model", "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": self.finish_reason()}],
        });
        if self.style == Style::OpenAi {
            body["usage"] = self.usage();
        }
        body.to_string()
    }

    /// The streaming body: `data: {chunk}` events, then `data: [DONE]`.
    fn sse(&self, seq: usize) -> String {
        let id = format!("chatcmpl-{seq}");
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": id, "object": "chat.completion.chunk", "created": 1_732_963_500,
                "model": "fake-model", "system_fingerprint": "fp_fake",
                "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
        };
        let mut chunks = vec![chunk(json!({"role": "assistant", "content": ""}), None)];
        if let Some(reasoning) = self.reasoning {
            for piece in pieces(reasoning) {
                chunks.push(chunk(
                    json!({"content": null, self.reasoning_field: piece}),
                    None,
                ));
            }
        }
        if let Some(text) = self.text {
            for piece in pieces(text) {
                chunks.push(chunk(json!({"content": piece}), None));
            }
        }
        match self.style {
            Style::OpenAi => {
                for (index, c) in self.calls.iter().enumerate() {
                    let mut first = json!({"index": index, "type": "function",
                        "function": {"name": c.name, "arguments": ""}});
                    if let Some(id) = c.id {
                        first["id"] = json!(id);
                    }
                    chunks.push(chunk(json!({"tool_calls": [first]}), None));
                    for piece in pieces(c.arguments) {
                        chunks.push(chunk(
                            json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                            None,
                        ));
                    }
                }
                chunks.push(chunk(json!({}), Some(self.finish_reason())));
                let mut usage = json!({"id": id, "object": "chat.completion.chunk", "created": 1_732_963_500,
                    "model": "fake-model", "choices": []});
                usage["usage"] = self.usage();
                chunks.push(usage);
            }
            Style::Ollama => {
                if !self.calls.is_empty() {
                    chunks.push(chunk(
                        json!({"role": "assistant", "content": "", "tool_calls": self.wire_calls()}),
                        None,
                    ));
                }
                chunks.push(chunk(
                    json!({"role": "assistant", "content": ""}),
                    Some("stop"),
                ));
            }
        }
        let mut body = String::new();
        for chunk in chunks {
            body.push_str("data: ");
            body.push_str(&chunk.to_string());
            body.push_str("\n\n");
        }
        body.push_str("data: [DONE]\n\n");
        body
    }
}

/// `text` in two pieces (split on a char boundary), as servers stream it.
fn pieces(text: &str) -> Vec<&str> {
    let mut middle = text.len() / 2;
    while !text.is_char_boundary(middle) {
        middle += 1;
    }
    [&text[..middle], &text[middle..]]
        .into_iter()
        .filter(|piece| !piece.is_empty())
        .collect()
}

/// What the server answers to one request.
#[derive(Clone)]
enum Reply {
    Model(Turn),
    /// The reply after a delay (to cancel a call while its request is in flight).
    Slow(Turn, Duration),
    Status(u16, Vec<(&'static str, &'static str)>, Value),
}

type Script = dyn Fn(&Value, usize) -> Reply + Send + Sync;

struct Responder {
    script: Box<Script>,
    received: Arc<Mutex<Vec<Value>>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Respond for Responder {
    /// A failed check or script panic becomes a 400 carrying its message (not retried), so the
    /// test sees why instead of a closed connection; it is also recorded, and the test fails
    /// when the server is dropped even if it expected a 400.
    fn respond(&self, request: &Request) -> ResponseTemplate {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(request))) {
            Ok(template) => template,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                self.failures.lock().unwrap().push(message.clone());
                ResponseTemplate::new(400).set_body_json(
                    json!({"error": {"message": format!("fake server: {message}"), "type": "invalid_request_error"}}),
                )
            }
        }
    }
}

impl Responder {
    fn answer(&self, request: &Request) -> ResponseTemplate {
        let body: Value = request.body_json().expect("the request body is JSON");
        assert_wire_history_valid(&body);
        let seq = {
            let mut received = self.received.lock().unwrap();
            received.push(body.clone());
            received.len()
        };
        match (self.script)(&body, seq - 1) {
            Reply::Slow(turn, delay) if body["stream"] == json!(true) => ResponseTemplate::new(200)
                .set_body_raw(turn.sse(seq), "text/event-stream")
                .set_delay(delay),
            Reply::Slow(turn, delay) => ResponseTemplate::new(200)
                .set_body_raw(turn.json(seq), "application/json")
                .set_delay(delay),
            Reply::Model(turn) if body["stream"] == json!(true) => {
                ResponseTemplate::new(200).set_body_raw(turn.sse(seq), "text/event-stream")
            }
            Reply::Model(turn) => {
                ResponseTemplate::new(200).set_body_raw(turn.json(seq), "application/json")
            }
            Reply::Status(status, headers, body) => {
                let mut template = ResponseTemplate::new(status).set_body_json(body);
                for (name, value) in headers {
                    template = template.insert_header(name, value);
                }
                template
            }
        }
    }
}

/// A fake OpenAI server on 127.0.0.1 and every request body it received.
struct FakeOpenAi {
    server: MockServer,
    received: Arc<Mutex<Vec<Value>>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Drop for FakeOpenAi {
    fn drop(&mut self) {
        let failures = self.failures.lock().unwrap();
        if !std::thread::panicking() {
            assert!(
                failures.is_empty(),
                "the fake server rejected requests: {failures:#?}"
            );
        }
    }
}

impl FakeOpenAi {
    /// `script(body, n)` decides the reply to the `n`th request (0-based) from its body.
    async fn start(script: impl Fn(&Value, usize) -> Reply + Send + Sync + 'static) -> Self {
        let server = MockServer::start().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder {
                script: Box::new(script),
                received: received.clone(),
                failures: failures.clone(),
            })
            .mount(&server)
            .await;
        FakeOpenAi {
            server,
            received,
            failures,
        }
    }

    /// A server answering by turn: the reply is `turns[k]` where `k` is the number of assistant
    /// messages after the last user message of the request (a stateless fake model).
    async fn by_turn(turns: Vec<Turn>) -> Self {
        FakeOpenAi::start(move |body, _| {
            if body.get("tools").is_none() {
                // Like a real model: no tools offered, no tool calls.
                return Reply::Model(Turn::text("(no tools)"));
            }
            let turn = turn_of(body);
            Reply::Model(
                turns
                    .get(turn)
                    .cloned()
                    .unwrap_or_else(|| panic!("no reply scripted for turn {turn}")),
            )
        })
        .await
    }

    fn client(&self) -> OpenAiClient {
        OpenAiClient::new(
            OpenAiConfig::new(format!("{}/v1", self.server.uri())).with_api_key("sk-test"),
        )
        .unwrap()
    }

    fn cycle(&self) -> LlmCycle {
        LlmCycle::new(self.client(), CycleConfig::new("fake-model"))
    }

    /// Every request body received so far (each already checked by the invariant).
    fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }

    /// The `messages` array of request `n`.
    fn messages(&self, n: usize) -> Value {
        self.requests()[n]["messages"].clone()
    }
}

/// Assistant messages after the last user message.
fn turn_of(body: &Value) -> usize {
    let messages = body["messages"].as_array().unwrap();
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count()
}

/// Codex's invariant, on the wire: every assistant tool call is answered by exactly one `tool`
/// message with its id, those messages directly follow the assistant message in call order,
/// and no `tool` message answers nothing.
fn assert_wire_history_valid(body: &Value) {
    let messages = body["messages"].as_array().expect("messages array");
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        i += 1;
        if message["role"] == "tool" {
            panic!("tool message answers no call: {message}\nin {body:#}");
        }
        let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
            continue;
        };
        assert_eq!(message["role"], "assistant");
        assert!(!calls.is_empty(), "empty tool_calls are not sent");
        let mut ids = std::collections::HashSet::new();
        for call in calls {
            let id = call["id"].as_str().expect("every call has an id");
            assert!(!id.is_empty() && ids.insert(id), "ids are unique: {id}");
            assert_eq!(call["type"], "function");
            assert!(call["function"]["arguments"].is_string());
            let answer = messages
                .get(i)
                .unwrap_or_else(|| panic!("call {id} unanswered in {body:#}"));
            assert_eq!(answer["role"], "tool", "call {id} unanswered in {body:#}");
            assert_eq!(answer["tool_call_id"], id, "answers out of call order");
            assert!(answer["content"].is_string());
            i += 1;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tools.

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

/// Sleeps for a minute; records whether its future was dropped (cancelled) and whether it ended.
struct Slow {
    started: Arc<AtomicBool>,
    dropped: Arc<AtomicBool>,
}

struct SetOnDrop(Arc<AtomicBool>);

impl Drop for SetOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
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
        let _guard = SetOnDrop(self.dropped.clone());
        self.started.store(true, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_secs(60)).await;
        Ok(json!("done"))
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather)).unwrap();
    registry
}

const WEATHER_TOOL: &str = r#"{"type": "function", "function": {"name": "get_weather",
    "description": "Current weather of a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}"#;

/// Both request paths, so each scenario runs streaming and non-streaming.
#[derive(Clone, Copy, Debug)]
enum Mode {
    Blocking,
    Streaming,
}

const MODES: [Mode; 2] = [Mode::Blocking, Mode::Streaming];

/// Run one tool-loop call: the final text (or error) and, when streaming, every event.
async fn run(
    cycle: &mut LlmCycle,
    prompt: &str,
    registry: &ToolRegistry,
    mode: Mode,
) -> (Result<String, LlmError>, Vec<StreamEvent>) {
    match mode {
        Mode::Blocking => (
            cycle
                .submit_with_tools(prompt.into(), registry)
                .await
                .map(|r| r.text()),
            Vec::new(),
        ),
        Mode::Streaming => {
            let events: Vec<StreamEvent> = match cycle
                .submit_stream_with_tools(prompt.into(), registry)
                .await
            {
                Ok(stream) => stream.collect().await,
                Err(error) => return (Err(error), Vec::new()),
            };
            let text = match events.last() {
                Some(StreamEvent::Error { message, .. }) => Err(LlmError::Other(message.clone())),
                _ => Ok(cycle
                    .messages()
                    .last()
                    .and_then(|m| m.text())
                    .unwrap_or_default()),
            };
            (text, events)
        }
    }
}

fn history(cycle: &LlmCycle) -> Value {
    serde_json::to_value(cycle.messages()).unwrap()
}

/// Without the request-only fields, a received message equals its history entry.
fn weather_call(id: &str, city: &str) -> Value {
    json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": format!("{{\"city\":\"{city}\"}}")}})
}

fn weather_result(id: &str, city: &str) -> Value {
    json!({"role": "tool", "tool_call_id": id, "content": format!("{{\"city\":\"{city}\",\"temperature\":22}}")})
}

// ---------------------------------------------------------------------------------------------
// Tests.

#[tokio::test]
async fn single_tool_turn_over_http() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("call_1", "get_weather", r#"{"city":"Paris"}"#)]),
            Turn::text("It is 22 degrees in Paris."),
        ])
        .await;
        let mut cycle = server.cycle();
        let (text, _) = run(&mut cycle, "Weather in Paris?", &registry(), mode).await;
        assert_eq!(text.unwrap(), "It is 22 degrees in Paris.", "{mode:?}");
        assert_eq!(
            history(&cycle),
            json!([
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [weather_call("call_1", "Paris")]},
                weather_result("call_1", "Paris"),
                {"role": "assistant", "content": "It is 22 degrees in Paris."}
            ]),
            "{mode:?}"
        );
        assert_eq!(server.requests().len(), 2);
    }
}

#[tokio::test]
async fn criterion_10_several_tool_turns_over_http_with_exact_history() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("call_a", "get_weather", r#"{"city":"Paris"}"#)])
                .with_text("Checking Paris."),
            Turn::calls(vec![call("call_b", "get_weather", r#"{"city":"Rome"}"#)]),
            Turn::calls(vec![call("call_c", "get_weather", r#"{"city":"Oslo"}"#)]),
            Turn::text("Paris, Rome and Oslo are all at 22."),
        ])
        .await;
        let mut cycle = server.cycle().with_system_prompt("You are terse.");
        let (text, _) = run(&mut cycle, "Compare three cities", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Paris, Rome and Oslo are all at 22.");
        // Criterion 13: the exact history.
        let expected = json!([
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Compare three cities"},
            {"role": "assistant", "content": "Checking Paris.", "tool_calls": [weather_call("call_a", "Paris")]},
            weather_result("call_a", "Paris"),
            {"role": "assistant", "content": null, "tool_calls": [weather_call("call_b", "Rome")]},
            weather_result("call_b", "Rome"),
            {"role": "assistant", "content": null, "tool_calls": [weather_call("call_c", "Oslo")]},
            weather_result("call_c", "Oslo"),
            {"role": "assistant", "content": "Paris, Rome and Oslo are all at 22."}
        ]);
        assert_eq!(history(&cycle), expected, "{mode:?}");
        // Each request carried the history so far, exactly.
        let requests = server.requests();
        assert_eq!(requests.len(), 4);
        for (n, len) in [(0, 2), (1, 4), (2, 6), (3, 8)] {
            assert_eq!(
                requests[n]["messages"],
                json!(expected.as_array().unwrap()[..len]),
                "{mode:?} request {n}"
            );
        }
    }
}

#[tokio::test]
async fn parallel_calls_in_one_turn_are_answered_in_call_order() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![
                call("call_1", "get_weather", r#"{"city":"Paris"}"#),
                call("call_2", "get_weather", r#"{"city":"Atlantis"}"#),
                call("call_3", "get_weather", r#"{"city":"Rome"}"#),
            ]),
            Turn::text("Paris and Rome: 22; Atlantis: unknown."),
        ])
        .await;
        let mut cycle = server.cycle();
        let (text, events) = run(&mut cycle, "Three cities", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Paris and Rome: 22; Atlantis: unknown.");
        let sent = server.messages(1);
        let roles: Vec<&str> = sent
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["user", "assistant", "tool", "tool", "tool"]);
        assert_eq!(sent[2], weather_result("call_1", "Paris"));
        assert_eq!(sent[3]["tool_call_id"], "call_2");
        assert_eq!(
            sent[3]["content"],
            "Error: tool 'get_weather' failed: no such city."
        );
        assert_eq!(sent[4], weather_result("call_3", "Rome"));
        if let Mode::Streaming = mode {
            let failed: Vec<(&str, bool)> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolExecutionCompleted { id, is_error, .. } => {
                        Some((id.as_str(), *is_error))
                    }
                    _ => None,
                })
                .collect();
            assert_eq!(failed.len(), 3);
            assert!(failed.contains(&("call_2", true)) && failed.contains(&("call_1", false)));
        }
    }
}

#[tokio::test]
async fn criterion_11_max_turns_over_http_leaves_a_history_valid_to_continue() {
    for mode in MODES {
        // A model that never stops calling tools (a different city each time, so the
        // repeated-call guard stays out of it), until it is told to answer.
        let server = FakeOpenAi::start(|body, _| {
            if turn_of(body) < 3 {
                Reply::Model(Turn::calls(vec![Call {
                    id: None,
                    name: "get_weather",
                    arguments: ["{\"city\":\"A\"}", "{\"city\":\"B\"}", "{\"city\":\"C\"}"]
                        [turn_of(body)],
                }]))
            } else {
                Reply::Model(Turn::text("done"))
            }
        })
        .await;
        let mut cycle = server.cycle();
        cycle.config_mut().max_turns = Some(2);
        let registry = registry();
        let (result, events) = run(&mut cycle, "Loop", &registry, mode).await;
        match mode {
            Mode::Blocking => match result.unwrap_err() {
                LlmError::MaxTurnsExceeded { turns, history } => {
                    assert_eq!(turns, 2);
                    assert_eq!(
                        serde_json::to_value(&history).unwrap(),
                        json!(cycle.messages())
                    );
                }
                other => panic!("{other:?}"),
            },
            Mode::Streaming => assert!(
                matches!(
                    events.last(),
                    Some(StreamEvent::Error {
                        kind: agcore::llm::ErrorKind::MaxTurnsExceeded,
                        ..
                    })
                ),
                "{events:?}"
            ),
        }
        assert_eq!(server.requests().len(), 2, "max_turns bounds requests");
        let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
        assert_eq!(
            roles,
            ["user", "assistant", "tool", "assistant", "tool"],
            "{mode:?}"
        );
        // Continuing sends that history as is; the server accepts it (invariant checked).
        let reply = cycle.resume_with_tools(&registry).await.unwrap();
        assert_eq!(reply.text(), "done");
        assert_eq!(server.requests().len(), 4);
    }
}

#[tokio::test]
async fn a_failing_tool_is_reported_and_the_model_recovers_next_turn() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("c1", "get_weather", r#"{"city":"Atlantis"}"#)]),
            Turn::calls(vec![call("c2", "get_weather", r#"{"town":"Paris"}"#)]),
            Turn::calls(vec![call("c3", "get_weather", r#"{"city":"Paris"#)]),
            Turn::calls(vec![call("c4", "no_such_tool", "{}")]),
            Turn::calls(vec![call("c5", "get_weather", r#"{"city":"Paris"}"#)]),
            Turn::text("Paris: 22."),
        ])
        .await;
        let mut cycle = server.cycle();
        let (text, events) = run(&mut cycle, "Weather?", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Paris: 22.", "{mode:?}");
        let last = server.messages(5);
        let answers: Vec<&str> = last
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .map(|m| m["content"].as_str().unwrap())
            .collect();
        assert_eq!(answers.len(), 5);
        assert_eq!(
            answers[0],
            "Error: tool 'get_weather' failed: no such city."
        );
        for (answer, says) in answers[1..4].iter().zip(["city", "JSON", "no_such_tool"]) {
            assert!(
                answer.starts_with("Error: ") && answer.contains(says),
                "{answer}"
            );
        }
        assert_eq!(answers[4], r#"{"city":"Paris","temperature":22}"#);
        if let Mode::Streaming = mode {
            let flags: Vec<bool> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolExecutionCompleted { is_error, .. } => Some(*is_error),
                    _ => None,
                })
                .collect();
            assert_eq!(flags, [true, true, true, true, false]);
        }
    }
}

#[tokio::test]
async fn criterion_12_streaming_event_order_over_http() {
    let server = FakeOpenAi::by_turn(vec![
        Turn::calls(vec![call("call_1", "get_weather", r#"{"city":"Beijing"}"#)])
            .with_text("Let me check."),
        Turn::text("Beijing is 22 °C today."),
    ])
    .await;
    let mut cycle = server.cycle();
    let registry = registry();
    let (_, events) = run(&mut cycle, "Weather?", &registry, Mode::Streaming).await;
    let mut kinds: Vec<&str> = events
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
            other => panic!("unexpected {other:?}"),
        })
        .collect();
    kinds.dedup();
    assert_eq!(
        kinds,
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
    assert_eq!(text, "Let me check.Beijing is 22 °C today.");
    // Usage: each turn's own on its ToolCalls turn, the sum on the final one.
    let usages: Vec<u64> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::TurnComplete { usage, .. } => usage.map(|u| u.total_tokens),
            _ => None,
        })
        .collect();
    assert_eq!(usages, [15, 30]);
    assert!(matches!(
        &events[events.iter().position(|e| matches!(e, StreamEvent::ToolExecutionStarted { .. })).unwrap()],
        StreamEvent::ToolExecutionStarted { id, tool_name, input }
            if id == "call_1" && tool_name == "get_weather" && input == &json!({"city": "Beijing"})
    ));
}

#[tokio::test]
async fn the_turn_2_request_body_is_exactly_what_openai_expects() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![
                call("call_x", "get_weather", r#"{"city":"Paris"}"#),
                call("call_y", "get_weather", r#"{"city":"Rome"}"#),
            ]),
            Turn::text("Both 22."),
        ])
        .await;
        let mut cycle = server.cycle();
        cycle.config_mut().options.tool_choice = Some(ToolChoice::Auto);
        cycle.config_mut().options.parallel_tool_calls = Some(true);
        run(&mut cycle, "Paris and Rome?", &registry(), mode)
            .await
            .0
            .unwrap();
        let turn_2 = server.requests()[1].clone();
        let mut expected = json!({
            "model": "fake-model",
            "messages": [
                {"role": "user", "content": "Paris and Rome?"},
                {"role": "assistant", "content": null, "tool_calls": [
                    weather_call("call_x", "Paris"), weather_call("call_y", "Rome")]},
                weather_result("call_x", "Paris"),
                weather_result("call_y", "Rome"),
            ],
            "tools": [serde_json::from_str::<Value>(WEATHER_TOOL).unwrap()],
            "tool_choice": "auto",
            "parallel_tool_calls": true,
        });
        match mode {
            Mode::Blocking => expected["stream"] = json!(false),
            Mode::Streaming => {
                expected["stream"] = json!(true);
                expected["stream_options"] = json!({"include_usage": true});
            }
        }
        assert_eq!(turn_2, expected, "{mode:?}");

        // Without tools, neither the tools array nor tool_choice / parallel_tool_calls is sent.
        cycle
            .submit("Thanks".into())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let plain = server.requests()[2].clone();
        for key in ["tools", "tool_choice", "parallel_tool_calls"] {
            assert!(
                plain.get(key).is_none(),
                "{mode:?}: {key} sent without tools"
            );
        }
        // An empty registry offers no tools either.
        run(&mut cycle, "Again", &ToolRegistry::new(), mode)
            .await
            .0
            .unwrap();
        let empty = server.requests()[3].clone();
        for key in ["tools", "tool_choice", "parallel_tool_calls"] {
            assert!(
                empty.get(key).is_none(),
                "{mode:?}: {key} sent with an empty registry"
            );
        }
    }
}

#[tokio::test]
async fn an_ollama_style_reply_still_runs_the_tool() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call(
                "call_u8o5oy2m",
                "get_weather",
                r#"{"city":"Toronto"}"#,
            )])
            .ollama(),
            Turn::text("Toronto: 22.").ollama(),
        ])
        .await;
        let mut cycle = server.cycle();
        let (text, _) = run(&mut cycle, "Toronto?", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Toronto: 22.", "{mode:?}");
        assert_eq!(
            server.messages(1)[2],
            weather_result("call_u8o5oy2m", "Toronto")
        );
    }
}

#[tokio::test]
async fn deepseek_reasoning_of_a_tool_calling_turn_goes_back_in_every_later_request() {
    // DeepSeek's thinking mode answers 400 ("Missing `reasoning_content` field in the assistant
    // message at message index N") when a tool-calling turn's reasoning is left out of any later
    // request, including requests of later user turns.
    for mode in MODES {
        let turns = [
            Turn::calls(vec![call(
                "call_r",
                "get_weather",
                r#"{"city":"Hangzhou"}"#,
            )])
            .with_reasoning("I need the weather first."),
            Turn::text("Hangzhou: 22.").with_reasoning("Now I can answer."),
            Turn::text("Plain answer.").with_reasoning("No tools needed."),
            Turn::text("Another.").with_reasoning("Still none."),
        ];
        // One reply per request, in order.
        let server = FakeOpenAi::start(move |_, seq| Reply::Model(turns[seq].clone())).await;
        let mut cycle = server.cycle();
        let registry = registry();
        run(&mut cycle, "Hangzhou?", &registry, mode)
            .await
            .0
            .unwrap();
        // Turn 2 of the same user turn: the reasoning is sent back on its assistant message.
        let turn_2 = server.messages(1);
        assert_eq!(
            turn_2[1]["reasoning_content"], "I need the weather first.",
            "{mode:?}"
        );
        assert_eq!(
            cycle.messages()[1].reasoning(),
            Some("I need the weather first.")
        );
        assert_eq!(cycle.messages()[3].reasoning(), Some("Now I can answer."));
        // The next user turns: the tool-calling turn's reasoning still goes back, under the
        // field name DeepSeek used and no other.
        run(&mut cycle, "And tomorrow?", &registry, mode)
            .await
            .0
            .unwrap();
        run(&mut cycle, "And then?", &registry, mode)
            .await
            .0
            .unwrap();
        let last = server.messages(3);
        let last = last.as_array().unwrap();
        assert_eq!(last.len(), 7, "{mode:?}");
        assert_eq!(last[1]["reasoning_content"], "I need the weather first.");
        assert_eq!(last[3]["reasoning_content"], "Now I can answer.");
        // A finished earlier turn without tool calls is sent without its reasoning.
        assert_eq!(
            last[5],
            json!({"role": "assistant", "content": "Plain answer."})
        );
        for message in last {
            assert!(message.get("reasoning").is_none(), "{mode:?}: {message}");
        }
    }
}

#[tokio::test]
async fn reasoning_goes_back_only_to_the_server_and_model_that_produced_it() {
    // The cross-model rule of artifacts: a session continued on another server (a same-API
    // fallback) or with another model does not send that history's reasoning there.
    for mode in MODES {
        let first = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("call_x", "get_weather", r#"{"city":"Oslo"}"#)])
                .with_reasoning("Private plan."),
            Turn::text("Oslo: 22."),
        ])
        .await;
        let mut cycle = first.cycle();
        run(&mut cycle, "Oslo?", &registry(), mode).await.0.unwrap();
        assert_eq!(first.messages(1)[1]["reasoning_content"], "Private plan.");
        let history = cycle.messages().to_vec();

        let other = FakeOpenAi::by_turn(vec![Turn::text("Lima: 19.")]).await;
        for (server, model) in [(&other, "fake-model"), (&first, "other-model")] {
            let before = server.requests().len();
            let mut moved =
                LlmCycle::from_history(server.client(), CycleConfig::new(model), history.clone());
            run(&mut moved, "Lima?", &registry(), mode).await.0.unwrap();
            // The first request of the moved run.
            let sent = &server.requests()[before]["messages"];
            assert_eq!(sent[1]["tool_calls"][0]["id"], "call_x", "{mode:?} {model}");
            assert!(
                sent[1].get("reasoning_content").is_none(),
                "{mode:?} {model}: {sent}"
            );
        }
        // The same server and model still get it.
        let mut same = LlmCycle::from_history(
            first.client(),
            CycleConfig::new("fake-model"),
            history.clone(),
        );
        run(&mut same, "Lima?", &registry(), mode).await.0.unwrap();
        let sent = first.requests().last().unwrap()["messages"].clone();
        assert_eq!(sent[1]["reasoning_content"], "Private plan.", "{mode:?}");
    }
}

#[tokio::test]
async fn reasoning_sent_as_reasoning_goes_back_as_reasoning_never_as_reasoning_content() {
    // Groq and Cerebras name it `reasoning` and answer 400 to an unknown `reasoning_content`.
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("call_g", "get_weather", r#"{"city":"Oslo"}"#)])
                .with_reasoning_field("Weather first."),
            Turn::text("Oslo: 22."),
        ])
        .await;
        let mut cycle = server.cycle();
        run(&mut cycle, "Oslo?", &registry(), mode).await.0.unwrap();
        let turn_2 = server.messages(1);
        assert_eq!(turn_2[1]["reasoning"], "Weather first.", "{mode:?}");
        assert!(turn_2[1].get("reasoning_content").is_none(), "{mode:?}");
    }
}

#[tokio::test]
async fn missing_tool_call_ids_are_generated_unique_and_used_in_the_tool_messages() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![
                Call {
                    id: None,
                    name: "get_weather",
                    arguments: r#"{"city":"Paris"}"#,
                },
                Call {
                    id: None,
                    name: "get_weather",
                    arguments: r#"{"city":"Rome"}"#,
                },
            ]),
            Turn::text("Both 22."),
        ])
        .await;
        let mut cycle = server.cycle();
        let (text, events) = run(&mut cycle, "Two cities", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Both 22.", "{mode:?}");
        let sent = server.messages(1);
        let ids: Vec<&str> = sent[1]["tool_calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 2);
        assert_ne!(ids[0], ids[1]);
        assert!(ids.iter().all(|id| id.starts_with("call_") && id.len() > 5));
        assert_eq!(sent[2]["tool_call_id"], ids[0]);
        assert_eq!(sent[3]["tool_call_id"], ids[1]);
        assert_eq!(sent[2], weather_result(ids[0], "Paris"));
        // The history holds the same ids as were sent, and the events carry them too.
        assert_eq!(history(&cycle)[1]["tool_calls"], sent[1]["tool_calls"]);
        if let Mode::Streaming = mode {
            let started: Vec<&str> = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ToolExecutionStarted { id, .. } => Some(id.as_str()),
                    _ => None,
                })
                .collect();
            assert_eq!(started, ids);
        }
    }
}

#[tokio::test]
async fn dropping_the_stream_while_a_slow_tool_runs_cancels_it_and_keeps_the_history_valid() {
    let server = FakeOpenAi::by_turn(vec![
        Turn::calls(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#)]),
        Turn::calls(vec![
            call("c2", "slow", "{}"),
            call("c3", "get_weather", r#"{"city":"Rome"}"#),
        ]),
        Turn::text("unreachable"),
    ])
    .await;
    let started = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicBool::new(false));
    let mut registry = registry();
    registry
        .register(Arc::new(Slow {
            started: started.clone(),
            dropped: dropped.clone(),
        }))
        .unwrap();
    let mut cycle = server.cycle();
    {
        let mut stream = cycle
            .submit_stream_with_tools("Go".into(), &registry)
            .await
            .unwrap();
        // Read until the fast tool of turn 2 completed: the slow one is then running.
        while let Some(event) = stream.next().await {
            if matches!(&event, StreamEvent::ToolExecutionCompleted { id, .. } if id == "c3") {
                break;
            }
        }
        assert!(started.load(Ordering::SeqCst));
        assert!(!dropped.load(Ordering::SeqCst));
    }
    // Dropping the stream dropped the running tool.
    assert!(
        dropped.load(Ordering::SeqCst),
        "the slow tool was not cancelled"
    );
    // c3 ran, so the cancelled turn is kept: c2 is answered as cancelled, c3 with its result.
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant", "tool", "tool"]
    );
    assert!(
        cycle.messages()[4]
            .text()
            .unwrap()
            .starts_with("Error: cancelled")
    );
    assert!(cycle.messages()[5].text().unwrap().contains("Rome"));
    assert_eq!(server.requests().len(), 2);
    // The conversation goes on; the server checks the history it receives.
    let server_2 = FakeOpenAi::by_turn(vec![Turn::text("Fine.")]).await;
    let mut cycle = LlmCycle::from_history(
        server_2.client(),
        CycleConfig::new("fake-model"),
        cycle.messages().to_vec(),
    );
    cycle
        .submit_with_tools("Next".into(), &registry)
        .await
        .unwrap();
    assert_eq!(server_2.messages(0).as_array().unwrap().len(), 7);
}

#[tokio::test]
async fn a_429_inside_a_loop_turn_is_retried() {
    for mode in MODES {
        let server = FakeOpenAi::start(|body, n| match (turn_of(body), n) {
            (0, _) => Reply::Model(Turn::calls(vec![call(
                "c1",
                "get_weather",
                r#"{"city":"Paris"}"#,
            )])),
            (1, 1) => Reply::Status(
                429,
                vec![("retry-after-ms", "1")],
                json!({"error": {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}}),
            ),
            (1, _) => Reply::Model(Turn::text("Paris: 22.")),
            (turn, n) => panic!("turn {turn}, request {n}"),
        })
        .await;
        let mut cycle = server.cycle();
        let (text, _) = run(&mut cycle, "Paris?", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Paris: 22.", "{mode:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 3);
        // The retry sent the same body again.
        assert_eq!(requests[1], requests[2]);
        assert_eq!(cycle.messages().len(), 4);
    }
}

#[tokio::test]
async fn the_usage_over_http_is_summed_over_turns() {
    for mode in MODES {
        let server = FakeOpenAi::by_turn(vec![
            Turn::calls(vec![call("c1", "get_weather", r#"{"city":"Paris"}"#)]),
            Turn::calls(vec![call("c2", "get_weather", r#"{"city":"Rome"}"#)]),
            Turn::text("22 both."),
        ])
        .await;
        let mut cycle = server.cycle();
        let registry = registry();
        let usage = match mode {
            Mode::Blocking => {
                cycle
                    .submit_with_tools("x".into(), &registry)
                    .await
                    .unwrap()
                    .usage
            }
            Mode::Streaming => {
                let events: Vec<StreamEvent> = cycle
                    .submit_stream_with_tools("x".into(), &registry)
                    .await
                    .unwrap()
                    .collect()
                    .await;
                match events.last() {
                    Some(StreamEvent::TurnComplete { usage, .. }) => *usage,
                    other => panic!("{other:?}"),
                }
            }
        };
        assert_eq!(usage.map(|u| u.total_tokens), Some(45), "{mode:?}");
    }
}

/// A server that calls `get_weather` when no tools are offered (a model that does so from its
/// history), and otherwise answers by turn with `text`.
async fn server_calling_without_tools(text: &'static str) -> FakeOpenAi {
    FakeOpenAi::start(move |body, _| {
        if body.get("tools").is_none() && turn_of(body) == 0 {
            Reply::Model(Turn::calls(vec![call(
                "call_p",
                "get_weather",
                r#"{"city":"Paris"}"#,
            )]))
        } else {
            Reply::Model(Turn::text(text))
        }
    })
    .await
}

// Fix: a history ending with unanswered tool calls (restored, e.g. saved by another program)
// made the next request carry them unanswered (a 400 on OpenAI). `submit` itself no longer
// stores unanswered calls (issue 10, item 21): it answers them as not run.
#[tokio::test]
async fn unanswered_calls_of_a_restored_history_are_run_by_resume_with_tools() {
    for mode in MODES {
        let server = server_calling_without_tools("Paris: 22.").await;
        let mut cycle = LlmCycle::from_history(
            server.client(),
            CycleConfig::new("fake-model"),
            vec![
                agcore::llm::OpenaiChatMessage::user_text("Weather in Paris?"),
                agcore::llm::OpenaiChatMessage::assistant_tool_calls(
                    None,
                    vec![agcore::llm::ToolCall::new(
                        "call_p",
                        "get_weather",
                        r#"{"city":"Paris"}"#,
                    )],
                ),
            ],
        );
        let registry = registry();
        let events: Vec<StreamEvent> = match mode {
            Mode::Blocking => {
                let reply = cycle.resume_with_tools(&registry).await.unwrap();
                assert_eq!(reply.text(), "Paris: 22.");
                Vec::new()
            }
            Mode::Streaming => {
                cycle
                    .resume_stream_with_tools(&registry)
                    .await
                    .unwrap()
                    .collect()
                    .await
            }
        };
        assert_eq!(
            history(&cycle),
            json!([
                {"role": "user", "content": "Weather in Paris?"},
                {"role": "assistant", "content": null, "tool_calls": [weather_call("call_p", "Paris")]},
                weather_result("call_p", "Paris"),
                {"role": "assistant", "content": "Paris: 22."}
            ]),
            "{mode:?}"
        );
        assert_eq!(server.requests().len(), 1);
        if let Mode::Streaming = mode {
            assert!(
                matches!(&events[0], StreamEvent::ToolExecutionStarted { id, .. } if id == "call_p")
            );
            assert!(
                matches!(&events[1], StreamEvent::ToolExecutionCompleted { id, is_error: false, .. } if id == "call_p")
            );
        }
    }
}

#[tokio::test]
async fn a_new_prompt_after_unanswered_calls_answers_them_as_not_run() {
    for mode in MODES {
        let server = server_calling_without_tools("Sure.").await;
        let mut cycle = server.cycle();
        cycle.submit("Weather in Paris?".into()).await.unwrap();
        let (text, _) = run(&mut cycle, "Never mind, say hi", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Sure.", "{mode:?}");
        let sent = server.messages(1);
        assert_eq!(sent[2]["role"], "tool");
        assert_eq!(sent[2]["tool_call_id"], "call_p");
        assert!(sent[2]["content"].as_str().unwrap().contains("not run"));
        assert_eq!(
            sent[3],
            json!({"role": "user", "content": "Never mind, say hi"})
        );
        // A plain submit after unanswered calls is valid too.
        cycle.submit("Bye".into()).await.unwrap();
        assert_eq!(server.requests().len(), 3);
    }
}

#[tokio::test]
async fn a_failed_request_after_unanswered_calls_leaves_the_history_as_it_was() {
    let server = FakeOpenAi::start(|body, _| match body.get("tools") {
        None => Reply::Model(Turn::calls(vec![call("call_p", "get_weather", "{}")])),
        Some(_) => Reply::Status(400, vec![], json!({"error": {"message": "no"}})),
    })
    .await;
    let mut cycle = server.cycle();
    cycle.submit("Weather?".into()).await.unwrap();
    let before = history(&cycle);
    let error = cycle
        .submit_with_tools("again".into(), &registry())
        .await
        .unwrap_err();
    assert!(matches!(error, LlmError::BadRequest { .. }), "{error:?}");
    assert_eq!(history(&cycle), before);
}

// Fix: in streaming mode the request deadline was computed once before the retries, so an
// attempt made after a backoff longer than `request_timeout` timed out at once.
#[tokio::test]
async fn each_retry_gets_a_fresh_request_deadline_when_streaming() {
    for mode in MODES {
        let server = FakeOpenAi::start(|_, n| match n {
            0 => Reply::Status(
                429,
                vec![("retry-after-ms", "1200")],
                json!({"error": {"message": "Rate limit reached", "code": "rate_limit_exceeded"}}),
            ),
            _ => Reply::Model(Turn::text("ok")),
        })
        .await;
        let mut cycle = server.cycle();
        cycle.config_mut().request_timeout = Some(Duration::from_secs(1));
        let (text, events) = run(&mut cycle, "hi", &registry(), mode).await;
        assert_eq!(text.unwrap(), "ok", "{mode:?}: {events:?}");
        assert_eq!(server.requests().len(), 2);
    }
}

#[tokio::test]
async fn dropping_the_stream_while_a_request_is_in_flight_keeps_completed_turns_only() {
    let server = FakeOpenAi::start(|body, _| match turn_of(body) {
        0 => Reply::Model(Turn::calls(vec![call(
            "c1",
            "get_weather",
            r#"{"city":"Paris"}"#,
        )])),
        _ => Reply::Slow(Turn::text("too late"), Duration::from_secs(3)),
    })
    .await;
    let registry = registry();
    let mut cycle = server.cycle();
    {
        let mut stream = cycle
            .submit_stream_with_tools("Go".into(), &registry)
            .await
            .unwrap();
        while let Some(event) = stream.next().await {
            if matches!(event, StreamEvent::ToolExecutionCompleted { .. }) {
                break;
            }
        }
        // Poll until the second request has reached the server, then drop the stream.
        let mut polls = 0;
        while server.requests().len() < 2 {
            tokio::select! {
                event = stream.next() => panic!("no event expected yet: {event:?}"),
                () = tokio::time::sleep(Duration::from_millis(5)) => polls += 1,
            }
            assert!(polls < 1_000, "the second request never arrived");
        }
    }
    let roles: Vec<&str> = cycle.messages().iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["user", "assistant", "tool"]);
}

// Fix: a forced `tool_choice` (`required` or a named function) was sent on every turn, so a
// model obeying it could never give its final answer; it now applies to the first request.
#[tokio::test]
async fn a_forced_tool_choice_applies_to_the_first_turn_only() {
    for (mode, choice) in [
        (Mode::Blocking, ToolChoice::Required),
        (Mode::Streaming, ToolChoice::Function("get_weather".into())),
    ] {
        let server = FakeOpenAi::start(|body, _| {
            // A model that obeys a forced choice.
            if body["tool_choice"] != json!("auto") {
                Reply::Model(Turn::calls(vec![Call {
                    id: None,
                    name: "get_weather",
                    arguments: r#"{"city":"Paris"}"#,
                }]))
            } else {
                Reply::Model(Turn::text("Paris: 22."))
            }
        })
        .await;
        let mut cycle = server.cycle();
        cycle.config_mut().options.tool_choice = Some(choice.clone());
        let (text, _) = run(&mut cycle, "Paris?", &registry(), mode).await;
        assert_eq!(text.unwrap(), "Paris: 22.", "{mode:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2);
        assert_eq!(
            requests[0]["tool_choice"],
            serde_json::to_value(&choice).unwrap()
        );
        assert_eq!(requests[1]["tool_choice"], "auto");
        // The configuration is unchanged: the next call is forced again.
        assert_eq!(cycle.config().options.tool_choice, Some(choice));
    }
}
