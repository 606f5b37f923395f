//! [`OpenAiResponsesClient`]: a [`ChatModel`] for OpenAI's Responses API
//! (`POST {base_url}/responses`, `Authorization: Bearer`).
//!
//! **Stateless by default.** Every request sends `store: false`,
//! `include: ["reasoning.encrypted_content"]` and the whole history in `input`; nothing of the
//! conversation is kept on OpenAI's side. What a reasoning model needs to continue comes back
//! in the reply and is kept in the history as [`Artifact`](crate::vocab::Artifact)s tagged
//! `openai_responses` and the request's model:
//!
//! | artifact | place | sent back |
//! | --- | --- | --- |
//! | a `reasoning` item, whole and verbatim (`id`, `summary`, `encrypted_content`) | `Before(next element)` | immediately before the item that followed it |
//! | `{"id": "fc_…"}` of a `function_call` item | `On(call)` | merged into that call's `function_call` item |
//! | `{"id": "msg_…", "phase"?}` of the reply's one `message` item | `On(0)` | merged into the text's `message` item |
//!
//! A tool call's id in the run is the item's `call_id` (not its `id`). A history sent to
//! another model or API leaves these out (they stay in the history): the API then gets plain
//! messages and calls without item ids, which it accepts without reasoning items.
//!
//! **Previous-response mode** ([`OpenAiResponsesConfig::previous_response_id`]): each reply's
//! response id is kept as one more artifact, `On(0)` `{"response_id": "resp_…"}` (never sent as
//! a field); a request then sends `previous_response_id` with only the messages after the last
//! assistant reply that has one, and `store: true` (a response that is not stored cannot be
//! continued). With no such reply (the first turn, another model) the whole history goes.
//!
//! Settings: see the request encoder (`reasoning_effort` → `reasoning.effort` with
//! `summary: "auto"`, `Off` → `effort: "none"`; max output tokens → `max_output_tokens`;
//! `response_format` → `text.format`; `tool_choice`, `parallel_tool_calls`, `temperature`,
//! `top_p`, `user`, `extra` such as `prompt_cache_key`). Not sent (no such parameter): `stop`,
//! `seed`, the penalties, `reasoning_budget_tokens`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::llm::ProviderError> {
//! use agcore::llm::openai_responses::{OpenAiResponsesClient, OpenAiResponsesConfig};
//! use agcore::llm::{ChatModel, ChatRequest, OpenaiChatMessage};
//! use agcore::llm::types::RequestOptions;
//!
//! let client = OpenAiResponsesClient::new(OpenAiResponsesConfig::from_env())?;
//! let messages = [OpenaiChatMessage::user_text("Say hi")];
//! let options = RequestOptions::default();
//! let request = ChatRequest { model: "gpt-5", messages: &messages, tools: &[], options: &options };
//! println!("{}", client.chat(request).await?.text());
//! # Ok(()) }
//! ```

mod errors;
mod events;
mod output;
mod reply;
mod request;

use async_trait::async_trait;
use reqwest::Url;
use reqwest::header::{AUTHORIZATION, HeaderMap};

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelStream, WireApi};
use crate::llm::transport::{HttpTransport, TransportSettings, is_json};
use crate::vocab::ChatResponse;

pub use events::decode_stream;

/// The default base URL, OpenAI's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// Connection settings of an [`OpenAiResponsesClient`].
///
/// ```
/// use agcore::llm::openai_responses::OpenAiResponsesConfig;
///
/// let config = OpenAiResponsesConfig::new("http://127.0.0.1:8080/v1").with_api_key("sk-local");
/// assert!(!config.store && !config.previous_response_id);
/// assert!(!format!("{config:?}").contains("sk-local"));
/// ```
#[derive(Clone)]
pub struct OpenAiResponsesConfig {
    /// Base URL up to and including `/v1` (`/responses` is appended).
    pub base_url: String,
    /// The API key, sent as `Authorization: Bearer`; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits, extra headers and query parameters.
    pub transport: TransportSettings,
    /// Let OpenAI store the responses (`store: true`). Off by default: the history travels
    /// whole with each request, reasoning as encrypted content.
    pub store: bool,
    /// Continue from the last reply with `previous_response_id` instead of resending the
    /// history (needs stored responses: `store` is sent as true). Off by default.
    pub previous_response_id: bool,
}

impl Default for OpenAiResponsesConfig {
    /// OpenAI's API, no key, today's transport defaults, stateless.
    fn default() -> Self {
        OpenAiResponsesConfig::new(DEFAULT_BASE_URL)
    }
}

impl OpenAiResponsesConfig {
    /// Settings for the server at `base_url` (up to and including `/v1`), without a key.
    pub fn new(base_url: impl Into<String>) -> Self {
        OpenAiResponsesConfig {
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
            store: false,
            previous_response_id: false,
        }
    }

    /// Settings from the environment: `OPENAI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and
    /// `OPENAI_API_KEY`. Empty variables count as unset.
    pub fn from_env() -> Self {
        OpenAiResponsesConfig::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        let config = OpenAiResponsesConfig::new(
            var("OPENAI_BASE_URL").unwrap_or_else(|| DEFAULT_BASE_URL.into()),
        );
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

    /// Set the timeouts, limits, extra headers and query parameters.
    pub fn with_transport(mut self, transport: TransportSettings) -> Self {
        self.transport = transport;
        self
    }

    /// Let OpenAI store the responses ([`OpenAiResponsesConfig::store`]).
    pub fn with_store(mut self, store: bool) -> Self {
        self.store = store;
        self
    }

    /// Continue with `previous_response_id` ([`OpenAiResponsesConfig::previous_response_id`]).
    pub fn with_previous_response_id(mut self, on: bool) -> Self {
        self.previous_response_id = on;
        self
    }
}

impl std::fmt::Debug for OpenAiResponsesConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiResponsesConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("transport", &self.transport)
            .field("store", &self.store)
            .field("previous_response_id", &self.previous_response_id)
            .finish()
    }
}

/// A client for OpenAI's Responses API. Cheap to clone (the connection pool is shared). See
/// the [module docs](self) for what it sends and keeps.
#[derive(Clone, Debug)]
pub struct OpenAiResponsesClient {
    config: OpenAiResponsesConfig,
    transport: HttpTransport,
    endpoint: Url,
}

impl OpenAiResponsesClient {
    /// A client for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, a header or the TLS set-up is invalid.
    pub fn new(config: OpenAiResponsesConfig) -> Result<Self, ProviderError> {
        let mut headers = HeaderMap::new();
        if let Some(key) = &config.api_key {
            headers.insert(
                AUTHORIZATION,
                HttpTransport::secret_header(&format!("Bearer {key}"))?,
            );
        }
        let transport = HttpTransport::new(config.transport.clone(), headers)?;
        let endpoint = transport.endpoint(&config.base_url, &["responses"])?;
        Ok(OpenAiResponsesClient {
            config,
            transport,
            endpoint,
        })
    }

    /// The settings this client was made with.
    pub fn config(&self) -> &OpenAiResponsesConfig {
        &self.config
    }

    fn mode(&self) -> request::Mode {
        request::Mode {
            store: self.config.store,
            previous_response_id: self.config.previous_response_id,
        }
    }
}

#[async_trait]
impl ChatModel for OpenAiResponsesClient {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let body = request::request_body(&request, false, self.mode())?;
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post(&self.endpoint, body, "application/json", errors::status_error)
            .await?;
        let body = self.transport.read_body(response, started).await?;
        reply::parse_response(&body, request.model, self.config.previous_response_id)
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let body = request::request_body(&request, true, self.mode())?;
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post(&self.endpoint, body, "text/event-stream", errors::status_error)
            .await?;
        let keep_response_id = self.config.previous_response_id;
        if is_json(&response) {
            // A server that ignored `stream: true` sent one `Response`; replay it as deltas.
            let body = self.transport.read_body(response, started).await?;
            let deltas = reply::response_deltas(&body, request.model, keep_response_id)?;
            return Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))));
        }
        Ok(self.transport.sse(
            response,
            started,
            events::EventDecoder::new(request.model, keep_response_id),
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

#[cfg(test)]
mod tests;
