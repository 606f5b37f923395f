//! Typed final output (issue 15) through `OpenAiClient` against a local fake OpenAI server in
//! the real wire format (SSE or one JSON reply), in each mode: native (`response_format`),
//! tool (a final-answer tool) and prompted (schema in the prompt, JSON from the text) — valid
//! answers, invalid then corrected, invalid every time, tool calls before the answer, and a
//! server that rejects `response_format`.
//!
//! Every request the server receives is checked: each assistant tool call is answered by
//! exactly one `tool` message right after it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, StreamEvent};
use agcore::run::{OutputMode, OutputSchema, TypedEvent, TypedOutput, TypedOutputError};
use agcore::tools::prelude::*;
use futures::StreamExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------------------------------------
// The fake server.

/// One model reply.
#[derive(Clone, Debug)]
enum Reply {
    Text(String),
    /// Tool calls: (id, name, arguments).
    Tools(Vec<(String, String, String)>),
}

/// Answers request N with reply N; with `reject_format`, a request carrying `response_format`
/// gets the 400 OpenAI sends for a model without structured outputs (no reply used up).
struct Script {
    replies: Vec<Reply>,
    next: Mutex<usize>,
    reject_format: bool,
}

const REJECTION: &str =
    "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.";

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        if self.reject_format && body.get("response_format").is_some() {
            return ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": REJECTION, "type": "invalid_request_error", "param": "response_format", "code": null}}));
        }
        let index = {
            let mut next = self.next.lock().unwrap();
            *next += 1;
            *next - 1
        };
        let Some(reply) = self.replies.get(index) else {
            return ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"message": "script exhausted"}}));
        };
        if body["stream"].as_bool().unwrap_or(false) {
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(sse(reply))
        } else {
            ResponseTemplate::new(200).set_body_json(whole(reply))
        }
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 1,
        "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
    format!("data: {chunk}\n\n")
}

fn sse(reply: &Reply) -> String {
    let mut body = chunk(json!({"role": "assistant", "content": ""}), None);
    let finish = match reply {
        Reply::Text(text) => {
            for piece in text.split_inclusive(' ') {
                body.push_str(&chunk(json!({"content": piece}), None));
            }
            "stop"
        }
        Reply::Tools(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                body.push_str(&chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                    "function": {"name": name, "arguments": ""}}]}),
                    None,
                ));
                let middle = (arguments.len() / 2..=arguments.len())
                    .find(|at| arguments.is_char_boundary(*at))
                    .unwrap();
                for piece in [&arguments[..middle], &arguments[middle..]] {
                    body.push_str(&chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        None,
                    ));
                }
            }
            "tool_calls"
        }
    };
    body.push_str(&chunk(json!({}), Some(finish)));
    body.push_str("data: [DONE]\n\n");
    body
}

fn whole(reply: &Reply) -> Value {
    let (message, finish) = match reply {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Tools(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            (
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
            )
        }
    };
    json!({"id": "chatcmpl-fake", "object": "chat.completion", "created": 1, "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
}

async fn server(replies: Vec<Reply>, reject_format: bool) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script {
            replies,
            next: Mutex::new(0),
            reject_format,
        })
        .mount(&server)
        .await;
    server
}

/// Every request body, each checked: every assistant tool call is answered by exactly one
/// `tool` message, in call order, right after it.
async fn bodies(server: &MockServer) -> Vec<Value> {
    let bodies: Vec<Value> = server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect();
    for body in &bodies {
        let messages = body["messages"].as_array().unwrap();
        for (at, message) in messages.iter().enumerate() {
            let Some(calls) = message["tool_calls"].as_array() else {
                continue;
            };
            for (offset, call) in calls.iter().enumerate() {
                let answer = &messages[at + 1 + offset];
                assert_eq!(answer["role"], "tool", "{body:#}");
                assert_eq!(answer["tool_call_id"], call["id"], "{body:#}");
            }
        }
    }
    bodies
}

fn cycle(server: &MockServer) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    LlmCycle::new(client, CycleConfig::new("fake-model"))
}

// ---------------------------------------------------------------------------------------------
// The answer type, a tool, and the replies of each mode.

/// The weather in a city.
#[derive(Debug, PartialEq, Deserialize, JsonSchema)]
struct Weather {
    /// The city.
    city: String,
    /// The temperature in °C.
    celsius: i32,
    /// Words for the sky.
    conditions: Vec<String>,
}

const VALID: &str = r#"{"city": "Paris", "celsius": 21, "conditions": ["sunny"]}"#;
/// `celsius` is a string: the schema says integer.
const WRONG_TYPE: &str = r#"{"city": "Paris", "celsius": "warm", "conditions": []}"#;
/// `conditions` is missing.
const MISSING: &str = r#"{"city": "Paris", "celsius": 21}"#;

fn paris() -> Weather {
    Weather {
        city: "Paris".into(),
        celsius: 21,
        conditions: vec!["sunny".into()],
    }
}

#[derive(Deserialize, JsonSchema)]
/// Look up the weather of a city.
struct LookupInput {
    /// The city.
    city: String,
}

struct Lookup;

impl Tool for Lookup {
    type Input = LookupInput;
    type Output = String;
    const NAME: &'static str = "lookup_weather";
    fn kind() -> ToolKind {
        ToolKind::Read
    }
    async fn run(&self, input: LookupInput) -> Result<String, ToolError> {
        Ok(format!("{}: 21 degrees, sunny", input.city))
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    registry.register(Lookup.erase()).unwrap();
    registry
}

const MODES: [OutputMode; 3] = [OutputMode::Native, OutputMode::Tool, OutputMode::Prompted];

/// The model giving `json` as its answer, the way `mode` asks for it.
fn answer(mode: OutputMode, json: &str, n: usize) -> Reply {
    match mode {
        OutputMode::Tool => Reply::Tools(vec![(
            format!("call_final_{n}"),
            "final_answer".into(),
            json.into(),
        )]),
        OutputMode::Prompted => Reply::Text(format!("Here is the answer:\n```json\n{json}\n```")),
        _ => Reply::Text(json.into()),
    }
}

fn lookup_call() -> Reply {
    Reply::Tools(vec![(
        "call_lookup".into(),
        "lookup_weather".into(),
        r#"{"city": "Paris"}"#.into(),
    )])
}

/// What a streaming run yielded, in short.
#[derive(Debug, Default)]
struct Seen {
    tools_started: Vec<String>,
    rejected: Vec<(u32, String)>,
    final_turns: usize,
}

/// Run a typed prompt in `mode` (streaming or not) against `replies`.
async fn typed(
    mode: OutputMode,
    streaming: bool,
    replies: Vec<Reply>,
) -> (
    Result<Weather, TypedOutputError>,
    Vec<Value>,
    Seen,
    LlmCycle,
) {
    let server = server(replies, false).await;
    let mut cycle = cycle(&server);
    let registry = registry();
    let options = TypedOutput::new().with_mode(mode);
    let mut seen = Seen::default();
    let result = if streaming {
        collect(
            cycle
                .submit_typed_stream::<Weather>("Weather in Paris?".into(), &registry, &options)
                .unwrap(),
            &mut seen,
        )
        .await
    } else {
        cycle
            .submit_typed_with::<Weather>("Weather in Paris?".into(), &registry, &options)
            .await
    };
    (result, bodies(&server).await, seen, cycle)
}

async fn collect<T: std::fmt::Debug>(
    mut stream: agcore::run::TypedStream<'_, T>,
    seen: &mut Seen,
) -> Result<T, TypedOutputError> {
    let mut result = None;
    while let Some(item) = stream.next().await {
        assert!(result.is_none(), "nothing comes after the result");
        match item {
            TypedEvent::Event(StreamEvent::ToolExecutionStarted { tool_name, .. }) => {
                seen.tools_started.push(tool_name)
            }
            TypedEvent::Event(StreamEvent::TurnComplete {
                reason: agcore::llm::FinishReason::Stop,
                ..
            }) => seen.final_turns += 1,
            TypedEvent::Event(_) => {}
            TypedEvent::Rejected { attempt, error } => seen.rejected.push((attempt, error)),
            TypedEvent::Output(value) => result = Some(Ok(value)),
            TypedEvent::Failed(error) => result = Some(Err(error)),
            other => panic!("unexpected {other:?}"),
        }
    }
    result.expect("the stream ends with a result")
}

/// The last user message of a request.
fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap().to_owned())
        .unwrap()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

// ---------------------------------------------------------------------------------------------
// The scenarios, in each mode, streaming and not.

#[tokio::test]
async fn a_valid_answer_is_returned_typed_in_every_mode() {
    for mode in MODES {
        for streaming in [false, true] {
            let (result, bodies, _, cycle) =
                typed(mode, streaming, vec![answer(mode, VALID, 1)]).await;
            assert_eq!(result.unwrap(), paris(), "{mode:?}");
            assert_eq!(bodies.len(), 1, "{mode:?}: one request");
            let body = &bodies[0];
            match mode {
                OutputMode::Native => {
                    let format = &body["response_format"];
                    assert_eq!(format["type"], "json_schema");
                    assert_eq!(format["json_schema"]["strict"], true);
                    assert_eq!(format["json_schema"]["name"], "Weather");
                    let mut required: Vec<&str> = format["json_schema"]["schema"]["required"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|name| name.as_str().unwrap())
                        .collect();
                    required.sort_unstable();
                    assert_eq!(required, ["celsius", "city", "conditions"]);
                    assert_eq!(
                        format["json_schema"]["schema"]["additionalProperties"],
                        false
                    );
                    assert_eq!(
                        tool_names(body),
                        ["lookup_weather"],
                        "other tools stay offered"
                    );
                }
                OutputMode::Tool => {
                    assert!(body.get("response_format").is_none());
                    assert_eq!(tool_names(body), ["lookup_weather", "final_answer"]);
                    let final_tool = &body["tools"][1]["function"];
                    assert_eq!(
                        final_tool["parameters"]["properties"]["celsius"]["type"],
                        "integer"
                    );
                    assert!(last_user(body).contains("`final_answer`"));
                    // The run ended with the call: answered in the history, no second request.
                    let last = cycle.messages().last().unwrap();
                    assert_eq!(last.role(), "tool");
                }
                _ => {
                    assert!(body.get("response_format").is_none());
                    assert_eq!(tool_names(body), ["lookup_weather"]);
                    let prompt = last_user(body);
                    assert!(prompt.starts_with("Weather in Paris?"), "{prompt}");
                    assert!(
                        prompt.contains("\"celsius\""),
                        "the schema is in the prompt: {prompt}"
                    );
                }
            }
            assert!(
                cycle.config().options.response_format.is_none(),
                "the caller's response_format is back"
            );
        }
    }
}

#[tokio::test]
async fn an_invalid_answer_goes_back_with_the_error_and_the_corrected_one_is_returned() {
    for mode in MODES {
        for streaming in [false, true] {
            let replies = vec![answer(mode, WRONG_TYPE, 1), answer(mode, VALID, 2)];
            let (result, bodies, seen, _) = typed(mode, streaming, replies).await;
            assert_eq!(result.unwrap(), paris(), "{mode:?}");
            assert_eq!(bodies.len(), 2, "{mode:?}");
            let feedback = last_user(&bodies[1]);
            assert!(
                feedback.contains("`celsius`"),
                "{mode:?}: the error names the field: {feedback}"
            );
            assert!(feedback.contains("not valid"), "{feedback}");
            if mode == OutputMode::Tool {
                assert!(feedback.contains("Call `final_answer` again"), "{feedback}");
            }
            if streaming {
                assert_eq!(seen.rejected.len(), 1, "{mode:?}");
                assert_eq!(seen.rejected[0].0, 1);
                assert!(seen.rejected[0].1.contains("celsius"));
            }
        }
    }
}

#[tokio::test]
async fn an_answer_invalid_every_time_is_a_typed_error_with_the_last_raw_output() {
    for mode in MODES {
        for streaming in [false, true] {
            let replies = vec![
                answer(mode, WRONG_TYPE, 1),
                answer(mode, WRONG_TYPE, 2),
                answer(mode, MISSING, 3),
            ];
            let (result, bodies, seen, _) = typed(mode, streaming, replies).await;
            let Err(TypedOutputError::Invalid {
                attempts,
                error,
                raw,
            }) = result
            else {
                panic!("{mode:?}: {result:?}")
            };
            assert_eq!(attempts, 3, "the first answer and two retries");
            assert_eq!(bodies.len(), 3, "{mode:?}: no fourth request");
            assert!(error.contains("conditions"), "{mode:?}: {error}");
            assert!(
                raw.contains(r#""celsius": 21}"#),
                "{mode:?}: the last raw answer: {raw}"
            );
            if streaming {
                assert_eq!(
                    seen.rejected.iter().map(|r| r.0).collect::<Vec<_>>(),
                    [1, 2]
                );
            }
        }
    }
}

#[tokio::test]
async fn tools_run_before_the_final_answer_in_every_mode() {
    for mode in MODES {
        for streaming in [false, true] {
            let replies = vec![lookup_call(), answer(mode, VALID, 1)];
            let (result, bodies, seen, _) = typed(mode, streaming, replies).await;
            assert_eq!(result.unwrap(), paris(), "{mode:?}");
            assert_eq!(bodies.len(), 2);
            // The tool ran in the same run, and the model read its result.
            let messages = bodies[1]["messages"].as_array().unwrap();
            let answer = messages.iter().find(|m| m["role"] == "tool").unwrap();
            assert_eq!(answer["content"], "Paris: 21 degrees, sunny");
            // The schema stays on for the request after the tool turn.
            match mode {
                OutputMode::Native => {
                    assert_eq!(bodies[1]["response_format"]["type"], "json_schema")
                }
                OutputMode::Tool => {
                    assert!(tool_names(&bodies[1]).contains(&"final_answer".to_owned()))
                }
                _ => {}
            }
            if streaming {
                assert_eq!(seen.tools_started[0], "lookup_weather");
                assert_eq!(seen.final_turns, 1, "one final TurnComplete(stop)");
            }
        }
    }
}

#[tokio::test]
async fn in_tool_mode_other_calls_of_the_final_turn_still_run() {
    let replies = vec![Reply::Tools(vec![
        (
            "call_lookup".into(),
            "lookup_weather".into(),
            r#"{"city": "Paris"}"#.into(),
        ),
        ("call_final".into(), "final_answer".into(), VALID.into()),
    ])];
    let (result, bodies, seen, cycle) = typed(OutputMode::Tool, true, replies).await;
    assert_eq!(result.unwrap(), paris());
    assert_eq!(bodies.len(), 1);
    assert_eq!(seen.tools_started, ["lookup_weather", "final_answer"]);
    let tools: Vec<String> = cycle
        .messages()
        .iter()
        .filter(|m| m.role() == "tool")
        .map(|m| m.text().unwrap())
        .collect();
    assert_eq!(
        tools,
        ["Paris: 21 degrees, sunny", "Final answer received."]
    );
}

#[tokio::test]
async fn a_text_answer_in_tool_mode_is_told_to_call_the_tool() {
    let replies = vec![
        Reply::Text(VALID.into()),
        answer(OutputMode::Tool, VALID, 1),
    ];
    let (result, bodies, _, _) = typed(OutputMode::Tool, false, replies).await;
    assert_eq!(result.unwrap(), paris());
    assert!(last_user(&bodies[1]).contains("calling the `final_answer` tool"));
}

// ---------------------------------------------------------------------------------------------
// A server that rejects response_format.

/// Log lines, captured.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn a_server_that_rejects_response_format_gets_tool_mode_said_once_in_a_log_line() {
    let log = Captured::default();
    let writer = log.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = crate::support::trace::scoped(subscriber);

    let replies = vec![
        lookup_call(),
        answer(OutputMode::Tool, VALID, 1),
        answer(OutputMode::Tool, VALID, 2),
    ];
    let server = server(replies, true).await;
    let mut cycle = cycle(&server);
    let registry = registry();
    let options = TypedOutput::new(); // auto
    let first: Weather = cycle
        .submit_typed_with("Weather in Paris?".into(), &registry, &options)
        .await
        .unwrap();
    assert_eq!(first, paris());
    assert_eq!(options.effective_mode(), OutputMode::Tool);
    // The same options again: tool mode at once, no second probe.
    let stream = cycle
        .submit_typed_stream::<Weather>("And tomorrow?".into(), &registry, &options)
        .unwrap();
    assert_eq!(
        collect(stream, &mut Seen::default()).await.unwrap(),
        paris()
    );

    let bodies = bodies(&server).await;
    let with_format: Vec<bool> = bodies
        .iter()
        .map(|b| b.get("response_format").is_some())
        .collect();
    assert_eq!(
        with_format,
        [true, false, false, false],
        "one rejected probe, then tool mode"
    );
    assert!(tool_names(&bodies[1]).contains(&"final_answer".to_owned()));
    assert!(
        last_user(&bodies[1]).contains("`final_answer`"),
        "the prompt is sent again, for tool mode"
    );
    let log = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
    assert_eq!(log.matches("falls back to tool mode").count(), 1, "{log}");
    assert!(
        log.contains("not supported with this model"),
        "the log names the server's reason: {log}"
    );
}

#[tokio::test]
async fn native_mode_asked_for_explicitly_does_not_fall_back() {
    let server = server(vec![answer(OutputMode::Tool, VALID, 1)], true).await;
    let mut cycle = cycle(&server);
    let options = TypedOutput::new().with_mode(OutputMode::Native);
    let result = cycle
        .submit_typed_with::<Weather>("Weather?".into(), &registry(), &options)
        .await;
    assert!(
        matches!(
            &result,
            Err(TypedOutputError::Llm(agcore::llm::LlmError::BadRequest {
                status: 400,
                ..
            }))
        ),
        "{result:?}"
    );
    assert!(cycle.messages().is_empty(), "a failed run keeps nothing");
}

#[tokio::test]
async fn a_schema_from_json_is_checked_and_returned_as_json() {
    let schema = OutputSchema::from_json(
        "answer.json",
        json!({"type": "array", "items": {"type": "string"}, "minItems": 1}),
    )
    .unwrap();
    let replies = vec![
        answer(OutputMode::Tool, r#"{"value": []}"#, 1),
        answer(OutputMode::Tool, r#"{"value": ["a", "b"]}"#, 2),
    ];
    let server = server(replies, false).await;
    let mut cycle = cycle(&server);
    let options = TypedOutput::new().with_mode(OutputMode::Tool);
    let value = cycle
        .submit_with_schema("List.".into(), &ToolRegistry::new(), schema, &options)
        .await
        .unwrap();
    assert_eq!(value, json!(["a", "b"]));
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[0]["tools"][0]["function"]["parameters"]["properties"]["value"]["type"],
        "array"
    );
}

#[tokio::test]
async fn a_final_answer_tool_name_taken_by_the_registry_is_an_error() {
    let server = server(vec![], false).await;
    let mut cycle = cycle(&server);
    let options = TypedOutput::new()
        .with_mode(OutputMode::Tool)
        .with_tool_name("lookup_weather");
    let result = cycle
        .submit_typed_with::<Weather>("Weather?".into(), &registry(), &options)
        .await;
    assert!(
        matches!(result, Err(TypedOutputError::ToolNameTaken(name)) if name == "lookup_weather")
    );
    assert!(bodies(&server).await.is_empty());
}

#[tokio::test]
async fn a_dropped_typed_stream_puts_the_callers_response_format_back() {
    let server = server(vec![answer(OutputMode::Native, VALID, 1)], false).await;
    let mut cycle = cycle(&server);
    cycle.config_mut().options.response_format = Some(json!({"type": "json_object"}));
    let registry = registry();
    let options = TypedOutput::new().with_mode(OutputMode::Native);
    {
        let mut stream = cycle
            .submit_typed_stream::<Weather>("Weather?".into(), &registry, &options)
            .unwrap();
        assert!(matches!(stream.next().await, Some(TypedEvent::Event(_))));
    }
    assert_eq!(
        cycle.config().options.response_format,
        Some(json!({"type": "json_object"}))
    );
    let bodies = bodies(&server).await;
    assert_eq!(
        bodies[0]["response_format"]["type"], "json_schema",
        "replaced for the run"
    );
}
