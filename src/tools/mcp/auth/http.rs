//! [`OAuthHttpClient`]: rmcp's streamable-HTTP client with OAuth — requests carry the current
//! token; a `401` or `403 insufficient_scope` runs an authorization on its challenge and sends
//! the request again, at most [`MAX_AUTHORIZATIONS_PER_REQUEST`] times.

use std::collections::HashMap;
use std::sync::Arc;

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::ClientJsonRpcMessage;
use rmcp::transport::AuthClient;
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};

use crate::tools::mcp::auth::MAX_AUTHORIZATIONS_PER_REQUEST;
use crate::tools::mcp::auth::config::McpAuth;
use crate::tools::mcp::auth::dpop_client::DpopHttpClient;
use crate::tools::mcp::auth::session::AuthSession;

type Error = StreamableHttpError<reqwest::Error>;
type Authorized = Option<AuthClient<DpopHttpClient>>;

/// A [`StreamableHttpClient`] that authorizes on demand.
#[derive(Clone)]
pub(crate) struct OAuthHttpClient {
    http: reqwest::Client,
    session: Arc<AuthSession>,
}

impl OAuthHttpClient {
    /// A client for the MCP endpoint `url`, authorizing with `auth`, sending with `http`
    /// (before and after authorization).
    pub(crate) fn new(url: &str, auth: McpAuth, http: reqwest::Client) -> Self {
        OAuthHttpClient {
            session: Arc::new(AuthSession::new(url, auth, http.clone())),
            http,
        }
    }

    /// The server's authorization state (shared with the transport that owns this client).
    pub(crate) fn session(&self) -> Arc<AuthSession> {
        self.session.clone()
    }

    /// Run `call` with the current authorization; on an auth challenge, authorize and retry.
    async fn send<T, F, Fut>(&self, call: F) -> Result<T, Error>
    where
        F: Fn(Authorized) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut authorizations = 0;
        loop {
            let (client, generation) = self.session.current().await;
            let result = call(client).await;
            let challenge = match &result {
                Err(StreamableHttpError::AuthRequired(e)) => e.www_authenticate_header.clone(),
                Err(StreamableHttpError::InsufficientScope(e)) => e.www_authenticate_header.clone(),
                _ => return result,
            };
            if authorizations >= MAX_AUTHORIZATIONS_PER_REQUEST {
                tracing::debug!(
                    target: "agcore::mcp",
                    authorizations,
                    "authorization retry limit reached"
                );
                return result;
            }
            authorizations += 1;
            self.session
                .authorize(&challenge, generation)
                .await
                .map_err(StreamableHttpError::Auth)?;
        }
    }
}

impl StreamableHttpClient for OAuthHttpClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<StreamableHttpPostResponse, Error> {
        self.send(|client| {
            let (uri, message, session_id) = (uri.clone(), message.clone(), session_id.clone());
            let (auth_header, headers) = (auth_header.clone(), custom_headers.clone());
            let http = self.http.clone();
            async move {
                match client {
                    Some(client) => {
                        client
                            .post_message(uri, message, session_id, None, headers)
                            .await
                    }
                    None => {
                        http.post_message(uri, message, session_id, auth_header, headers)
                            .await
                    }
                }
            }
        })
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
        self.send(|client| {
            let (uri, message, session_id) = (uri.clone(), message.clone(), session_id.clone());
            let (auth_header, headers) = (auth_header.clone(), custom_headers.clone());
            let http = self.http.clone();
            async move {
                match client {
                    Some(client) => {
                        client
                            .post_message_with_response_limits(
                                uri, message, session_id, None, headers, limits,
                            )
                            .await
                    }
                    None => {
                        http.post_message_with_response_limits(
                            uri,
                            message,
                            session_id,
                            auth_header,
                            headers,
                            limits,
                        )
                        .await
                    }
                }
            }
        })
        .await
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), Error> {
        // Ending a session never starts an authorization.
        match self.session.current().await.0 {
            Some(client) => {
                client
                    .delete_session(uri, session_id, None, custom_headers)
                    .await
            }
            None => {
                self.http
                    .delete_session(uri, session_id, auth_header, custom_headers)
                    .await
            }
        }
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, Error> {
        self.send(|client| {
            let (uri, session_id, last_event_id) =
                (uri.clone(), session_id.clone(), last_event_id.clone());
            let (auth_header, headers) = (auth_header.clone(), custom_headers.clone());
            let http = self.http.clone();
            async move {
                match client {
                    Some(client) => {
                        client
                            .get_stream(uri, session_id, last_event_id, None, headers)
                            .await
                    }
                    None => {
                        http.get_stream(uri, session_id, last_event_id, auth_header, headers)
                            .await
                    }
                }
            }
        })
        .await
    }
}
