//! [`McpConfigError`]: why an `mcpServers` file, or one entry of it, could not be used.

use std::path::PathBuf;

use crate::tools::error::ToolError;

/// Why an `mcpServers` file could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpConfigError {
    /// The file could not be read.
    #[error("cannot read MCP config {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid JSON or not an `mcpServers` object.
    #[error("invalid MCP config{}: {source}", path.as_ref().map(|p| format!(" {}", p.display())).unwrap_or_default())]
    Parse {
        /// The file, when read from one.
        path: Option<PathBuf>,
        /// The JSON error (with line and column).
        source: serde_json::Error,
    },
    /// One server's entry is unusable.
    #[error("MCP server '{server}' in the config: {reason}")]
    Invalid {
        /// The server's name.
        server: String,
        /// What is wrong.
        reason: String,
    },
}

impl From<McpConfigError> for ToolError {
    fn from(error: McpConfigError) -> Self {
        ToolError::McpError(error.to_string())
    }
}
