//! The OpenAI Responses backend against a local server (127.0.0.1) that serves the API's
//! recorded shapes and checks every request like the real API with `store: false`
//! (`support::responses_fake`): reasoning items back byte for byte and in place, item ids only
//! with their reasoning, tool outputs tied to their calls — streaming and not. Also the typed
//! errors (429 with its wait, an `error` event and `response.failed` inside HTTP 200, the
//! context overflow), a reply cut mid-call, and the fixtures parsed by the `openai` SDK.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agcore::llm::openai_responses::{OpenAiResponsesClient, OpenAiResponsesConfig};
use agcore::llm::types::RequestOptions;
use agcore::llm::{
    ChatModel, ChatRequest, CycleConfig, ErrorKind, LlmCycle, LlmError, OpenaiChatMessage,
    ProviderError, RetryPolicy, StreamEvent,
};
use agcore::tools::prelude::*;
use futures::StreamExt;
use wiremock::ResponseTemplate;

use crate::support::mcp::python_script;
use crate::support::require::require;
use crate::support::responses_fake::{Answer, ResponsesFake, fixture};

const MODEL: &str = "gpt-5";

const TOOL_TURN: Answer = Answer::Reply {
    stream: "stream_reasoning_parallel_calls.sse",
    whole: "response_reasoning_calls.json",
};

const TEXT_TURN: Answer = Answer::Reply {
    stream: "stream_reasoning_text.sse",
    whole: "response_reasoning_text.json",
};

const CUT_TURN: Answer = Answer::Reply {
    stream: "stream_incomplete_mid_call.sse",
    whole: "response_incomplete_mid_call.json",
};

fn client(fake: &ResponsesFake) -> OpenAiResponsesClient {
    OpenAiResponsesClient::new(OpenAiResponsesConfig::new(fake.base_url()).with_api_key("sk-test"))
        .unwrap()
}

fn cycle(fake: &ResponsesFake, model: &str) -> LlmCycle {
    let mut config = CycleConfig::new(model);
    config.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(50),
    };
    config.request_timeout = Some(Duration::from_secs(20));
    LlmCycle::new(client(fake), config)
}

struct Weather(Arc<AtomicUsize>);

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
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"city": args["city"], "temperature": 22}))
    }
}

fn registry() -> (ToolRegistry, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather(runs.clone()))).unwrap();
    (registry, runs)
}

#[derive(Clone, Copy, Debug)]
enum Mode {
    Blocking,
    Streaming,
}

/// One tool-loop call: the final text or the error's kind and text, and the stream's events.
async fn call(
    cycle: &mut LlmCycle,
    prompt: &str,
    registry: &ToolRegistry,
    mode: Mode,
) -> (Result<String, (ErrorKind, String)>, Vec<StreamEvent>) {
    let failed = |error: LlmError| (error.kind(), error.to_string());
    let run = async {
        match mode {
            Mode::Blocking => (
                cycle
                    .submit_with_tools(prompt.into(), registry)
                    .await
                    .map(|reply| reply.text())
                    .map_err(failed),
                Vec::new(),
            ),
            Mode::Streaming => {
                let events: Vec<StreamEvent> = match cycle
                    .submit_stream_with_tools(prompt.into(), registry)
                    .await
                {
                    Ok(stream) => stream.collect().await,
                    Err(error) => return (Err(failed(error)), Vec::new()),
                };
                let result = match events.last() {
                    Some(StreamEvent::Error { kind, message }) => Err((*kind, message.clone())),
                    _ => Ok(events
                        .iter()
                        .filter_map(|event| match event {
                            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
                            _ => None,
                        })
                        .collect()),
                };
                (result, events)
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the call finished in time")
}

/// The items of a request's `input` of one type.
fn items<'a>(request: &'a Value, kind: &str) -> Vec<&'a Value> {
    request["input"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|item| item["type"] == kind)
        .collect()
}

#[tokio::test]
async fn reasoning_and_calls_go_back_as_the_stateless_api_requires() {
    for mode in [Mode::Streaming, Mode::Blocking] {
        let fake = ResponsesFake::start(|_, n| match n {
            0 | 2 => TOOL_TURN,
            _ => TEXT_TURN,
        })
        .await;
        let (registry, runs) = registry();
        let mut cycle = cycle(&fake, MODEL);
        let (result, events) =
            call(&mut cycle, "Weather in Zürich and Tokyo?", &registry, mode).await;
        assert_eq!(
            result.unwrap(),
            "Zürich: 22 °C, 東京: 22 °C — same temperature 🌤️.",
            "{mode:?}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 2);
        if let Mode::Streaming = mode {
            assert!(
                events.iter().any(
                    |e| matches!(e, StreamEvent::ReasoningDelta { text } if text.contains("東京"))
                ),
                "the summary is shown"
            );
        }
        // A second user turn carries both earlier replies' reasoning again.
        let (result, _) = call(&mut cycle, "And tomorrow?", &registry, mode).await;
        assert!(result.is_ok(), "{mode:?}: {result:?}");
        assert_eq!(fake.rejected(), Vec::<String>::new(), "{mode:?}");
        let requests = fake.requests();
        assert_eq!(requests.len(), 4);
        let first = &requests[0];
        assert_eq!(first["store"], false);
        assert_eq!(first["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(first["tools"][0]["name"], "get_weather");
        // The tool turn's request: the reasoning item, both calls with their item ids, the
        // outputs tied by call id.
        let second = &requests[1];
        assert_eq!(items(second, "reasoning").len(), 1);
        let calls = items(second, "function_call");
        assert_eq!(
            calls
                .iter()
                .map(|c| (c["call_id"].as_str().unwrap(), c["id"].as_str().unwrap()))
                .collect::<Vec<_>>(),
            [
                (
                    "call_Zr7mXq2VbN4kLp9sTa1Yc3Ud",
                    "fc_0a1b2c3d4e5f6071fa8293a4b5c6d7e8f90a1b2c3d4e5f6071"
                ),
                (
                    "call_K8pQw3ErT6yUi9Oa2Sd5Fg7H",
                    "fc_0a1b2c3d4e5f6071fb8293a4b5c6d7e8f90a1b2c3d4e5f6071"
                ),
            ]
        );
        let outputs = items(second, "function_call_output");
        assert_eq!(outputs[0]["call_id"], "call_Zr7mXq2VbN4kLp9sTa1Yc3Ud");
        assert!(outputs[0]["output"].as_str().unwrap().contains("Zürich"));
        // The next user turn: three reasoning items (two turns), the message with its id.
        let third = &requests[2];
        assert_eq!(items(third, "reasoning").len(), 2);
        let answer = items(third, "message")
            .into_iter()
            .find(|m| m["role"] == "assistant")
            .unwrap();
        assert_eq!(
            answer["id"],
            "msg_1b2c3d4e5f607182ms93a4b5c6d7e8f90a1b2c3d4e5f607182"
        );
        assert_eq!(answer["content"][0]["type"], "output_text");
    }
}

#[tokio::test]
async fn the_fake_rejects_a_history_that_breaks_the_apis_rules() {
    let fake = ResponsesFake::start(|_, n| match n {
        0 => TOOL_TURN,
        _ => TEXT_TURN,
    })
    .await;
    let (registry, _) = registry();
    let mut cycle = cycle(&fake, MODEL);
    call(&mut cycle, "Weather?", &registry, Mode::Blocking)
        .await
        .0
        .unwrap();
    let good = cycle.messages().to_vec();
    let client = client(&fake);
    let options = RequestOptions::default();
    let send = |messages: Vec<OpenaiChatMessage>| {
        let client = client.clone();
        let options = options.clone();
        async move {
            let request = ChatRequest {
                model: MODEL,
                messages: &messages,
                tools: &[],
                options: &options,
            };
            client.chat(request).await
        }
    };
    let edit = |f: &dyn Fn(&mut Vec<agcore::llm::Artifact>)| {
        good.iter()
            .cloned()
            .map(|message| {
                let mut artifacts = message.artifacts().to_vec();
                if artifacts.is_empty() {
                    return message;
                }
                f(&mut artifacts);
                message.with_artifacts(artifacts)
            })
            .collect::<Vec<_>>()
    };
    // Reasoning dropped, item ids kept.
    let error = send(edit(&|a| a.retain(|a| a.data["type"] != "reasoning")))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ProviderError::BadRequest { status: 400, message } if message.contains("without its required 'reasoning' item")),
        "{error:?}"
    );
    // The encrypted content changed.
    let error = send(edit(&|a| {
        for artifact in a.iter_mut().filter(|a| a.data["type"] == "reasoning") {
            artifact.data["encrypted_content"] = json!("gAAAAAB-forged");
        }
    }))
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("could not be verified"),
        "{error}"
    );
    // The reasoning item moved away from its call.
    let error = send(edit(&|a| {
        for artifact in a.iter_mut().filter(|a| a.data["type"] == "reasoning") {
            artifact.place = agcore::llm::ArtifactPlace::Before(2);
        }
    }))
    .await
    .unwrap_err();
    assert!(
        error.to_string().contains("without its required"),
        "{error}"
    );
    // A tool output whose call is gone.
    let mut orphan = good.clone();
    orphan.remove(1);
    let error = send(orphan).await.unwrap_err();
    assert!(error.to_string().contains("No tool call found"), "{error}");
    // The history as it was passes.
    assert!(send(good.clone()).await.is_ok());
    assert_eq!(fake.rejected().len(), 4);
}

#[tokio::test]
async fn a_history_sent_to_another_model_goes_without_artifacts_and_is_accepted() {
    let fake = ResponsesFake::start(|_, n| match n {
        0 => TOOL_TURN,
        _ => TEXT_TURN,
    })
    .await;
    let (registry, _) = registry();
    let mut cycle = cycle(&fake, MODEL);
    call(&mut cycle, "Weather?", &registry, Mode::Streaming)
        .await
        .0
        .unwrap();
    let history = cycle.messages().to_vec();
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: "gpt-5-mini",
        messages: &history,
        tools: &[],
        options: &options,
    };
    client(&fake).chat(request).await.unwrap();
    let sent = fake.requests().last().unwrap().to_string();
    for kept in ["rs_", "fc_", "msg_", "\"encrypted_content\":"] {
        assert!(!sent.contains(kept), "{kept} went to another model: {sent}");
    }
    assert!(sent.contains("call_Zr7mXq2VbN4kLp9sTa1Yc3Ud"));
    // The history keeps them for a later request to their own model.
    assert!(history.iter().any(|m| !m.artifacts().is_empty()));
}

#[tokio::test]
async fn a_reply_cut_mid_call_runs_no_tool() {
    for mode in [Mode::Streaming, Mode::Blocking] {
        let fake = ResponsesFake::start(|_, _| CUT_TURN).await;
        let (registry, runs) = registry();
        let mut cycle = cycle(&fake, MODEL);
        let (result, _) = call(&mut cycle, "Weather in Reykjavík?", &registry, mode).await;
        assert_eq!(
            result.unwrap_err().0,
            ErrorKind::TruncatedToolCalls,
            "{mode:?}"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 0);
        assert_eq!(fake.requests().len(), 1, "not retried");
    }
}

fn raw(status: u16, fixture_name: &str) -> Answer {
    Answer::Raw(
        ResponseTemplate::new(status).set_body_raw(fixture(fixture_name), "application/json"),
    )
}

fn sse(fixture_name: &str) -> Answer {
    Answer::Raw(ResponseTemplate::new(200).set_body_raw(fixture(fixture_name), "text/event-stream"))
}

#[tokio::test]
async fn a_429_is_retried_after_the_wait_it_asks_for() {
    let fake = ResponsesFake::start(|_, n| match n {
        0 => Answer::Raw(
            ResponseTemplate::new(429)
                .insert_header("retry-after-ms", "20")
                .set_body_raw(fixture("error_rate_limit.json"), "application/json"),
        ),
        _ => TEXT_TURN,
    })
    .await;
    let (registry, _) = registry();
    let mut cycle = cycle(&fake, MODEL);
    let (result, _) = call(&mut cycle, "hi", &registry, Mode::Blocking).await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(fake.requests().len(), 2);
    // One attempt alone reports the wait.
    let fake = ResponsesFake::start(|_, _| {
        Answer::Raw(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "3")
                .set_body_raw(fixture("error_rate_limit.json"), "application/json"),
        )
    })
    .await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: MODEL,
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let error = client(&fake).chat(request).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::RateLimited { retry_after: Some(wait), .. } if wait == Duration::from_secs(3)),
        "{error:?}"
    );
}

/// What one streamed request to a server answering `answer` ends with.
async fn stream_outcome(answer: fn() -> Answer) -> (Vec<String>, Result<(), ProviderError>) {
    let fake = ResponsesFake::start(move |_, _| answer()).await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: MODEL,
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let mut stream = match client(&fake).chat_stream(request).await {
        Ok(stream) => stream,
        Err(error) => return (Vec::new(), Err(error)),
    };
    let mut texts = Vec::new();
    while let Some(delta) = stream.next().await {
        match delta {
            Ok(agcore::llm::ModelDelta::Text(text)) => texts.push(text),
            Ok(_) => {}
            Err(error) => return (texts, Err(error)),
        }
    }
    (texts, Ok(()))
}

#[tokio::test]
async fn errors_inside_a_200_reply_and_error_statuses_are_typed() {
    let (texts, result) = stream_outcome(|| sse("stream_error_event.sse")).await;
    assert_eq!(texts, ["Partial "]);
    assert!(
        matches!(result, Err(ProviderError::Server { status: 500, .. })),
        "{result:?}"
    );
    let (_, result) = stream_outcome(|| sse("stream_failed.sse")).await;
    assert!(
        matches!(result, Err(ProviderError::Server { status: 500, .. })),
        "{result:?}"
    );
    let (_, result) = stream_outcome(|| sse("stream_context_length_error.sse")).await;
    assert!(
        matches!(result, Err(ProviderError::ContextLengthExceeded { .. })),
        "{result:?}"
    );
    let (_, result) = stream_outcome(|| raw(400, "error_context_length.json")).await;
    assert!(
        matches!(result, Err(ProviderError::ContextLengthExceeded { .. })),
        "{result:?}"
    );
    let (_, result) = stream_outcome(|| raw(400, "error_missing_reasoning.json")).await;
    assert!(
        matches!(&result, Err(ProviderError::BadRequest { status: 400, message }) if message.contains("required 'reasoning' item")),
        "{result:?}"
    );
    assert!(!RetryPolicy::is_retryable(&result.unwrap_err()));
    let (_, result) = stream_outcome(|| raw(503, "error_rate_limit.json")).await;
    assert!(
        matches!(result, Err(ProviderError::Server { status: 503, .. })),
        "{result:?}"
    );
}

#[test]
fn the_fixtures_are_the_apis_shapes_for_the_openai_sdk() {
    let Some(python) = python_script("python") else {
        return;
    };
    let has_sdk = Command::new(&python)
        .args(["-c", "import openai, pydantic"])
        .status()
        .is_ok_and(|status| status.success());
    let Some(python) = require(
        "the openai SDK (PyPI openai==3.51.0)",
        "run `.ci/install-mcp-servers.sh` (it installs openai into .ci/venv) or set AGCORE_TEST_VENV",
        has_sdk.then_some(python),
    ) else {
        return;
    };
    let dir = format!("{}/tests/fixtures/providers", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<String> = std::fs::read_dir(format!("{dir}/openai_responses"))
        .unwrap()
        .map(|entry| entry.unwrap().path().display().to_string())
        .collect();
    files.sort();
    assert!(files.len() >= 12, "{files:?}");
    let output = Command::new(python)
        .arg(format!("{dir}/check_openai_responses.py"))
        .args(&files)
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{report}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(
        report
            .lines()
            .filter(|line| line.starts_with("ok "))
            .count(),
        files.len(),
        "{report}"
    );
}
