//! [`AnthropicClient`]: a [`ChatModel`] for the Anthropic Messages API (`POST {base_url}/messages`,
//! `x-api-key`, `anthropic-version: 2023-06-01`), streaming and not.
//!
//! What it keeps that a chat-completions endpoint loses: the `thinking` and
//! `redacted_thinking` blocks of each reply, stored byte-exact as [`crate::vocab::Artifact`]s
//! and sent back in place (before the text or call that followed them) to the same model; tool
//! results first in the next user message; the cache breakpoints of [`AnthropicConfig::cache`].
//! How each request option maps to the API is in `request.rs`; reasoning budgets in
//! [`thinking`]; usage by token kind in `usage.rs`; errors in `errors.rs` (529 `overloaded_error`,
//! in a status or an `error` event, is retried like any 5xx; 400s are not; "prompt is too long"
//! is [`ProviderError::ContextLengthExceeded`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::llm::ProviderError> {
//! use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig};
//! use agcore::llm::{ChatModel, ChatRequest, OpenaiChatMessage};
//! use agcore::llm::types::RequestOptions;
//!
//! let client = AnthropicClient::new(AnthropicConfig::from_env())?;
//! let messages = [OpenaiChatMessage::user_text("Say hi")];
//! let options = RequestOptions::default();
//! let request = ChatRequest { model: "claude-sonnet-4-5", messages: &messages, tools: &[], options: &options };
//! println!("{}", client.chat(request).await?.text());
//! # Ok(()) }
//! ```

mod cache;
mod errors;
mod request;
mod response;
mod stream;
pub mod thinking;
mod usage;

use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use futures::Stream;
use reqwest::Url;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelStream, WireApi};
use crate::llm::transport::{self, HttpTransport, TransportSettings};
use crate::vocab::ChatResponse;

pub use request::DEFAULT_MAX_TOKENS;

/// The default base URL, Anthropic's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// Connection settings of an [`AnthropicClient`].
///
/// ```
/// use agcore::llm::anthropic::AnthropicConfig;
///
/// let config = AnthropicConfig::new("http://127.0.0.1:8080/v1").with_api_key("sk-ant-local");
/// assert!(config.cache);
/// assert!(!format!("{config:?}").contains("sk-ant-local"));
/// ```
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Base URL up to and including `/v1` (`/messages` is appended).
    pub base_url: String,
    /// The API key, sent as `x-api-key`; never printed.
    pub api_key: Option<String>,
    /// Timeouts, size limits, extra headers and query.
    pub transport: TransportSettings,
    /// Mark prompt-cache breakpoints (`cache_control`): the last tool, the last system block,
    /// the end of the previous request and the newest message. On by default.
    pub cache: bool,
}

impl Default for AnthropicConfig {
    /// Anthropic's API, no key, default transport settings, caching on.
    fn default() -> Self {
        AnthropicConfig::new(DEFAULT_BASE_URL)
    }
}

impl AnthropicConfig {
    /// Settings for the server at `base_url` (up to and including `/v1`), no key.
    pub fn new(base_url: impl Into<String>) -> Self {
        AnthropicConfig {
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
            cache: true,
        }
    }

    /// Settings from the environment: `ANTHROPIC_BASE_URL` (else [`DEFAULT_BASE_URL`]) and
    /// `ANTHROPIC_API_KEY`. Empty variables count as unset.
    pub fn from_env() -> Self {
        AnthropicConfig::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let config = AnthropicConfig::new(
            var("ANTHROPIC_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()),
        );
        match var("ANTHROPIC_API_KEY") {
            Some(key) => config.with_api_key(key),
            None => config,
        }
    }

    /// Send `key` as `x-api-key`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Use these transport settings.
    pub fn with_transport(mut self, transport: TransportSettings) -> Self {
        self.transport = transport;
        self
    }

    /// Turn the prompt-cache breakpoints on or off.
    pub fn with_cache(mut self, cache: bool) -> Self {
        self.cache = cache;
        self
    }
}

impl std::fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("transport", &self.transport)
            .field("cache", &self.cache)
            .finish()
    }
}

/// A client for the Anthropic Messages API. Cheap to clone (the connection pool is shared).
#[derive(Clone, Debug)]
pub struct AnthropicClient {
    config: AnthropicConfig,
    transport: HttpTransport,
    endpoint: Url,
}

impl AnthropicClient {
    /// A client for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, the key or a header is invalid.
    pub fn new(config: AnthropicConfig) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        headers.insert(
            HeaderName::from_static("anthropic-version"),
            HeaderValue::from_static(API_VERSION),
        );
        if let Some(key) = &config.api_key {
            headers.insert(
                HeaderName::from_static("x-api-key"),
                HttpTransport::secret_header(key)?,
            );
        }
        let transport = HttpTransport::new(config.transport.clone(), headers)?;
        let endpoint = transport.endpoint(&config.base_url, &["messages"])?;
        Ok(AnthropicClient {
            config,
            transport,
            endpoint,
        })
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &AnthropicConfig {
        &self.config
    }
}

#[async_trait]
impl ChatModel for AnthropicClient {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let encoded = request::request_body(&request, false, self.config.cache)?;
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post(
                &self.endpoint,
                encoded.body,
                "application/json",
                errors::status_error,
            )
            .await?;
        let body = self.transport.read_body(response, started).await?;
        response::parse_message(&body, Some(request.model.to_owned()), encoded.answer_tool)
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let encoded = request::request_body(&request, true, self.config.cache)?;
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post(
                &self.endpoint,
                encoded.body,
                "text/event-stream",
                errors::status_error,
            )
            .await?;
        let model = Some(request.model.to_owned());
        if transport::is_json(&response) {
            // A server (or proxy) that ignored `"stream": true`: its whole reply, as deltas.
            let body = self.transport.read_body(response, started).await?;
            let deltas = response::message_deltas(&body, model, encoded.answer_tool)?;
            return Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))));
        }
        let decoder = stream::EventDecoder::new(model, encoded.answer_tool);
        Ok(self.transport.sse(response, started, decoder))
    }

    fn provider(&self) -> &str {
        "anthropic"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn api(&self) -> WireApi {
        WireApi::AnthropicMessages
    }
}

/// Decode a Messages SSE body into a [`ModelStream`], like
/// [`crate::llm::openai::decode_stream`]: any chunking, `idle_timeout` without progress ends it,
/// default size limits. Artifacts are recorded for the reply's own model.
pub fn decode_stream<S, E>(bytes: S, idle_timeout: Option<Duration>) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    transport::decode_events(bytes, idle_timeout, stream::EventDecoder::new(None, None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_env_reads_the_base_url_and_key_and_ignores_empty_values() {
        let config = AnthropicConfig::from_lookup(|name| match name {
            "ANTHROPIC_BASE_URL" => Some("http://127.0.0.1:9/v1".into()),
            "ANTHROPIC_API_KEY" => Some("sk-ant".into()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-ant"));
        let config = AnthropicConfig::from_lookup(|_| Some(String::new()));
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.api_key, None);
    }

    #[test]
    fn the_endpoint_is_base_plus_messages() {
        let client = AnthropicClient::new(AnthropicConfig::new("http://127.0.0.1:9/v1/")).unwrap();
        assert_eq!(client.endpoint.as_str(), "http://127.0.0.1:9/v1/messages");
        assert!(AnthropicClient::new(AnthropicConfig::new("not a url")).is_err());
    }
}
