//! [`GeminiClient`]: the Gemini API.
//!
//! Skeleton: the configuration and client types are final; the wire codec is being built.

use async_trait::async_trait;
use reqwest::header::HeaderMap;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelStream, WireApi};
use crate::llm::transport::{HttpTransport, TransportSettings};
use crate::vocab::ChatResponse;

/// The vendor's public API, up to where its resource paths begin.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// Connection settings of a [`GeminiClient`].
#[derive(Clone)]
pub struct GeminiConfig {
    /// Base URL up to where the resource paths begin (`https://generativelanguage.googleapis.com/v1beta`).
    pub base_url: String,
    /// The API key; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits and extra headers.
    pub transport: TransportSettings,
}

impl std::fmt::Debug for GeminiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

impl Default for GeminiConfig {
    /// The vendor's public API, no key, default transport settings.
    fn default() -> Self {
        GeminiConfig::new(DEFAULT_BASE_URL)
    }
}

impl GeminiConfig {
    /// Settings for the server at `base_url`, without a key.
    pub fn new(base_url: impl Into<String>) -> Self {
        GeminiConfig {
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
        }
    }

    /// Settings from the environment: `GEMINI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and `GEMINI_API_KEY`, then `GOOGLE_API_KEY`. Empty variables count as unset.
    pub fn from_env() -> Self {
        let var = |name: &str| std::env::var(name).ok().filter(|value| !value.is_empty());
        let config =
            GeminiConfig::new(var("GEMINI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()));
        match var("GEMINI_API_KEY").or_else(|| var("GOOGLE_API_KEY")) {
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

/// A [`ChatModel`] for the Gemini API (`:generateContent`).
#[derive(Debug, Clone)]
pub struct GeminiClient {
    config: GeminiConfig,
    #[allow(dead_code)]
    transport: HttpTransport,
}

impl GeminiClient {
    /// A client for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when a header or the TLS set-up is invalid.
    pub fn new(config: GeminiConfig) -> Result<Self, ProviderError> {
        let transport = HttpTransport::new(config.transport.clone(), HeaderMap::new())?;
        Ok(GeminiClient { config, transport })
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &GeminiConfig {
        &self.config
    }
}

#[async_trait]
impl ChatModel for GeminiClient {
    async fn chat(&self, _request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        Err(ProviderError::Other("Gemini backend: not built yet".into()))
    }

    async fn chat_stream(&self, _request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        Err(ProviderError::Other("Gemini backend: not built yet".into()))
    }

    fn provider(&self) -> &str {
        "gemini"
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
    }

    fn api(&self) -> WireApi {
        WireApi::Gemini
    }
}
