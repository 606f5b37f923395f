//! The line `run` and `chat` print at start for each MCP server some of whose tools the model
//! does not simply get: how many are hidden and why, how many ask before each call and why,
//! pointing at `agcore tools` for the whole report. No gate stays silent.

use std::collections::BTreeMap;

use agcore::display::escape_for_terminal;
use agcore::tools::ToolRegistry;
use agcore::tools::ToolSource;
use agcore::tools::exposure::HiddenBecause;
use agcore::tools::mcp::McpServerStatus;

/// One line per connected server with hidden or asking tools (none when every tool is simply
/// offered), in the order of `servers`.
pub fn lines(
    registry: &ToolRegistry,
    servers: &[McpServerStatus],
    provider: &str,
    model: &str,
) -> Vec<String> {
    let report = registry.explain(provider, model);
    let mut out = Vec::new();
    for server in servers.iter().filter(|server| server.connected) {
        let mut total = 0usize;
        // Reason → tool names, in a stable order.
        let mut hidden: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        let mut asking: BTreeMap<&'static str, Vec<String>> = BTreeMap::new();
        for tool in registry.tools() {
            if !matches!(tool.source(), ToolSource::Mcp { server: ref name } if *name == server.name)
            {
                continue;
            }
            total += 1;
            let name = tool.name().to_owned();
            let Some(row) = report.tool(&name) else {
                continue;
            };
            if !row.exposed {
                // The first gate names the reason (`agcore tools` lists them all).
                let reason = row.hidden_because.first().map_or("hidden", gate);
                hidden.entry(reason).or_default().push(name);
            } else if !row.ask.is_empty() {
                let reason = if registry.permission_decision(tool.as_ref()).unannotated {
                    "no annotations"
                } else {
                    "configured as ask"
                };
                asking.entry(reason).or_default().push(name);
            }
        }
        for skipped in &server.skipped {
            total += 1;
            hidden
                .entry("not registered")
                .or_default()
                .push(skipped.tool.clone());
        }
        if hidden.is_empty() && asking.is_empty() {
            continue;
        }
        let count =
            |groups: &BTreeMap<&str, Vec<String>>| groups.values().map(Vec::len).sum::<usize>();
        let mut parts = Vec::new();
        if !asking.is_empty() {
            parts.push(format!(
                "{} of {total} tool(s) ask before each call ({})",
                count(&asking),
                describe(&asking)
            ));
        }
        if !hidden.is_empty() {
            parts.push(format!(
                "{} of {total} hidden ({})",
                count(&hidden),
                describe(&hidden)
            ));
        }
        out.push(format!(
            "mcp server '{}': {} — details: agcore tools",
            escape_for_terminal(&server.name),
            parts.join("; ")
        ));
    }
    out
}

/// `reason: a, b; other: c`, names escaped for the terminal.
fn describe(groups: &BTreeMap<&str, Vec<String>>) -> String {
    groups
        .iter()
        .map(|(reason, names)| {
            let names: Vec<String> = names
                .iter()
                .map(|name| escape_for_terminal(name).into_owned())
                .collect();
            format!("{reason}: {}", names.join(", "))
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// A gate's short name.
fn gate(reason: &HiddenBecause) -> &'static str {
    match reason {
        HiddenBecause::Profile { .. } => "profile",
        HiddenBecause::RestrictedMode { .. } => "restricted mode",
        HiddenBecause::FeatureFlags { .. } => "feature flags",
        HiddenBecause::Provider { .. } => "provider",
        HiddenBecause::Agent { .. } => "agent",
        HiddenBecause::Permissions { .. } => "permission denied",
        HiddenBecause::NotRegistered { .. } => "not registered",
        _ => "hidden",
    }
}

/// Print [`lines`] on stderr, each as a note.
pub fn print(registry: &ToolRegistry, servers: &[McpServerStatus], provider: &str, model: &str) {
    for line in lines(registry, servers, provider, model) {
        eprintln!("note: {line}");
    }
}
