//! [`GeminiClient`]: the Gemini API (`generativelanguage.googleapis.com`), natively.
//!
//! Streaming requests go to `{base_url}/models/{model}:streamGenerateContent?alt=sse`, others to
//! `{base_url}/models/{model}:generateContent`; the key travels in `x-goog-api-key`, never in the
//! URL. What the model thought comes back byte-exact: every `thoughtSignature` is kept as an
//! [`Artifact`](crate::vocab::Artifact) of the part it arrived on and returns inside that part,
//! thought parts and signature-only parts return whole where they came (see `stream.rs` and
//! `request.rs`).
//!
//! Request options: `max_completion_tokens` (else `max_tokens`) → `maxOutputTokens`;
//! `temperature`, `top_p` → `topP`, `stop` → `stopSequences`, `seed`, `presence_penalty`,
//! `frequency_penalty`; `response_format` → `responseMimeType: application/json` (+
//! `responseJsonSchema`); `tool_choice` → `toolConfig.functionCallingConfig` (`AUTO`, `NONE`,
//! `ANY`, `ANY` + `allowedFunctionNames`); `reasoning_effort` / `reasoning_budget_tokens` →
//! `thinkingConfig` (see [`GeminiConfig`]); `extra` merged into the body (an object into the
//! object of the same name, so `{"generationConfig": {"topK": 40}}` adds to it). Not sent, as
//! Gemini has no such parameter: `parallel_tool_calls` (Gemini may always call several),
//! `user`, `stream_options`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::llm::ProviderError> {
//! use agcore::llm::{ChatModel, ChatRequest, GeminiClient, GeminiConfig, OpenaiChatMessage};
//! use agcore::llm::types::RequestOptions;
//!
//! let client = GeminiClient::new(GeminiConfig::from_env())?;
//! let messages = [OpenaiChatMessage::user_text("Say hi")];
//! let options = RequestOptions::default();
//! let request = ChatRequest { model: "gemini-2.5-flash", messages: &messages, tools: &[], options: &options };
//! println!("{}", client.chat(request).await?.text());
//! # Ok(()) }
//! ```

mod codec;
mod errors;
mod request;
mod response;
pub mod schema;
mod stream;
mod wire;

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

use crate::llm::error::ProviderError;
use crate::llm::http_model::HttpModel;
use crate::llm::model::{ModelDelta, ModelStream, WireApi};
use crate::llm::provider::Provider;
use crate::llm::transport::{SseDecoder, TransportSettings, decode_events};

pub use codec::GeminiApi;
pub use schema::{SchemaDialect, SchemaDialectError};

/// The vendor's public API, up to where its resource paths begin.
pub const DEFAULT_BASE_URL: &str = "https://generativelanguage.googleapis.com/v1beta";

/// The header that carries the API key.
const API_KEY_HEADER: &str = "x-goog-api-key";

/// The Gemini API in the provider table: `gemini`, `GEMINI_BASE_URL`, `GEMINI_API_KEY` then
/// `GOOGLE_API_KEY`.
pub const PROVIDER: Provider = Provider {
    name: "gemini",
    api: WireApi::Gemini,
    default_base_url: DEFAULT_BASE_URL,
    base_url_variable: "GEMINI_BASE_URL",
    key_variables: &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
    connect: |connection| {
        let mut config =
            GeminiConfig::new(connection.base_url).with_transport(connection.transport);
        config.api_key = connection.api_key;
        Ok(std::sync::Arc::new(GeminiClient::new(config)?))
    },
};

/// Connection settings of a [`GeminiClient`].
///
/// ```
/// use agcore::llm::GeminiConfig;
/// use agcore::llm::gemini::SchemaDialect;
///
/// let config = GeminiConfig::new("http://127.0.0.1:8080/v1beta")
///     .with_api_key("AIza-local")
///     .with_schema_dialect(SchemaDialect::OpenApi);
/// assert!(!format!("{config:?}").contains("AIza-local"));
/// ```
#[derive(Clone)]
pub struct GeminiConfig {
    /// Base URL up to where the resource paths begin (`https://generativelanguage.googleapis.com/v1beta`).
    pub base_url: String,
    /// The API key, sent as `x-goog-api-key`; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits and extra headers.
    pub transport: TransportSettings,
    /// How tool schemas are sent: `parametersJsonSchema` (the default) or `parameters` in
    /// Gemini's OpenAPI subset.
    pub schema_dialect: SchemaDialect,
}

impl std::fmt::Debug for GeminiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GeminiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("schema_dialect", &self.schema_dialect)
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
            schema_dialect: SchemaDialect::default(),
        }
    }

    /// Settings from the environment: `GEMINI_BASE_URL` (else [`DEFAULT_BASE_URL`]) and
    /// `GEMINI_API_KEY`, then `GOOGLE_API_KEY`. Empty variables count as unset.
    pub fn from_env() -> Self {
        GeminiConfig::from_lookup(|name| std::env::var(name).ok())
    }

    fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Self {
        let connection = PROVIDER.from_lookup(lookup);
        let mut config = GeminiConfig::new(connection.base_url);
        config.api_key = connection.api_key;
        config
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

    /// Send tool schemas in `dialect`.
    pub fn with_schema_dialect(mut self, dialect: SchemaDialect) -> Self {
        self.schema_dialect = dialect;
        self
    }
}

/// A [`ChatModel`](crate::llm::ChatModel) for the Gemini API (`:generateContent`, `:streamGenerateContent`):
/// the generic [`HttpModel`] over the [`GeminiApi`] codec.
///
/// Reasoning: an explicit `reasoning_budget_tokens` is sent as `thinkingConfig.thinkingBudget`.
/// A `reasoning_effort` is `thinkingLevel` on Gemini 3 models (model names starting with
/// `gemini-3`): low, medium and high as named (medium is `high` on Pro models, which have only
/// the two), off as `low` (Gemini 3 cannot turn thinking off). On earlier models it is a
/// `thinkingBudget`: off 0, low 1024, medium 8192, high 24576. `includeThoughts` is on whenever
/// thinking is, so the thought summaries stream as reasoning text.
///
/// History from another provider or model: its artifacts are left out; a `functionCall` of the
/// current turn that this model did not make (another model's, or one injected into the
/// history) gets Gemini's documented placeholder (`skip_thought_signature_validator`) on the
/// first call of each step, which Gemini 3 requires. A call this model made goes back exactly
/// as it was sent: with its signature, or without one when it came without (every call it
/// makes is recorded with an artifact, empty when the part had no other fields).
///
/// Usage: the input is `promptTokenCount` (which includes cached content) plus
/// `toolUsePromptTokenCount`, the cache reads `cachedContentTokenCount`, the output
/// `candidatesTokenCount` plus `thoughtsTokenCount` (Gemini counts thoughts apart), the
/// reasoning `thoughtsTokenCount`; Gemini reports no cache writes.
///
/// Not converted: tool names go out as they are (Gemini takes letters, digits, `_`, `.`, `:`
/// and `-`); a tool result's media goes out as its text only.
///
/// A reply ending `MALFORMED_FUNCTION_CALL` (the model's call could not be parsed) ends
/// `length` with the calls it has, or with one nameless call standing for the broken one, so
/// the run fails it as `truncated_tool_calls` and runs nothing.
pub type GeminiClient = HttpModel<GeminiApi>;

/// The Gemini stream decoder: each SSE `data:` is one whole `GenerateContentResponse`.
#[derive(Debug)]
pub struct StreamDecoder {
    decoder: stream::ResponseDecoder,
}

impl StreamDecoder {
    pub(crate) fn new(model: Option<String>) -> Self {
        StreamDecoder {
            decoder: stream::ResponseDecoder::new(model),
        }
    }
}

impl SseDecoder for StreamDecoder {
    fn event(
        &mut self,
        _event: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        if data.is_empty() {
            return Ok(false);
        }
        self.decoder.decode(data, out)?;
        Ok(false)
    }

    fn finished(&self) -> bool {
        self.decoder.finished()
    }
}

/// Decode a Gemini SSE body (`streamGenerateContent?alt=sse`) into a [`ModelStream`], under the
/// default size limits and `idle_timeout`: for replaying a recorded stream and for benchmarks.
/// Artifacts carry no model (usable by any Gemini model). The stream ends cleanly at the end of
/// the body after a `finishReason`; before one, with [`ProviderError::Stream`].
///
/// ```
/// # async fn demo() -> Result<(), agcore::llm::ProviderError> {
/// use agcore::llm::{StreamAssembler, gemini::decode_stream};
/// use futures::StreamExt;
///
/// let body = "data: {\"candidates\": [{\"content\": {\"parts\": [{\"text\": \"Hi\"}],\"role\": \"model\"},\"finishReason\": \"STOP\",\"index\": 0}]}\r\n\r\n";
/// let bytes = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(body))]);
/// let mut deltas = decode_stream(bytes, None);
/// let mut assembler = StreamAssembler::new();
/// let mut events = Vec::new();
/// while let Some(delta) = deltas.next().await {
///     assembler.push(delta?, &mut events);
/// }
/// assert_eq!(assembler.finish(&mut events)?.text(), "Hi");
/// # Ok(()) }
/// ```
pub fn decode_stream<S, E>(bytes: S, idle_timeout: Option<Duration>) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_events(bytes, idle_timeout, StreamDecoder::new(None))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_env_prefers_gemini_api_key_and_ignores_empty_values() {
        let config = GeminiConfig::from_lookup(|name| match name {
            "GEMINI_BASE_URL" => Some("http://127.0.0.1:9/v1beta".into()),
            "GEMINI_API_KEY" => Some(String::new()),
            "GOOGLE_API_KEY" => Some("AIza-google".into()),
            _ => None,
        });
        assert_eq!(config.base_url, "http://127.0.0.1:9/v1beta");
        assert_eq!(config.api_key.as_deref(), Some("AIza-google"));
        let config = GeminiConfig::from_lookup(|name| match name {
            "GEMINI_API_KEY" => Some("AIza-gemini".into()),
            "GOOGLE_API_KEY" => Some("AIza-google".into()),
            _ => None,
        });
        assert_eq!(config.api_key.as_deref(), Some("AIza-gemini"));
        assert_eq!(config.base_url, DEFAULT_BASE_URL);
    }

    #[test]
    fn endpoints_name_the_model_and_method() {
        let client = GeminiClient::new(GeminiConfig::new("http://127.0.0.1:9/v1beta/")).unwrap();
        assert_eq!(
            client
                .url("models/gemini-2.5-flash", false)
                .unwrap()
                .as_str(),
            "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:generateContent"
        );
        assert_eq!(
            client.url("gemini-2.5-flash", true).unwrap().as_str(),
            "http://127.0.0.1:9/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"
        );
        assert!(GeminiClient::new(GeminiConfig::new("not a url")).is_err());
    }
}
