//! The Converse [`Codec`]: `POST {endpoint}/model/{modelId}/converse` (or `converse-stream`,
//! AWS event-stream framed), SigV4-signed or with a Bedrock API key as a bearer token.

use std::sync::Arc;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::llm::bedrock::signer::SigV4Signer;
use crate::llm::bedrock::stream::EventDecoder;
use crate::llm::bedrock::{BedrockAuth, BedrockConfig, errors, request, response};
use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::transport::{
    AwsEventStreamFraming, HttpTransport, RequestSigner, TransportSettings,
};
use crate::vocab::ChatResponse;

/// Bedrock's Converse API as a [`Codec`] (the codec of
/// [`BedrockClient`](crate::llm::bedrock::BedrockClient)).
#[derive(Debug)]
pub struct BedrockConverse {
    config: BedrockConfig,
    base_url: String,
    signer: Option<Arc<SigV4Signer>>,
}

/// The answer tool of a typed-output request, and the model its artifacts are recorded for.
pub struct Turn {
    answer_tool: Option<String>,
}

impl Codec for BedrockConverse {
    type Config = BedrockConfig;
    type Turn = Turn;
    type Decoder = EventDecoder;
    type Framing = AwsEventStreamFraming;

    fn new(config: BedrockConfig) -> Result<Self, ProviderError> {
        let base_url = config.endpoint();
        let signer = match &config.auth {
            BedrockAuth::ApiKey(_) => None,
            BedrockAuth::SigV4(source) => Some(Arc::new(SigV4Signer::new(
                config.region.clone(),
                source.clone(),
            ))),
        };
        Ok(BedrockConverse {
            config,
            base_url,
            signer,
        })
    }

    fn config(&self) -> &BedrockConfig {
        &self.config
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn transport_settings(&self) -> TransportSettings {
        self.config.transport.clone()
    }

    fn auth_headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let BedrockAuth::ApiKey(key) = &self.config.auth {
            headers.insert(
                AUTHORIZATION,
                HttpTransport::secret_header(&format!("Bearer {key}"))?,
            );
        }
        Ok(headers)
    }

    fn signer(&self) -> Option<Arc<dyn RequestSigner>> {
        self.signer
            .clone()
            .map(|signer| signer as Arc<dyn RequestSigner>)
    }

    fn provider(&self) -> &str {
        "bedrock"
    }

    fn api(&self) -> WireApi {
        WireApi::BedrockConverse
    }

    fn resource(&self) -> Resource {
        Resource::PerRequest
    }

    fn endpoint(
        &self,
        transport: &HttpTransport,
        model: &str,
        stream: bool,
    ) -> Result<reqwest::Url, ProviderError> {
        // The model id (an ARN has `:` and `/`) is one path segment, percent-encoded.
        let action = if stream {
            "converse-stream"
        } else {
            "converse"
        };
        transport.endpoint(&self.base_url, &["model", model, action])
    }

    fn encode(
        &self,
        request: &ChatRequest<'_>,
        _stream: bool,
    ) -> Result<(Vec<u8>, Turn), ProviderError> {
        let cache = self.config.cache.unwrap_or_else(|| {
            request::is_anthropic(request.model) || request.model.contains("nova")
        });
        let encoded = request::request_body(request, cache)?;
        Ok((
            encoded.body,
            Turn {
                answer_tool: encoded.answer_tool,
            },
        ))
    }

    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        turn: Turn,
    ) -> Result<ChatResponse, ProviderError> {
        response::parse_reply(body, request.model, turn.answer_tool)
    }

    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        turn: Turn,
    ) -> Result<Vec<ModelDelta>, ProviderError> {
        response::reply_deltas(body, request.model, turn.answer_tool)
    }

    fn decoder(&self, request: &ChatRequest<'_>, turn: Turn) -> EventDecoder {
        EventDecoder::new(request.model, turn.answer_tool)
    }

    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        errors::status_error(status, headers, body)
    }
}
