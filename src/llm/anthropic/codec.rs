//! The Messages [`Codec`]: `POST {base_url}/messages`, `x-api-key`, `anthropic-version`.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::llm::anthropic::stream::EventDecoder;
use crate::llm::anthropic::{API_VERSION, AnthropicConfig, errors, request, response};
use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::transport::{HttpTransport, SseFraming, TransportSettings};
use crate::vocab::ChatResponse;

/// The Anthropic Messages API as a [`Codec`] (the codec of
/// [`AnthropicClient`](crate::llm::AnthropicClient)).
#[derive(Debug)]
pub struct AnthropicMessages {
    config: AnthropicConfig,
}

impl Codec for AnthropicMessages {
    type Config = AnthropicConfig;
    /// The typed-output tool whose call is the answer, if the request forced one.
    type Turn = Option<String>;
    type Decoder = EventDecoder;
    type Framing = SseFraming;

    fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        Ok(AnthropicMessages { config })
    }

    fn config(&self) -> &AnthropicConfig {
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
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &self.config.api_key {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                HttpTransport::secret_header(key)?,
            );
        }
        Ok(headers)
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    fn api(&self) -> WireApi {
        WireApi::AnthropicMessages
    }

    fn resource(&self) -> Resource {
        Resource::Fixed(&["messages"])
    }

    fn request_headers(&self, request: &ChatRequest<'_>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Some(value) = request::betas(request.options)
            .and_then(|betas| reqwest::header::HeaderValue::from_str(&betas).ok())
        {
            headers.insert("anthropic-beta", value);
        }
        headers
    }

    fn encode(
        &self,
        request: &ChatRequest<'_>,
        stream: bool,
    ) -> Result<(Vec<u8>, Option<String>), ProviderError> {
        let encoded = request::request_body(request, stream, self.config.cache)?;
        Ok((encoded.body, encoded.answer_tool))
    }

    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        answer_tool: Option<String>,
    ) -> Result<ChatResponse, ProviderError> {
        response::parse_message(body, Some(request.model.to_owned()), answer_tool)
    }

    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        answer_tool: Option<String>,
    ) -> Result<Vec<ModelDelta>, ProviderError> {
        response::message_deltas(body, Some(request.model.to_owned()), answer_tool)
    }

    fn decoder(&self, request: &ChatRequest<'_>, answer_tool: Option<String>) -> EventDecoder {
        EventDecoder::new(Some(request.model.to_owned()), answer_tool)
    }

    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        errors::status_error(status, headers, body)
    }
}
