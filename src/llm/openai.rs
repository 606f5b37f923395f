//! [`OpenAiClient`]: a [`crate::llm::ChatModel`] for any OpenAI-compatible server (stub; see issue 2).

use std::time::Duration;

/// Connection settings of an [`OpenAiClient`].
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Base URL up to and including `/v1` (e.g. `https://api.openai.com/v1`, `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer`; never printed.
    pub api_key: Option<String>,
    /// Extra headers sent with every request (e.g. `api-key` for Azure, `HTTP-Referer` for OpenRouter).
    pub headers: Vec<(String, String)>,
    /// Extra query parameters (e.g. Azure's `api-version`).
    pub query: Vec<(String, String)>,
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Limit for a whole non-streaming request.
    pub request_timeout: Duration,
    /// Limit for the wait between two chunks of a stream.
    pub stream_idle_timeout: Duration,
    /// The provider name reported by [`crate::llm::ChatModel::provider`].
    pub provider: String,
}

/// A client for an OpenAI-compatible `/chat/completions` endpoint.
#[derive(Debug, Clone)]
pub struct OpenAiClient {
    _config: OpenAiConfig,
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .finish_non_exhaustive()
    }
}

// Temporary stubs until the OpenAI client lands.
impl OpenAiConfig {
    /// A configuration for `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            api_key: None,
            headers: Vec::new(),
            query: Vec::new(),
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            stream_idle_timeout: Duration::from_secs(300),
            provider: "openai".to_owned(),
        }
    }

    /// Set the API key.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }
}

impl OpenAiClient {
    /// A client.
    pub fn new(config: OpenAiConfig) -> Result<Self, crate::llm::LlmError> {
        Ok(OpenAiClient { _config: config })
    }
}

#[async_trait::async_trait]
impl crate::llm::ChatModel for OpenAiClient {
    async fn chat(
        &self,
        _request: crate::llm::ChatRequest<'_>,
    ) -> Result<crate::llm::ChatResponse, crate::llm::LlmError> {
        Err(crate::llm::LlmError::Other("not yet".into()))
    }
    async fn chat_stream(
        &self,
        _request: crate::llm::ChatRequest<'_>,
    ) -> Result<crate::llm::ModelStream, crate::llm::LlmError> {
        Err(crate::llm::LlmError::Other("not yet".into()))
    }
}
