//! Recovery: a server that fails to start is tried again with backoff ([`McpRetry`]); a server
//! that died (a crashed stdio process, a closed HTTP connection) is started again on the next
//! call, a bounded number of times, with its tools listed again.
//!
//! A call in flight when the server dies is never re-sent (a tool call may not be idempotent):
//! it fails with the server's exit status and last stderr lines; the next call restarts it.
//!
//! This module holds the policy; the mechanics are the shared state's
//! ([`crate::tools::mcp::shared`]: `open_with_retries`, `Shared::live`).

use std::time::Duration;

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
