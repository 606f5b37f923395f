//! A fifth provider through the dialect seam: Mistral, an OpenAI-compatible server with its
//! own names, reached by its name in the provider table alone, against a fake on 127.0.0.1
//! that rejects what Mistral rejects.

use agcore::llm::providers;
use agcore::llm::{
    ChatModel, ChatRequest, OpenAiClient, OpenAiConfig, OpenaiChatMessage, ProviderError,
    ToolDefinition,
};
use agcore::vocab::{RequestOptions, ToolChoice};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn completion() -> Value {
    json!({
        "id": "cmpl-1", "object": "chat.completion", "created": 1732964000,
        "model": "mistral-small-latest",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Done."},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7}
    })
}

/// What Mistral's chat completions reject (it forbids unknown fields, with a 422): a
/// `tool_choice` outside `auto` / `none` / `any` / an object, `seed` (its name is
/// `random_seed`) and `max_completion_tokens` (its name is `max_tokens`).
fn check_mistral(body: &Value) -> Result<(), String> {
    match body.get("tool_choice") {
        None | Some(Value::Object(_)) => {}
        Some(Value::String(choice)) if ["auto", "none", "any"].contains(&choice.as_str()) => {}
        Some(other) => return Err(format!("tool_choice {other} is not one of auto, none, any")),
    }
    for field in ["seed", "max_completion_tokens"] {
        if body.get(field).is_some() {
            return Err(format!("extra inputs are not permitted: {field}"));
        }
    }
    Ok(())
}

struct MistralFake;

impl Respond for MistralFake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        match check_mistral(&body) {
            Ok(()) => ResponseTemplate::new(200).set_body_json(completion()),
            Err(message) => ResponseTemplate::new(422).set_body_json(
                json!({"object": "error", "message": message, "type": "invalid_request_error"}),
            ),
        }
    }
}

async fn mistral_fake() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(MistralFake)
        .mount(&server)
        .await;
    server
}

fn forcing_options() -> RequestOptions {
    RequestOptions {
        tool_choice: Some(ToolChoice::Required),
        seed: Some(7),
        max_completion_tokens: Some(100),
        ..RequestOptions::default()
    }
}

fn weather() -> ToolDefinition {
    ToolDefinition::function(
        "get_weather",
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}}}),
    )
}

async fn ask(model: &dyn ChatModel) -> Result<String, ProviderError> {
    let messages = [OpenaiChatMessage::user_text("Weather in Paris?")];
    let tools = [weather()];
    let options = forcing_options();
    let request = ChatRequest {
        model: "mistral-small-latest",
        messages: &messages,
        tools: &tools,
        options: &options,
    };
    Ok(model.chat(request).await?.text())
}

#[tokio::test]
async fn mistral_is_reached_by_name_and_speaks_its_dialect() {
    let server = mistral_fake().await;
    let mistral = providers::named("mistral").expect("mistral is in the provider table");
    assert_eq!(mistral.key_variables, ["MISTRAL_API_KEY"]);
    assert_eq!(mistral.default_base_url, "https://api.mistral.ai/v1");
    let connection = mistral.from_lookup(|name| match name {
        "MISTRAL_BASE_URL" => Some(format!("{}/v1", server.uri())),
        "MISTRAL_API_KEY" => Some("mistral-key".into()),
        _ => None,
    });
    let model = mistral.connect(connection).unwrap();
    assert_eq!(model.provider(), "mistral");
    assert_eq!(ask(&*model).await.unwrap(), "Done.");

    let received = server.received_requests().await.unwrap();
    assert_eq!(received.len(), 1);
    assert_eq!(
        received[0].headers.get("authorization").unwrap(),
        "Bearer mistral-key"
    );
    let body: Value = serde_json::from_slice(&received[0].body).unwrap();
    assert_eq!(body["tool_choice"], "any");
    assert_eq!(body["random_seed"], 7);
    assert_eq!(body["max_tokens"], 100);
    assert!(body.get("seed").is_none() && body.get("max_completion_tokens").is_none());
    assert_eq!(body["tools"][0]["function"]["name"], "get_weather");
}

#[tokio::test]
async fn the_mistral_fake_rejects_openai_names() {
    let server = mistral_fake().await;
    let openai = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let error = ask(&openai).await.unwrap_err();
    assert!(
        error.to_string().contains("tool_choice"),
        "the standard dialect's `required` is refused: {error}"
    );
}
