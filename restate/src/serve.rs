//! Serving the endpoint: HTTP/2 cleartext on a TCP listener, until a shutdown signal.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use restate_sdk::prelude::{Endpoint, HttpServer};
use tokio::net::TcpListener;

use crate::agent::Agent;
use crate::session::AgentSession;

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
pub async fn serve(listener: TcpListener, agent: Arc<Agent>, shutdown: impl Future) {
    let endpoint = Endpoint::builder().bind(AgentSession::new(agent)).build();
    HttpServer::new(endpoint)
        .serve_with_cancel(listener, shutdown)
        .await;
}
