//! [`McpProgress`]: a server's `notifications/progress`, and the callback that receives them.

use std::sync::Arc;

/// A progress notification from a server (`notifications/progress`).
#[derive(Debug, Clone, PartialEq)]
pub struct McpProgress {
    /// The server's name.
    pub server: String,
    /// Progress so far.
    pub progress: f64,
    /// The total, when known.
    pub total: Option<f64>,
    /// A message, when given.
    pub message: Option<String>,
}

/// Called for every progress notification of a client's server.
pub type ProgressCallback = Arc<dyn Fn(McpProgress) + Send + Sync>;
