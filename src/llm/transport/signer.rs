//! The signing hook: a step that sees each request as it will be sent (method, URL, headers,
//! body bytes) and adds headers to it. AWS SigV4 (Bedrock) and short-lived bearer tokens
//! (Vertex) plug in here; API keys stay fixed headers of the transport.

use async_trait::async_trait;
use reqwest::header::HeaderMap;
use reqwest::{Method, Url};

use crate::llm::error::ProviderError;

/// A request about to be sent, as a signer sees it: everything is final except the headers,
/// to which the signer adds its own (and which it may read, e.g. to sign `content-type`).
#[derive(Debug)]
pub struct SignableRequest<'a> {
    /// The HTTP method (`POST`).
    pub method: &'a Method,
    /// The full URL, query included.
    pub url: &'a Url,
    /// The headers that will be sent: the transport's fixed ones, `accept`, `content-type` and,
    /// when on, `traceparent`. Mark a secret value sensitive (`HeaderValue::set_sensitive`).
    pub headers: &'a mut HeaderMap,
    /// The body bytes, exactly as they will be sent.
    pub body: &'a [u8],
}

/// Signs each request of an [`HttpTransport`](crate::llm::HttpTransport) (see
/// [`HttpTransport::with_signer`](crate::llm::HttpTransport::with_signer)). Called once per
/// attempt, after the body is encoded and before anything is sent, so a retried request is
/// signed again (fresh timestamp, fresh credentials).
#[async_trait]
pub trait RequestSigner: std::fmt::Debug + Send + Sync + 'static {
    /// Add the signature headers to `request`.
    ///
    /// # Errors
    /// Why the request cannot be signed (no credentials, an expired token that cannot be
    /// renewed); the request is then not sent.
    async fn sign(&self, request: &mut SignableRequest<'_>) -> Result<(), ProviderError>;
}
