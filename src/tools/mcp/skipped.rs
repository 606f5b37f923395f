//! [`SkippedMcpTool`]: a server's tool agcore did not register, and why — no tool is hidden
//! without a reason the user can ask for (`agcore tools`, `agcore mcp list`,
//! [`McpClient::skipped_tools`](crate::tools::mcp::McpClient::skipped_tools)).

use std::collections::HashSet;

use rmcp::model::Tool;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::mcp::filter::McpToolFilter;
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

/// Why a tool of an MCP server was skipped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum McpSkipReason {
    /// Its input schema does not compile (e.g. an invalid `pattern` regex, an unresolvable
    /// `$ref`): arguments could not be validated.
    #[error("its input schema is not a valid JSON Schema: {detail}")]
    InvalidSchema {
        /// What the schema compiler reported.
        detail: String,
    },
    /// The server lists this name more than once; the first one is registered.
    #[error("the server lists a tool of this name more than once; the first one is used")]
    DuplicateName,
    /// The server's `include` list does not name it (see [`McpToolFilter`]).
    ///
    /// [`McpToolFilter`]: crate::tools::mcp::McpToolFilter
    #[error("the server's `include` list ({}) does not name it", include.join(", "))]
    NotIncluded {
        /// The `include` entries.
        include: Vec<String>,
    },
    /// The server's `exclude` list names it (see [`McpToolFilter`]).
    ///
    /// [`McpToolFilter`]: crate::tools::mcp::McpToolFilter
    #[error("excluded by the server's `exclude` entry '{pattern}'")]
    Excluded {
        /// The entry that matched.
        pattern: String,
    },
    /// The registry refused it.
    #[error("it could not be registered: {detail}")]
    Registration {
        /// The registry's error.
        detail: String,
    },
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
