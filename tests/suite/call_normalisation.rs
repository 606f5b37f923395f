//! The `ChatModel` contract: the provider normalises tool calls, once — every call of a reply
//! gets an id unique within it (generated when the server sent none, an empty one or a repeat),
//! blank arguments become `{}` — for a whole reply and for a stream alike. `OpenAiClient`
//! against a local HTTP server speaking the OpenAI wire format.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;

use agcore::llm::types::RequestOptions;
use agcore::llm::{
    ChatModel, ChatRequest, ChatResponse, OpenAiClient, OpenAiConfig, OpenaiChatMessage,
    StreamAssembler,
};
use futures::StreamExt;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

async fn server(response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

fn client(server: &MockServer) -> OpenAiClient {
    OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap()
}

/// The reply's calls are `f`, `g`, `h` with unique non-empty ids, `x` kept for the first call
/// that sent it, and JSON-text arguments.
fn check(reply: &ChatResponse) {
    let calls = reply.message.tool_calls();
    let names: Vec<&str> = calls.iter().map(|c| c.function.name.as_str()).collect();
    assert_eq!(names, ["f", "g", "h"], "{calls:?}");
    let ids: HashSet<&str> = calls.iter().map(|c| c.id.as_str()).collect();
    assert_eq!(ids.len(), 3, "ids must be unique: {calls:?}");
    assert!(!ids.contains(""), "no empty id: {calls:?}");
    assert!(calls[0].id.starts_with("call_"), "{calls:?}");
    assert_eq!(calls[1].id, "x");
    assert!(calls[2].id.starts_with("call_"), "{calls:?}");
    let arguments: Vec<&str> = calls
        .iter()
        .map(|c| c.function.arguments.as_str())
        .collect();
    assert_eq!(arguments, ["{}", "{\"a\":1}", "{}"]);
}

#[tokio::test]
async fn a_whole_reply_without_ids_or_arguments_is_normalised_by_the_provider() {
    let body = json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": null, "tool_calls": [
                {"type": "function", "function": {"name": "f", "arguments": ""}},
                {"id": "x", "type": "function", "function": {"name": "g", "arguments": "{\"a\":1}"}},
                {"id": "x", "type": "function", "function": {"name": "h", "arguments": "  "}}
            ]}}]
    });
    let server = server(ResponseTemplate::new(200).set_body_json(body)).await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let reply = client(&server)
        .chat(ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        })
        .await
        .unwrap();
    check(&reply);
}

#[tokio::test]
async fn a_streamed_reply_without_ids_or_arguments_is_normalised_by_the_assembler() {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        let chunk = json!({"id": "r", "object": "chat.completion.chunk", "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let call = |index: u32, id: Option<&str>, name: &str, arguments: &str| {
        let mut call = json!({"index": index, "type": "function",
            "function": {"name": name, "arguments": arguments}});
        if let Some(id) = id {
            call["id"] = json!(id);
        }
        chunk(json!({"tool_calls": [call]}), None)
    };
    let body = [
        chunk(json!({"role": "assistant", "content": null}), None),
        call(0, None, "f", ""),
        call(1, Some("x"), "g", "{\"a\":1}"),
        call(2, Some("x"), "h", ""),
        chunk(json!({}), Some("tool_calls")),
        "data: [DONE]\n\n".to_owned(),
    ]
    .concat();
    let server = server(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream")).await;
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let mut stream = client(&server)
        .chat_stream(ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        })
        .await
        .unwrap();
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = stream.next().await {
        assembler.push(delta.unwrap(), &mut events);
    }
    let reply = assembler.finish(&mut events).unwrap();
    check(&reply);
    // The events announce the calls as the reply has them.
    let ready: Vec<String> = events
        .iter()
        .filter_map(|event| match event {
            agcore::llm::ModelEvent::ToolCallReady { id, .. } => Some(id.clone()),
            _ => None,
        })
        .collect();
    let ids: Vec<String> = reply
        .message
        .tool_calls()
        .iter()
        .map(|c| c.id.clone())
        .collect();
    assert_eq!(ready, ids);
}
