//! The provider codec's seams against fakes on 127.0.0.1: the request-signing hook and the
//! provider table.

use std::sync::Arc;

use agcore::llm::providers::{self, Connection};
use agcore::llm::{
    ChatModel, ChatRequest, OpenAiClient, OpenAiConfig, OpenaiChatMessage, ProviderError,
    RequestSigner, SignableRequest,
};
use agcore::vocab::RequestOptions;
use async_trait::async_trait;
use reqwest::header::HeaderValue;
use serde_json::{Value, json};
use wiremock::matchers::method;
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

async fn ask(model: &dyn ChatModel) -> Result<String, ProviderError> {
    let messages = [OpenaiChatMessage::user_text("Hi")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: "gpt-4o-mini",
        messages: &messages,
        tools: &[],
        options: &options,
    };
    Ok(model.chat(request).await?.text())
}

/// Signs with a digest of the method, path, query and body, which the fake recomputes.
#[derive(Debug)]
struct DigestSigner;

fn digest(method: &str, url: &reqwest::Url, body: &[u8]) -> String {
    let url = format!("{}?{}", url.path(), url.query().unwrap_or(""));
    // FNV-1a: enough to show the signer saw exactly the bytes that were sent.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in method
        .bytes()
        .chain(url.bytes())
        .chain(body.iter().copied())
    {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{hash:016x}")
}

#[async_trait]
impl RequestSigner for DigestSigner {
    async fn sign(&self, request: &mut SignableRequest<'_>) -> Result<(), ProviderError> {
        // The signer sees the headers that will be sent.
        if request
            .headers
            .get("content-type")
            .map(HeaderValue::as_bytes)
            != Some(b"application/json".as_slice())
        {
            return Err(ProviderError::Other("no content-type to sign".into()));
        }
        let signature = digest(request.method.as_str(), request.url, request.body);
        let value = HeaderValue::from_str(&signature)
            .map_err(|error| ProviderError::Other(error.to_string()))?;
        request.headers.insert("x-signature", value);
        Ok(())
    }
}

/// Refuses to sign (no credentials).
#[derive(Debug)]
struct NoCredentials;

#[async_trait]
impl RequestSigner for NoCredentials {
    async fn sign(&self, _request: &mut SignableRequest<'_>) -> Result<(), ProviderError> {
        Err(ProviderError::Other("no credentials to sign with".into()))
    }
}

struct SignatureFake;

impl Respond for SignatureFake {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let expected = digest("POST", &request.url, &request.body);
        match request.headers.get("x-signature") {
            Some(value) if value.as_bytes() == expected.as_bytes() => {
                ResponseTemplate::new(200).set_body_json(completion())
            }
            _ => ResponseTemplate::new(403).set_body_json(
                json!({"error": {"message": "the signature does not match", "type": "auth"}}),
            ),
        }
    }
}

#[tokio::test]
async fn a_signer_signs_the_bytes_that_are_sent() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(SignatureFake)
        .mount(&server)
        .await;
    let base = format!("{}/v1?api-version=2024-10-21", server.uri());
    let unsigned = OpenAiClient::new(OpenAiConfig::new(base.clone())).unwrap();
    // The fake refuses a request without a good signature...
    let refused = ask(&unsigned).await.unwrap_err();
    assert!(
        matches!(refused, ProviderError::Authentication { .. }),
        "{refused:?}"
    );
    // ...and takes the signed one.
    let signed = unsigned.clone().with_signer(Arc::new(DigestSigner));
    assert_eq!(ask(&signed).await.unwrap(), "Done.");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);

    // A signer that fails stops the request before anything is sent.
    let failing = OpenAiClient::new(OpenAiConfig::new(base))
        .unwrap()
        .with_signer(Arc::new(NoCredentials));
    let error = ask(&failing).await.unwrap_err();
    assert!(error.to_string().contains("no credentials"), "{error}");
    assert_eq!(server.received_requests().await.unwrap().len(), 2);
}

#[tokio::test]
async fn every_provider_in_the_table_connects_by_name() {
    // A cloud's region (Bedrock needs one; the others ignore it).
    let cloud = providers::CloudSettings {
        region: Some("us-east-1".into()),
        ..providers::CloudSettings::default()
    };
    for provider in providers::PROVIDERS {
        let connection = Connection::new(provider.name, "http://127.0.0.1:9/v1")
            .with_api_key("secret-key")
            .with_cloud(cloud.clone());
        assert!(!format!("{connection:?}").contains("secret-key"));
        let model = provider.connect(connection).unwrap();
        assert_eq!(model.api(), provider.api, "{}", provider.name);
        assert_eq!(model.base_url(), Some("http://127.0.0.1:9/v1"));
        let bad = Connection::new(provider.name, "not a url").with_cloud(cloud.clone());
        assert!(provider.connect(bad).is_err(), "{}", provider.name);
    }
}
