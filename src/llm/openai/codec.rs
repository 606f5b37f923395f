//! The chat-completions [`Codec`]: `POST {base_url}/chat/completions`, `Authorization: Bearer`,
//! the request encoded straight from the borrowed history in the config's [`Dialect`](super::Dialect).

use reqwest::header::HeaderMap;

use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::openai::stream::ChunkDecoder;
use crate::llm::openai::{OpenAiConfig, errors, origin, request, response};
use crate::llm::transport::{SseFraming, TransportSettings};
use crate::vocab::ChatResponse;

/// OpenAI-compatible chat completions as a [`Codec`] (the codec of
/// [`OpenAiClient`](crate::llm::OpenAiClient)).
#[derive(Debug)]
pub struct ChatCompletions {
    config: OpenAiConfig,
    /// The server as replies record it ([`origin::server_of`]).
    server: String,
}

impl Codec for ChatCompletions {
    type Config = OpenAiConfig;
    type Turn = ();
    type Decoder = ChunkDecoder;
    type Framing = SseFraming;

    fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let server = origin::server_of(&config.base_url);
        Ok(ChatCompletions { config, server })
    }

    fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    fn base_url(&self) -> &str {
        &self.config.base_url
    }

    fn transport_settings(&self) -> TransportSettings {
        self.config.transport_settings()
    }

    fn auth_headers(&self) -> Result<HeaderMap, ProviderError> {
        self.config.base_headers()
    }

    fn provider(&self) -> &str {
        &self.config.provider
    }

    fn api(&self) -> WireApi {
        WireApi::ChatCompletions
    }

    fn resource(&self) -> Resource {
        Resource::Fixed(&["chat", "completions"])
    }

    fn encode(
        &self,
        request: &ChatRequest<'_>,
        stream: bool,
    ) -> Result<(Vec<u8>, ()), ProviderError> {
        let body = request::request_body(
            request,
            stream,
            self.config.reasoning_echo,
            self.config.dialect,
            &self.server,
        )?;
        Ok((body, ()))
    }

    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<ChatResponse, ProviderError> {
        response::parse_completion(body, request.model, &self.server)
    }

    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<Vec<ModelDelta>, ProviderError> {
        Ok(response::response_deltas(response::parse_completion(
            body,
            request.model,
            &self.server,
        )?))
    }

    fn decoder(&self, request: &ChatRequest<'_>, (): ()) -> ChunkDecoder {
        ChunkDecoder::for_model(request.model, &self.server)
    }

    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        errors::status_error(status, headers, body)
    }
}
