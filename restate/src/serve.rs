//! Serving the endpoint: HTTP/2 cleartext on a TCP listener, until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use hyper::server::conn::http2;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::graceful::GracefulShutdown;
use restate_sdk::hyper::HyperEndpoint;
use restate_sdk::prelude::Endpoint;
use tokio::net::TcpListener;

use crate::agent::Agent;
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
}

/// Bind `address` for [`serve`] (a failure names the address).
pub async fn bind(address: SocketAddr) -> Result<TcpListener, ServeError> {
    TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Bind { address, source })
}

/// Serve `agent`'s [`AgentSession`] object on `listener` until `shutdown` completes.
///
/// The SDK's own `HttpServer` is not used because it leaves Nagle's algorithm on: an
/// invocation's stream carries many small frames (each journaled step's command, Restate's
/// acknowledgement), and a small write held back until the peer's delayed ACK costs up to
/// 40 ms, several times per turn. Every connection here is `TCP_NODELAY`.
pub async fn serve(listener: TcpListener, agent: Arc<Agent>, shutdown: impl Future) {
    let endpoint = HyperEndpoint::new(Endpoint::builder().bind(AgentSession::new(agent)).build());
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
}
