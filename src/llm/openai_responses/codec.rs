//! The Responses [`Codec`]: `POST {base_url}/responses`, `Authorization: Bearer`.

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::openai_responses::stream::EventDecoder;
use crate::llm::openai_responses::{OpenAiResponsesConfig, errors, request, response};
use crate::llm::transport::{HttpTransport, SseFraming, TransportSettings};
use crate::vocab::ChatResponse;

/// OpenAI's Responses API as a [`Codec`] (the codec of
/// [`OpenAiResponsesClient`](crate::llm::OpenAiResponsesClient)).
#[derive(Debug)]
pub struct Responses {
    config: OpenAiResponsesConfig,
}

impl Responses {
    fn mode(&self) -> request::Mode {
        request::Mode {
            store: self.config.store,
            previous_response_id: self.config.previous_response_id,
        }
    }
}

impl Codec for Responses {
    type Config = OpenAiResponsesConfig;
    type Turn = ();
    type Decoder = EventDecoder;
    type Framing = SseFraming;

    fn new(config: OpenAiResponsesConfig) -> Result<Self, ProviderError> {
        Ok(Responses { config })
    }

    fn config(&self) -> &OpenAiResponsesConfig {
        &self.config
    }

    fn base_url(&self) -> &str {
        &self.config.base_url
    }

    fn transport_settings(&self) -> TransportSettings {
        self.config.transport.clone()
    }

    fn auth_headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.config.api_key {
            headers.insert(
                AUTHORIZATION,
                HttpTransport::secret_header(&format!("Bearer {key}"))?,
            );
        }
        Ok(headers)
    }

    fn provider(&self) -> &str {
        "openai"
    }

    fn api(&self) -> WireApi {
        WireApi::Responses
    }

    fn resource(&self) -> Resource {
        Resource::Fixed(&["responses"])
    }

    fn encode(
        &self,
        request: &ChatRequest<'_>,
        stream: bool,
    ) -> Result<(Vec<u8>, ()), ProviderError> {
        Ok((request::request_body(request, stream, self.mode())?, ()))
    }

    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<ChatResponse, ProviderError> {
        response::parse_response(body, request.model, self.config.previous_response_id)
    }

    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<Vec<ModelDelta>, ProviderError> {
        response::response_deltas(body, request.model, self.config.previous_response_id)
            .map(Vec::from)
    }

    fn decoder(&self, request: &ChatRequest<'_>, (): ()) -> EventDecoder {
        EventDecoder::new(request.model, self.config.previous_response_id)
    }

    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        errors::status_error(status, headers, body)
    }
}
