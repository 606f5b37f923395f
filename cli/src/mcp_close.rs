//! Closing the MCP servers when a command ends: gracefully, all at once, bounded.

use std::time::Duration;

use agcore::tools::mcp::McpHandle;

/// How long the servers get, together, to close. Each close is bounded on its own (stdio: stdin
/// closed, then SIGTERM and SIGKILL after short waits; HTTP: the session `DELETE` under rmcp's
/// timeout); past this, the command exits anyway and dropping the clients kills what is left.
const CLOSE_LIMIT: Duration = Duration::from_secs(10);

/// Close every server: a stdio server sees its stdin close (the MCP shutdown) and gets time to
/// exit before it is killed; an HTTP server's session is ended with `DELETE`.
pub async fn close_servers(servers: &[McpHandle]) {
    let closing = futures::future::join_all(servers.iter().map(McpHandle::close));
    if tokio::time::timeout(CLOSE_LIMIT, closing).await.is_err() {
        tracing::debug!(target: "agcore::mcp", "MCP servers did not close in time; killing them");
    }
}
