//! The provider codec: everything a wire API adds to HTTP — where a request goes, how it is
//! encoded, how a reply (whole or streamed) is read, what a failed status means. The
//! [`HttpModel`](crate::llm::HttpModel) runs it: encode → (sign) → post → parse or frame →
//! decode, the same for every API, so a backend is its codec and nothing else.
//!
//! A backend folder names its files the same way: `request.rs` (encode), `response.rs` (a
//! whole reply), `stream.rs` (the stream decoder), `errors.rs` (status → error), and, where the
//! API has them, `usage.rs`, `schema.rs`, `dialect.rs`.

use reqwest::header::HeaderMap;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatRequest, ModelDelta, WireApi};
use crate::llm::transport::{Framer, HttpTransport, SseDecoder, TransportSettings};
use crate::vocab::ChatResponse;

/// Where a codec's requests go, below the configured base URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resource {
    /// The same path for every request (`["chat", "completions"]`): resolved once, when the
    /// model is made.
    Fixed(&'static [&'static str]),
    /// A path per request (Gemini's `models/{model}:generateContent`), from
    /// [`Codec::endpoint`].
    PerRequest,
}

/// A wire API: encode, decode, and the HTTP facts around them. Implemented once per API; the
/// generic [`HttpModel`](crate::llm::HttpModel) does the rest.
pub trait Codec: std::fmt::Debug + Send + Sync + Sized + 'static {
    /// The backend's settings (`OpenAiConfig`, `AnthropicConfig`, ...).
    type Config: Clone + std::fmt::Debug + Send + Sync + 'static;
    /// What encoding a request learned that reading its reply needs (Anthropic's typed-output
    /// tool); `()` for most APIs.
    type Turn: Send + 'static;
    /// The stream decoder of one reply.
    type Decoder: SseDecoder;
    /// How a streaming body is cut into messages ([`SseFraming`](crate::llm::transport::SseFraming)
    /// for every API today).
    type Framing: Framer;

    /// The codec of `config`.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the settings cannot work (an unusable schema dialect, ...).
    fn new(config: Self::Config) -> Result<Self, ProviderError>;

    /// The settings it was made with.
    fn config(&self) -> &Self::Config;

    /// The base URL, up to where the API's resource paths begin.
    fn base_url(&self) -> &str;

    /// Timeouts, limits, extra headers and query of the transport.
    fn transport_settings(&self) -> TransportSettings;

    /// The fixed headers of every request: the key (marked sensitive) and version headers.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the key is not a valid header value.
    fn auth_headers(&self) -> Result<HeaderMap, ProviderError>;

    /// The headers of one request besides [`Codec::auth_headers`] (Anthropic's
    /// `anthropic-beta` for the hosted tools that need one): none by default. A header the
    /// transport already sends gets these values appended, comma-separated.
    fn request_headers(&self, request: &ChatRequest<'_>) -> HeaderMap {
        let _ = request;
        HeaderMap::new()
    }

    /// The signer of every request (AWS SigV4, short-lived tokens), if the API needs one;
    /// [`HttpModel::new`](crate::llm::HttpModel::new) sets it on the transport. `None` by
    /// default: fixed [`Codec::auth_headers`] are enough.
    fn signer(&self) -> Option<std::sync::Arc<dyn crate::llm::transport::RequestSigner>> {
        None
    }

    /// The provider name reported by [`ChatModel::provider`](crate::llm::ChatModel::provider).
    fn provider(&self) -> &str;

    /// The wire API.
    fn api(&self) -> WireApi;

    /// Where requests go.
    fn resource(&self) -> Resource;

    /// The URL of one request when [`Codec::resource`] is [`Resource::PerRequest`].
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the URL cannot be formed.
    fn endpoint(
        &self,
        transport: &HttpTransport,
        model: &str,
        stream: bool,
    ) -> Result<reqwest::Url, ProviderError> {
        let _ = (model, stream);
        transport.endpoint(self.base_url(), &[])
    }

    /// The request body, written straight to bytes from the borrowed request, and what its
    /// reply's decoding needs.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the request cannot be encoded.
    fn encode(
        &self,
        request: &ChatRequest<'_>,
        stream: bool,
    ) -> Result<(Vec<u8>, Self::Turn), ProviderError>;

    /// A whole (non-streamed) reply.
    ///
    /// # Errors
    /// [`ProviderError::Decode`] for a body that is not a reply; the typed error an error body
    /// reports.
    fn parse(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        turn: Self::Turn,
    ) -> Result<ChatResponse, ProviderError>;

    /// A whole reply to a streaming request (a server or proxy that ignored streaming), as the
    /// deltas a stream would have carried.
    ///
    /// # Errors
    /// As [`Codec::parse`].
    fn reply_deltas(
        &self,
        body: &[u8],
        request: &ChatRequest<'_>,
        turn: Self::Turn,
    ) -> Result<Vec<ModelDelta>, ProviderError>;

    /// The decoder of one streamed reply.
    fn decoder(&self, request: &ChatRequest<'_>, turn: Self::Turn) -> Self::Decoder;

    /// The typed error of a non-success status (its headers and the start of its body).
    fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError;
}
