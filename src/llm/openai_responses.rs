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

mod codec;
mod errors;
mod output;
mod request;
mod response;
mod stream;

use crate::llm::http_model::HttpModel;
use crate::llm::model::WireApi;
use crate::llm::provider::Provider;
use crate::llm::transport::TransportSettings;

pub use codec::Responses;
pub use stream::decode_stream;

/// The default base URL, OpenAI's public API.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The Responses API in the provider table: `openai-responses`, `OPENAI_BASE_URL`,
/// `OPENAI_API_KEY`.
pub const PROVIDER: Provider = Provider {
    name: "openai-responses",
    api: WireApi::Responses,
    default_base_url: DEFAULT_BASE_URL,
    base_url_variable: "OPENAI_BASE_URL",
    key_variables: &["OPENAI_API_KEY"],
    connect: |connection| {
        let mut config =
            OpenAiResponsesConfig::new(connection.base_url).with_transport(connection.transport);
        config.api_key = connection.api_key;
        Ok(std::sync::Arc::new(OpenAiResponsesClient::new(config)?))
    },
};

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
        let connection = PROVIDER.from_lookup(lookup);
        let mut config = OpenAiResponsesConfig::new(connection.base_url);
        config.api_key = connection.api_key;
        config
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

/// A client for OpenAI's Responses API: the generic [`HttpModel`] over the [`Responses`]
/// codec. Cheap to clone (the connection pool is shared). See the [module docs](self) for what
/// it sends and keeps.
pub type OpenAiResponsesClient = HttpModel<Responses>;

#[cfg(test)]
mod tests;
