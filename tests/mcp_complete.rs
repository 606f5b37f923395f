//! MCP against `@modelcontextprotocol/server-everything` (stdio): per-server tool filters,
//! resources and prompts for the model, resource subscriptions, images for the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use agcore::tools::ToolRegistry;
use agcore::tools::exposure::HiddenBecause;
use agcore::tools::mcp::{McpServersConfig, McpSkipReason, register_mcp_tools_with_report};
use mcp_support::npm_script;

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

/// An `mcpServers` entry for server-everything with `extra` fields, or `None` when it is not
/// installed.
fn everything_config(extra: serde_json::Value) -> Option<McpServersConfig> {
    let script = npm_script(EVERYTHING, "dist/index.js")?;
    let mut entry = serde_json::json!({
        "command": "node",
        "args": [script.to_string_lossy(), "stdio"],
    });
    entry
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let json = serde_json::json!({"mcpServers": {"everything": entry}});
    Some(McpServersConfig::parse(&json.to_string()).unwrap())
}

#[tokio::test]
async fn include_and_exclude_lists_leave_tools_out_and_say_why() {
    let Some(config) = everything_config(serde_json::json!({
        "include": ["echo", "get-*"],
        "exclude": ["get-env"],
    })) else {
        return;
    };
    let mut connected = config.connect_all().await;
    let (_, client) = connected.remove(0);
    let mut client = client.unwrap();
    let names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(names.contains(&"get-sum".to_owned()), "{names:?}");
    assert!(!names.contains(&"get-env".to_owned()), "{names:?}");
    assert!(
        names.iter().all(|n| n == "echo" || n.starts_with("get-")),
        "{names:?}"
    );

    let skipped = client.skipped_tools();
    let env = skipped.iter().find(|s| s.tool == "get-env").unwrap();
    assert_eq!(
        env.reason,
        McpSkipReason::Excluded {
            pattern: "get-env".into()
        }
    );
    let not_included = skipped
        .iter()
        .find(|s| s.tool == "trigger-long-running-operation" || s.tool == "add")
        .unwrap_or_else(|| panic!("{skipped:?}"));
    assert!(matches!(
        &not_included.reason,
        McpSkipReason::NotIncluded { include } if include.len() == 2
    ));

    // Registered: only what the filter lets through; the report lists the rest as hidden.
    let mut registry = ToolRegistry::new();
    let registration = register_mcp_tools_with_report(&mut registry, vec![client]);
    assert!(registration.skipped.iter().any(|s| s.tool == "get-env"));
    assert!(registry.get("get-env").is_none() && registry.get("echo").is_some());
    let report = registry
        .explain("openai", "m")
        .with_skipped_mcp_tools(registration.skipped);
    let row = report.tool("get-env").unwrap();
    assert!(!row.exposed);
    assert!(matches!(
        &row.hidden_because[..],
        [HiddenBecause::McpSkipped { server, .. }] if server == "everything"
    ));
    let text = report.to_string();
    let line = text.lines().find(|l| l.contains("get-env")).unwrap();
    assert!(line.starts_with("hidden"), "{line}");
    assert!(
        line.contains("excluded by the server's `exclude` entry 'get-env'"),
        "{line}"
    );
}
