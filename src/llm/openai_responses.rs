//! [`OpenAiResponsesClient`]: the OpenAI Responses API.
//!
//! Skeleton: the configuration and client types are final; the wire codec is being built.

use async_trait::async_trait;
use reqwest::header::HeaderMap;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelStream, WireApi};
use crate::llm::transport::{HttpTransport, TransportSettings};
use crate::vocab::ChatResponse;

/// The vendor's public API, up to where its resource paths begin.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Connection settings of a [`OpenAiResponsesClient`].
#[derive(Clone)]
pub struct OpenAiResponsesConfig {
    /// Base URL up to where the resource paths begin (`https://api.openai.com/v1`).
    pub base_url: String,
    /// The API key; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits and extra headers.
    pub transport: TransportSettings,
    /// Let OpenAI store responses (`store: true`); off by default (stateless).
    pub store: bool,
    /// Continue from the previous response id instead of sending the whole history (needs `store`).
    pub previous_response_id: bool,
}

impl std::fmt::Debug for OpenAiResponsesConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiResponsesConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Default for OpenAiResponsesConfig {
    /// The vendor's public API, no key, default transport settings.
    fn default() -> Self {
        OpenAiResponsesConfig::new(DEFAULT_BASE_URL)
    }
}

impl OpenAiResponsesConfig {
    /// Settings for the server at `base_url`, without a key.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiResponsesConfig {
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
            store: false,
            previous_response_id: false,
        }
    }

    /// Settings from the environment: `OPENAI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and `OPENAI_API_KEY`. Empty variables count as unset.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let config = OpenAiResponsesConfig::new(
            var("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()),
        );
        match var("OPENAI_API_KEY") {
            Some(key) => config.with_api_key(key),
            None => config,
        }
    }

    /// Use `key`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Use `settings` for timeouts, limits and extra headers.
    pub fn with_transport(mut self, settings: TransportSettings) -> Self {
        self.transport = settings;
        self
    }
}

/// A [`ChatModel`] for the OpenAI Responses API (`/responses`).
#[derive(Debug, Clone)]
pub struct OpenAiResponsesClient {
    config: OpenAiResponsesConfig,
    #[allow(dead_code)]
    transport: HttpTransport,
}

impl OpenAiResponsesClient {
    /// A client for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when a header or the TLS set-up is invalid.
    pub fn new(config: OpenAiResponsesConfig) -> Result<Self, ProviderError> {
        let transport = HttpTransport::new(config.transport.clone(), HeaderMap::new())?;
        Ok(OpenAiResponsesClient { config, transport })
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &OpenAiResponsesConfig {
        &self.config
    }
}

#[async_trait]
impl ChatModel for OpenAiResponsesClient {
    async fn chat(&self, _request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::Other(
            "Responses backend: not built yet".into(),
        ))
    }

    async fn chat_stream(&self, _request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        Err(ProviderError::Other(
            "Responses backend: not built yet".into(),
        ))
    }

    fn provider(&self) -> &str {
        "openai"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn api(&self) -> WireApi {
        WireApi::Responses
    }
}
