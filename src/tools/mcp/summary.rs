//! Serialisable views of servers and their tools, for listings (`agcore mcp list [--json]`).

use std::collections::HashSet;

use serde::Serialize;
use serde_json::Value;

use crate::tools::base::BaseTool;
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::connection::McpServerInfo;
use crate::tools::mcp::listing::McpCacheHint;
use crate::tools::mcp::naming::assign_names;
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
    /// How long the server said its tool list stays fresh (2026-07-28 servers; omitted when
    /// it said nothing).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tools_cache: Option<McpCacheHint>,
    /// The tools it listed that agcore left out, each with the reason (omitted when none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<SkippedMcpTool>,
    /// How many attempts connecting took (1 without retries; 0 when unknown, e.g. a config
    /// error). A failed connect's error says how many it made.
    pub connect_attempts: u32,
    /// How many times the server was restarted after dying (since connecting).
    pub restarts: u32,
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
                tools_cache: client.tools_cache_hint(),
                skipped: client.skipped_tools(),
                connect_attempts: client.connect_attempts(),
                restarts: client.restarts(),
            },
            Err(error) => McpServerStatus {
                name: name.to_owned(),
                connected: false,
                error: Some(error.to_string()),
                info: None,
                tools: Vec::new(),
                tools_cache: None,
                skipped: Vec::new(),
                connect_attempts: 0,
                restarts: 0,
            },
        }
    }
}

impl McpClient {
    /// The server's tools (as last listed) as agcore would register them.
    ///
    /// Names are those [`register_mcp_tools`](crate::tools::mcp::register_mcp_tools) gives
    /// this server's tools in an empty registry (tools whose names sanitise alike are told
    /// apart).
    pub fn tool_summaries(&self) -> Vec<McpToolSummary> {
        let adapters = self.adapters();
        let wanted: Vec<(&str, &str, &str)> = adapters
            .iter()
            .map(|a| (a.server_name(), a.tool_name(), a.name_str()))
            .collect();
        let names = assign_names(&wanted, &HashSet::new());
        adapters
            .iter()
            .zip(names)
            .map(|(adapter, name)| {
                let title = adapter.title(&Value::Null);
                McpToolSummary {
                    title: (title != name).then_some(title),
                    name,
                    tool: adapter.tool_name().to_owned(),
                    description: adapter.current_description().into_owned(),
                    kind: adapter.kind(),
                    permissions: adapter.required_permissions(),
                    input_schema: adapter.parameters(),
                }
            })
            .collect()
    }
}
