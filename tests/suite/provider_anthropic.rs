//! `AnthropicClient` against a local fake Messages server (`tests/support/anthropic_fake.rs`)
//! that serves the vendor-shaped fixtures of `tests/fixtures/providers/anthropic/` and checks
//! every request like the API (thinking blocks byte-exact and in place, tool results first and
//! tied to their ids, alternation), plus the stream decoder fed in small random pieces.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig, decode_stream};
use agcore::llm::transport::TransportSettings;
use agcore::llm::types::RequestOptions;
use agcore::llm::{
    ChatModel, ChatRequest, ChatResponse, CycleConfig, FinishReason, LlmCycle, LlmError,
    ModelStream, OpenaiChatMessage, ProviderError, RetryPolicy, StreamAssembler, StreamEvent,
};
use agcore::tools::prelude::*;
use agcore::vocab::{ArtifactPlace, ArtifactProvider, ReasoningEffort};
use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::anthropic_fake::{AnthropicFake, Reply, fixture, fixture_dir};
use crate::support::require::require;

const MODEL: &str = "claude-sonnet-4-5";

// ---------------------------------------------------------------------------------------------
// Helpers.

fn client(fake: &AnthropicFake) -> AnthropicClient {
    AnthropicClient::new(AnthropicConfig::new(fake.base_url()).with_api_key("test-key")).unwrap()
}

fn config(model: &str) -> CycleConfig {
    let mut config = CycleConfig::new(model);
    config.options.reasoning_effort = Some(ReasoningEffort::Medium);
    config.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
    };
    config
}

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
        match args["city"].as_str() {
            Some("Paris") => Ok(json!({"city": "Paris", "temperature": 22})),
            other => Err(ToolError::ExecutionFailed(
                "get_weather".into(),
                format!("no such city: {other:?}"),
            )),
        }
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather)).unwrap();
    registry
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Blocking,
    Streaming,
}

const MODES: [Mode; 2] = [Mode::Blocking, Mode::Streaming];

/// Run one tool-loop call: the final text or the error, and the events when streaming.
async fn run(
    cycle: &mut LlmCycle,
    prompt: &str,
    mode: Mode,
) -> (Result<String, LlmError>, Vec<StreamEvent>) {
    let registry = registry();
    match mode {
        Mode::Blocking => (
            cycle
                .submit_with_tools(prompt.into(), &registry)
                .await
                .map(|reply| reply.text()),
            Vec::new(),
        ),
        Mode::Streaming => {
            let events: Vec<StreamEvent> = match cycle
                .submit_stream_with_tools(prompt.into(), &registry)
                .await
            {
                Ok(stream) => stream.collect().await,
                Err(error) => return (Err(error), Vec::new()),
            };
            let text = match events.last() {
                Some(StreamEvent::Error { kind, message, .. }) => {
                    Err(LlmError::Other(format!("{kind}: {message}")))
                }
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

/// The content block `index` of fixture `name.json`, as compact JSON text.
fn fixture_block(name: &str, index: usize) -> String {
    let whole: Value = serde_json::from_str(&fixture(&format!("{name}.json"))).unwrap();
    serde_json::to_string(&whole["content"][index]).unwrap()
}

/// What a stream produced: the response or the error's text.
async fn assemble(mut stream: ModelStream) -> Result<ChatResponse, String> {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = stream.next().await {
        match delta {
            Ok(delta) => assembler.push(delta, &mut events),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing may follow an error");
                return Err(format!("{:?}", error.kind()));
            }
        }
    }
    assembler.finish(&mut events).map_err(|e| e.to_string())
}

/// `body` delivered in pieces of 1 to 7 bytes (cutting lines and UTF-8 characters).
fn pieces(body: &[u8], seed: u64) -> Vec<Result<Bytes, std::io::Error>> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut out = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let end = (start + rng.usize(1..8)).min(body.len());
        out.push(Ok(Bytes::copy_from_slice(&body[start..end])));
        start = end;
    }
    out
}

async fn decode_in_pieces(body: &str, seed: u64) -> Result<ChatResponse, String> {
    assemble(decode_stream(
        futures::stream::iter(pieces(body.as_bytes(), seed)),
        None,
    ))
    .await
}

// ---------------------------------------------------------------------------------------------
// The fixtures are the vendor's shapes.

/// The SDK's Python, when the venv has the `anthropic` package.
fn sdk_python() -> Option<PathBuf> {
    // The venv's Python (the shared lookup: `AGCORE_TEST_VENV`, else `.ci/venv`).
    let python = crate::support::mcp::python_script("python")?;
    let works = Command::new(&python)
        .args(["-c", "import anthropic"])
        .output()
        .is_ok_and(|out| out.status.success());
    require(
        "the anthropic Python SDK",
        "run `.ci/install-mcp-servers.sh` (a venv in .ci/venv with anthropic==2.10.0) or set AGCORE_TEST_VENV",
        works.then_some(python),
    )
}

fn run_sdk_check(python: &PathBuf, files: &[PathBuf]) -> String {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers/check_anthropic.py");
    let out = Command::new(python)
        .arg("-B")
        .arg(script)
        .args(files)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the SDK rejected a file:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

#[test]
fn every_fixture_parses_with_the_anthropic_sdk() {
    let Some(python) = sdk_python() else { return };
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixture_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    let out = run_sdk_check(&python, &files);
    assert_eq!(
        out.lines().filter(|l| l.starts_with("ok ")).count(),
        files.len(),
        "{out}"
    );
    // The streams and their whole messages are the same replies.
    assert!(
        out.contains(
            "thinking_parallel_tools.sse: stream of 5 blocks, equal to thinking_parallel_tools.json"
        ),
        "{out}"
    );
}

// ---------------------------------------------------------------------------------------------
// Thinking + parallel tools + results, checked by the fake.

#[tokio::test]
async fn thinking_and_parallel_calls_come_back_byte_exact_with_their_results() {
    for mode in MODES {
        let fake = AnthropicFake::start(vec![
            Reply::Fixture("thinking_parallel_tools"),
            Reply::Fixture("thinking_answer"),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL)).with_system_prompt("Be brief.");
        let (text, events) = run(&mut cycle, "Weather in Paris and Tokyo?", mode).await;
        fake.assert_no_rejections();
        assert_eq!(
            text.unwrap(),
            "Paris: 22 °C ☀️. Tōkyō: the look-up failed (no such city…).",
            "{mode:?}"
        );
        let received = fake.received();
        assert_eq!(received.len(), 2, "{mode:?}");
        let second = &received[1];
        // Thinking stays on in the tool loop: the reply's thinking block leads it.
        assert_eq!(
            second.body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        let assistant = &second.body["messages"][1];
        assert_eq!(assistant["role"], "assistant");
        let kinds: Vec<&str> = assistant["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(|b| b["type"].as_str().unwrap())
            .collect();
        assert_eq!(
            kinds,
            [
                "thinking",
                "redacted_thinking",
                "text",
                "tool_use",
                "tool_use"
            ]
        );
        // Byte-exact in the request text.
        for index in [0, 1] {
            let block = fixture_block("thinking_parallel_tools", index);
            assert!(
                second.text.contains(&block),
                "{mode:?}: {block} not in {}",
                second.text
            );
        }
        // The results, first in the next user message, tied to their calls.
        let results = &second.body["messages"][2]["content"];
        assert_eq!(results[0]["tool_use_id"], "toolu_01Paris8xQ2mN4vR7tY1");
        assert!(results[0].get("is_error").is_none());
        assert_eq!(results[1]["tool_use_id"], "toolu_01Tokyo3bK9wE6sD2fG5");
        assert_eq!(results[1]["is_error"], true);
        // The history keeps the artifacts, for this provider and model, in place.
        let reply = &cycle.messages()[2];
        let artifacts = reply.artifacts();
        assert_eq!(artifacts.len(), 2);
        assert!(
            artifacts
                .iter()
                .all(|a| a.provider == ArtifactProvider::Anthropic
                    && a.model.as_deref() == Some(MODEL)
                    && a.place == ArtifactPlace::Before(0))
        );
        assert!(
            reply.reasoning().is_none(),
            "native thinking is not a chat-completions field"
        );
        if mode == Mode::Streaming {
            let thoughts: String = events
                .iter()
                .filter_map(|e| match e {
                    StreamEvent::ReasoningDelta { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect();
            assert!(
                thoughts.starts_with("The user wants the weather in Paris and in Tōkyō (東京).")
            );
            assert!(thoughts.contains("Paris reported 22 °C"));
        }
        // Usage by token kind, summed over the two requests.
        let usage = cycle.usage().tokens;
        assert_eq!(
            usage.prompt_tokens,
            (412 + 1536) + (95 + 310 + 1536),
            "{mode:?}"
        );
        assert_eq!(usage.cached_tokens, Some(1536));
        assert_eq!(usage.cache_write_tokens, Some(1536 + 310));
        assert_eq!(usage.completion_tokens, 187 + 64);
        assert_eq!(usage.reasoning_tokens, Some(96 + 21));

        // Saved and restored (as a session store does): the same model gets every block back.
        let saved = serde_json::to_string(cycle.messages()).unwrap();
        let restored: Vec<OpenaiChatMessage> = serde_json::from_str(&saved).unwrap();
        assert_eq!(restored, cycle.messages());
        fake.push(Reply::Fixture("thinking_answer"));
        let mut resumed = LlmCycle::from_history(client(&fake), config(MODEL), restored);
        let (text, _) = run(&mut resumed, "Thanks. And tomorrow?", mode).await;
        fake.assert_no_rejections();
        assert!(text.is_ok(), "{mode:?}: {text:?}");
        let resumed_request = &fake.received()[2];
        for (name, index) in [
            ("thinking_parallel_tools", 0),
            ("thinking_parallel_tools", 1),
            ("thinking_answer", 0),
        ] {
            let block = fixture_block(name, index);
            assert!(resumed_request.text.contains(&block), "{mode:?}: {block}");
        }

        // The same history to another model: its signed blocks stay home, and a new user turn
        // may think.
        fake.push(Reply::Fixture("thinking_answer"));
        let mut other = LlmCycle::from_history(
            client(&fake),
            config("claude-opus-4-1"),
            cycle.messages().to_vec(),
        );
        let (text, _) = run(&mut other, "Thanks. And tomorrow?", mode).await;
        fake.assert_no_rejections();
        assert!(text.is_ok(), "{mode:?}: {text:?}");
        let other_request = &fake.received()[3];
        assert!(
            !other_request.text.contains("\"signature\""),
            "{}",
            other_request.text
        );
        assert!(!other_request.text.contains("redacted_thinking"));
        assert!(other_request.body.get("thinking").is_some());
    }
}

#[tokio::test]
async fn a_tool_loop_from_another_provider_continues_without_thinking() {
    // The calls were made by another provider: no thinking block can lead the assistant
    // message, so this request must not think (the fake answers 400 otherwise).
    let history = vec![
        OpenaiChatMessage::user_text("Weather in Paris?"),
        OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![agcore::llm::ToolCall::new(
                "call_abc",
                "get_weather",
                r#"{"city":"Paris"}"#,
            )],
        ),
        OpenaiChatMessage::tool_result("call_abc", "22"),
    ];
    let fake = AnthropicFake::start(vec![Reply::Fixture("thinking_answer")]).await;
    let options = RequestOptions {
        reasoning_effort: Some(ReasoningEffort::High),
        ..RequestOptions::default()
    };
    let request = ChatRequest {
        model: MODEL,
        messages: &history,
        tools: &[],
        options: &options,
    };
    let reply = client(&fake).chat(request).await.unwrap();
    fake.assert_no_rejections();
    assert!(reply.text().starts_with("Paris: 22 °C"));
    assert!(fake.received()[0].body.get("thinking").is_none());
}

// ---------------------------------------------------------------------------------------------
// Streams in pieces, unknown events, errors.

#[tokio::test]
async fn streams_cut_in_small_random_pieces_decode_like_whole_ones() {
    for name in [
        "text",
        "tool_use",
        "thinking_parallel_tools",
        "thinking_answer",
        "max_tokens_tool_use",
        "overloaded_mid_stream",
    ] {
        let body = fixture(&format!("{name}.sse"));
        let whole = decode_in_pieces(&body, 0).await;
        let one = assemble(decode_stream(
            futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from(body.clone()))]),
            None,
        ))
        .await;
        assert_eq!(format!("{whole:?}"), format!("{one:?}"), "{name}");
        for seed in 1..40 {
            let split = decode_in_pieces(&body, seed).await;
            assert_eq!(
                format!("{split:?}"),
                format!("{one:?}"),
                "{name}, seed {seed}"
            );
        }
    }
    let thinking = decode_in_pieces(&fixture("thinking_parallel_tools.sse"), 7)
        .await
        .unwrap();
    assert_eq!(
        thinking.text(),
        "I’ll check both cities at once: Paris and 東京."
    );
    assert_eq!(
        thinking.tool_calls()[1].function.arguments,
        r#"{"city": "東京"}"#
    );
    assert_eq!(
        thinking.tool_calls()[0].function.arguments,
        r#"{"city": "Paris"}"#
    );
    assert_eq!(thinking.stop_reason, Some(FinishReason::ToolCalls));
    assert_eq!(
        serde_json::to_string(&thinking.message.artifacts()[0].data).unwrap(),
        fixture_block("thinking_parallel_tools", 0)
    );
    // The SDK's own tool_use fixture: an empty first fragment, then the arguments.
    let tool = decode_in_pieces(&fixture("tool_use.sse"), 3).await.unwrap();
    assert_eq!(
        tool.tool_calls()[0].function.arguments,
        r#"{"location": "Paris"}"#
    );
    assert_eq!(tool.usage.unwrap().completion_tokens, 65);
    assert_eq!(tool.usage.unwrap().prompt_tokens, 377);
}

#[tokio::test]
async fn unknown_event_types_and_blocks_are_ignored() {
    let body = fixture("text.sse");
    let extra = concat!(
        "event: content_block_start\n",
        "data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"hologram\",\"frames\":[1,2]}}\n\n",
        "event: content_block_delta\n",
        "data: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"hologram_delta\",\"frame\":3}}\n\n",
        "event: content_block_stop\n",
        "data: {\"type\":\"content_block_stop\",\"index\":1}\n\n",
        "event: telemetry_v9\n",
        "data: {\"type\":\"telemetry_v9\",\"load\":0.5}\n\n",
        ": a comment\n\n",
    );
    let at = body.find("event: message_delta").unwrap();
    let with_unknown = format!("{}{extra}{}", &body[..at], &body[at..]);
    let plain = decode_in_pieces(&body, 1).await.unwrap();
    let unknown = decode_in_pieces(&with_unknown, 1).await.unwrap();
    assert_eq!(unknown, plain);
    assert_eq!(unknown.text(), "Hello there!");
}

#[tokio::test]
async fn an_error_event_mid_stream_is_an_overloaded_server_error() {
    let mut stream = decode_stream(
        futures::stream::iter(pieces(fixture("overloaded_mid_stream.sse").as_bytes(), 5)),
        None,
    );
    let mut error = None;
    while let Some(item) = stream.next().await {
        if let Err(e) = item {
            error = Some(e);
        }
    }
    let error = error.unwrap();
    assert!(
        matches!(error, ProviderError::Server { status: 529, .. }),
        "{error:?}"
    );
    assert!(RetryPolicy::is_retryable(&error));
    // A stream that just stops is not a complete reply.
    let body = fixture("text.sse");
    let cut = &body[..body.find("event: message_delta").unwrap()];
    assert!(decode_in_pieces(cut, 2).await.is_err());
}

#[tokio::test]
async fn a_529_is_retried_and_a_400_is_not() {
    for mode in MODES {
        let fake = AnthropicFake::start(vec![
            Reply::Status(
                529,
                vec![("retry-after", "0".into())],
                fixture("error_overloaded.json"),
            ),
            Reply::Fixture("thinking_answer"),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        let (text, _) = run(&mut cycle, "Hi", mode).await;
        assert!(text.unwrap().starts_with("Paris"), "{mode:?}");
        let received = fake.received();
        assert_eq!(received.len(), 2);
        assert_eq!(
            received[0].text, received[1].text,
            "the retry sends the same body"
        );

        let fake = AnthropicFake::start(vec![
            Reply::Status(400, vec![], fixture("error_invalid_request.json")),
            Reply::Fixture("thinking_answer"),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        let (text, _) = run(&mut cycle, "Hi", mode).await;
        let error = format!("{:?}", text.unwrap_err());
        assert!(
            error.contains("BadRequest") || error.contains("bad_request"),
            "{mode:?}: {error}"
        );
        assert_eq!(fake.received().len(), 1, "a 400 is not retried");
    }
}

#[tokio::test]
async fn a_prompt_too_long_is_a_typed_context_overflow() {
    let fake = AnthropicFake::start(vec![Reply::Status(
        400,
        vec![],
        fixture("error_prompt_too_long.json"),
    )])
    .await;
    let messages = [OpenaiChatMessage::user_text("x")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: MODEL,
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let error = client(&fake).chat_stream(request).await.err().unwrap();
    assert!(
        matches!(&error, ProviderError::ContextLengthExceeded { message } if message.starts_with("prompt is too long")),
        "{error:?}"
    );
    let fake = AnthropicFake::start(vec![Reply::Status(
        429,
        vec![("retry-after", "12".into())],
        fixture("error_rate_limit.json"),
    )])
    .await;
    let error = client(&fake).chat(request).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::RateLimited { retry_after: Some(wait), .. } if wait == Duration::from_secs(12))
    );
}

#[tokio::test]
async fn max_tokens_in_the_middle_of_a_call_runs_nothing() {
    for mode in MODES {
        let fake = AnthropicFake::start(vec![Reply::Fixture("max_tokens_tool_use")]).await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        let (result, _) = run(&mut cycle, "Weather?", mode).await;
        let error = result.unwrap_err();
        assert!(
            matches!(&error, LlmError::TruncatedToolCalls)
                || matches!(&error, LlmError::Other(m) if m.starts_with("truncated_tool_calls")),
            "{mode:?}: {error:?}"
        );
        // Nothing ran and nothing unanswered was stored.
        assert!(
            cycle.messages().iter().all(|m| m.tool_calls().is_empty()),
            "{mode:?}"
        );
        assert_eq!(fake.received().len(), 1);
    }
}

// ---------------------------------------------------------------------------------------------
// Caching and the request's shape.

#[tokio::test]
async fn cache_markers_stay_on_the_same_prefix_from_request_to_request() {
    let fake = AnthropicFake::start(vec![
        Reply::Fixture("thinking_parallel_tools"),
        Reply::Fixture("thinking_answer"),
    ])
    .await;
    let mut cycle = LlmCycle::new(client(&fake), config(MODEL)).with_system_prompt("Be brief.");
    let (text, _) = run(&mut cycle, "Weather in Paris and Tokyo?", Mode::Blocking).await;
    text.unwrap();
    fake.assert_no_rejections();
    let received = fake.received();
    let marked = |body: &Value| -> Vec<String> {
        let mut at = Vec::new();
        for (m, message) in body["messages"].as_array().unwrap().iter().enumerate() {
            for (b, block) in message["content"].as_array().unwrap().iter().enumerate() {
                if block.get("cache_control").is_some() {
                    at.push(format!("{m}.{b}"));
                }
            }
        }
        at
    };
    assert_eq!(marked(&received[0].body), ["0.0"]);
    // Request 2 marks the end of request 1 (read) and its own end (written for the next).
    assert_eq!(marked(&received[1].body), ["0.0", "2.1"]);
    for body in [&received[0].body, &received[1].body] {
        assert_eq!(
            body["tools"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
        assert_eq!(
            body["system"][0]["cache_control"],
            json!({"type": "ephemeral"})
        );
    }
    // Without caching: no markers at all.
    let fake = AnthropicFake::start(vec![Reply::Fixture("thinking_answer")]).await;
    let client = AnthropicClient::new(
        AnthropicConfig::new(fake.base_url())
            .with_api_key("test-key")
            .with_cache(false),
    )
    .unwrap();
    let mut cycle = LlmCycle::new(client, config(MODEL));
    cycle.submit("Hi".into()).await.unwrap();
    assert!(!fake.received()[0].text.contains("cache_control"));
}

#[tokio::test]
async fn the_requests_sent_are_valid_create_params_for_the_sdk() {
    let fake = AnthropicFake::start(vec![
        Reply::Fixture("thinking_parallel_tools"),
        Reply::Fixture("thinking_answer"),
    ])
    .await;
    let mut cycle = LlmCycle::new(client(&fake), config(MODEL)).with_system_prompt("Be brief.");
    run(&mut cycle, "Weather in Paris and Tokyo?", Mode::Streaming)
        .await
        .0
        .unwrap();
    let Some(python) = sdk_python() else { return };
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = fake
        .received()
        .iter()
        .enumerate()
        .map(|(n, received)| {
            let path = dir.path().join(format!("sent_{n}.request.json"));
            std::fs::write(&path, &received.text).unwrap();
            path
        })
        .collect();
    let out = run_sdk_check(&python, &files);
    assert_eq!(out.matches(": request").count(), 2, "{out}");
}

// ---------------------------------------------------------------------------------------------
// Typed output: a forced tool whose call is the answer.

#[derive(Debug, PartialEq, serde::Deserialize, schemars::JsonSchema)]
#[allow(dead_code)]
struct Forecast {
    city: String,
    temperature: i64,
}

#[tokio::test]
async fn typed_output_forces_a_tool_and_reads_its_call_as_the_answer() {
    use agcore::run::{OutputMode, TypedOutput};
    for mode in MODES {
        let fake = AnthropicFake::start(vec![Reply::Fixture("typed_answer")]).await;
        // Thinking is asked for; a forced tool cannot think, so it is left out (the fake
        // answers 400 otherwise).
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        let options = TypedOutput::new().with_mode(OutputMode::Native);
        let registry = registry();
        let forecast: Forecast = match mode {
            Mode::Blocking => cycle
                .submit_typed_with::<Forecast>("Zürich?".into(), &registry, &options)
                .await
                .unwrap(),
            Mode::Streaming => {
                let mut stream = cycle
                    .submit_typed_stream::<Forecast>("Zürich?".into(), &registry, &options)
                    .unwrap();
                let mut answer = None;
                while let Some(item) = stream.next().await {
                    match item {
                        agcore::run::TypedEvent::Output(value) => answer = Some(value),
                        agcore::run::TypedEvent::Failed(error) => panic!("{error:?}"),
                        _ => {}
                    }
                }
                answer.unwrap()
            }
        };
        fake.assert_no_rejections();
        assert_eq!(
            forecast,
            Forecast {
                city: "Zürich".into(),
                temperature: 21
            },
            "{mode:?}"
        );
        let body = &fake.received()[0].body;
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "Forecast"})
        );
        assert!(body.get("thinking").is_none());
        let tools: Vec<&str> = body["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(tools, ["get_weather", "Forecast"]);
        // The answer is the reply's text, not a call left unanswered.
        let last = cycle.messages().last().unwrap();
        assert!(last.tool_calls().is_empty(), "{mode:?}");
    }
}

#[tokio::test]
async fn the_transport_limits_bound_an_anthropic_stream() {
    // One text delta of 64 KiB against an event limit of 16 KiB.
    let body = fixture("text.sse").replacen(
        "\"text\":\"Hello\"",
        &format!("\"text\":\"{}\"", "é".repeat(32 * 1024)),
        1,
    );
    let fake = AnthropicFake::start(vec![Reply::Sse(body)]).await;
    let settings = TransportSettings::default().with_max_event_bytes(16 * 1024);
    let client = AnthropicClient::new(
        AnthropicConfig::new(fake.base_url())
            .with_api_key("test-key")
            .with_transport(settings),
    )
    .unwrap();
    let messages = [OpenaiChatMessage::user_text("x")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: MODEL,
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let outcome = assemble(client.chat_stream(request).await.unwrap()).await;
    assert_eq!(outcome.unwrap_err(), "ResponseLimitExceeded");
}

#[tokio::test]
async fn an_overloaded_error_after_the_reply_began_is_retried_in_the_loop() {
    let fake = AnthropicFake::start(vec![
        Reply::Sse(fixture("overloaded_mid_stream.sse")),
        Reply::Fixture("thinking_answer"),
    ])
    .await;
    let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
    let (text, events) = run(&mut cycle, "Hi", Mode::Streaming).await;
    fake.assert_no_rejections();
    assert!(text.unwrap().starts_with("Paris: 22 °C"));
    let retries: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::Retry { attempt, kind, .. } => Some((*attempt, kind.to_string())),
            _ => None,
        })
        .collect();
    assert_eq!(retries, [(2, "server".to_owned())]);
    let received = fake.received();
    assert_eq!(received.len(), 2);
    assert_eq!(received[0].text, received[1].text, "the same request again");
    // The broken reply's text is not in the history.
    assert!(
        cycle
            .messages()
            .iter()
            .all(|m| !m.text().unwrap_or_default().contains("Let me th"))
    );
}

/// The checking fake is shown to refuse (issue 33, item 10): after serving a thinking tool
/// turn, the same turn sent back whole passes; its thinking block edited, its blocks
/// reordered, or its signed blocks sent to another model are each a 400.
#[test]
fn the_checking_fake_refuses_edited_reordered_or_moved_thinking() {
    use crate::support::anthropic_fake::{Served, check_request, fixture};
    let served: Value = serde_json::from_str(&fixture("thinking_parallel_tools.json")).unwrap();
    let model = served["model"].as_str().unwrap();
    let content = served["content"].as_array().unwrap().clone();
    let results: Vec<Value> = content
        .iter()
        .filter(|block| block["type"] == "tool_use")
        .map(|block| json!({"type": "tool_result", "tool_use_id": block["id"], "content": "ok"}))
        .collect();
    let body = |model: &str, assistant: Vec<Value>| {
        json!({
            "model": model,
            "max_tokens": 4096,
            "thinking": {"type": "enabled", "budget_tokens": 2048},
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "Weather in Paris and Tokyo?"}]},
                {"role": "assistant", "content": assistant},
                {"role": "user", "content": results},
            ],
        })
    };
    let history = [Served::new(model, content.clone())];
    check_request(&body(model, content.clone()), &history).unwrap();
    let mut edited = content.clone();
    edited[0]["thinking"] = json!("I changed my mind.");
    let mut reordered = content.clone();
    reordered.swap(0, 1);
    for (what, request) in [
        ("an edited thinking block", body(model, edited)),
        ("reordered blocks", body(model, reordered)),
        (
            "the signed blocks to another model",
            body("claude-other", content.clone()),
        ),
    ] {
        let refused = check_request(&request, &history).expect_err(what);
        assert!(
            refused.contains("Invalid `signature` in `thinking` block"),
            "{what}: refused for another reason: {refused}"
        );
    }
}
