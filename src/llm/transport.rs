//! The HTTP side every backend shares: one bounded request, one bounded body, one bounded
//! stream of server-sent events — so the chat-completions, Responses, Anthropic and Gemini
//! backends differ only in their JSON.
//!
//! - [`TransportSettings`]: timeouts and size limits (today's OpenAI-client defaults).
//! - [`HttpTransport`]: sends a POST (same-origin redirects only, keys marked sensitive), maps a
//!   non-success status through the backend's own function, reads a whole body within the
//!   request limit, or turns a streaming body into a [`ModelStream`] through an [`SseDecoder`].
//! - [`RequestSigner`]: the optional signing step (SigV4, short-lived tokens) that sees each
//!   request's method, URL, headers and body bytes and adds headers.
//! - [`Framer`]: how a streaming body is cut into messages ([`SseFraming`],
//!   [`AwsEventStreamFraming`]).
//! - [`retry_after`], [`truncate`], [`error_chain`], [`send_error`]: error pieces every backend
//!   uses.

mod body;
mod echoed_secrets;
mod errors;
mod event_stream;
mod framing;
mod redirect;
mod signer;
mod sse;

use std::sync::Arc;

use std::collections::VecDeque;
use std::time::Duration;

use reqwest::Url;
use reqwest::header::{ACCEPT, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue};

use crate::llm::error::{ProviderError, ResponseLimit, TimeoutKind};
use crate::llm::model::{ModelDelta, ModelStream};

pub(crate) use body::BodyLimits;
pub use errors::{MAX_ERROR_BODY_BYTES, error_chain, retry_after, send_error, truncate};
pub use event_stream::AwsEventStreamFraming;
pub(crate) use event_stream::decode_frames;
pub use framing::{Framer, SseFraming, StreamBody};
pub use signer::{RequestSigner, SignableRequest};
pub use sse::decode_events;

/// [`TransportSettings::max_event_bytes`] by default: 16 MiB (a whole tool call's arguments may
/// arrive in one event).
pub const DEFAULT_MAX_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// [`TransportSettings::max_response_bytes`] by default: 64 MiB.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 64 * 1024 * 1024;

/// [`TransportSettings::response_deadline`] by default: 30 minutes (a slow local model writing a
/// long answer needs that long; a server that never ends does not get longer).
pub const DEFAULT_RESPONSE_DEADLINE: Duration = Duration::from_secs(30 * 60);

/// Decodes the events of one streamed reply for a backend.
pub trait SseDecoder: Send + Unpin + 'static {
    /// One server-sent event: its `event:` name, if any, and its `data:` (trimmed). Deltas go to
    /// `out`; `Ok(true)` ends the stream cleanly (nothing after it is read).
    ///
    /// # Errors
    /// The typed error the event reports (an `error` event, a failed response) or that its
    /// payload could not be decoded; it ends the stream.
    fn event(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError>;

    /// Whether a body that ends now ended a complete reply; otherwise the stream ends with
    /// [`ProviderError::Stream`] ("ended before the reply was complete").
    fn finished(&self) -> bool;
}

/// Timeouts and limits of a backend's HTTP requests.
///
/// ```
/// use std::time::Duration;
/// use agcore::llm::transport::TransportSettings;
///
/// let settings = TransportSettings::default().with_stream_idle_timeout(Duration::from_secs(60));
/// assert_eq!(settings.stream_idle_timeout, Duration::from_secs(60));
/// assert_eq!(settings.max_response_bytes, 64 * 1024 * 1024);
/// ```
#[derive(Clone)]
pub struct TransportSettings {
    /// Limit for establishing the connection.
    pub connect_timeout: Duration,
    /// Limit for a whole non-streaming request (and for the response headers of a streaming one).
    pub request_timeout: Duration,
    /// Limit for the wait for progress of a stream: an event that carries part of the reply
    /// (keep-alive comments, pings and empty events do not count).
    pub stream_idle_timeout: Duration,
    /// The time from sending a streaming request to the reply's end; nothing the server sends
    /// extends it.
    pub response_deadline: Duration,
    /// The longest server-sent event (or line of one) a stream may carry, in bytes.
    pub max_event_bytes: usize,
    /// The longest response body (streamed or not), in bytes.
    pub max_response_bytes: usize,
    /// Extra headers sent with every request; their values are kept out of logs.
    pub headers: Vec<(String, String)>,
    /// Extra query parameters of every request.
    pub query: Vec<(String, String)>,
    /// Send the request span's W3C `traceparent` (see
    /// [`OpenAiConfig::propagate_trace_context`](crate::llm::OpenAiConfig::propagate_trace_context)).
    pub propagate_trace_context: bool,
}

impl Default for TransportSettings {
    /// Connect 10 s, request 600 s, stream idle 300 s, response deadline 30 min, events up to
    /// 16 MiB, bodies up to 64 MiB, no extra headers, no trace context.
    fn default() -> Self {
        TransportSettings {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(600),
            stream_idle_timeout: Duration::from_secs(300),
            response_deadline: DEFAULT_RESPONSE_DEADLINE,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            headers: Vec::new(),
            query: Vec::new(),
            propagate_trace_context: false,
        }
    }
}

impl std::fmt::Debug for TransportSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TransportSettings")
            .field("connect_timeout", &self.connect_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("stream_idle_timeout", &self.stream_idle_timeout)
            .field("response_deadline", &self.response_deadline)
            .field("max_event_bytes", &self.max_event_bytes)
            .field("max_response_bytes", &self.max_response_bytes)
            .field(
                "headers",
                &self
                    .headers
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

impl TransportSettings {
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

    /// Set the limit for the wait for progress of a stream.
    pub fn with_stream_idle_timeout(mut self, limit: Duration) -> Self {
        self.stream_idle_timeout = limit;
        self
    }

    /// Set the time from sending a streaming request to the reply's end.
    pub fn with_response_deadline(mut self, limit: Duration) -> Self {
        self.response_deadline = limit;
        self
    }

    /// Set the longest server-sent event, in bytes.
    pub fn with_max_event_bytes(mut self, max: usize) -> Self {
        self.max_event_bytes = max;
        self
    }

    /// Set the longest response body, in bytes.
    pub fn with_max_response_bytes(mut self, max: usize) -> Self {
        self.max_response_bytes = max;
        self
    }

    /// Send an extra header with every request.
    pub fn with_header(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }
}

/// A backend's status mapping: the typed error of a non-success response (status, headers,
/// the start of its body).
pub type StatusMapper = fn(u16, &HeaderMap, &[u8]) -> ProviderError;

/// The HTTP client of one backend: connection pool, fixed headers, limits.
#[derive(Clone)]
pub struct HttpTransport {
    settings: TransportSettings,
    http: reqwest::Client,
    headers: HeaderMap,
    signer: Option<Arc<dyn RequestSigner>>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport")
            .field("settings", &self.settings)
            .field("signer", &self.signer)
            .finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// A transport sending `base_headers` (the backend's key and version headers; mark key
    /// values sensitive) and the settings' extra headers with every request, with
    /// same-origin-only redirects.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when a header or the TLS set-up is invalid.
    pub fn new(
        settings: TransportSettings,
        base_headers: HeaderMap,
    ) -> Result<Self, ProviderError> {
        let http = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .redirect(HttpTransport::redirect_policy())
            .build()
            .map_err(|error| {
                ProviderError::Other(format!(
                    "could not build the HTTP client: {}",
                    error_chain(&error)
                ))
            })?;
        HttpTransport::with_http_client(settings, base_headers, http)
    }

    /// A transport sending through `http` (build it with [`HttpTransport::redirect_policy`]).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when a header is invalid.
    pub fn with_http_client(
        settings: TransportSettings,
        mut headers: HeaderMap,
        http: reqwest::Client,
    ) -> Result<Self, ProviderError> {
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        for (name, value) in &settings.headers {
            let name = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| ProviderError::Other(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| ProviderError::Other(format!("invalid value for header {name}")))?;
            // Extra headers often carry keys (Azure's `api-key`); keep them out of logs.
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        Ok(HttpTransport {
            settings,
            http,
            headers,
            signer: None,
        })
    }

    /// A header value that is never logged (an API key).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when `value` is not a valid header value.
    pub fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
        let mut value = HeaderValue::from_str(value)
            .map_err(|_| ProviderError::Other("the API key is not a valid header value".into()))?;
        value.set_sensitive(true);
        Ok(value)
    }

    /// Redirects within the endpoint's origin (same scheme, host and port) are followed, up to
    /// 10; one to another origin is refused with [`ProviderError::CrossOriginRedirect`], so keys,
    /// headers and the conversation never go there.
    pub fn redirect_policy() -> reqwest::redirect::Policy {
        reqwest::redirect::Policy::custom(redirect::same_origin_only)
    }

    /// Sign every request with `signer` (after encoding, before sending; again on each retry).
    #[must_use]
    pub fn with_signer(mut self, signer: Arc<dyn RequestSigner>) -> Self {
        self.signer = Some(signer);
        self
    }

    /// Whether a signer is set.
    pub(crate) fn has_signer(&self) -> bool {
        self.signer.is_some()
    }

    /// The settings.
    pub fn settings(&self) -> &TransportSettings {
        &self.settings
    }

    /// `base` (up to where the API's resource paths begin) with `segments` appended and the
    /// settings' query added, keeping a query `base` carries.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when `base` is not an http(s) URL that can take a path.
    pub fn endpoint(&self, base: &str, segments: &[&str]) -> Result<Url, ProviderError> {
        let mut url = endpoint_url(base, segments)?;
        if !self.settings.query.is_empty() {
            url.query_pairs_mut().extend_pairs(&self.settings.query);
        }
        Ok(url)
    }

    /// POST `body` to `url`; a non-success status becomes `map_status`'s error (its body read
    /// only up to [`MAX_ERROR_BODY_BYTES`], within the request limit).
    ///
    /// # Errors
    /// A timeout, connection or refused-redirect error, or `map_status`'s.
    pub async fn post(
        &self,
        url: &Url,
        body: Vec<u8>,
        accept: &'static str,
        map_status: StatusMapper,
    ) -> Result<reqwest::Response, ProviderError> {
        self.post_with_headers(url, body, accept, HeaderMap::new(), map_status)
            .await
    }

    /// [`HttpTransport::post`] with headers of this request only (`extra`): a header the
    /// transport already sends gets the value appended, comma-separated (as Anthropic's
    /// `anthropic-beta` list is written).
    ///
    /// # Errors
    /// As [`HttpTransport::post`].
    pub async fn post_with_headers(
        &self,
        url: &Url,
        body: Vec<u8>,
        accept: &'static str,
        extra: HeaderMap,
        map_status: StatusMapper,
    ) -> Result<reqwest::Response, ProviderError> {
        let mut headers = self.headers.clone();
        for (name, value) in &extra {
            let joined = headers.get(name).and_then(|old| {
                let old = old.to_str().ok()?;
                let new = value.to_str().ok()?;
                HeaderValue::from_str(&format!("{old},{new}")).ok()
            });
            headers.insert(name.clone(), joined.unwrap_or_else(|| value.clone()));
        }
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        if self.settings.propagate_trace_context
            && let Some(traceparent) = crate::vocab::trace_context::current_traceparent()
            && let Ok(value) = HeaderValue::from_str(&traceparent)
        {
            headers.insert(crate::vocab::trace_context::TRACEPARENT, value);
        }
        if let Some(signer) = &self.signer {
            signer
                .sign(&mut SignableRequest {
                    method: &reqwest::Method::POST,
                    url,
                    headers: &mut headers,
                    body: &body,
                })
                .await?;
        }
        // Kept to mask them in an error body that echoes them.
        let sent_headers = headers.clone();
        let request = self.http.post(url.clone()).headers(headers).body(body);
        let limit = self.settings.request_timeout;
        // The response headers must arrive within the request limit, streaming or not.
        let response = match tokio::time::timeout(limit, request.send()).await {
            Ok(result) => result.map_err(|error| self.send_error(&error))?,
            Err(_) => return Err(request_timeout(limit)),
        };
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let headers = response.headers().clone();
        // Read for its message only, and only its start: failing or stalling leaves it empty.
        let body = tokio::time::timeout(limit, body::read_at_most(response, MAX_ERROR_BODY_BYTES))
            .await
            .ok()
            .and_then(Result::ok)
            .map(|(body, _cut)| body)
            .unwrap_or_default();
        let body = echoed_secrets::mask_echoed_secrets(&body, &sent_headers);
        Err(map_status(status.as_u16(), &headers, &body))
    }

    /// A whole (non-streamed) body, within what is left of the request limit since `started`
    /// and up to `max_response_bytes`.
    ///
    /// # Errors
    /// [`ProviderError::ResponseLimitExceeded`], a timeout or a connection error.
    pub async fn read_body(
        &self,
        response: reqwest::Response,
        started: tokio::time::Instant,
    ) -> Result<Vec<u8>, ProviderError> {
        let limit = self.settings.request_timeout;
        let max = self.settings.max_response_bytes;
        let read = body::read_at_most(response, max);
        match tokio::time::timeout(limit.saturating_sub(started.elapsed()), read).await {
            Ok(Ok((_, true))) => Err(ProviderError::ResponseLimitExceeded {
                limit: ResponseLimit::ResponseBytes(max),
            }),
            Ok(Ok((body, false))) => Ok(body),
            Ok(Err(error)) => Err(self.send_error(&error)),
            Err(_) => Err(request_timeout(limit)),
        }
    }

    /// The events of a streaming `response` (sent at `started`) as deltas, under the idle
    /// timeout, the response deadline and the size limits.
    pub fn sse(
        &self,
        response: reqwest::Response,
        started: tokio::time::Instant,
        decoder: impl SseDecoder,
    ) -> ModelStream {
        SseFraming.frame(self.stream_body(response, started), decoder)
    }

    /// A streaming `response` (sent at `started`) with the limits it is read under, for a
    /// [`Framer`].
    pub fn stream_body(
        &self,
        response: reqwest::Response,
        started: tokio::time::Instant,
    ) -> StreamBody {
        StreamBody {
            bytes: Box::pin(response.bytes_stream()),
            limits: self.body_limits(started),
        }
    }

    fn body_limits(&self, started: tokio::time::Instant) -> BodyLimits {
        let limit = self.settings.response_deadline;
        BodyLimits {
            idle: Some(self.settings.stream_idle_timeout),
            // A deadline too far to represent is no deadline.
            deadline: started.checked_add(limit).map(|at| (at, limit)),
            max_event_bytes: self.settings.max_event_bytes,
            max_body_bytes: self.settings.max_response_bytes,
        }
    }

    fn send_error(&self, error: &reqwest::Error) -> ProviderError {
        if let Some(refused) = redirect::refused(error) {
            return refused;
        }
        send_error(
            error,
            self.settings.connect_timeout,
            self.settings.request_timeout,
        )
    }
}

/// Whether `response` says it carries JSON (a server that ignored a streaming request).
pub fn is_json(response: &reqwest::Response) -> bool {
    response
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.trim_start().starts_with("application/json"))
}

fn request_timeout(limit: Duration) -> ProviderError {
    ProviderError::Timeout {
        what: TimeoutKind::Request,
        limit,
        retries: 0,
    }
}

/// `base` with `segments` appended to its path, keeping its query (Azure's `api-version`).
fn endpoint_url(base: &str, segments: &[&str]) -> Result<Url, ProviderError> {
    let invalid = |reason: &dyn std::fmt::Display| {
        ProviderError::Other(format!("invalid base URL {base:?}: {reason}"))
    };
    let mut url = Url::parse(base).map_err(|error| invalid(&error))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(invalid(&"the scheme must be http or https"));
    }
    url.path_segments_mut()
        .map_err(|()| invalid(&"it cannot be a base"))?
        .pop_if_empty()
        .extend(segments);
    Ok(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_keep_the_base_path_and_query() {
        let url =
            |base: &str, segments: &[&str]| endpoint_url(base, segments).map(|u| u.to_string());
        assert_eq!(
            url("http://127.0.0.1:8080/v1", &["chat", "completions"]).unwrap(),
            "http://127.0.0.1:8080/v1/chat/completions"
        );
        assert_eq!(
            url("https://api.anthropic.com/v1/", &["messages"]).unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            url(
                "https://x.openai.azure.com/openai/deployments/gpt-4o?api-version=2024-10-21",
                &["chat", "completions"]
            )
            .unwrap(),
            "https://x.openai.azure.com/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"
        );
        assert!(url("mailto:me@example.com", &["x"]).is_err());
        assert!(url("not a url", &["x"]).is_err());
    }
}
