//! Serialisable views of servers and their tools, for listings (`agcore mcp list [--json]`).

use serde::Serialize;
use serde_json::Value;

use crate::tools::base::BaseTool;
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::connection::McpServerInfo;
use crate::tools::mcp::skipped::SkippedMcpTool;
use crate::tools::permission::Permission;

/// One tool of a server as agcore registers it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpToolSummary {
    /// The adapter's name (what the model calls).
    pub name: String,
    /// The tool's name on the server.
    pub tool: String,
    /// The human title, if the server gives one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The description.
    pub description: String,
    /// The kind derived from the annotations.
    pub kind: ToolKind,
    /// The permissions derived from the annotations (or the client's default).
    pub permissions: Vec<Permission>,
    /// The input schema.
    pub input_schema: Value,
}

/// One server of a config: connected with its tools, or why not.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpServerStatus {
    /// The server's name in the config.
    pub name: String,
    /// Whether it is connected.
    pub connected: bool,
    /// Why it is not, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// What it said about itself.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub info: Option<McpServerInfo>,
    /// Its tools (empty when not connected).
    pub tools: Vec<McpToolSummary>,
    /// The tools it listed that agcore left out, each with the reason (omitted when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMcpTool>,
}

impl McpServerStatus {
    /// The status of one result of
    /// [`McpServersConfig::connect_all`](crate::tools::mcp::McpServersConfig::connect_all).
    pub fn of(name: &str, result: &Result<McpClient, ToolError>) -> Self {
        match result {
            Ok(client) => McpServerStatus {
                name: name.to_owned(),
                connected: client.is_connected(),
                error: None,
                info: client.server_info(),
                tools: client.tool_summaries(),
                skipped: client.skipped_tools(),
            },
            Err(error) => McpServerStatus {
                name: name.to_owned(),
                connected: false,
                error: Some(error.to_string()),
                info: None,
                tools: Vec::new(),
                skipped: Vec::new(),
            },
        }
    }
}

impl McpClient {
    /// The server's tools (as last listed) as agcore would register them.
    pub fn tool_summaries(&self) -> Vec<McpToolSummary> {
        self.adapters()
            .iter()
            .map(|adapter| {
                let title = adapter.title(&Value::Null);
                McpToolSummary {
                    name: adapter.name().to_owned(),
                    tool: adapter.tool_name().to_owned(),
                    title: (title != adapter.name()).then_some(title),
                    description: adapter.description().to_owned(),
                    kind: adapter.kind(),
                    permissions: adapter.required_permissions(),
                    input_schema: adapter.parameters(),
                }
            })
            .collect()
    }
}
