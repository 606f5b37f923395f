//! [`OpenAiClient`]: a [`ChatModel`] for any OpenAI-compatible `/chat/completions` server
//! (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's llama-server, DeepSeek, Groq, OpenRouter, ...).
//!
//! One call makes one HTTP attempt; failures are mapped to typed [`ProviderError`]s so the caller's
//! [`crate::llm::RetryPolicy`] retries what is worth retrying (429, 5xx, 408/409, connection
//! errors, timeouts) and nothing else.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::llm::ProviderError> {
//! use agcore::llm::{ChatModel, ChatRequest, OpenAiClient, OpenAiConfig, OpenaiChatMessage};
//! use agcore::llm::types::RequestOptions;
//!
//! let client = OpenAiClient::new(OpenAiConfig::from_env())?;
//! let messages = [OpenaiChatMessage::user_text("Say hi")];
//! let options = RequestOptions::default();
//! let request = ChatRequest {
//!     model: "gpt-4o-mini",
//!     messages: &messages,
//!     tools: &[],
//!     options: &options,
//! };
//! let response = client.chat(request).await?;
//! println!("{}", response.text());
//! # Ok(()) }
//! ```

mod codec;
mod decode;
pub mod dialect;
pub(crate) mod errors;
mod origin;
mod request;
mod response;
mod stream;

use std::time::Duration;

use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::llm::error::ProviderError;
use crate::llm::http_model::HttpModel;
use crate::llm::model::WireApi;
use crate::llm::provider::{Connection, Provider};
use crate::llm::transport::{HttpTransport, TransportSettings};

pub use codec::ChatCompletions;
pub use dialect::{Dialect, StandardDialect};

pub use crate::llm::transport::{
    DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_RESPONSE_DEADLINE,
};
pub use decode::decode_stream;

/// The default base URL, OpenAI's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// OpenAI chat completions in the provider table: `openai`, `OPENAI_BASE_URL`, `OPENAI_API_KEY`.
pub const PROVIDER: Provider = Provider {
    name: "openai",
    api: WireApi::ChatCompletions,
    default_base_url: DEFAULT_BASE_URL,
    base_url_variable: "OPENAI_BASE_URL",
    key_variables: &["OPENAI_API_KEY"],
    connect: |connection| connect(connection, &StandardDialect),
};

/// An [`OpenAiClient`] in `dialect` for `connection` (how the provider table connects every
/// OpenAI-compatible entry).
///
/// # Errors
/// [`ProviderError::Other`] when the base URL, the key or a header is invalid.
pub fn connect(
    connection: Connection,
    dialect: &'static dyn Dialect,
) -> Result<std::sync::Arc<dyn crate::llm::ChatModel>, ProviderError> {
    let mut config = OpenAiConfig::new(connection.base_url)
        .with_provider(connection.provider)
        .with_transport(connection.transport)
        .with_dialect(dialect);
    config.api_key = connection.api_key;
    Ok(std::sync::Arc::new(OpenAiClient::new(config)?))
}

/// Connection settings of an [`OpenAiClient`].
///
/// ```
/// use std::time::Duration;
/// use agcore::llm::OpenAiConfig;
///
/// let config = OpenAiConfig::new("http://127.0.0.1:8080/v1")
///     .with_api_key("sk-local")
///     .with_stream_idle_timeout(Duration::from_secs(60))
///     .with_provider("llama.cpp");
/// assert!(!format!("{config:?}").contains("sk-local"));
/// ```
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
    /// Limit for a whole non-streaming request (and for the response headers of a streaming one).
    pub request_timeout: Duration,
    /// Limit for the wait for progress of a stream: an event that carries part of the reply
    /// (keep-alive comments and empty events do not count).
    pub stream_idle_timeout: Duration,
    /// The provider name reported by [`ChatModel::provider`].
    pub provider: String,
    /// Which reasoning text of earlier replies is sent back.
    pub reasoning_echo: ReasoningEcho,
    /// The longest server-sent event (or line of one) a stream may carry, in bytes.
    pub max_event_bytes: usize,
    /// The longest response body (streamed or not), in bytes.
    pub max_response_bytes: usize,
    /// The time from sending a streaming request to the reply's end; unlike
    /// `stream_idle_timeout`, nothing the server sends extends it.
    pub response_deadline: Duration,
    /// Send the `traceparent` of the request's span (W3C trace context, from the provider in
    /// [`crate::vocab::trace_context`]) with each request. Off by default: the model server is
    /// usually a third party, and a trace id tells it which requests belong to one run of
    /// yours (and, sampled or not, which were traced); turn it on for a server you operate
    /// that joins your traces.
    pub propagate_trace_context: bool,
    /// The server's quirks on the wire ([`StandardDialect`] by default).
    pub dialect: &'static dyn Dialect,
}

/// Which reasoning text of earlier replies an [`OpenAiClient`] sends back to the server.
///
/// Servers name the reasoning field differently (`reasoning_content`: DeepSeek, llama.cpp;
/// `reasoning`: OpenRouter, Groq, Cerebras, Ollama) and some reject a field they do not know
/// (Groq and Cerebras answer 400 to `reasoning_content`). Each assistant message keeps its
/// reasoning in the field it arrived in, so a server only ever gets back a field it produced.
/// Reasoning follows the artifacts' cross-model rule: it goes back only to the server (base URL)
/// and model that produced it (a same-API fallback, or a session continued with another server
/// or model, sends that history without its reasoning).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ReasoningEcho {
    /// Send reasoning back in the field it arrived in, for the current user turn and for every
    /// earlier user turn that called tools (DeepSeek's thinking mode requires those and
    /// answers 400 without them); earlier turns without tool calls are sent without it.
    #[default]
    AsReceived,
    /// Never send reasoning back (for a server that rejects even the field it produced).
    Never,
}

impl Default for OpenAiConfig {
    /// OpenAI's API, no key, connect 10 s, request 600 s, stream idle 300 s, response deadline
    /// 30 min, events up to 16 MiB, bodies up to 64 MiB, provider `"openai"`.
    fn default() -> Self {
        OpenAiConfig::new(DEFAULT_BASE_URL)
    }
}

impl OpenAiConfig {
    /// Settings for the server at `base_url` (up to and including `/v1`), with default timeouts
    /// and no API key.
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
            reasoning_echo: ReasoningEcho::AsReceived,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            response_deadline: DEFAULT_RESPONSE_DEADLINE,
            propagate_trace_context: false,
            dialect: &StandardDialect,
        }
    }

    /// Settings from the environment: `OPENAI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and
    /// `OPENAI_API_KEY` (none is fine for local servers). Empty variables count as unset.
    pub fn from_env() -> Self {
        OpenAiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let connection = PROVIDER.from_lookup(lookup);
        let mut config = OpenAiConfig::new(connection.base_url);
        config.api_key = connection.api_key;
        config
    }

    /// Take the timeouts, limits, extra headers, query and trace-context setting of `settings`.
    pub fn with_transport(mut self, settings: TransportSettings) -> Self {
        self.connect_timeout = settings.connect_timeout;
        self.request_timeout = settings.request_timeout;
        self.stream_idle_timeout = settings.stream_idle_timeout;
        self.response_deadline = settings.response_deadline;
        self.max_event_bytes = settings.max_event_bytes;
        self.max_response_bytes = settings.max_response_bytes;
        self.headers = settings.headers;
        self.query = settings.query;
        self.propagate_trace_context = settings.propagate_trace_context;
        self
    }

    /// Speak `dialect` (a server's quirks; see [`Dialect`]).
    pub fn with_dialect(mut self, dialect: &'static dyn Dialect) -> Self {
        self.dialect = dialect;
        self
    }

    /// Send `key` as `Authorization: Bearer <key>`.
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// Send an extra header with every request (e.g. Azure's `api-key`).
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// Add a query parameter to every request (e.g. Azure's `api-version`).
    pub fn with_query(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.query.push((name.into(), value.into()));
        self
    }

    /// Set the limit for establishing a connection.
    pub fn with_connect_timeout(mut self, limit: Duration) -> Self {
        self.connect_timeout = limit;
        self
    }

    /// Set the limit for a whole non-streaming request.
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.request_timeout = limit;
        self
    }

    /// Set the limit for the wait for progress of a stream (keep-alive comments and empty
    /// events do not count as progress).
    pub fn with_stream_idle_timeout(mut self, limit: Duration) -> Self {
        self.stream_idle_timeout = limit;
        self
    }

    /// Set the longest server-sent event (or line of one) a stream may carry, in bytes; a
    /// longer one ends the stream with [`ProviderError::ResponseLimitExceeded`].
    pub fn with_max_event_bytes(mut self, max: usize) -> Self {
        self.max_event_bytes = max;
        self
    }

    /// Set the longest response body (streamed or not), in bytes; a longer one ends the
    /// request with [`ProviderError::ResponseLimitExceeded`].
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// Set the time from sending a streaming request to the reply's end; a reply still going
    /// ends with [`ProviderError::ResponseLimitExceeded`]. Keep-alives do not extend it.
    pub fn with_response_deadline(mut self, limit: Duration) -> Self {
        self.response_deadline = limit;
        self
    }

    /// Set which reasoning text of earlier replies is sent back (see [`ReasoningEcho`]).
    pub fn with_reasoning_echo(mut self, echo: ReasoningEcho) -> Self {
        self.reasoning_echo = echo;
        self
    }

    /// Send (or not) the request span's `traceparent` ([`OpenAiConfig::propagate_trace_context`]).
    pub fn with_trace_context_propagation(mut self, propagate: bool) -> Self {
        self.propagate_trace_context = propagate;
        self
    }

    /// Set the provider name reported by [`ChatModel::provider`] (`"ollama"`, `"deepseek"`, ...).
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }
}

impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("provider", &self.provider)
            .field("dialect", &self.dialect)
            .finish_non_exhaustive()
    }
}

/// A client for an OpenAI-compatible `/chat/completions` endpoint: the generic
/// [`HttpModel`] over the [`ChatCompletions`] codec.
///
/// Cheap to clone (the connection pool is shared). See the [module docs](self) for an example.
pub type OpenAiClient = HttpModel<ChatCompletions>;

impl OpenAiConfig {
    /// These connection settings as the shared [`TransportSettings`].
    pub fn transport_settings(&self) -> TransportSettings {
        TransportSettings {
            connect_timeout: self.connect_timeout,
            request_timeout: self.request_timeout,
            stream_idle_timeout: self.stream_idle_timeout,
            response_deadline: self.response_deadline,
            max_event_bytes: self.max_event_bytes,
            max_response_bytes: self.max_response_bytes,
            headers: self.headers.clone(),
            query: self.query.clone(),
            propagate_trace_context: self.propagate_trace_context,
        }
    }

    pub(crate) fn base_headers(&self) -> Result<HeaderMap, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.api_key {
            headers.insert(
                AUTHORIZATION,
                HttpTransport::secret_header(&format!("Bearer {key}"))?,
            );
        }
        Ok(headers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_env_reads_the_base_url_and_key_and_ignores_empty_values() {
        let config = OpenAiConfig::from_lookup(|name| match name {
            "OPENAI_BASE_URL" => Some("http://127.0.0.1:9/v1".into()),
            "OPENAI_API_KEY" => Some("sk-env".into()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(config.api_key.as_deref(), Some("sk-env"));
        let config = OpenAiConfig::from_lookup(|_| Some(String::new()));
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
        assert_eq!(config.api_key, None);
    }

    #[test]
    fn an_invalid_base_url_is_rejected_up_front() {
        assert!(matches!(
            OpenAiClient::new(OpenAiConfig::new("not a url")),
            Err(ProviderError::Other(_))
        ));
    }
}
