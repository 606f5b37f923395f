//! The Gemini [`Codec`]: `POST {base_url}/models/{model}:generateContent` (streaming:
//! `:streamGenerateContent?alt=sse`), the key in `x-goog-api-key`, never in the URL.

use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName};

use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::gemini::{API_KEY_HEADER, GeminiConfig, StreamDecoder, errors, request, response};
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::transport::{HttpTransport, SseFraming, TransportSettings};
use crate::vocab::ChatResponse;

/// The Gemini API as a [`Codec`] (the codec of [`GeminiClient`](crate::llm::GeminiClient)).
#[derive(Debug)]
pub struct GeminiApi {
    config: GeminiConfig,
}

impl Codec for GeminiApi {
    type Config = GeminiConfig;
    type Turn = ();
    type Decoder = StreamDecoder;
    type Framing = SseFraming;

    fn new(config: GeminiConfig) -> Result<Self, ProviderError> {
        Ok(GeminiApi { config })
    }

    fn config(&self) -> &GeminiConfig {
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
                HeaderName::from_static(API_KEY_HEADER),
                HttpTransport::secret_header(key)?,
            );
        }
        Ok(headers)
    }

    fn provider(&self) -> &str {
        "gemini"
    }

    fn api(&self) -> WireApi {
        WireApi::Gemini
    }

    fn resource(&self) -> Resource {
        Resource::PerRequest
    }

    /// `{base_url}/models/{model}:{method}`.
    fn endpoint(
        &self,
        transport: &HttpTransport,
        model: &str,
        stream: bool,
    ) -> Result<Url, ProviderError> {
        let method = if stream {
            "streamGenerateContent"
        } else {
            "generateContent"
        };
        let resource = format!("{}:{method}", request::model_name(model));
        let mut url = transport.endpoint(&self.config.base_url, &["models", &resource])?;
        if stream {
            url.query_pairs_mut().append_pair("alt", "sse");
        }
        Ok(url)
    }

    fn encode(
        &self,
        request: &ChatRequest<'_>,
        _stream: bool,
    ) -> Result<(Vec<u8>, ()), ProviderError> {
        Ok((
            request::request_body(request, self.config.schema_dialect)?,
            (),
        ))
    }

    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<ChatResponse, ProviderError> {
        response::parse_reply(body, request.model)
    }

    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        (): (),
    ) -> Result<Vec<ModelDelta>, ProviderError> {
        // A proxy that answered with one JSON body (or Gemini's JSON-array stream).
        response::reply_deltas(body, request.model)
    }

    fn decoder(&self, request: &ChatRequest<'_>, (): ()) -> StreamDecoder {
        StreamDecoder::new(Some(request::model_name(request.model).to_owned()))
    }

    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
        errors::status_error(status, headers, body)
    }
}
