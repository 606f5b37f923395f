//! Wire behaviours of real servers that used to go wrong (issue 10, items 18, 20, 21, 22),
//! through `OpenAiClient` and `LlmCycle` against local HTTP servers on 127.0.0.1:
//! configured secrets and cross-origin redirects, the legacy `function_call` reply, tool calls
//! cut by `finish_reason: length`, and an error as the very first stream event.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{
    CycleConfig, ErrorKind, LlmCycle, LlmError, OpenAiClient, OpenAiConfig, RetryPolicy,
    StreamEvent,
};
use agcore::tools::prelude::*;
use futures::StreamExt;
use wiremock::matchers::{any, method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------------------------------------
// A scripted server.

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/openai/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

fn sse(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")
}

fn json_body(body: String) -> ResponseTemplate {
    ResponseTemplate::new(200).set_body_raw(body, "application/json")
}

/// A plain text answer, streamed or whole as the request asks.
fn text_reply(body: &Value, text: &str) -> ResponseTemplate {
    if body["stream"] == json!(true) {
        let chunk = json!({"id": "chatcmpl-ok", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
        sse(format!("data: {chunk}\n\ndata: [DONE]\n\n"))
    } else {
        json_body(
            json!({"id": "chatcmpl-ok", "object": "chat.completion", "model": "m",
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
            .to_string(),
        )
    }
}

type Script = dyn Fn(&Value, usize) -> ResponseTemplate + Send + Sync;

struct Scripted {
    script: Box<Script>,
    received: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Scripted {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let n = {
            let mut received = self.received.lock().unwrap();
            received.push(body.clone());
            received.len() - 1
        };
        (self.script)(&body, n)
    }
}

/// A server answering request `n` (0-based) with `script(body, n)`, recording every body.
struct Server {
    server: MockServer,
    received: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    async fn start(
        script: impl Fn(&Value, usize) -> ResponseTemplate + Send + Sync + 'static,
    ) -> Self {
        let server = MockServer::start().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Scripted {
                script: Box::new(script),
                received: received.clone(),
            })
            .mount(&server)
            .await;
        Server { server, received }
    }

    fn cycle(&self) -> LlmCycle {
        let client =
            OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", self.server.uri()))).unwrap();
        let mut config = CycleConfig::new("m");
        config.retry = RetryPolicy {
            max_retries: 2,
            initial_backoff: Duration::from_millis(10),
            max_backoff: Duration::from_millis(50),
        };
        config.request_timeout = Some(Duration::from_secs(20));
        LlmCycle::new(client, config)
    }

    fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Mode {
    Blocking,
    Streaming,
}

const MODES: [Mode; 2] = [Mode::Blocking, Mode::Streaming];

/// One call of `cycle` (with or without tools): the final text or the error, and every event.
async fn call(
    cycle: &mut LlmCycle,
    prompt: &str,
    registry: Option<&ToolRegistry>,
    mode: Mode,
) -> (Result<String, (ErrorKind, String)>, Vec<StreamEvent>) {
    let failed = |error: LlmError| (error.kind(), error.to_string());
    let run = async {
        match (mode, registry) {
            (Mode::Blocking, Some(registry)) => (
                cycle
                    .submit_with_tools(prompt.into(), registry)
                    .await
                    .map(|r| r.text())
                    .map_err(failed),
                Vec::new(),
            ),
            (Mode::Blocking, None) => (
                cycle
                    .submit(prompt.into())
                    .await
                    .map(|r| r.text())
                    .map_err(failed),
                Vec::new(),
            ),
            (Mode::Streaming, _) => {
                let stream = match registry {
                    Some(registry) => {
                        cycle
                            .submit_stream_with_tools(prompt.into(), registry)
                            .await
                    }
                    None => cycle.submit_stream(prompt.into()).await,
                };
                let events: Vec<StreamEvent> = match stream {
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

fn history(cycle: &LlmCycle) -> Value {
    serde_json::to_value(cycle.messages()).unwrap()
}

/// Every assistant tool call is answered by one `tool` message with its id, right after it, in
/// call order; no `tool` message answers nothing; no legacy `function_call` is left.
fn assert_wire_valid(messages: &Value) {
    let messages = messages.as_array().expect("messages array");
    let mut i = 0;
    while i < messages.len() {
        let message = &messages[i];
        i += 1;
        assert!(message.get("function_call").is_none(), "{message}");
        assert_ne!(
            message["role"], "tool",
            "tool message answers no call: {message}"
        );
        let Some(calls) = message.get("tool_calls").and_then(Value::as_array) else {
            continue;
        };
        for call in calls {
            let id = call["id"].as_str().expect("every call has an id");
            assert!(!id.is_empty());
            assert_eq!(call["type"], "function");
            let answer = messages
                .get(i)
                .unwrap_or_else(|| panic!("call {id} unanswered in {messages:#?}"));
            assert_eq!(answer["role"], "tool", "call {id} unanswered");
            assert_eq!(answer["tool_call_id"], id);
            i += 1;
        }
    }
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
        Ok(json!({"city": args["city"], "temperature": 22}))
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather)).unwrap();
    registry
}

// ---------------------------------------------------------------------------------------------
// Item 18: configured secrets never follow a redirect to another origin.

/// The headers of each request a server got, as (name, value) pairs.
type SeenHeaders = Arc<Mutex<Vec<Vec<(String, String)>>>>;

/// Server B: records the headers of every request it gets and answers like a model.
async fn recording_server() -> (MockServer, SeenHeaders) {
    struct Recorder(SeenHeaders);
    impl Respond for Recorder {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let headers = request
                .headers
                .iter()
                .map(|(name, value)| {
                    (
                        name.as_str().to_owned(),
                        value.to_str().unwrap_or_default().to_owned(),
                    )
                })
                .collect();
            self.0.lock().unwrap().push(headers);
            text_reply(&json!({"stream": false}), "from B")
        }
    }
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(any())
        .respond_with(Recorder(seen.clone()))
        .mount(&server)
        .await;
    (server, seen)
}

fn secret_config(base_url: String) -> OpenAiConfig {
    OpenAiConfig::new(base_url)
        .with_api_key("sk-secret-key")
        .with_header("api-key", "azure-secret")
        .with_header("x-api-key", "other-secret")
}

#[tokio::test]
async fn configured_headers_and_the_key_never_follow_a_cross_origin_redirect() {
    let (b, seen) = recording_server().await;
    for status in [307, 308, 302, 301] {
        let a = MockServer::start().await;
        Mock::given(method("POST"))
            .respond_with(ResponseTemplate::new(status).insert_header(
                "location",
                format!("{}/v1/chat/completions", b.uri()).as_str(),
            ))
            .mount(&a)
            .await;
        let client = OpenAiClient::new(secret_config(format!("{}/v1", a.uri()))).unwrap();
        let mut cycle = LlmCycle::new(client, CycleConfig::new("m"));
        let result = tokio::time::timeout(Duration::from_secs(20), cycle.submit("hi".into()))
            .await
            .unwrap();
        for headers in seen.lock().unwrap().iter() {
            for secret in ["authorization", "api-key", "x-api-key"] {
                assert!(
                    !headers.iter().any(|(name, _)| name == secret),
                    "{status}: {secret} reached the other origin: {headers:?}"
                );
            }
        }
        assert_eq!(
            seen.lock().unwrap().len(),
            0,
            "{status}: B was not asked at all"
        );
        let error = result.unwrap_err();
        let LlmError::CrossOriginRedirect { from, to } = &error else {
            panic!("{status}: {error:?}");
        };
        assert_eq!(from, &a.uri(), "{status}");
        assert_eq!(to, &b.uri(), "{status}");
        assert!(error.to_string().contains(&b.uri()), "{error}");
        assert!(!error.is_retryable());
        // Not retried: one request reached A.
        assert_eq!(a.received_requests().await.unwrap().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn a_same_origin_redirect_is_followed_with_the_configured_headers() {
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(307).insert_header("location", "/v2/chat/completions"))
        .mount(&server)
        .await;
    struct Check(Arc<Mutex<Vec<bool>>>);
    impl Respond for Check {
        fn respond(&self, request: &Request) -> ResponseTemplate {
            let has = |name: &str| request.headers.get(name).is_some();
            self.0
                .lock()
                .unwrap()
                .push(has("authorization") && has("api-key") && has("x-api-key"));
            text_reply(&json!({"stream": false}), "moved")
        }
    }
    Mock::given(method("POST"))
        .and(path("/v2/chat/completions"))
        .respond_with(Check(seen.clone()))
        .mount(&server)
        .await;
    let client = OpenAiClient::new(secret_config(format!("{}/v1", server.uri()))).unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("m"));
    let reply = cycle.submit("hi".into()).await.unwrap();
    assert_eq!(reply.text(), "moved");
    assert_eq!(*seen.lock().unwrap(), [true]);
}

// ---------------------------------------------------------------------------------------------
// Item 20: the legacy `function_call` is one tool call with a synthesised id.

#[tokio::test]
async fn a_legacy_function_call_becomes_a_tool_call_and_goes_back_as_tool_calls() {
    for mode in MODES {
        let server = Server::start(|body, n| match n {
            0 if body["stream"] == json!(true) => sse(fixture("azure_legacy_function_call.sse")),
            0 => json_body(fixture("azure_legacy_function_call.json")),
            _ => text_reply(body, "Paris: 22 degrees."),
        })
        .await;
        let mut cycle = server.cycle();
        let registry = registry();
        let (text, events) = call(&mut cycle, "Weather in Paris?", Some(&registry), mode).await;
        assert_eq!(text.unwrap(), "Paris: 22 degrees.", "{mode:?}");
        let requests = server.requests();
        assert_eq!(requests.len(), 2, "{mode:?}");
        let sent = &requests[1]["messages"];
        assert_wire_valid(sent);
        let call = &sent[1]["tool_calls"][0];
        let id = call["id"].as_str().unwrap();
        assert!(id.starts_with("call_"), "{mode:?}: synthesised id {id}");
        assert_eq!(call["function"]["name"], "get_weather");
        let arguments: Value =
            serde_json::from_str(call["function"]["arguments"].as_str().unwrap()).unwrap();
        assert_eq!(arguments, json!({"city": "Paris"}));
        assert_eq!(sent[1]["tool_calls"].as_array().unwrap().len(), 1);
        assert_eq!(sent[2]["role"], "tool");
        assert_eq!(sent[2]["tool_call_id"], id);
        assert!(
            sent[2]["content"].as_str().unwrap().contains("22"),
            "{mode:?}: the tool ran"
        );
        assert_wire_valid(&history(&cycle));
        if mode == Mode::Streaming {
            assert!(
                events.iter().any(|event| matches!(event,
                    StreamEvent::ToolExecutionStarted { id: started, tool_name, .. }
                        if started == id && tool_name == "get_weather")),
                "{events:#?}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Item 21: a tool call cut by `finish_reason: length` is an error in every path.

#[tokio::test]
async fn a_tool_call_cut_by_the_token_limit_is_an_error_with_and_without_tools() {
    for mode in MODES {
        for with_tools in [true, false] {
            let server = Server::start(|body, _| {
                if body["stream"] == json!(true) {
                    sse(fixture("openai_length_cut_tool_call.sse"))
                } else {
                    json_body(fixture("openai_length_cut_tool_call.json"))
                }
            })
            .await;
            let mut cycle = server.cycle().with_system_prompt("terse");
            let before = history(&cycle);
            let registry = registry();
            let tools = with_tools.then_some(&registry);
            let (result, events) = call(&mut cycle, "Weather in Paris?", tools, mode).await;
            let case = format!("{mode:?}, tools: {with_tools}");
            let (kind, message) = result.expect_err(&case);
            assert_eq!(kind, ErrorKind::TruncatedToolCalls, "{case}: {message}");
            assert!(
                message.contains("finish_reason=length"),
                "{case}: {message}"
            );
            // The turn is not committed: no unanswered call with unterminated JSON is stored.
            assert_eq!(history(&cycle), before, "{case}");
            assert!(
                !events
                    .iter()
                    .any(|e| matches!(e, StreamEvent::ToolExecutionStarted { .. })),
                "{case}: nothing ran"
            );
            assert_eq!(server.requests().len(), 1, "{case}: not retried");
        }
    }
}

#[tokio::test]
async fn tool_calls_returned_by_a_plain_submit_are_stored_answered() {
    for mode in MODES {
        let server = Server::start(|body, n| match n {
            0 if body["stream"] == json!(true) => sse(fixture("azure_legacy_function_call.sse")),
            0 => json_body(fixture("azure_legacy_function_call.json")),
            _ => text_reply(body, "ok"),
        })
        .await;
        let mut cycle = server.cycle();
        let (result, _) = call(&mut cycle, "Weather?", None, mode).await;
        result.unwrap();
        let stored = history(&cycle);
        assert_wire_valid(&stored);
        assert_eq!(
            stored[1]["tool_calls"][0]["function"]["name"],
            "get_weather"
        );
        assert!(
            stored[2]["content"].as_str().unwrap().contains("not run"),
            "{mode:?}: {stored:#}"
        );
        // The next request carries exactly that valid history.
        let (text, _) = call(&mut cycle, "Thanks", None, mode).await;
        assert_eq!(text.unwrap(), "ok");
        assert_wire_valid(&server.requests()[1]["messages"]);
        assert_eq!(
            server.requests()[1]["messages"].as_array().unwrap().len(),
            4
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Item 22: an error as the very first stream event is retried like the same HTTP status.

#[tokio::test]
async fn an_error_as_the_first_stream_event_is_retried_like_its_status() {
    for first in [
        "llamacpp_peg_format_error.sse",
        "llamacpp_peg_format_error_data.sse",
        "openrouter_upstream_error.sse",
    ] {
        for with_tools in [false, true] {
            let server = Server::start(move |body, n| match n {
                0 => sse(fixture(first)),
                _ => text_reply(body, "second answer"),
            })
            .await;
            let mut cycle = server.cycle();
            let registry = registry();
            let tools = with_tools.then_some(&registry);
            let (text, _) = call(&mut cycle, "hi", tools, Mode::Streaming).await;
            assert_eq!(text.unwrap(), "second answer", "{first}");
            assert_eq!(server.requests().len(), 2, "{first}");
            assert_eq!(cycle.messages().len(), 2, "{first}");
        }
    }
}

#[tokio::test]
async fn an_error_inside_a_200_json_reply_is_retried_like_its_status() {
    let server = Server::start(|body, n| match n {
        0 => json_body(
            json!({"error": {"message": "The server had an error while processing your request.",
                "type": "server_error", "param": null, "code": null}})
            .to_string(),
        ),
        _ => text_reply(body, "second answer"),
    })
    .await;
    let mut cycle = server.cycle();
    let (text, _) = call(&mut cycle, "hi", None, Mode::Blocking).await;
    assert_eq!(text.unwrap(), "second answer");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn an_error_after_a_delta_is_retried_after_a_retry_event() {
    let server = Server::start(|body, n| match n {
        0 => sse(fixture("openrouter_text_then_error.sse")),
        _ => text_reply(body, "second answer"),
    })
    .await;
    let mut cycle = server.cycle();
    let (result, events) = call(&mut cycle, "hi", None, Mode::Streaming).await;
    // The events show both attempts; the history keeps the second only.
    assert_eq!(result.unwrap(), "Once uponsecond answer");
    assert_eq!(history(&cycle)[1]["content"], "second answer");
    assert!(
        matches!(&events[0], StreamEvent::AssistantTextDelta { text } if text == "Once upon"),
        "{events:#?}"
    );
    assert!(
        matches!(&events[1], StreamEvent::Retry { attempt: 2, kind: ErrorKind::Server, error, .. }
            if error.contains("Upstream provider disconnected")),
        "{events:#?}"
    );
    assert_eq!(server.requests().len(), 2);
    assert_eq!(cycle.messages().len(), 2);
}

#[tokio::test]
async fn a_context_length_error_as_the_first_stream_event_is_not_retried() {
    let server = Server::start(|body, n| match n {
        0 => sse(fixture("llamacpp_context_error.sse")),
        _ => text_reply(body, "second answer"),
    })
    .await;
    let mut cycle = server.cycle();
    let (result, _) = call(&mut cycle, "hi", None, Mode::Streaming).await;
    let (kind, message) = result.unwrap_err();
    assert_eq!(kind, ErrorKind::ContextLengthExceeded, "{message}");
    assert_eq!(server.requests().len(), 1);
    assert!(cycle.messages().is_empty());
}

#[tokio::test]
async fn first_event_errors_that_keep_failing_report_their_retries() {
    let server = Server::start(|_, _| sse(fixture("openrouter_upstream_error.sse"))).await;
    let mut cycle = server.cycle();
    let error = match cycle.submit_stream("hi".into()).await {
        Ok(_) => panic!("the stream opened"),
        Err(error) => error,
    };
    assert!(
        matches!(
            error,
            LlmError::Server {
                status: 502,
                retries: 2,
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(server.requests().len(), 3);
}
