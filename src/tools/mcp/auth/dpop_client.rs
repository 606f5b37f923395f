//! [`DpopHttpClient`]: the streamable-HTTP client that presents a DPoP-bound access token —
//! `Authorization: DPoP <token>` and a fresh proof (`DPoP` header, bound to the token by
//! `ath`) on every request (RFC 9449 §7). rmcp's `AuthClient` hands it the token; a plain
//! bearer token, or none, goes out as rmcp's reqwest client sends it.
//!
//! A server that wants its nonce in the proofs answers `401` with `WWW-Authenticate: DPoP
//! error="use_dpop_nonce"` and the nonce in `DPoP-Nonce` (RFC 9449 §9). rmcp's reqwest client
//! keeps only the challenge, so on that challenge this client asks the server for its nonce
//! with a `ping` (harmless if the server accepted it after all; the refused request is not
//! repeated to learn it), then sends the request once more with a proof carrying the nonce —
//! rmcp never sees the nonce challenge. The nonce is remembered per origin for later proofs.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::BoxStream;
use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::auth::AuthError;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::tools::mcp::auth::dpop_binding::{
    DPOP_HEADER, DPOP_NONCE_HEADER, DpopBinding, asks_for_nonce,
};

type Error = StreamableHttpError<reqwest::Error>;

/// How long the nonce request may take.
const NONCE_REQUEST_TIMEOUT: Duration = Duration::from_secs(10);
/// The JSON-RPC id of the nonce request (its answer is never read).
const NONCE_REQUEST_ID: &str = "agcore-dpop-nonce";

/// A [`StreamableHttpClient`] presenting DPoP-bound tokens with proofs.
#[derive(Clone)]
pub(crate) struct DpopHttpClient {
    http: reqwest::Client,
    binding: Option<Arc<DpopBinding>>,
}

impl DpopHttpClient {
    /// `http` with the DPoP state `binding` (none: a server without DPoP, bearer as always).
    pub(crate) fn new(http: reqwest::Client, binding: Option<Arc<DpopBinding>>) -> Self {
        DpopHttpClient { http, binding }
    }

    /// Run `call` (rmcp's reqwest client, given its bearer token and custom headers) with the
    /// token presented the way its type asks; on a nonce challenge, fetch the nonce and run it
    /// once more.
    async fn send<T, F, Fut>(
        &self,
        method: &str,
        uri: &str,
        session_id: Option<&str>,
        token: Option<String>,
        headers: HashMap<HeaderName, HeaderValue>,
        call: F,
    ) -> Result<T, Error>
    where
        F: Fn(Option<String>, HashMap<HeaderName, HeaderValue>) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let (Some(binding), Some(token)) = (self.binding.as_ref(), token.as_ref()) else {
            return call(token, headers).await;
        };
        if !binding.is_bound() {
            return call(Some(token.clone()), headers).await;
        }
        let mut retried = false;
        loop {
            let with_proof = dpop_headers(binding, method, uri, token, headers.clone())?;
            match call(None, with_proof).await {
                Err(StreamableHttpError::AuthRequired(challenge))
                    if !retried && asks_for_nonce(&challenge.www_authenticate_header) =>
                {
                    retried = true;
                    tracing::debug!(target: "agcore::mcp", %uri, "MCP server asked for a DPoP nonce");
                    if !self
                        .fetch_nonce(binding, uri, session_id, token, &headers)
                        .await
                    {
                        return Err(StreamableHttpError::AuthRequired(challenge));
                    }
                }
                result => return result,
            }
        }
    }

    /// Ask the server at `uri` for its current nonce with a `ping` and remember it; `false`
    /// when its answer carries none.
    async fn fetch_nonce(
        &self,
        binding: &DpopBinding,
        uri: &str,
        session_id: Option<&str>,
        token: &str,
        headers: &HashMap<HeaderName, HeaderValue>,
    ) -> bool {
        let mut request = self
            .http
            .post(uri)
            .header(ACCEPT, "application/json, text/event-stream")
            .timeout(NONCE_REQUEST_TIMEOUT)
            .json(&serde_json::json!({
                "jsonrpc": "2.0",
                "id": NONCE_REQUEST_ID,
                "method": "ping",
            }));
        for (name, value) in headers {
            // The SEP-2243 headers describe the refused request, not this one.
            let name_text = name.as_str();
            if name_text.starts_with("mcp-param-")
                || name_text == "mcp-method"
                || name_text == "mcp-name"
            {
                continue;
            }
            request = request.header(name, value);
        }
        if headers.keys().any(|name| name.as_str() == "mcp-method") {
            request = request.header("Mcp-Method", "ping");
        }
        if let Some(session_id) = session_id {
            request = request.header("Mcp-Session-Id", session_id);
        }
        let Ok(with_proof) = dpop_headers(binding, "POST", uri, token, HashMap::new()) else {
            return false;
        };
        for (name, value) in with_proof {
            request = request.header(name, value);
        }
        match request.send().await {
            // Only the header is wanted; the body is dropped unread.
            Ok(response) => response
                .headers()
                .get(DPOP_NONCE_HEADER)
                .is_some_and(|nonce| binding.remember_nonce(uri, nonce.as_bytes())),
            Err(error) => {
                tracing::debug!(target: "agcore::mcp", %uri, %error, "DPoP nonce request failed");
                false
            }
        }
    }
}

/// `headers` with `Authorization: DPoP <token>` and a fresh proof for `method` `uri`.
fn dpop_headers(
    binding: &DpopBinding,
    method: &str,
    uri: &str,
    token: &str,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> Result<HashMap<HeaderName, HeaderValue>, Error> {
    let failed = |what: String| StreamableHttpError::Auth(AuthError::InternalError(what));
    let proof = binding
        .proof(method, uri, Some(token))
        .map_err(|error| failed(error.to_string()))?;
    let authorization = HeaderValue::try_from(format!("DPoP {token}"))
        .map_err(|_| failed("the access token is not a valid header value".into()))?;
    let proof = HeaderValue::try_from(proof)
        .map_err(|_| failed("the DPoP proof is not a valid header value".into()))?;
    headers.insert(AUTHORIZATION, authorization);
    headers.insert(HeaderName::from_static(DPOP_HEADER), proof);
    Ok(headers)
}

impl StreamableHttpClient for DpopHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let session = session_id.as_deref();
        self.send(
            "POST",
            &uri,
            session,
            auth_header,
            custom_headers,
            |token, headers| {
                let (uri, message, session_id) = (uri.clone(), message.clone(), session_id.clone());
                async move {
                    self.http
                        .post_message(uri, message, session_id, token, headers)
                        .await
                }
            },
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, Error> {
        let session = session_id.as_deref();
        self.send(
            "POST",
            &uri,
            session,
            auth_header,
            custom_headers,
            |token, headers| {
                let (uri, message, session_id) = (uri.clone(), message.clone(), session_id.clone());
                async move {
                    self.http
                        .post_message_with_response_limits(
                            uri, message, session_id, token, headers, limits,
                        )
                        .await
                }
            },
        )
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        let session = Some(&*session_id);
        self.send(
            "DELETE",
            &uri,
            session,
            auth_header,
            custom_headers,
            |token, headers| {
                let (uri, session_id) = (uri.clone(), session_id.clone());
                async move {
                    self.http
                        .delete_session(uri, session_id, token, headers)
                        .await
                }
            },
        )
        .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, Error> {
        let session = session_id.as_deref();
        self.send(
            "GET",
            &uri,
            session,
            auth_header,
            custom_headers,
            |token, headers| {
                let (uri, session_id, last_event_id) =
                    (uri.clone(), session_id.clone(), last_event_id.clone());
                async move {
                    self.http
                        .get_stream(uri, session_id, last_event_id, token, headers)
                        .await
                }
            },
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, Error> {
        let session = session_id.as_deref();
        self.send(
            "GET",
            &uri,
            session,
            auth_header,
            custom_headers,
            |token, headers| {
                let (uri, session_id, last_event_id) =
                    (uri.clone(), session_id.clone(), last_event_id.clone());
                async move {
                    self.http
                        .get_stream_with_max_sse_event_size(
                            uri,
                            session_id,
                            last_event_id,
                            token,
                            headers,
                            max_sse_event_size,
                        )
                        .await
                }
            },
        )
        .await
    }
}
