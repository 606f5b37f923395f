//! Registering MCP tools into a [`ToolRegistry`]: names that never collide
//! ([`register_mcp_tools`]), and keeping a registry in line with a server's changing tool list
//! ([`McpHandle::sync_registry`]).

use std::collections::HashSet;
use std::sync::Arc;

use crate::tools::error::ToolError;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::naming::{
    assign_names, fit, qualified_tool_name, sanitize_tool_name, unique_name,
};
use crate::tools::mcp::skipped::{McpSkipReason, SkippedMcpTool};
use crate::tools::registry::ToolRegistry;
use crate::tools::source::ToolSource;

/// One tool [`register_mcp_tools`] registered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegisteredMcpTool {
    /// The name in the registry (what the model calls).
    pub name: String,
    /// The server.
    pub server: String,
    /// The tool's name on the server.
    pub tool: String,
}

/// What [`register_mcp_tools_with_report`] did: the tools it registered and those it left out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpRegistration {
    /// The registered tools.
    pub registered: Vec<RegisteredMcpTool>,
    /// The tools left out, each with the reason: those the servers listed but agcore cannot
    /// use ([`McpClient::skipped_tools`]) and those the registry refused.
    pub skipped: Vec<SkippedMcpTool>,
}

/// Register the tools of several connected servers into `registry`. Tools keep their raw
/// names (or the client's [`McpToolNaming`](crate::tools::mcp::McpToolNaming)) unless two tools — of one server or of two — or a
/// tool already in the registry want the same name; those get `<server>__<tool>` names, made
/// unique with a stable hash suffix (then a number) where that is taken too: distinct tools
/// never collide. A tool that cannot be registered is left out (logged); the rest register —
/// see [`register_mcp_tools_with_report`] for the list of what was left out and why.
///
/// # Errors
/// None today: a bad tool is skipped, not fatal. (The `Result` is kept for compatibility.)
pub fn register_mcp_tools(
    registry: &mut ToolRegistry,
    clients: impl IntoIterator<Item = McpClient>,
) -> Result<Vec<RegisteredMcpTool>, ToolError> {
    Ok(register_mcp_tools_with_report(registry, clients).registered)
}

/// [`register_mcp_tools`], returning the skipped tools (with their reasons) as well.
pub fn register_mcp_tools_with_report(
    registry: &mut ToolRegistry,
    clients: impl IntoIterator<Item = McpClient>,
) -> McpRegistration {
    let mut report = McpRegistration::default();
    let mut adapters = Vec::new();
    for client in clients {
        report.skipped.extend(client.skipped_tools());
        adapters.extend(client.adapters());
    }
    let existing: HashSet<String> = registry.list_tools().into_iter().collect();
    let wanted: Vec<(&str, &str, &str)> = adapters
        .iter()
        .map(|a| (a.server_name(), a.tool_name(), a.name_str()))
        .collect();
    let names = assign_names(&wanted, &existing);
    for (adapter, name) in adapters.into_iter().zip(names) {
        let record = RegisteredMcpTool {
            name: name.clone(),
            server: adapter.server_name().to_owned(),
            tool: adapter.tool_name().to_owned(),
        };
        match registry.register(Arc::new(adapter.with_name(name))) {
            Ok(()) => report.registered.push(record),
            Err(error) => {
                let skip = SkippedMcpTool {
                    server: record.server,
                    tool: record.tool,
                    reason: McpSkipReason::Registration {
                        detail: error.to_string(),
                    },
                };
                tracing::warn!(target: "agcore::mcp", "{skip}");
                report.skipped.push(skip);
            }
        }
    }
    report
}

/// What [`McpHandle::sync_registry`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct McpRegistrySync {
    /// Names registered for new tools.
    pub added: Vec<String>,
    /// Names unregistered because the server no longer lists their tools.
    pub removed: Vec<String>,
}

/// Every name an adapter of `tool` may have been registered under.
fn name_candidates(server: &str, tool: &str) -> [String; 3] {
    let qualified = qualified_tool_name(server, tool);
    let hashed = fit(qualified.clone(), &format!("{server}\u{0}{tool}"), true);
    [sanitize_tool_name(tool), qualified, hashed]
}

/// See [`McpHandle::sync_registry`].
fn sync_mcp_tools(
    registry: &mut ToolRegistry,
    handle: &McpHandle,
) -> Result<McpRegistrySync, ToolError> {
    let server = handle.server_name().to_owned();
    let tools = handle.cached_tools();
    let source = ToolSource::Mcp {
        server: server.clone(),
    };
    let registered: Vec<String> = registry
        .tools()
        .filter(|tool| tool.source() == source)
        .map(|tool| tool.name().to_owned())
        .collect();
    let candidates: Vec<[String; 3]> = tools
        .iter()
        .map(|tool| name_candidates(&server, &tool.name))
        .collect();
    let mut sync = McpRegistrySync::default();
    for name in &registered {
        if !candidates.iter().any(|names| names.contains(name)) {
            registry.unregister(name);
            sync.removed.push(name.clone());
        }
    }
    for (tool, names) in tools.iter().zip(&candidates) {
        if registered.iter().any(|name| names.contains(name)) {
            continue;
        }
        let adapter = handle.adapter(tool);
        let taken: HashSet<String> = registry.list_tools().into_iter().collect();
        let name = match [adapter.name_str(), &names[1], &names[2]]
            .into_iter()
            .find(|name| !taken.contains(*name))
        {
            Some(name) => name.to_owned(),
            None => unique_name(&names[1], &format!("{server}\u{0}{}", tool.name), &taken),
        };
        registry.register(Arc::new(adapter.with_name(name.clone())))?;
        sync.added.push(name);
    }
    Ok(sync)
}

impl McpHandle {
    /// Bring `registry` in line with the server's current tool list (e.g. after
    /// `notifications/tools/list_changed`, see [`tool_changes`](Self::tool_changes)): register
    /// adapters for new tools, unregister those of tools the server no longer lists.
    ///
    /// # Errors
    /// The first registration error; the registry keeps the changes made before it.
    pub fn sync_registry(&self, registry: &mut ToolRegistry) -> Result<McpRegistrySync, ToolError> {
        sync_mcp_tools(registry, self)
    }
}
