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

pub(crate) mod cache;
mod codec;
mod errors;
mod request;
mod response;
mod stream;
pub mod thinking;
mod usage;
mod wire;

use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

use crate::llm::http_model::HttpModel;
use crate::llm::model::{ModelStream, WireApi};
use crate::llm::provider::Provider;
use crate::llm::transport::{self, TransportSettings};

pub use codec::AnthropicMessages;
pub use request::DEFAULT_MAX_TOKENS;

/// The default base URL, Anthropic's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.anthropic.com/v1";

/// The API version sent as `anthropic-version`.
pub const API_VERSION: &str = "2023-06-01";

/// The Messages API in the provider table: `anthropic`, `ANTHROPIC_BASE_URL`, `ANTHROPIC_API_KEY`.
pub const PROVIDER: Provider = Provider {
    name: "anthropic",
    api: WireApi::AnthropicMessages,
    default_base_url: DEFAULT_BASE_URL,
    base_url_variable: "ANTHROPIC_BASE_URL",
    key_variables: &["ANTHROPIC_API_KEY"],
    connect: |connection| {
        let mut config =
            AnthropicConfig::new(connection.base_url).with_transport(connection.transport);
        config.api_key = connection.api_key;
        Ok(std::sync::Arc::new(AnthropicClient::new(config)?))
    },
};

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
        let connection = PROVIDER.from_lookup(lookup);
        let mut config = AnthropicConfig::new(connection.base_url);
        config.api_key = connection.api_key;
        config
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

/// A client for the Anthropic Messages API: the generic [`HttpModel`] over the
/// [`AnthropicMessages`] codec. Cheap to clone (the connection pool is shared).
pub type AnthropicClient = HttpModel<AnthropicMessages>;

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
        assert_eq!(
            client.url("claude-x", true).unwrap().as_str(),
            "http://127.0.0.1:9/v1/messages"
        );
        assert!(AnthropicClient::new(AnthropicConfig::new("not a url")).is_err());
    }
}
