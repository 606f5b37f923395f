//! `OpenAiClient` against a local HTTP server speaking the real wire format of OpenAI, Azure,
//! vLLM, Ollama, llama.cpp and DeepSeek, plus the stream decoder fed in arbitrary byte splits.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use agcore::llm::openai::decode_stream;
use agcore::llm::types::{RequestOptions, ToolChoice};
use agcore::llm::{
    ChatModel, ChatRequest, ChatResponse, FinishReason, ModelStream, OpenAiClient, OpenAiConfig,
    OpenaiChatMessage, ProviderError, RetryPolicy, StreamAssembler, StreamEvent, TimeoutKind,
    ToolCall, ToolDefinition,
};
use bytes::Bytes;
use futures::StreamExt;
use proptest::prelude::*;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const FIXTURES: &[&str] = &[
    "openai_text",
    "openai_tool_call_split",
    "vllm_parallel_tool_calls",
    "azure_prompt_filter",
    "ollama_whole_tool_call",
    "llamacpp_object_arguments",
    "deepseek_reasoning",
    "openai_mid_stream_error",
    "openai_cut",
];

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/openai/{name}.sse",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// What a stream produced: the assembled response or the error's text, and every event.
#[derive(Debug, PartialEq)]
struct Outcome {
    response: Result<ChatResponse, String>,
    events: Vec<StreamEvent>,
}

async fn assemble(mut stream: ModelStream) -> Outcome {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = stream.next().await {
        match delta {
            Ok(delta) => assembler.push(delta, &mut events),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing may follow an error");
                return Outcome {
                    response: Err(error.to_string()),
                    events: events.into_iter().map(StreamEvent::from).collect(),
                };
            }
        }
    }
    let response = assembler.finish(&mut events).map_err(|e| e.to_string());
    // The run streams the model's events as its own, unchanged.
    let events = events.into_iter().map(StreamEvent::from).collect();
    Outcome { response, events }
}

/// Decode `body` delivered in pieces ending at `cuts` (byte offsets), without a network.
async fn decode_split(body: &[u8], cuts: &[usize]) -> Outcome {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts.iter().chain(std::iter::once(&body.len())) {
        let cut = cut.clamp(start, body.len());
        if cut > start {
            pieces.push(Ok::<_, std::io::Error>(Bytes::copy_from_slice(
                &body[start..cut],
            )));
        }
        start = cut;
    }
    assemble(decode_stream(futures::stream::iter(pieces), None)).await
}

async fn decode_byte_by_byte(body: &[u8]) -> Outcome {
    let cuts: Vec<usize> = (1..body.len()).collect();
    decode_split(body, &cuts).await
}

fn request<'a>(
    messages: &'a [OpenaiChatMessage],
    tools: &'a [ToolDefinition],
    options: &'a RequestOptions,
) -> ChatRequest<'a> {
    ChatRequest {
        model: "test-model",
        messages,
        tools,
        options,
    }
}

async fn server_with_stream(body: String) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    server
}

fn client(server: &MockServer) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri())).with_api_key("sk-test"))
        .unwrap()
}

/// Serve the fixture over HTTP, and decode it whole, byte by byte, with CRLF line ends and with
/// `data:` lacking its space; every way must give the same outcome, which is returned.
async fn stream_fixture(name: &str) -> Outcome {
    let body = fixture(name);
    let server = server_with_stream(body.clone()).await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let stream = client(&server)
        .chat_stream(request(&messages, &[], &options))
        .await
        .unwrap();
    let mut over_http = assemble(stream).await;
    // The client records where reasoning came from (its server and model, so it goes back
    // only there); `decode_stream` knows no server and records nothing.
    if let Ok(response) = &mut over_http.response
        && let OpenaiChatMessage::Assistant {
            artifacts,
            reasoning_content,
            reasoning,
            ..
        } = &mut response.message
    {
        let before = artifacts.len();
        artifacts.retain(|artifact| artifact.data.get("reasoning_origin").is_none());
        let recorded = before - artifacts.len();
        let has_reasoning = reasoning_content.is_some() || reasoning.is_some();
        assert_eq!(recorded, usize::from(has_reasoning), "{name}");
    }
    assert_eq!(
        decode_split(body.as_bytes(), &[]).await,
        over_http,
        "{name}: whole"
    );
    assert_eq!(
        decode_byte_by_byte(body.as_bytes()).await,
        over_http,
        "{name}: byte by byte"
    );
    let crlf = body.replace('\n', "\r\n");
    assert_eq!(
        decode_byte_by_byte(crlf.as_bytes()).await,
        over_http,
        "{name}: CRLF"
    );
    let no_space = body.replace("data: ", "data:");
    assert_eq!(
        decode_split(no_space.as_bytes(), &[]).await,
        over_http,
        "{name}: data without space"
    );
    over_http
}

fn text_deltas(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn openai_streaming_text_with_trailing_usage_chunk() {
    let outcome = stream_fixture("openai_text").await;
    let response = outcome.response.unwrap();
    assert_eq!(response.text(), "Hello! Grüße aus Zürich 🌍. 日本語もOK.");
    assert_eq!(text_deltas(&outcome.events), response.text());
    assert_eq!(response.stop_reason, Some(FinishReason::Stop));
    let usage = response.usage.unwrap();
    assert_eq!(
        (
            usage.prompt_tokens,
            usage.completion_tokens,
            usage.total_tokens
        ),
        (19, 10, 29)
    );
    assert_eq!(
        response.id.as_deref(),
        Some("chatcmpl-AZ3mN8b1xYqK0v7Qe2R5tU9wXyZaB")
    );
    assert_eq!(response.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
}

#[tokio::test]
async fn one_tool_call_with_arguments_split_over_many_chunks() {
    let response = stream_fixture("openai_tool_call_split")
        .await
        .response
        .unwrap();
    assert_eq!(
        response.tool_calls(),
        [ToolCall::new(
            "call_DdmO9pD3xa9XTPNJ32zg2hcA",
            "get_weather",
            r#"{"location":"Paris, France","unit":"celsius","days": 3}"#
        )]
    );
    assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage.unwrap().total_tokens, 109);
    assert_eq!(response.message.text(), None);
}

#[tokio::test]
async fn two_parallel_tool_calls_interleaved_by_index() {
    let outcome = stream_fixture("vllm_parallel_tool_calls").await;
    let response = outcome.response.unwrap();
    assert_eq!(
        response.tool_calls(),
        [
            ToolCall::new("chatcmpl-tool-a1", "get_weather", r#"{"city": "Paris"}"#),
            ToolCall::new(
                "chatcmpl-tool-b2",
                "get_time",
                r#"{"timezone": "Europe/Berlin"}"#
            ),
        ]
    );
    let ready: Vec<&str> = outcome
        .events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallReady { id, .. } => Some(id.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(ready, ["chatcmpl-tool-a1", "chatcmpl-tool-b2"]);
}

#[tokio::test]
async fn azure_first_chunk_with_empty_choices_is_skipped() {
    let response = stream_fixture("azure_prompt_filter")
        .await
        .response
        .unwrap();
    assert_eq!(response.text(), "The capital is Paris.");
    assert_eq!(response.id.as_deref(), Some("chatcmpl-AzUrE5xK2mPq"));
    assert_eq!(response.model.as_deref(), Some("gpt-4o-2024-11-20"));
}

#[tokio::test]
async fn ollama_whole_tool_call_ending_in_stop_is_still_a_tool_call() {
    let response = stream_fixture("ollama_whole_tool_call")
        .await
        .response
        .unwrap();
    assert_eq!(
        response.tool_calls(),
        [ToolCall::new(
            "call_u8o5oy2m",
            "get_weather",
            r#"{"city":"Toronto"}"#
        )]
    );
    assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
}

#[tokio::test]
async fn llamacpp_arguments_sent_as_an_object_become_json_text() {
    let response = stream_fixture("llamacpp_object_arguments")
        .await
        .response
        .unwrap();
    let call = &response.tool_calls()[0];
    assert_eq!(call.function.name, "search_files");
    let arguments: Value = serde_json::from_str(&call.function.arguments).unwrap();
    assert_eq!(
        arguments,
        json!({"pattern": "fn main", "path": "src/", "max_results": 5})
    );
    assert_eq!(response.usage.unwrap().total_tokens, 243);
}

#[tokio::test]
async fn deepseek_reasoning_content_is_kept_apart_from_the_answer() {
    let outcome = stream_fixture("deepseek_reasoning").await;
    let response = outcome.response.unwrap();
    assert_eq!(response.text(), "9.8 is larger.");
    assert_eq!(
        response.message.reasoning(),
        Some("The user asks for 9.11 vs 9.8. Compare decimals.")
    );
    assert!(
        outcome
            .events
            .iter()
            .any(|event| matches!(event, StreamEvent::ReasoningDelta { .. }))
    );
    assert_eq!(response.usage.unwrap().reasoning_tokens, Some(104));
}

#[tokio::test]
async fn an_error_object_mid_stream_is_a_stream_error() {
    let outcome = stream_fixture("openai_mid_stream_error").await;
    assert_eq!(
        outcome.response,
        // Typed by its `type` like the HTTP status it stands for (`server_error`: 500).
        Err("server error (HTTP 500): The server had an error while processing your request. Sorry about that!"
            .to_owned())
    );
    assert_eq!(text_deltas(&outcome.events), "Let me think");
}

#[tokio::test]
async fn a_stream_cut_without_finish_or_done_is_an_error() {
    let outcome = stream_fixture("openai_cut").await;
    let error = outcome.response.unwrap_err();
    assert!(
        error.contains("ended before the reply was complete"),
        "{error}"
    );
}

#[tokio::test]
async fn done_without_finish_reason_is_complete_but_a_lone_finish_needs_no_done() {
    let text = r#"data: {"choices":[{"index":0,"delta":{"content":"hi"}}]}"#;
    let outcome = decode_split(format!("{text}\n\ndata: [DONE]\n\n").as_bytes(), &[]).await;
    assert_eq!(outcome.response.unwrap().text(), "hi");
    let finish = r#"data: {"choices":[{"index":0,"delta":{},"finish_reason":"length"}]}"#;
    let outcome = decode_split(format!("{text}\n\n{finish}\n\n").as_bytes(), &[]).await;
    assert_eq!(
        outcome.response.unwrap().stop_reason,
        Some(FinishReason::Length)
    );
}

#[tokio::test]
async fn an_error_event_is_a_stream_error() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\nevent: error\ndata: {\"error\":{\"message\":\"slot unavailable\"}}\n\n";
    let outcome = decode_split(body.as_bytes(), &[]).await;
    assert_eq!(
        outcome.response,
        Err("stream error: slot unavailable".to_owned())
    );
}

#[tokio::test(start_paused = true)]
async fn a_silent_stream_hits_the_idle_timeout() {
    let first = Bytes::from_static(
        b"data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n: ping\n\n",
    );
    let bytes =
        futures::stream::iter([Ok::<_, std::io::Error>(first)]).chain(futures::stream::pending());
    let mut stream = decode_stream(bytes, Some(Duration::from_secs(30)));
    assert!(matches!(stream.next().await, Some(Ok(_))));
    match stream.next().await {
        Some(Err(ProviderError::Timeout {
            what,
            limit,
            retries: 0,
        })) => {
            assert_eq!(what, TimeoutKind::StreamIdle);
            assert_eq!(limit, Duration::from_secs(30));
        }
        other => panic!("expected an idle timeout, got {other:?}"),
    }
    assert!(stream.next().await.is_none());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn any_split_of_any_fixture_assembles_the_same(
        which in 0..FIXTURES.len(),
        cuts in proptest::collection::vec(0usize..7000, 0..40),
    ) {
        let body = fixture(FIXTURES[which]);
        let mut cuts = cuts;
        cuts.sort_unstable();
        let whole = futures::executor::block_on(decode_split(body.as_bytes(), &[]));
        let split = futures::executor::block_on(decode_split(body.as_bytes(), &cuts));
        prop_assert_eq!(whole, split);
    }
}

fn completion_body() -> Value {
    json!({
        "id": "chatcmpl-B1", "object": "chat.completion", "created": 1732964000,
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done.", "refusal": null},
            "logprobs": null, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
}

fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(20),
    }
}

async fn chat_with_retries(server: &MockServer) -> Result<ChatResponse, ProviderError> {
    let client = client(server);
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    fast_retries()
        .run(|| client.chat(request(&messages, &[], &options)))
        .await
}

async fn requests_received(server: &MockServer) -> usize {
    server.received_requests().await.unwrap().len()
}

#[tokio::test]
async fn rate_limited_with_retry_after_then_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "1")
                .set_body_json(json!({"error": {"message": "Rate limit reached for requests", "type": "requests", "code": "rate_limit_exceeded"}})),
        )
        .up_to_n_times(1)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion_body()))
        .mount(&server)
        .await;
    let response = chat_with_retries(&server).await.unwrap();
    assert_eq!(response.text(), "Done.");
    assert_eq!(requests_received(&server).await, 2);
}

#[tokio::test]
async fn a_429_carries_retry_after_and_the_server_message() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(429)
                .insert_header("retry-after", "7")
                .set_body_json(json!({"error": {"message": "slow down"}})),
        )
        .mount(&server)
        .await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let error = client(&server)
        .chat_stream(request(&messages, &[], &options))
        .await
        .err()
        .unwrap();
    match error {
        ProviderError::RateLimited {
            retry_after,
            retries,
            message,
        } => {
            assert_eq!(retry_after, Some(Duration::from_secs(7)));
            assert_eq!(retries, 0);
            assert_eq!(message, "slow down");
        }
        other => panic!("expected RateLimited, got {other:?}"),
    }
}

#[tokio::test]
async fn unauthorized_is_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": "Incorrect API key provided: sk-test. You can find your API key at https://platform.openai.com/account/api-keys.", "type": "invalid_request_error", "param": null, "code": "invalid_api_key"}})))
        .mount(&server)
        .await;
    let error = chat_with_retries(&server).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::Authentication { status: 401, .. }),
        "{error:?}"
    );
    assert_eq!(requests_received(&server).await, 1);
}

/// A 401 whose body echoes the key (as OpenAI's does, in part; some proxies whole): the error's
/// text and debug form carry no part of the key the request sent.
#[tokio::test]
async fn a_401_body_echoing_the_key_is_redacted_in_the_error() {
    const KEY: &str = "sk-proj-echoed-Secret-0123456789";
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(401).set_body_json(json!({"error": {"message": format!("Incorrect API key provided: {KEY}; sent header: Bearer {KEY}"), "type": "invalid_request_error", "code": "invalid_api_key"}})))
        .mount(&server)
        .await;
    let client =
        OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri())).with_api_key(KEY))
            .unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let error = client
        .chat(request(&messages, &[], &options))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::Authentication { status: 401, .. }),
        "{error:?}"
    );
    for shown in [error.to_string(), format!("{error:?}")] {
        assert!(!shown.contains("echoed-Secret"), "{shown}");
        assert!(
            shown.contains("Incorrect API key provided: <redacted>"),
            "{shown}"
        );
    }
}

#[tokio::test]
async fn server_errors_are_retried_until_success() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(500).set_body_string("Internal Server Error"))
        .up_to_n_times(2)
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion_body()))
        .mount(&server)
        .await;
    assert_eq!(chat_with_retries(&server).await.unwrap().text(), "Done.");
    assert_eq!(requests_received(&server).await, 3);
}

#[tokio::test]
async fn a_server_error_that_persists_reports_the_retries() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(503).set_body_json(json!({"detail": "model is loading"})),
        )
        .mount(&server)
        .await;
    let error = chat_with_retries(&server).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "server error (HTTP 503) after 3 retries: model is loading"
    );
    assert_eq!(requests_received(&server).await, 4);
}

#[tokio::test]
async fn a_context_length_400_is_mapped_and_not_retried() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(400).set_body_json(json!({"error": {"message": "This model's maximum context length is 128000 tokens. However, your messages resulted in 130412 tokens. Please reduce the length of the messages.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}})))
        .mount(&server)
        .await;
    let error = chat_with_retries(&server).await.unwrap_err();
    assert!(
        matches!(error, ProviderError::ContextLengthExceeded { ref message } if message.contains("128000")),
        "{error:?}"
    );
    assert_eq!(requests_received(&server).await, 1);
}

#[tokio::test]
async fn a_closed_port_is_a_retryable_connection_error() {
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap().port()
    };
    let client =
        OpenAiClient::new(OpenAiConfig::new(format!("http://127.0.0.1:{port}/v1"))).unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let error = client
        .chat(request(&messages, &[], &options))
        .await
        .unwrap_err();
    assert!(
        matches!(error, ProviderError::Connection { retries: 0, .. }),
        "{error:?}"
    );
    assert!(RetryPolicy::is_retryable(&error));
}

#[tokio::test]
async fn a_slow_server_hits_the_request_timeout() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(completion_body())
                .set_delay(Duration::from_secs(30)),
        )
        .mount(&server)
        .await;
    let client = OpenAiClient::new(
        OpenAiConfig::new(format!("{}/v1", server.uri()))
            .with_request_timeout(Duration::from_millis(100)),
    )
    .unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let error = client
        .chat(request(&messages, &[], &options))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            ProviderError::Timeout {
                what: TimeoutKind::Request,
                ..
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_non_streaming_tool_call_reply_is_parsed() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-B2", "object": "chat.completion", "created": 1732964100, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [
                    {"id": "call_a", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                    {"id": "call_b", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
                ]}, "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 82, "completion_tokens": 40, "total_tokens": 122,
                "prompt_tokens_details": {"cached_tokens": 64}, "completion_tokens_details": {"reasoning_tokens": 0}},
            "system_fingerprint": "fp_1"
        })))
        .mount(&server)
        .await;
    let messages = [OpenaiChatMessage::user_text("weather and time?")];
    let options = RequestOptions::default();
    let response = client(&server)
        .chat(request(&messages, &[], &options))
        .await
        .unwrap();
    assert_eq!(
        response.tool_calls(),
        [
            ToolCall::new("call_a", "get_weather", r#"{"city":"Paris"}"#),
            ToolCall::new("call_b", "get_time", "{}"),
        ]
    );
    assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
    assert_eq!(response.usage.unwrap().cached_tokens, Some(64));
}

#[tokio::test]
async fn the_request_body_and_headers_are_in_openai_shape() {
    let server = server_with_stream(fixture("openai_text")).await;
    let config = OpenAiConfig::new(format!("{}/v1", server.uri()))
        .with_api_key("sk-secret-key-123")
        .with_header("OpenAI-Organization", "org-1")
        .with_query("api-version", "2024-10-21")
        .with_provider("azure");
    assert!(!format!("{config:?}").contains("sk-secret-key-123"));
    let client = OpenAiClient::new(config).unwrap();
    assert!(!format!("{client:?}").contains("sk-secret-key-123"));
    assert_eq!(client.provider(), "azure");

    let messages = vec![
        OpenaiChatMessage::system("Be brief."),
        OpenaiChatMessage::user_text("weather?"),
        OpenaiChatMessage::Assistant {
            content: None,
            refusal: None,
            reasoning_content: Some("old turn's thoughts".into()),
            reasoning: None,
            tool_calls: vec![ToolCall::new(
                "call_1",
                "get_weather",
                r#"{"city":"Paris"}"#,
            )],
            name: None,
            artifacts: Vec::new(),
        },
        OpenaiChatMessage::tool_result("call_1", "22 °C"),
        OpenaiChatMessage::user_text("and tomorrow?"),
        OpenaiChatMessage::Assistant {
            content: None,
            refusal: None,
            reasoning_content: Some("this turn's thoughts".into()),
            reasoning: None,
            tool_calls: vec![ToolCall::new("call_2", "get_weather", r#"{"day":1}"#)],
            name: None,
            artifacts: Vec::new(),
        },
        OpenaiChatMessage::tool_result("call_2", "19 °C"),
    ];
    let tools = vec![ToolDefinition::function(
        "get_weather",
        "Current weather for a city",
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}),
    )];
    let mut options = RequestOptions {
        temperature: Some(0.5),
        tool_choice: Some(ToolChoice::Auto),
        ..RequestOptions::default()
    };
    options.extra.insert("top_k".into(), json!(40));
    options.extra.insert(
        "chat_template_kwargs".into(),
        json!({"enable_thinking": false}),
    );
    let request = ChatRequest {
        model: "gpt-4o",
        messages: &messages,
        tools: &tools,
        options: &options,
    };
    let outcome = assemble(client.chat_stream(request).await.unwrap()).await;
    assert!(outcome.response.is_ok());

    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    let sent = &received[0];
    assert_eq!(
        sent.headers.get("authorization").unwrap(),
        "Bearer sk-secret-key-123"
    );
    assert_eq!(sent.headers.get("openai-organization").unwrap(), "org-1");
    assert_eq!(sent.url.query(), Some("api-version=2024-10-21"));
    let body: Value = serde_json::from_slice(&sent.body).unwrap();
    assert_eq!(body["model"], "gpt-4o");
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(body["temperature"], 0.5);
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(body["top_k"], 40);
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": false})
    );
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "function": {"name": "get_weather", "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])
    );
    let sent_messages = body["messages"].as_array().unwrap();
    assert_eq!(sent_messages.len(), messages.len());
    assert_eq!(
        sent_messages[2],
        json!({"role": "assistant", "content": null, "reasoning_content": "old turn's thoughts",
            "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
    );
    assert_eq!(
        sent_messages[5]["reasoning_content"],
        "this turn's thoughts"
    );
    assert_eq!(
        sent_messages[3],
        json!({"role": "tool", "tool_call_id": "call_1", "content": "22 °C"})
    );
}

#[test]
fn config_defaults_match_the_documentation() {
    let defaults = OpenAiConfig::default();
    assert_eq!(defaults.base_url, "https://api.openai.com/v1");
    assert_eq!(
        (
            defaults.connect_timeout,
            defaults.request_timeout,
            defaults.stream_idle_timeout
        ),
        (
            Duration::from_secs(10),
            Duration::from_secs(600),
            Duration::from_secs(300)
        )
    );
    assert_eq!(defaults.provider, "openai");
    assert_eq!(defaults.api_key, None);
}

#[tokio::test]
async fn a_llamacpp_error_line_mid_stream_keeps_its_message() {
    let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\nerror: {\"code\":500,\"message\":\"Failed to decode the batch\",\"type\":\"server_error\"}\n\n";
    let whole = decode_split(body.as_bytes(), &[]).await;
    assert_eq!(
        whole.response,
        // Typed like the HTTP status its code names (500).
        Err("server error (HTTP 500): Failed to decode the batch".to_owned())
    );
    assert_eq!(decode_byte_by_byte(body.as_bytes()).await, whole);
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_replayed_as_a_stream() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(ResponseTemplate::new(200).set_body_json(completion_body()))
        .mount(&server)
        .await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let outcome = assemble(
        client(&server)
            .chat_stream(request(&messages, &[], &options))
            .await
            .unwrap(),
    )
    .await;
    let response = outcome.response.unwrap();
    assert_eq!(text_deltas(&outcome.events), "Done.");
    assert_eq!(response.stop_reason, Some(FinishReason::Stop));
    assert_eq!(response.usage.unwrap().total_tokens, 7);
    assert_eq!(response.id.as_deref(), Some("chatcmpl-B1"));
}

/// A raw HTTP/1.1 server that answers one request with the SSE `first` chunk, then either
/// stalls (`then_close: false`) or drops the connection mid-body.
async fn stalling_server(first: &'static str, then_close: bool) -> String {
    stalling_server_with("text/event-stream", first, then_close).await
}

/// [`stalling_server`] with another content type.
async fn stalling_server_with(
    content_type: &'static str,
    first: &'static str,
    then_close: bool,
) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut request = Vec::new();
        let mut buffer = [0u8; 4096];
        // Read the headers and the body (its length is in Content-Length).
        loop {
            let read = socket.read(&mut buffer).await.unwrap();
            request.extend_from_slice(&buffer[..read]);
            let text = String::from_utf8_lossy(&request).to_lowercase();
            if let Some(end) = text.find("\r\n\r\n") {
                let length: usize = text
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .map(|value| value.trim().parse().unwrap())
                    .unwrap_or(0);
                if request.len() >= end + 4 + length {
                    break;
                }
            }
        }
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ntransfer-encoding: chunked\r\n\r\n"
        );
        let chunk = format!("{:x}\r\n{first}\r\n", first.len());
        socket.write_all(head.as_bytes()).await.unwrap();
        socket.write_all(chunk.as_bytes()).await.unwrap();
        socket.flush().await.unwrap();
        if then_close {
            drop(socket);
        } else {
            tokio::time::sleep(Duration::from_secs(60)).await;
        }
    });
    format!("http://{address}/v1")
}

#[tokio::test]
async fn a_stalled_http_stream_ends_with_an_idle_timeout() {
    let base_url = stalling_server(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
        false,
    )
    .await;
    let client = OpenAiClient::new(
        OpenAiConfig::new(base_url).with_stream_idle_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let outcome = assemble(
        client
            .chat_stream(request(&messages, &[], &options))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(text_deltas(&outcome.events), "a");
    assert_eq!(
        outcome.response,
        Err("timed out: waiting for more of the streamed reply took longer than 200ms".to_owned())
    );
}

#[tokio::test]
async fn a_json_reply_to_a_stream_request_that_stalls_hits_the_request_timeout() {
    // The server ignores `"stream": true`, sends JSON headers and part of the body, then stalls.
    let base_url = stalling_server_with("application/json", "{\"id\":", false).await;
    let client = OpenAiClient::new(
        OpenAiConfig::new(base_url).with_request_timeout(Duration::from_millis(200)),
    )
    .unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    // The guard only turns a hang (the stall lasts 60 s) into a failure.
    let result = tokio::time::timeout(
        Duration::from_secs(30),
        client.chat_stream(request(&messages, &[], &options)),
    )
    .await
    .expect("the body read was not bounded by the request timeout");
    assert!(
        matches!(
            result,
            Err(ProviderError::Timeout {
                what: TimeoutKind::Request,
                ..
            })
        ),
        "{:?}",
        result.err()
    );
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_a_stream_error() {
    let base_url = stalling_server(
        "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n",
        true,
    )
    .await;
    let client = OpenAiClient::new(OpenAiConfig::new(base_url)).unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let outcome = assemble(
        client
            .chat_stream(request(&messages, &[], &options))
            .await
            .unwrap(),
    )
    .await;
    let error = outcome.response.unwrap_err();
    assert!(
        error.starts_with("stream error: the connection failed mid-stream"),
        "{error}"
    );
}
