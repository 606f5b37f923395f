//! The Responses codec on the vendor's shapes: recorded streams decoded in random splits (across
//! lines and UTF-8 characters), whole replies, and the request encoder.

use bytes::Bytes;
use futures::StreamExt;
use serde_json::{Value, json};

use super::*;
use crate::llm::error::ProviderError;
use crate::llm::event::ModelEvent as StreamEvent;
use crate::llm::model::{ChatModel, ChatRequest};
use crate::llm::stream::StreamAssembler;
use crate::vocab::ChatResponse;
use crate::vocab::{
    Artifact, ArtifactPlace, ArtifactProvider, FinishReason, OpenaiChatMessage, ReasoningEffort,
    RequestOptions, ToolCall, ToolChoice, ToolDefinition,
};

const MODEL: &str = "gpt-5";

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/providers/openai_responses/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// A small deterministic generator for split points.
struct Splits(u64);

impl Splits {
    fn next(&mut self, below: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) as usize) % below.max(1)
    }

    /// `body` in pieces of 1 to 17 bytes.
    fn pieces(&mut self, body: &[u8]) -> Vec<Result<Bytes, std::io::Error>> {
        let mut pieces = Vec::new();
        let mut start = 0;
        while start < body.len() {
            let end = (start + 1 + self.next(17)).min(body.len());
            pieces.push(Ok(Bytes::copy_from_slice(&body[start..end])));
            start = end;
        }
        pieces
    }
}

type Outcome = (Result<ChatResponse, ProviderError>, Vec<StreamEvent>);

async fn decode(body: &str, seed: u64) -> Outcome {
    let pieces = Splits(seed).pieces(body.as_bytes());
    let decoder = stream::EventDecoder::new(MODEL, false);
    let mut stream =
        crate::llm::transport::decode_events(futures::stream::iter(pieces), None, decoder);
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = stream.next().await {
        match delta {
            Ok(delta) => assembler.push(delta, &mut events),
            Err(error) => {
                assert!(stream.next().await.is_none(), "nothing follows an error");
                return (Err(error), events);
            }
        }
    }
    (assembler.finish(&mut events), events)
}

/// The `item` of the `response.output_item.done` event for `item_id` in a recorded stream.
fn done_item(body: &str, item_id: &str) -> Value {
    body.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .map(|data| serde_json::from_str::<Value>(data).unwrap())
        .find(|event| {
            event["type"] == "response.output_item.done" && event["item"]["id"] == item_id
        })
        .map(|event| event["item"].clone())
        .unwrap()
}

#[tokio::test]
async fn parallel_calls_with_interleaved_arguments_and_reasoning_in_any_split() {
    let body = fixture("stream_reasoning_parallel_calls.sse");
    let reasoning = done_item(
        &body,
        "rs_0a1b2c3d4e5f6071rs8293a4b5c6d7e8f90a1b2c3d4e5f6071",
    );
    for seed in 0..40 {
        let (response, events) = decode(&body, seed).await;
        let response = response.unwrap();
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        let calls = response.tool_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].id, "call_Zr7mXq2VbN4kLp9sTa1Yc3Ud");
        assert_eq!(calls[0].function.arguments, r#"{"city":"Zürich"}"#);
        assert_eq!(calls[1].id, "call_K8pQw3ErT6yUi9Oa2Sd5Fg7H");
        assert_eq!(calls[1].function.arguments, r#"{"city":"東京"}"#);
        let artifacts = response.message.artifacts();
        assert_eq!(
            artifacts,
            &[
                Artifact::new(
                    ArtifactProvider::OpenaiResponses,
                    MODEL,
                    ArtifactPlace::Before(0),
                    reasoning.clone()
                ),
                Artifact::new(
                    ArtifactProvider::OpenaiResponses,
                    MODEL,
                    ArtifactPlace::On(1),
                    json!({"id": "fc_0a1b2c3d4e5f6071fa8293a4b5c6d7e8f90a1b2c3d4e5f6071"})
                ),
                Artifact::new(
                    ArtifactProvider::OpenaiResponses,
                    MODEL,
                    ArtifactPlace::On(2),
                    json!({"id": "fc_0a1b2c3d4e5f6071fb8293a4b5c6d7e8f90a1b2c3d4e5f6071"})
                ),
            ]
        );
        // The reasoning item is the done form, every value byte for byte.
        assert_eq!(
            serde_json::to_string(&artifacts[0].data).unwrap(),
            serde_json::to_string(&reasoning).unwrap()
        );
        // Summaries are shown, never kept as chat-completions reasoning.
        let thought: String = events
            .iter()
            .filter_map(|event| match event {
                StreamEvent::ReasoningDelta { text } => Some(text.as_str()),
                _ => None,
            })
            .collect();
        assert!(thought.contains("in 東京 — I’ll call"), "{thought}");
        assert_eq!(response.message.reasoning(), None);
        let usage = response.usage.unwrap();
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.cache_write_tokens
            ),
            (412, Some(256), Some(0))
        );
        assert_eq!(
            (usage.completion_tokens, usage.reasoning_tokens),
            (187, Some(128))
        );
        assert_eq!(
            response.id.as_deref(),
            Some("resp_0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071")
        );
        assert_eq!(response.model.as_deref(), Some("gpt-5-2025-08-07"));
    }
}

#[tokio::test]
async fn a_text_reply_keeps_its_reasoning_before_the_text_and_its_message_id_on_it() {
    let body = fixture("stream_reasoning_text.sse");
    for seed in 0..20 {
        let response = decode(&body, seed).await.0.unwrap();
        assert_eq!(
            response.text(),
            "Zürich: 22 °C, 東京: 22 °C — same temperature 🌤️."
        );
        assert_eq!(response.stop_reason, Some(FinishReason::Stop));
        let places: Vec<_> = response
            .message
            .artifacts()
            .iter()
            .map(|a| (a.place, a.data.get("type").cloned()))
            .collect();
        assert_eq!(
            places,
            [
                (ArtifactPlace::Before(0), Some(json!("reasoning"))),
                (ArtifactPlace::On(0), None)
            ]
        );
        assert_eq!(
            response.message.artifacts()[1].data,
            json!({"id": "msg_1b2c3d4e5f607182ms93a4b5c6d7e8f90a1b2c3d4e5f607182"})
        );
    }
}

#[tokio::test]
async fn a_whole_reply_gives_what_its_stream_gives() {
    for (whole, streamed) in [
        (
            "response_reasoning_calls.json",
            "stream_reasoning_parallel_calls.sse",
        ),
        ("response_reasoning_text.json", "stream_reasoning_text.sse"),
    ] {
        let parsed = response::parse_response(fixture(whole).as_bytes(), MODEL, false).unwrap();
        let decoded = decode(&fixture(streamed), 7).await.0.unwrap();
        assert_eq!(parsed, decoded, "{whole}");
    }
}

#[tokio::test]
async fn a_reply_cut_mid_call_is_a_length_stop_with_the_partial_call() {
    let (response, _) = decode(&fixture("stream_incomplete_mid_call.sse"), 3).await;
    let response = response.unwrap();
    assert_eq!(response.stop_reason, Some(FinishReason::Length));
    assert_eq!(
        response.tool_calls()[0].function.arguments,
        r#"{"city":"Reykj"#
    );
    let whole = fixture("response_incomplete_mid_call.json");
    let response = response::parse_response(whole.as_bytes(), MODEL, false).unwrap();
    assert_eq!(response.stop_reason, Some(FinishReason::Length));
    assert_eq!(
        response.tool_calls()[0].function.arguments,
        r#"{"city":"Reykj"#
    );
}

#[tokio::test]
async fn errors_inside_a_200_stream_are_typed() {
    let (result, events) = decode(&fixture("stream_error_event.sse"), 1).await;
    assert!(
        matches!(result, Err(ProviderError::Server { status: 500, .. })),
        "{result:?}"
    );
    assert!(
        events
            .iter()
            .any(|e| matches!(e, StreamEvent::AssistantTextDelta { .. }))
    );
    let (result, _) = decode(&fixture("stream_failed.sse"), 2).await;
    assert!(
        matches!(&result, Err(ProviderError::Server { status: 500, message, .. }) if message.contains("req_8f2a1c")),
        "{result:?}"
    );
    let (result, _) = decode(&fixture("stream_context_length_error.sse"), 3).await;
    assert!(
        matches!(result, Err(ProviderError::ContextLengthExceeded { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn unknown_events_fields_and_comments_are_ignored_and_a_cut_stream_fails() {
    let body = fixture("stream_reasoning_text.sse");
    let noisy = body.replacen(
        "event: response.in_progress",
        ": keep-alive\n\nevent: response.future_thing\ndata: {\"type\":\"response.future_thing\",\"sequence_number\":99,\"payload\":{\"x\":[1,2]}}\n\nevent: response.in_progress",
        1,
    );
    assert_ne!(noisy, body);
    assert_eq!(
        decode(&noisy, 5).await.0.unwrap(),
        decode(&body, 5).await.0.unwrap()
    );
    let cut = &body[..body.find("event: response.completed").unwrap()];
    let (result, _) = decode(cut, 4).await;
    assert!(
        matches!(result, Err(ProviderError::Stream(message)) if message.contains("ended before"))
    );
}

// ---------------------------------------------------------------------------------------------
// The request.

fn encode(
    messages: &[OpenaiChatMessage],
    tools: &[ToolDefinition],
    options: &RequestOptions,
    stream: bool,
    mode: request::Mode,
) -> Value {
    let request = ChatRequest {
        model: MODEL,
        messages,
        tools,
        options,
    };
    serde_json::from_slice(&request::request_body(&request, stream, mode).unwrap()).unwrap()
}

const STATELESS: request::Mode = request::Mode {
    store: false,
    previous_response_id: false,
};

fn artifact(model: &str, place: ArtifactPlace, data: Value) -> Artifact {
    Artifact::new(ArtifactProvider::OpenaiResponses, model, place, data)
}

fn reasoning(id: &str) -> Value {
    json!({"id": id, "type": "reasoning", "encrypted_content": format!("gAAA-{id}"), "summary": []})
}

#[test]
fn the_history_goes_out_as_items_with_artifacts_in_place() {
    let calls = OpenaiChatMessage::assistant_tool_calls(
        Some("Looking.".into()),
        vec![
            ToolCall::new("call_a", "get_weather", r#"{"city":"Zürich"}"#),
            ToolCall::new("call_b", "get_weather", "{}"),
        ],
    )
    .with_artifacts(vec![
        artifact(MODEL, ArtifactPlace::Before(0), reasoning("rs_1")),
        artifact(
            MODEL,
            ArtifactPlace::On(0),
            json!({"id": "msg_1", "phase": "commentary"}),
        ),
        artifact(MODEL, ArtifactPlace::On(1), json!({"id": "fc_a"})),
        artifact(MODEL, ArtifactPlace::Before(2), reasoning("rs_2")),
        artifact(MODEL, ArtifactPlace::On(2), json!({"id": "fc_b"})),
        // Another model's reasoning and another API's signature are left out.
        artifact("gpt-4.1", ArtifactPlace::Before(0), reasoning("rs_other")),
        Artifact::new(
            ArtifactProvider::Gemini,
            MODEL,
            ArtifactPlace::On(1),
            json!({"thoughtSignature": "sig"}),
        ),
    ]);
    let messages = vec![
        OpenaiChatMessage::system("Be brief."),
        OpenaiChatMessage::user_text("Weather?"),
        calls,
        OpenaiChatMessage::tool_result("call_a", "22 °C"),
        OpenaiChatMessage::tool_result("call_b", "18 °C"),
        OpenaiChatMessage::Developer {
            content: "Use Celsius.".into(),
            name: None,
        },
    ];
    let body = encode(&messages, &[], &RequestOptions::default(), false, STATELESS);
    assert_eq!(body["instructions"], "Be brief.");
    assert_eq!(body["store"], false);
    assert_eq!(body["include"], json!(["reasoning.encrypted_content"]));
    assert!(body.get("stream").is_none() && body.get("previous_response_id").is_none());
    assert_eq!(
        body["input"],
        json!([
            {"type": "message", "role": "user", "content": "Weather?"},
            reasoning("rs_1"),
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Looking.", "annotations": []}], "id": "msg_1", "phase": "commentary"},
            {"type": "function_call", "call_id": "call_a", "name": "get_weather", "arguments": "{\"city\":\"Zürich\"}", "id": "fc_a"},
            reasoning("rs_2"),
            {"type": "function_call", "call_id": "call_b", "name": "get_weather", "arguments": "{}", "id": "fc_b"},
            {"type": "function_call_output", "call_id": "call_a", "output": "22 °C"},
            {"type": "function_call_output", "call_id": "call_b", "output": "18 °C"},
            {"type": "message", "role": "developer", "content": "Use Celsius."},
        ])
    );
    // The reasoning item is sent byte for byte as kept (every value; keys in serde_json's order).
    let request = ChatRequest {
        model: MODEL,
        messages: &messages,
        tools: &[],
        options: &RequestOptions::default(),
    };
    let text =
        String::from_utf8(request::request_body(&request, false, STATELESS).unwrap()).unwrap();
    let kept = serde_json::to_string(&reasoning("rs_1")).unwrap();
    assert!(text.contains(&kept), "{kept} not in {text}");
}

#[test]
fn options_map_to_the_responses_parameters() {
    let tools = vec![ToolDefinition::function(
        "get_weather",
        "Weather",
        json!({"type": "object"}),
    )];
    let mut options = RequestOptions {
        reasoning_effort: Some(ReasoningEffort::High),
        reasoning_budget_tokens: Some(4096),
        max_tokens: Some(100),
        max_completion_tokens: Some(2000),
        tool_choice: Some(ToolChoice::Function("get_weather".into())),
        parallel_tool_calls: Some(false),
        temperature: Some(0.5),
        stop: Some(vec!["END".into()]),
        seed: Some(7),
        response_format: Some(
            json!({"type": "json_schema", "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": true}}),
        ),
        ..RequestOptions::default()
    };
    options
        .extra
        .insert("prompt_cache_key".into(), json!("session-42"));
    let messages = vec![OpenaiChatMessage::user_text("q")];
    let body = encode(&messages, &tools, &options, true, STATELESS);
    assert_eq!(body["stream"], true);
    assert_eq!(
        body["reasoning"],
        json!({"effort": "high", "summary": "auto"})
    );
    assert_eq!(body["max_output_tokens"], 2000);
    assert_eq!(
        body["tool_choice"],
        json!({"type": "function", "name": "get_weather"})
    );
    assert_eq!(body["parallel_tool_calls"], false);
    assert_eq!(
        body["text"],
        json!({"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": true}})
    );
    assert_eq!(body["prompt_cache_key"], "session-42");
    assert_eq!(
        body["tools"],
        json!([{"type": "function", "name": "get_weather", "description": "Weather", "parameters": {"type": "object"}, "strict": false}])
    );
    for absent in [
        "stop",
        "seed",
        "max_tokens",
        "reasoning_budget_tokens",
        "messages",
        "reasoning_effort",
    ] {
        assert!(body.get(absent).is_none(), "{absent} sent: {body}");
    }
    // Off asks for no reasoning (and no summary); without tools no tool options go out; an
    // extra wins over the typed field of the same name.
    options.reasoning_effort = Some(ReasoningEffort::Off);
    options.extra.insert("temperature".into(), json!(1.0));
    let body = encode(&messages, &[], &options, false, STATELESS);
    assert_eq!(body["reasoning"], json!({"effort": "none"}));
    assert!(body.get("tool_choice").is_none() && body.get("parallel_tool_calls").is_none());
    assert_eq!(body["temperature"], 1.0);
    assert_eq!(
        serde_json::to_string(&body)
            .unwrap()
            .matches("temperature")
            .count(),
        1
    );
}

#[test]
fn user_parts_map_to_input_parts() {
    use crate::vocab::{ContentPart, ImageUrl};
    let messages = vec![OpenaiChatMessage::user_parts(vec![
        ContentPart::Text {
            text: "What is this?".into(),
        },
        ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: "data:image/png;base64,iVBO".into(),
                detail: None,
            },
        },
        ContentPart::File {
            file: json!({"file_id": "file-1"}),
        },
    ])];
    let body = encode(&messages, &[], &RequestOptions::default(), false, STATELESS);
    assert_eq!(
        body["input"][0]["content"],
        json!([
            {"type": "input_text", "text": "What is this?"},
            {"type": "input_image", "image_url": "data:image/png;base64,iVBO", "detail": "auto"},
            {"type": "input_file", "file_id": "file-1"},
        ])
    );
}

#[tokio::test]
async fn previous_response_mode_sends_only_what_follows_the_last_stored_reply() {
    let mode = request::Mode {
        store: false,
        previous_response_id: true,
    };
    // The reply keeps its response id (never sent as a field).
    let parsed = response::parse_response(
        fixture("response_reasoning_calls.json").as_bytes(),
        MODEL,
        true,
    )
    .unwrap();
    let reply = parsed.message.clone();
    assert!(
        reply
            .artifacts()
            .iter()
            .any(|a| a.data.get("response_id").is_some())
    );
    let messages = vec![
        OpenaiChatMessage::system("Be brief."),
        OpenaiChatMessage::user_text("Weather?"),
        reply.clone(),
        OpenaiChatMessage::tool_result("call_Zr7mXq2VbN4kLp9sTa1Yc3Ud", "22 °C"),
        OpenaiChatMessage::tool_result("call_K8pQw3ErT6yUi9Oa2Sd5Fg7H", "18 °C"),
    ];
    let body = encode(&messages, &[], &RequestOptions::default(), false, mode);
    assert_eq!(
        body["previous_response_id"],
        "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071"
    );
    assert_eq!(body["store"], true);
    assert!(body.get("include").is_none());
    assert_eq!(body["instructions"], "Be brief.");
    let kinds: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|item| item["type"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["function_call_output", "function_call_output"]);
    // Stateless, the same history goes whole and the response id is no field of any item.
    let body = encode(&messages, &[], &RequestOptions::default(), false, STATELESS);
    assert!(
        !serde_json::to_string(&body)
            .unwrap()
            .contains("response_id")
    );
    assert_eq!(body["input"].as_array().unwrap().len(), 1 + 3 + 2);
}

#[test]
fn the_config_reads_the_environment_and_the_client_names_its_api() {
    let config = OpenAiResponsesConfig::from_lookup(|name| match name {
        "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".into()),
        "OPENAI_API_KEY" => Some("sk-env".into()),
        _ => None,
    });
    assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
    assert_eq!(config.api_key.as_deref(), Some("sk-env"));
    let client = OpenAiResponsesClient::new(config).unwrap();
    assert_eq!(
        client.url("gpt-5", false).unwrap().as_str(),
        "http://127.0.0.1:9/v1/responses"
    );
    assert_eq!(client.api(), WireApi::Responses);
    assert_eq!(client.provider(), "openai");
    assert!(OpenAiResponsesClient::new(OpenAiResponsesConfig::new("not a url")).is_err());
}
