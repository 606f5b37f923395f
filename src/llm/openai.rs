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

mod body;
mod chunk;
mod decode;
mod errors;
mod redirect;
mod request;
mod response;

use std::time::Duration;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::llm::error::{ProviderError, ResponseLimit, TimeoutKind};
use crate::llm::model::{ChatModel, ChatRequest, ModelStream};
use crate::vocab::ChatResponse;

pub use decode::decode_stream;

/// The default base URL, OpenAI's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

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
}

/// [`OpenAiConfig::max_event_bytes`] by default: 16 MiB (a whole tool call's arguments may
/// arrive in one event).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// [`OpenAiConfig::max_response_bytes`] by default: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// [`OpenAiConfig::response_deadline`] by default: 30 minutes (a slow local model writing a
/// long answer needs that long; a server that never ends does not get longer).
pub const DEFAULT_RESPONSE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// Which reasoning text of earlier replies an [`OpenAiClient`] sends back to the server.
///
/// Servers name the reasoning field differently (`reasoning_content`: DeepSeek, llama.cpp;
/// `reasoning`: OpenRouter, Groq, Cerebras, Ollama) and some reject a field they do not know
/// (Groq and Cerebras answer 400 to `reasoning_content`). Each assistant message keeps its
/// reasoning in the field it arrived in, so a server only ever gets back a field it produced.
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
        }
    }

    /// Settings from the environment: `OPENAI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and
    /// `OPENAI_API_KEY` (none is fine for local servers). Empty variables count as unset.
    pub fn from_env() -> Self {
        OpenAiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let base_url = var("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into());
        let config = OpenAiConfig::new(base_url);
        match var("OPENAI_API_KEY") {
            Some(key) => config.with_api_key(key),
            None => config,
        }
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
            .finish_non_exhaustive()
    }
}

/// A client for an OpenAI-compatible `/chat/completions` endpoint.
///
/// Cheap to clone (the connection pool is shared). See the [module docs](self) for an example.
#[derive(Clone)]
pub struct OpenAiClient {
    config: OpenAiConfig,
    http: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
}

impl std::fmt::Debug for OpenAiClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiClient")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiClient {
    /// A client for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, a header or the TLS set-up is invalid.
    pub fn new(config: OpenAiConfig) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .redirect(OpenAiClient::redirect_policy())
            .build()
            .map_err(|error| {
                ProviderError::Other(format!(
                    "could not build the HTTP client: {}",
                    errors::error_chain(&error)
                ))
            })?;
        OpenAiClient::with_http_client(config, http)
    }

    /// A client that sends its requests through `http` (to share a connection pool or set up
    /// proxies and certificates yourself). `config.connect_timeout` and the redirect policy are
    /// then `http`'s business: build it with [`OpenAiClient::redirect_policy`] so the API key and
    /// configured headers never follow a redirect to another origin (reqwest's default policy
    /// drops `Authorization` there but keeps custom headers such as Azure's `api-key`).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL or a header is invalid.
    pub fn with_http_client(
        config: OpenAiConfig,
        http: reqwest::Client,
    ) -> Result<Self, ProviderError> {
        let mut endpoint = chat_completions_url(&config.base_url)?;
        if !config.query.is_empty() {
            endpoint.query_pairs_mut().extend_pairs(&config.query);
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(key) = &config.api_key {
            let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                ProviderError::Other("the API key is not a valid header value".into())
            })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (name, value) in &config.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::Other(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| ProviderError::Other(format!("invalid value for header {name}")))?;
            // Extra headers often carry keys (Azure's `api-key`); keep them out of logs.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(OpenAiClient {
            config,
            http,
            endpoint,
            headers,
        })
    }

    /// The redirect policy of [`OpenAiClient::new`]: redirects within the endpoint's origin
    /// (same scheme, host and port) are followed, up to 10; a redirect to another origin is
    /// refused with [`ProviderError::CrossOriginRedirect`], so the API key, the configured headers
    /// and the conversation are never sent there. Refused rather than followed without them:
    /// an API endpoint has no reason to move across origins, a 307/308 would resend the whole
    /// conversation to the new host, and a key-less request there would only fail less clearly.
    ///
    /// ```
    /// use agcore::llm::{OpenAiClient, OpenAiConfig};
    ///
    /// let http = reqwest::Client::builder()
    ///     .redirect(OpenAiClient::redirect_policy())
    ///     .build()
    ///     .unwrap();
    /// let client = OpenAiClient::with_http_client(OpenAiConfig::new("http://127.0.0.1:8080/v1"), http);
    /// assert!(client.is_ok());
    /// ```
    pub fn redirect_policy() -> reqwest::redirect::Policy {
        reqwest::redirect::Policy::custom(redirect::same_origin_only)
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// Send `body`; a non-success status becomes its typed error.
    async fn send(
        &self,
        body: Vec<u8>,
        accept: &'static str,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut request = self
            .http
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(ACCEPT, accept)
            .body(body);
        if self.config.propagate_trace_context
            && let Some(traceparent) = crate::vocab::trace_context::current_traceparent()
        {
            request = request.header(crate::vocab::trace_context::TRACEPARENT, traceparent);
        }
        let send = request.send();
        // The response headers must arrive within the request limit, streaming or not.
        let response = match tokio::time::timeout(self.config.request_timeout, send).await {
            Ok(result) => result.map_err(|error| self.send_error(&error))?,
            Err(_) => {
                return Err(ProviderError::Timeout {
                    what: TimeoutKind::Request,
                    limit: self.config.request_timeout,
                    retries: 0,
                });
            }
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // The error body is read for its message only, and only its start: failing or stalling
        // leaves it empty, and a huge one is cut (the rest is never read).
        let body = tokio::time::timeout(
            self.config.request_timeout,
            body::read_at_most(response, errors::MAX_ERROR_BODY_BYTES),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .map(|(body, _cut)| body)
        .unwrap_or_default();
        Err(errors::status_error(status.as_u16(), &headers, &body))
    }

    /// Read a whole (non-streamed) body within what is left of the request limit and up to
    /// `max_response_bytes`.
    async fn read_body(
        &self,
        response: reqwest::Response,
        started: tokio::time::Instant,
    ) -> Result<Vec<u8>, ProviderError> {
        let limit = self.config.request_timeout;
        let max = self.config.max_response_bytes;
        let read = body::read_at_most(response, max);
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), read).await {
            Ok(Ok((_, true))) => Err(ProviderError::ResponseLimitExceeded {
                limit: ResponseLimit::ResponseBytes(max),
            }),
            Ok(Ok((body, false))) => Ok(body),
            Ok(Err(error)) => Err(self.send_error(&error)),
            Err(_) => Err(ProviderError::Timeout {
                what: TimeoutKind::Request,
                limit,
                retries: 0,
            }),
        }
    }

    /// The limits of a streaming body whose request was sent at `started`.
    fn body_limits(&self, started: tokio::time::Instant) -> body::BodyLimits {
        let limit = self.config.response_deadline;
        body::BodyLimits {
            idle: Some(self.config.stream_idle_timeout),
            // A deadline too far to represent is no deadline.
            deadline: started.checked_add(limit).map(|at| (at, limit)),
            max_event_bytes: self.config.max_event_bytes,
            max_body_bytes: self.config.max_response_bytes,
        }
    }

    fn send_error(&self, error: &reqwest::Error) -> ProviderError {
        if let Some(refused) = redirect::refused(error) {
            return refused;
        }
        errors::send_error(
            error,
            self.config.connect_timeout,
            self.config.request_timeout,
        )
    }
}

/// `{base_url}/chat/completions`, keeping a query the base URL may carry (Azure's `api-version`).
fn chat_completions_url(base_url: &str) -> Result<Url, ProviderError> {
    let invalid = |reason: &dyn std::fmt::Display| {
        ProviderError::Other(format!("invalid base URL {base_url:?}: {reason}"))
    };
    let mut url = Url::parse(base_url).map_err(|error| invalid(&error))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(&"the scheme must be http or https"));
    }
    url.path_segments_mut()
        .map_err(|()| invalid(&"it cannot be a base"))?
        .pop_if_empty()
        .extend(["chat", "completions"]);
    Ok(url)
}

fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

#[async_trait]
impl ChatModel for OpenAiClient {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let body = request::request_body(&request, false, self.config.reasoning_echo)?;
        let started = tokio::time::Instant::now();
        let response = self.send(body, "application/json").await?;
        let body = self.read_body(response, started).await?;
        response::parse_completion(&body)
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let body = request::request_body(&request, true, self.config.reasoning_echo)?;
        let started = tokio::time::Instant::now();
        let response = self.send(body, "text/event-stream").await?;
        if is_json(&response) {
            // The server ignored `"stream": true` and sent one JSON reply; replay it as deltas.
            let body = self.read_body(response, started).await?;
            let deltas = response::response_deltas(response::parse_completion(&body)?);
            return Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))));
        }
        Ok(decode::decode_limited(
            response.bytes_stream(),
            self.body_limits(started),
        ))
    }

    fn provider(&self) -> &str {
        &self.config.provider
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.config.base_url)
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
    fn the_endpoint_keeps_the_base_path_and_query() {
        let url = |base: &str| chat_completions_url(base).map(|url| url.to_string());
        assert_eq!(
            url("http://127.0.0.1:8080/v1").unwrap(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            url("https://api.openai.com/v1/").unwrap(),
            "https://api.openai.com/v1/chat/completions"
        );
        assert_eq!(
            url("https://x.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21")
                .unwrap(),
            "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        assert!(url("mailto:me@example.com").is_err());
    }

    #[test]
    fn an_invalid_base_url_is_rejected_up_front() {
        assert!(matches!(
            OpenAiClient::new(OpenAiConfig::new("not a url")),
            Err(ProviderError::Other(_))
        ));
    }
}
