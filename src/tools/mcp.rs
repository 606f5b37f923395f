//! MCP client (filled by the MCP issue).

/// An MCP client.
#[derive(Debug)]
pub struct McpClient;
