//! [`SkippedMcpTool`]: a server's tool agcore did not register, and why — no tool is hidden
//! without a reason the user can ask for (`agcore tools`, `agcore mcp list`,
//! [`McpClient::skipped_tools`](crate::tools::mcp::McpClient::skipped_tools)).

use std::collections::HashSet;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::exposure::ExposureReport;
use crate::tools::mcp::filter::McpToolFilter;
use crate::tools::source::ToolSource;
use crate::tools::validate::compile_schema;

/// A tool of an MCP server that was not registered; the server's other tools were.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedMcpTool {
    /// The server's name.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
    /// Why it was skipped.
    pub reason: McpSkipReason,
}

impl std::fmt::Display for SkippedMcpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "MCP server '{}': tool '{}' skipped: {}",
            self.server, self.tool, self.reason
        )
    }
}

/// Why a tool of an MCP server was skipped: the tool core's source-neutral
/// [`SkipReason`](crate::tools::exposure::SkipReason).
pub use crate::tools::reasons::SkipReason as McpSkipReason;

impl ExposureReport {
    /// The report with a hidden row for each MCP tool that was not registered (left out by
    /// the server's `include` / `exclude` lists, or unusable), named as on its server — so
    /// every tool a server offers has a line and a reason.
    pub fn with_skipped_mcp_tools(self, skipped: impl IntoIterator<Item = SkippedMcpTool>) -> Self {
        self.with_unregistered(skipped.into_iter().map(|skip| {
            (
                skip.tool,
                ToolSource::Mcp {
                    server: skip.server,
                },
                skip.reason,
            )
        }))
    }
}

/// Split a `tools/list` into the usable tools and the skipped ones: those `filter` leaves out
/// (logged at `debug`: the user asked for it) and those agcore cannot use (logged as warnings).
pub(crate) fn partition(
    server: &str,
    tools: Vec<Tool>,
    filter: &McpToolFilter,
) -> (Vec<Tool>, Vec<SkippedMcpTool>) {
    if !filter.is_empty() {
        let names: Vec<&str> = tools.iter().map(|tool| tool.name.as_ref()).collect();
        for entry in filter.unmatched(&names) {
            tracing::warn!(target: "agcore::mcp", server, entry, "an include/exclude entry matches none of the server's tools");
        }
    }
    let mut seen = HashSet::new();
    let mut usable = Vec::with_capacity(tools.len());
    let mut skipped = Vec::new();
    for tool in tools {
        if let Some(reason) = filter.verdict(&tool.name) {
            let skip = SkippedMcpTool {
                server: server.to_owned(),
                tool: tool.name.to_string(),
                reason,
            };
            tracing::debug!(target: "agcore::mcp", "{skip}");
            skipped.push(skip);
            continue;
        }
        let reason = if !seen.insert(tool.name.to_string()) {
            Some(McpSkipReason::DuplicateName)
        } else {
            let schema = Value::Object(tool.input_schema.as_ref().clone());
            compile_schema(&tool.name, &schema)
                .err()
                .map(|error| McpSkipReason::InvalidSchema {
                    detail: match error {
                        crate::tools::ToolError::InvalidSchema { reason, .. } => reason,
                        other => other.to_string(),
                    },
                })
        };
        match reason {
            Some(reason) => {
                let skip = SkippedMcpTool {
                    server: server.to_owned(),
                    tool: tool.name.to_string(),
                    reason,
                };
                tracing::warn!(target: "agcore::mcp", "{skip}");
                skipped.push(skip);
            }
            None => usable.push(tool),
        }
    }
    (usable, skipped)
}
