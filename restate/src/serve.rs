//! Serving the endpoint: HTTP/2 cleartext on a TCP listener, until a shutdown signal.
//!
//! Who may call it is [`Access`]: requests signed by Restate (its request identity keys,
//! verified by restate-sdk's endpoint) or, on a loopback address only, anyone. Every request
//! body is read through [`BoundedMessages`].

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::Incoming;
use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use restate_sdk::endpoint::ResponseBody;
use restate_sdk::prelude::Endpoint;
use tokio::net::TcpListener;

use crate::agent::Agent;
use crate::message_limit::BoundedMessages;
use crate::session::AgentSession;

/// How long a shutdown waits for open invocations' connections to close.
const DRAIN: Duration = Duration::from_secs(10);

/// How long to wait before accepting again after a failed accept.
const ACCEPT_PAUSE: Duration = Duration::from_millis(10);

/// Why the endpoint could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The address could not be bound (in use, not local, no permission).
    #[error("could not bind the Restate endpoint to {address}: {source}")]
    Bind {
        /// The address asked for.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A request identity key restate-sdk does not accept.
    #[error("{key:?} is not a Restate request identity key (publickeyv1_…): {reason}")]
    BadIdentityKey {
        /// The key given.
        key: String,
        /// Why the SDK refused it.
        reason: String,
    },
    /// A non-loopback address without a request identity key: anyone who reaches the port
    /// could run the agent with the operator's model key.
    #[error(
        "refusing to serve {address} without a request identity key: it is not a loopback \
         address, and unsigned requests would let anyone who reaches it run the agent; give \
         Restate's request identity public key (publickeyv1_…)"
    )]
    Unverified {
        /// The address.
        address: SocketAddr,
    },
}

/// Who the endpoint serves: requests Restate signed with one of its identity keys, or —
/// with no key, on a loopback address only — anyone who can connect.
#[derive(Debug, Clone, Default)]
pub struct Access {
    identity_keys: Vec<String>,
}

impl Access {
    /// No verification: allowed on loopback addresses only (see [`Access::check`]).
    pub fn unverified() -> Self {
        Access::default()
    }

    /// Also accept requests signed with `key` (`publickeyv1_…`, as Restate prints it for its
    /// `request-identity-private-key-pem-file`). Several keys let a key be rotated.
    pub fn identity_key(mut self, key: &str) -> Result<Self, ServeError> {
        Endpoint::builder()
            .identity_key(key)
            .map_err(|error| ServeError::BadIdentityKey {
                key: key.to_owned(),
                reason: error.to_string(),
            })?;
        self.identity_keys.push(key.to_owned());
        Ok(self)
    }

    /// Whether requests are verified.
    pub fn is_verified(&self) -> bool {
        !self.identity_keys.is_empty()
    }

    /// Whether the endpoint may serve `address` with this access: an unverified endpoint
    /// only on a loopback address.
    pub fn check(&self, address: SocketAddr) -> Result<(), ServeError> {
        if self.is_verified() || address.ip().is_loopback() {
            Ok(())
        } else {
            Err(ServeError::Unverified { address })
        }
    }

    /// The SDK's endpoint for `agent` with these keys.
    fn endpoint(&self, agent: Arc<Agent>) -> Result<Endpoint, ServeError> {
        let mut builder = Endpoint::builder().bind(AgentSession::new(agent));
        for key in &self.identity_keys {
            builder = builder
                .identity_key(key)
                .map_err(|error| ServeError::BadIdentityKey {
                    key: key.clone(),
                    reason: error.to_string(),
                })?;
        }
        Ok(builder.build())
    }
}

/// The SDK's endpoint as a hyper service, every request body bounded ([`BoundedMessages`]).
#[derive(Clone)]
struct BoundedEndpoint(Endpoint);

impl hyper::service::Service<http::Request<Incoming>> for BoundedEndpoint {
    type Response = http::Response<ResponseBody>;
    type Error = std::convert::Infallible;
    type Future = std::future::Ready<Result<Self::Response, Self::Error>>;

    fn call(&self, request: http::Request<Incoming>) -> Self::Future {
        // `handle` serves the bidirectional stream protocol, as the SDK's `HyperEndpoint`.
        std::future::ready(Ok(self.0.handle(request.map(BoundedMessages::new))))
    }
}

/// Bind `address` for [`serve`] (a failure names the address).
pub async fn bind(address: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })
}

/// Serve `agent`'s [`AgentSession`] object on `listener` to the callers `access` admits,
/// until `shutdown` completes. Fails at once when `access` does not allow the listener's
/// address ([`Access::check`]).
///
/// The SDK's own `HttpServer` is not used because it leaves Nagle's algorithm on: an
/// invocation's stream carries many small frames (each journaled step's command, Restate's
/// acknowledgement), and a small write held back until the peer's delayed ACK costs up to
/// 40 ms, several times per turn. Every connection here is `TCP_NODELAY`.
pub async fn serve(
    listener: TcpListener,
    agent: Arc<Agent>,
    access: Access,
    shutdown: impl Future,
) -> Result<(), ServeError> {
    let address = listener.local_addr().map_err(|source| ServeError::Bind {
        address: SocketAddr::from(([0, 0, 0, 0], 0)),
        source,
    })?;
    access.check(address)?;
    let endpoint = BoundedEndpoint(access.endpoint(agent)?);
    let graceful = GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                // A failed accept (a connection reset before it was taken, no file
                // descriptors left) concerns that connection only; a pause keeps a lasting
                // failure from spinning.
                let Ok((stream, _peer)) = accepted else {
                    tokio::time::sleep(ACCEPT_PAUSE).await;
                    continue;
                };
                // Best effort: a socket that refuses it is served all the same.
                let _ = stream.set_nodelay(true);
                let connection = http2::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), endpoint.clone());
                let connection = graceful.watch(connection);
                tokio::spawn(async move {
                    // A connection that fails ends its invocations' attempts; Restate retries them.
                    let _ = connection.await;
                });
            }
            _ = &mut shutdown => break,
        }
    }
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(DRAIN) => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
    use agcore::tools::ToolRegistry;
    use bytes::Bytes;

    /// A Restate request identity key (the public half of a test-only ed25519 key).
    const KEY: &str = "publickeyv1_7cNGGP2ELVBwdNy3zZXz8qJSHwo1U6GQEZngMKcVbjaQ";

    /// How long any answer may take.
    const PATIENCE: Duration = Duration::from_secs(20);

    /// An agent whose model is never reached (nothing listens on port 9 of loopback).
    fn agent() -> Arc<Agent> {
        let client = OpenAiClient::new(OpenAiConfig::new("http://127.0.0.1:9/v1")).unwrap();
        Agent::new(
            LlmCycle::new(client, CycleConfig::new("m")),
            ToolRegistry::new(),
        )
    }

    /// Serve on a loopback port with `access`; the endpoint's base URL.
    async fn start(access: Access) -> String {
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).await.unwrap();
        let address = listener.local_addr().unwrap();
        tokio::spawn(serve(
            listener,
            agent(),
            access,
            std::future::pending::<()>(),
        ));
        format!("http://{address}")
    }

    fn h2() -> reqwest::Client {
        reqwest::Client::builder()
            .http2_prior_knowledge()
            .timeout(PATIENCE)
            .build()
            .unwrap()
    }

    #[tokio::test]
    async fn a_verified_endpoint_refuses_unsigned_requests() {
        let verified = start(Access::unverified().identity_key(KEY).unwrap()).await;
        let open = start(Access::unverified()).await;
        for (base, expected) in [(&verified, 401), (&open, 200)] {
            let discovered = h2()
                .get(format!("{base}/discover"))
                .header("accept", "application/vnd.restate.endpointmanifest.v4+json")
                .send()
                .await
                .unwrap();
            assert_eq!(discovered.status().as_u16(), expected, "{base}");
        }
        // A forged signature is no better than none.
        let forged = h2()
            .get(format!("{verified}/discover"))
            .header("x-restate-signature-scheme", "v1")
            .header("x-restate-jwt-v1", "eyJhbGciOiJFZERTQSJ9.e30.AAAA")
            .send()
            .await
            .unwrap();
        assert_eq!(forged.status().as_u16(), 401);
    }

    #[tokio::test]
    async fn an_unverified_endpoint_on_a_network_address_does_not_start() {
        let listener = bind(SocketAddr::from(([0, 0, 0, 0], 0))).await.unwrap();
        let error = serve(
            listener,
            agent(),
            Access::unverified(),
            std::future::pending::<()>(),
        )
        .await
        .unwrap_err();
        assert!(matches!(error, ServeError::Unverified { .. }), "{error}");
        let error = Access::unverified()
            .identity_key("publickeyv1_nope")
            .unwrap_err();
        assert!(
            matches!(error, ServeError::BadIdentityKey { .. }),
            "{error}"
        );
        let keyed = Access::unverified().identity_key(KEY).unwrap();
        assert!(keyed.check(SocketAddr::from(([0, 0, 0, 0], 9080))).is_ok());
    }

    #[tokio::test]
    async fn a_message_above_the_limit_ends_the_invocation_before_it_is_read() {
        let base = start(Access::unverified()).await;
        // A start message declaring 64 MiB, of which only 1 MiB is sent; the body stays open.
        let (sender, receiver) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(4);
        let header = (64_u64 * 1024 * 1024).to_be_bytes();
        sender
            .send(Ok(Bytes::copy_from_slice(&header)))
            .await
            .unwrap();
        sender
            .send(Ok(Bytes::from(vec![0; 1024 * 1024])))
            .await
            .unwrap();
        let body = reqwest::Body::wrap_stream(tokio_stream_of(receiver));
        let answered = tokio::time::timeout(PATIENCE, async {
            let response = h2()
                .post(format!("{base}/invoke/AgentSession/run"))
                .header("content-type", "application/vnd.restate.invocation.v5")
                .body(body)
                .send()
                .await?;
            response.bytes().await
        })
        .await;
        // Kept alive until here: without the bound the endpoint would wait for the rest.
        drop(sender);
        assert!(
            answered.is_ok(),
            "the endpoint kept reading a 64 MiB message (no answer within {PATIENCE:?})"
        );
    }

    /// The receiver as a stream.
    fn tokio_stream_of<T: Send + 'static>(
        mut receiver: tokio::sync::mpsc::Receiver<T>,
    ) -> impl futures::Stream<Item = T> + Send + 'static {
        futures::stream::poll_fn(move |cx| receiver.poll_recv(cx))
    }
}
