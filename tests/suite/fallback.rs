//! `FallbackModel` end to end against two local servers on 127.0.0.1: a retryable failure
//! before any output moves the request to the next model (a `model_switch` event first, each
//! server asked for its own model name); a client error does not; an open circuit breaker skips
//! its model until its cool-down ends.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{
    ChatModel, CircuitBreaker, CycleConfig, ErrorKind, FallbackModel, LlmCycle, OpenAiClient,
    OpenAiConfig, RetryPolicy, StreamEvent,
};
use futures::StreamExt;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A plain text answer, streamed or whole as the request asks.
fn text_reply(body: &Value, text: &str) -> ResponseTemplate {
    if body["stream"] == json!(true) {
        let chunk = json!({"id": "chatcmpl-ok", "object": "chat.completion.chunk", "model": body["model"],
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": text}, "finish_reason": "stop"}]});
        ResponseTemplate::new(200).set_body_raw(
            format!("data: {chunk}\n\ndata: [DONE]\n\n"),
            "text/event-stream",
        )
    } else {
        ResponseTemplate::new(200).set_body_raw(
            json!({"id": "chatcmpl-ok", "object": "chat.completion", "model": body["model"],
                "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]})
            .to_string(),
            "application/json",
        )
    }
}

fn overloaded() -> ResponseTemplate {
    ResponseTemplate::new(503).set_body_raw(
        json!({"error": {"message": "The engine is currently overloaded, please try again later",
            "type": "server_error", "param": null, "code": null}})
        .to_string(),
        "application/json",
    )
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

/// A server answering request `n` with `script(body, n)`, recording every body.
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

    fn client(&self) -> Arc<dyn ChatModel> {
        Arc::new(OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", self.server.uri()))).unwrap())
    }

    fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

/// A cycle on `model` without retries of its own: only the fallback moves on.
fn cycle(model: FallbackModel) -> LlmCycle {
    let mut config = CycleConfig::new("configured-name");
    config.retry = RetryPolicy::none();
    config.request_timeout = Some(Duration::from_secs(20));
    LlmCycle::new(model, config)
}

fn last_text(cycle: &LlmCycle) -> Value {
    serde_json::to_value(cycle.messages().last().unwrap()).unwrap()["content"].clone()
}

#[tokio::test]
async fn a_5xx_before_any_output_moves_to_the_next_model_with_an_event() {
    let first = Server::start(|_, _| overloaded()).await;
    let second = Server::start(|body, _| text_reply(body, "from the second model")).await;
    let model =
        FallbackModel::new(first.client(), "model-a").with_fallback(second.client(), "model-b");
    let mut cycle = cycle(model);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    match &events[0] {
        StreamEvent::ModelSwitch { from, to, reason } => {
            assert_eq!((from.as_str(), to.as_str()), ("model-a", "model-b"));
            assert!(
                reason.contains("HTTP 503") && reason.contains("overloaded"),
                "{reason}"
            );
        }
        other => panic!("expected the switch first, got {other:?}"),
    }
    assert_eq!(
        serde_json::to_value(&events[0]).unwrap()["type"],
        "model_switch"
    );
    assert_eq!(last_text(&cycle), "from the second model");
    // Each server is asked for its own model, not the configured name.
    assert_eq!(first.requests()[0]["model"], "model-a");
    assert_eq!(second.requests()[0]["model"], "model-b");
    // Not streaming: the same fallback.
    let answer = cycle.submit("again".into()).await.unwrap();
    assert_eq!(answer.text(), "from the second model");
    assert_eq!(first.requests().len(), 2);
    assert_eq!(second.requests().len(), 2);
}

#[tokio::test]
async fn a_client_error_is_not_a_reason_to_switch() {
    let first = Server::start(|_, _| {
        ResponseTemplate::new(400).set_body_raw(
            json!({"error": {"message": "Invalid value for 'tools'", "type": "invalid_request_error",
                "param": "tools", "code": null}})
            .to_string(),
            "application/json",
        )
    })
    .await;
    let second = Server::start(|body, _| text_reply(body, "never")).await;
    let model =
        FallbackModel::new(first.client(), "model-a").with_fallback(second.client(), "model-b");
    let mut cycle = cycle(model);
    let events: Vec<StreamEvent> = match cycle.submit_stream("hi".into()).await {
        Ok(stream) => stream.collect().await,
        Err(error) => vec![StreamEvent::from_error(&error)],
    };
    assert!(
        matches!(
            events.as_slice(),
            [StreamEvent::Error {
                kind: ErrorKind::BadRequest,
                ..
            }]
        ),
        "{events:#?}"
    );
    assert!(second.requests().is_empty());
}

#[tokio::test]
async fn every_model_failing_returns_the_last_failure_and_the_run_retries_the_list() {
    let first = Server::start(|_, _| overloaded()).await;
    let second = Server::start(|body, n| match n {
        0 => overloaded(),
        _ => text_reply(body, "second, on the retry"),
    })
    .await;
    let model =
        FallbackModel::new(first.client(), "model-a").with_fallback(second.client(), "model-b");
    let mut config = CycleConfig::new("configured-name");
    config.retry = RetryPolicy {
        max_retries: 1,
        initial_backoff: Duration::from_millis(5),
        max_backoff: Duration::from_millis(10),
    };
    let mut cycle = LlmCycle::new(model, config);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    let switches = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::ModelSwitch { .. }))
        .count();
    assert_eq!(switches, 1, "{events:#?}");
    assert_eq!(last_text(&cycle), "second, on the retry");
    assert_eq!(first.requests().len(), 2);
    assert_eq!(second.requests().len(), 2);
}

#[tokio::test]
async fn an_open_breaker_skips_its_model_and_says_so() {
    let first = Server::start(|_, _| overloaded()).await;
    let second = Server::start(|body, _| text_reply(body, "b")).await;
    let model = FallbackModel::new(first.client(), "model-a")
        .with_fallback(second.client(), "model-b")
        .with_circuit_breaker(CircuitBreaker {
            failure_threshold: 1,
            cool_down: Duration::from_secs(600),
        });
    let mut cycle = cycle(model);
    cycle.submit("one".into()).await.unwrap();
    let events: Vec<StreamEvent> = cycle
        .submit_stream("two".into())
        .await
        .unwrap()
        .collect()
        .await;
    assert!(
        matches!(&events[0], StreamEvent::ModelSwitch { from, reason, .. }
            if from == "model-a" && reason.contains("circuit breaker open")),
        "{events:#?}"
    );
    assert_eq!(
        first.requests().len(),
        1,
        "the open breaker skipped model-a"
    );
    assert_eq!(second.requests().len(), 2);
}

// ---------------------------------------------------------------------------------------------
// Continuation artifacts stay with their model: a Gemini-style `extra_content` thought
// signature on a call goes back to the model that made it, never to the fallback.

const SIGNATURE: &str = "c2lnbmF0dXJlLW9mLW1vZGVsLWE=";

fn signed_call() -> ResponseTemplate {
    let chunk = json!({"id": "chatcmpl-a", "object": "chat.completion.chunk", "model": "model-a",
        "choices": [{"index": 0, "delta": {"role": "assistant", "tool_calls": [{"index": 0,
            "id": "call_a", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
            "extra_content": {"google": {"thought_signature": SIGNATURE}}}]},
            "finish_reason": "tool_calls"}]});
    ResponseTemplate::new(200).set_body_raw(
        format!("data: {chunk}\n\ndata: [DONE]\n\n"),
        "text/event-stream",
    )
}

fn rejected(message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_raw(
        json!({"error": {"message": message, "type": "invalid_request_error", "code": 400}})
            .to_string(),
        "application/json",
    )
}

/// The `extra_content` of the first call of the assistant message in `body`, if any.
fn sent_extra(body: &Value) -> Option<Value> {
    body["messages"]
        .as_array()?
        .iter()
        .find(|message| message["role"] == "assistant")?["tool_calls"][0]
        .get("extra_content")
        .cloned()
}

struct Weather;

#[async_trait::async_trait]
impl agcore::tools::BaseTool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    async fn execute(&self, _args: Value) -> Result<Value, agcore::tools::ToolError> {
        Ok(json!({"temperature": 22}))
    }
}

#[tokio::test]
async fn a_model_s_artifacts_go_back_to_it_and_never_to_the_fallback() {
    // Model A signs its call, then fails once; afterwards it insists on its signature, as
    // Gemini does ("Function call is missing a thought_signature").
    let first = Server::start(|body, n| match n {
        0 => signed_call(),
        1 => overloaded(),
        _ if sent_extra(body) != Some(json!({"google": {"thought_signature": SIGNATURE}})) => {
            rejected("Function call is missing a thought_signature in functionCall parts.")
        }
        _ => text_reply(body, "a again"),
    })
    .await;
    // Model B rejects a field it does not know, as a strict server does.
    let second = Server::start(|body, _| {
        if body.to_string().contains("extra_content") {
            rejected("Unrecognized request argument supplied: extra_content")
        } else {
            text_reply(body, "b answers")
        }
    })
    .await;
    let model =
        FallbackModel::new(first.client(), "model-a").with_fallback(second.client(), "model-b");
    let mut cycle = cycle(model);
    let mut registry = agcore::tools::ToolRegistry::new();
    registry.register(Arc::new(Weather)).unwrap();
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("Weather in Paris?".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    assert!(
        events
            .iter()
            .any(|event| matches!(event, StreamEvent::ModelSwitch { .. })),
        "{events:#?}"
    );
    assert_eq!(last_text(&cycle), "b answers", "{events:#?}");
    let to_b = &second.requests()[0];
    assert_eq!(to_b["messages"][1]["tool_calls"][0]["id"], "call_a");
    assert_eq!(sent_extra(to_b), None, "{to_b}");
    // The signature stayed in the history: model A gets it back, byte for byte.
    let answer = cycle
        .submit_with_tools("And tomorrow?".into(), &registry)
        .await
        .unwrap();
    assert_eq!(answer.text(), "a again");
    let to_a = first.requests().pop().unwrap();
    assert_eq!(
        sent_extra(&to_a),
        Some(json!({"google": {"thought_signature": SIGNATURE}}))
    );
}

#[tokio::test]
async fn a_switch_is_an_attribute_of_the_request_span() {
    use agcore::llm::ProviderError;
    use agcore::llm::testing::ScriptedModel;
    let (subscriber, recorded) = support::trace::recording();
    let _guard = crate::support::trace::scoped(subscriber);
    let first = ScriptedModel::new()
        .reply_error(|| ProviderError::Server {
            status: 529,
            retries: 0,
            retry_after: None,
            message: "Overloaded".to_owned(),
        })
        .with_provider("anthropic");
    let second = ScriptedModel::new()
        .reply_text("from gemini")
        .with_provider("gemini");
    let model = FallbackModel::new(Arc::new(first), "claude-haiku-4-5")
        .with_fallback(Arc::new(second), "gemini-2.5-flash");
    let mut cycle = cycle(model);
    cycle.submit("hi".into()).await.unwrap();
    let recorded = recorded.lock().unwrap();
    let chat = recorded
        .spans
        .iter()
        .find(|span| span.name == "chat configured-name")
        .expect("a chat span");
    let switch = chat.fields.get("agcore.model_switch").expect("the switch");
    assert!(
        switch.starts_with("claude-haiku-4-5 -> gemini-2.5-flash: ") && switch.contains("529"),
        "{switch}"
    );
    assert_eq!(
        chat.fields.get("gen_ai.provider.name").map(String::as_str),
        Some("gemini")
    );
}
