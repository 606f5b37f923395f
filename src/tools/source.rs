//! [`ToolSource`]: where a tool comes from.

use serde::{Deserialize, Serialize};

/// Where a tool comes from (shown by `agcore tools`, matched by profiles).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ToolSource {
    /// Registered by the application.
    #[default]
    Local,
    /// One of agcore's built-in tools.
    Builtin,
    /// A tool of an MCP server.
    Mcp {
        /// The server's name.
        server: String,
    },
    /// A tool the model's provider runs itself ([`crate::llm::hosted`]).
    Hosted,
}

impl std::fmt::Display for ToolSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolSource::Local => f.write_str("local"),
            ToolSource::Builtin => f.write_str("built-in"),
            ToolSource::Mcp { server } => write!(f, "mcp:{server}"),
            ToolSource::Hosted => f.write_str("hosted"),
        }
    }
}
