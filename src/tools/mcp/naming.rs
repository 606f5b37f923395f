//! Tool names for MCP adapters: always `^[a-zA-Z0-9_-]{1,64}$`, never colliding.

use std::collections::{HashMap, HashSet};

use std::sync::Arc;

use crate::tools::base::ToolSource;
use crate::tools::error::ToolError;
use crate::tools::mcp::adapter::McpToolAdapter;
use crate::tools::mcp::client::{McpClient, McpHandle};
use crate::tools::registry::ToolRegistry;

/// The longest tool name the OpenAI wire format accepts.
const MAX_NAME: usize = 64;

/// How an [`McpClient`]'s adapters are named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum McpToolNaming {
    /// The server's tool name (sanitised when it has characters the model API rejects).
    #[default]
    Raw,
    /// `<server>__<tool>`, sanitised and shortened with a stable hash when too long.
    Qualified,
}

/// `name` with every character outside `[a-zA-Z0-9_-]` replaced by `_`; empty → `tool`;
/// longer than 64 → cut and suffixed with a stable hash of `name`.
pub fn sanitize_tool_name(name: &str) -> String {
    fit(sanitize_part(name, "tool"), name, false)
}

/// `<server>__<tool>`, sanitised to `^[a-zA-Z0-9_-]{1,64}$`; when too long it keeps a prefix
/// and ends with `_` + 8 hex digits of a stable hash of server and tool, so it stays unique.
pub fn qualified_tool_name(server: &str, tool: &str) -> String {
    let joined = format!(
        "{}__{}",
        sanitize_part(server, "_"),
        sanitize_part(tool, "_")
    );
    fit(joined, &format!("{server}\u{0}{tool}"), false)
}

/// `part` with every character outside `[a-zA-Z0-9_-]` replaced by `_` (`empty` if empty).
fn sanitize_part(part: &str, empty: &str) -> String {
    if part.is_empty() {
        return empty.to_owned();
    }
    part.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Cut `name` to 64 characters with a hash suffix of `key` when it is too long (or always when
/// `force_hash`).
fn fit(name: String, key: &str, force_hash: bool) -> String {
    if name.len() <= MAX_NAME && !force_hash {
        return name;
    }
    let suffix = format!("_{:08x}", stable_hash(key) as u32);
    let keep = MAX_NAME.saturating_sub(suffix.len()).min(name.len());
    format!("{}{suffix}", &name[..keep])
}

/// FNV-1a: stable across runs and platforms (unlike `DefaultHasher`).
fn stable_hash(key: &str) -> u64 {
    key.bytes().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    })
}

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

/// Register the tools of several connected servers into `registry`. Tools keep their raw
/// names (or the client's [`McpToolNaming`]) unless two servers — or a tool already in the
/// registry — use the same name; those get `<server>__<tool>` names.
///
/// # Errors
/// The first registration error (e.g. an invalid input schema); tools before it stay
/// registered.
pub fn register_mcp_tools(
    registry: &mut ToolRegistry,
    clients: impl IntoIterator<Item = McpClient>,
) -> Result<Vec<RegisteredMcpTool>, ToolError> {
    let adapters: Vec<McpToolAdapter> = clients
        .into_iter()
        .flat_map(|client| client.adapters())
        .collect();
    let mut uses: HashMap<String, usize> = HashMap::new();
    for adapter in &adapters {
        *uses.entry(adapter.name_str().to_owned()).or_default() += 1;
    }
    let existing: HashSet<String> = registry.list_tools().into_iter().collect();
    let mut taken = existing.clone();
    let mut registered = Vec::with_capacity(adapters.len());
    for adapter in adapters {
        let clash = uses.get(adapter.name_str()).is_some_and(|n| *n > 1)
            || existing.contains(adapter.name_str());
        let mut name = if clash {
            qualified_tool_name(adapter.server_name(), adapter.tool_name())
        } else {
            adapter.name_str().to_owned()
        };
        if taken.contains(&name) {
            let key = format!("{}\u{0}{}", adapter.server_name(), adapter.tool_name());
            name = fit(name, &key, true);
        }
        taken.insert(name.clone());
        let record = RegisteredMcpTool {
            name: name.clone(),
            server: adapter.server_name().to_owned(),
            tool: adapter.tool_name().to_owned(),
        };
        registry.register(Arc::new(adapter.with_name(name)))?;
        registered.push(record);
    }
    Ok(registered)
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
pub(crate) fn sync_mcp_tools(
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
        let name = [adapter.name_str(), &names[1], &names[2]]
            .into_iter()
            .find(|name| registry.get(name).is_none())
            .map(str::to_owned)
            .ok_or_else(|| ToolError::DuplicateName(names[1].clone()))?;
        registry.register(Arc::new(adapter.with_name(name.clone())))?;
        sync.added.push(name);
    }
    Ok(sync)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::registry::validate_tool_name;

    #[test]
    fn valid_names_stay_as_they_are() {
        assert_eq!(sanitize_tool_name("get_weather-2"), "get_weather-2");
    }

    #[test]
    fn invalid_characters_become_underscores() {
        assert_eq!(sanitize_tool_name("fs.read file"), "fs_read_file");
        assert_eq!(sanitize_tool_name(""), "tool");
    }

    #[test]
    fn qualified_names_join_server_and_tool() {
        assert_eq!(qualified_tool_name("my server", "echo"), "my_server__echo");
    }

    #[test]
    fn long_names_are_shortened_with_a_stable_distinct_hash() {
        let a = qualified_tool_name(&"s".repeat(40), &format!("{}a", "t".repeat(40)));
        let b = qualified_tool_name(&"s".repeat(40), &format!("{}b", "t".repeat(40)));
        assert_eq!(a.len(), 64);
        assert_ne!(a, b);
        assert_eq!(
            a,
            qualified_tool_name(&"s".repeat(40), &format!("{}a", "t".repeat(40)))
        );
        assert!(validate_tool_name(&a).is_ok());
    }

    proptest::proptest! {
        #[test]
        fn every_generated_name_is_valid(server in ".{0,80}", tool in ".{0,80}") {
            proptest::prop_assert!(validate_tool_name(&qualified_tool_name(&server, &tool)).is_ok());
            proptest::prop_assert!(validate_tool_name(&sanitize_tool_name(&tool)).is_ok());
        }
    }
}
