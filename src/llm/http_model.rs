//! [`HttpModel`]: the one [`ChatModel`] over HTTP. A [`Codec`] says what the wire API is; this
//! runs it — encode, sign (when a [`RequestSigner`] is set), post, then parse the reply or
//! frame and decode the stream — under the transport's timeouts, size limits and redirect
//! rule, the same for every API. `OpenAiClient`, `OpenAiResponsesClient`, `AnthropicClient`
//! and `GeminiClient` are this model over their codecs.

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::Url;

use crate::llm::codec::{Codec, Resource};
use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelStream, WireApi};
use crate::llm::transport::{Framer, HttpTransport, RequestSigner, is_json};
use crate::vocab::ChatResponse;

/// A [`ChatModel`] speaking the wire API of codec `C` over HTTP. Cheap to clone (the codec and
/// the connection pool are shared).
pub struct HttpModel<C: Codec> {
    codec: Arc<C>,
    transport: HttpTransport,
    /// The endpoint of a [`Resource::Fixed`] codec, resolved once.
    fixed: Option<Url>,
}

impl<C: Codec> Clone for HttpModel<C> {
    fn clone(&self) -> Self {
        HttpModel {
            codec: self.codec.clone(),
            transport: self.transport.clone(),
            fixed: self.fixed.clone(),
        }
    }
}

impl<C: Codec> std::fmt::Debug for HttpModel<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The codec's config redacts its key.
        f.debug_struct("HttpModel")
            .field("config", self.codec.config())
            .finish_non_exhaustive()
    }
}

impl<C: Codec> HttpModel<C> {
    /// A model for the server `config` describes.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, a header or the TLS set-up is invalid.
    pub fn new(config: C::Config) -> Result<Self, ProviderError> {
        let codec = C::new(config)?;
        let transport = HttpTransport::new(codec.transport_settings(), codec.auth_headers()?)?;
        HttpModel::with_codec(codec, transport)
    }

    /// A model that sends its requests through `http` (to share a connection pool or set up
    /// proxies and certificates yourself). The connect timeout and the redirect policy are then
    /// `http`'s business: build it with [`HttpModel::redirect_policy`] so keys and configured
    /// headers never follow a redirect to another origin (reqwest's default policy drops
    /// `Authorization` there but keeps custom headers such as Azure's `api-key`).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL or a header is invalid.
    pub fn with_http_client(
        config: C::Config,
        http: reqwest::Client,
    ) -> Result<Self, ProviderError> {
        let codec = C::new(config)?;
        let transport = HttpTransport::with_http_client(
            codec.transport_settings(),
            codec.auth_headers()?,
            http,
        )?;
        HttpModel::with_codec(codec, transport)
    }

    /// A model running `codec` over `transport` (with a [`RequestSigner`] already set on it,
    /// for instance).
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the codec's base URL is invalid.
    pub fn with_codec(codec: C, transport: HttpTransport) -> Result<Self, ProviderError> {
        // The codec's signer, unless the caller set one of their own.
        let transport = match codec.signer() {
            Some(signer) if !transport.has_signer() => transport.with_signer(signer),
            _ => transport,
        };
        // A bad base URL fails now rather than on the first request.
        let fixed = match codec.resource() {
            Resource::Fixed(segments) => Some(transport.endpoint(codec.base_url(), segments)?),
            Resource::PerRequest => {
                transport.endpoint(codec.base_url(), &[])?;
                None
            }
        };
        Ok(HttpModel {
            codec: Arc::new(codec),
            transport,
            fixed,
        })
    }

    /// Sign every request with `signer` (see [`RequestSigner`]).
    #[must_use]
    pub fn with_signer(mut self, signer: Arc<dyn RequestSigner>) -> Self {
        self.transport = self.transport.with_signer(signer);
        self
    }

    /// The redirect policy of [`HttpModel::new`]: redirects within the endpoint's origin (same
    /// scheme, host and port) are followed, up to 10; a redirect to another origin is refused
    /// with [`ProviderError::CrossOriginRedirect`], so the key, the configured headers and the
    /// conversation are never sent there. Refused rather than followed without them: an API
    /// endpoint has no reason to move across origins, a 307/308 would resend the whole
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
        HttpTransport::redirect_policy()
    }

    /// The settings this model was made with.
    pub fn config(&self) -> &C::Config {
        self.codec.config()
    }

    /// The codec.
    pub fn codec(&self) -> &C {
        &self.codec
    }

    /// The URL of one request.
    pub(crate) fn url(&self, model: &str, stream: bool) -> Result<Url, ProviderError> {
        match &self.fixed {
            Some(url) => Ok(url.clone()),
            None => self.codec.endpoint(&self.transport, model, stream),
        }
    }
}

#[async_trait]
impl<C: Codec> ChatModel for HttpModel<C> {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let (body, turn) = self.codec.encode(&request, false)?;
        let url = self.url(request.model, false)?;
        let headers = self.codec.request_headers(&request);
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post_with_headers(&url, body, "application/json", headers, C::status_error)
            .await?;
        let body = self.transport.read_body(response, started).await?;
        self.codec.parse(&body, &request, turn)
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let (body, turn) = self.codec.encode(&request, true)?;
        let url = self.url(request.model, true)?;
        let headers = self.codec.request_headers(&request);
        let started = tokio::time::Instant::now();
        let response = self
            .transport
            .post_with_headers(&url, body, C::Framing::ACCEPT, headers, C::status_error)
            .await?;
        if is_json(&response) {
            // The server (or a proxy) ignored streaming and sent one reply: replay it as deltas.
            let body = self.transport.read_body(response, started).await?;
            let deltas = self.codec.reply_deltas(&body, &request, turn)?;
            return Ok(Box::pin(futures::stream::iter(deltas.into_iter().map(Ok))));
        }
        let decoder = self.codec.decoder(&request, turn);
        let body = self.transport.stream_body(response, started);
        Ok(C::Framing::default().frame(body, decoder))
    }

    fn provider(&self) -> &str {
        self.codec.provider()
    }

    fn base_url(&self) -> Option<&str> {
        Some(self.codec.base_url())
    }

    fn api(&self) -> WireApi {
        self.codec.api()
    }
}
