//! Recovery: a server that fails to start is tried again with backoff ([`McpRetry`]); a server
//! that died (a crashed stdio process, a closed HTTP connection) is started again on the next
//! call, a bounded number of times, with its tools listed again.
//!
//! A call in flight when the server dies is never re-sent (a tool call may not be idempotent):
//! it fails with the server's exit status and last stderr lines; the next call restarts it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::tools::error::ToolError;
use crate::tools::mcp::client::Shared;
use crate::tools::mcp::connection::{Connection, OpenFailure, Settings};
use crate::vocab::trace_context::otel_int;

/// How a server that fails to start is tried again: `retries` more times, waiting `backoff`
/// before the first retry and twice as long before each next one, at most `max_backoff`.
///
/// Failures to start the program at all (not found, not executable) are not retried.
///
/// ```
/// use std::time::Duration;
/// use agcore::tools::mcp::McpRetry;
///
/// let retry = McpRetry::new(3, Duration::from_millis(200));
/// assert_eq!(retry.delay(0), Duration::from_millis(200));
/// assert_eq!(retry.delay(2), Duration::from_millis(800));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McpRetry {
    /// Retries after the first attempt (0: none).
    pub retries: u32,
    /// The wait before the first retry.
    pub backoff: Duration,
    /// The longest wait between two attempts.
    pub max_backoff: Duration,
}

impl Default for McpRetry {
    /// No retries.
    fn default() -> Self {
        McpRetry::new(0, Duration::from_millis(500))
    }
}

impl McpRetry {
    /// `retries` retries, the first after `backoff`, doubling, at most 30 s apart.
    pub fn new(retries: u32, backoff: Duration) -> Self {
        McpRetry {
            retries,
            backoff,
            max_backoff: Duration::from_secs(30),
        }
    }

    /// The wait before retry number `retry` (0-based).
    pub fn delay(&self, retry: u32) -> Duration {
        self.backoff
            .saturating_mul(2u32.saturating_pow(retry.min(16)))
            .min(self.max_backoff)
    }
}

/// Open a connection, retrying by `settings.startup` on failures that may pass.
pub(crate) async fn open_with_retries(
    settings: &Settings,
    shared: &Shared,
) -> Result<Connection, ToolError> {
    let retry = settings.startup;
    let mut attempt = 0;
    loop {
        shared.attempts.store(attempt + 1, Ordering::Relaxed);
        match Connection::open(settings, shared.cache.clone()).await {
            Ok(conn) => return Ok(conn),
            Err(OpenFailure { error, permanent }) => {
                if permanent || attempt >= retry.retries {
                    return Err(if attempt == 0 {
                        error
                    } else {
                        tried(error, attempt + 1)
                    });
                }
                let delay = retry.delay(attempt);
                tracing::warn!(
                    target: "agcore::mcp",
                    server = %settings.server,
                    attempt = i64::from(attempt + 1),
                    retry_in_ms = otel_int(delay.as_millis()),
                    "{error}"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
    }
}

/// `error`, saying how many attempts it took.
fn tried(error: ToolError, attempts: u32) -> ToolError {
    let note = |message: String| format!("{message} (after {attempts} attempts)");
    match error {
        ToolError::McpError(message) => ToolError::McpError(note(message)),
        ToolError::McpTimeout(message) => ToolError::McpTimeout(note(message)),
        other => other,
    }
}

impl Shared {
    /// The connection for the next request: the current one while it lives; once the server
    /// has died, a new one — at most `restarts` times over the client's life (until the next
    /// `connect()`), one restart at a time however many calls notice.
    pub(crate) async fn live(&self) -> Result<Arc<Connection>, ToolError> {
        let conn = self.connection()?;
        if conn.is_alive() {
            return Ok(conn);
        }
        let Some(settings) = self.restart_settings() else {
            return Ok(conn); // no restarts: the request fails with how the server ended
        };
        let _one_at_a_time = self.restart_lock.lock().await;
        let current = self.connection()?;
        if !Arc::ptr_eq(&current, &conn) && current.is_alive() {
            return Ok(current); // another call restarted it meanwhile
        }
        let done = self.restarts.load(Ordering::Relaxed);
        if done >= settings.restarts {
            let ended = current.gone_error().await;
            return Err(ToolError::McpError(format!(
                "{ended}; it was restarted {done} time(s) already, the limit — call connect() \
                 to start it again"
            )));
        }
        self.restarts.store(done + 1, Ordering::Relaxed);
        let ended = current.gone_error().await;
        tracing::warn!(target: "agcore::mcp", server = %self.server, restart = otel_int(done + 1), limit = otel_int(settings.restarts), "restarting: {ended}");
        current.close().await;
        let fresh = Connection::open(&settings, self.cache.clone())
            .await
            .map_err(|failure| {
                ToolError::McpError(format!(
                    "MCP server '{}' could not be restarted (restart {} of {}): {}",
                    self.server,
                    done + 1,
                    settings.restarts,
                    failure.error
                ))
            })?;
        let fresh = Arc::new(fresh);
        if fresh.info.has_tools {
            let tools = fresh.list_tools().await?;
            self.cache.store(&self.server, tools);
        }
        self.subscriptions.renew(&fresh).await;
        self.replace(fresh.clone());
        Ok(fresh)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let retry = McpRetry {
            retries: 40,
            backoff: Duration::from_secs(1),
            max_backoff: Duration::from_secs(5),
        };
        let delays: Vec<u64> = (0..5).map(|n| retry.delay(n).as_secs()).collect();
        assert_eq!(delays, [1, 2, 4, 5, 5]);
        assert_eq!(retry.delay(39), Duration::from_secs(5));
    }
}
