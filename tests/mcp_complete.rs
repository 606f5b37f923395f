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

fn everything_client() -> Option<agcore::tools::mcp::McpClient> {
    let script = npm_script(EVERYTHING, "dist/index.js")?;
    Some(agcore::tools::mcp::McpClient::new(
        "everything",
        agcore::tools::mcp::McpTransport::Stdio {
            command: "node".into(),
            args: vec![script.to_string_lossy().into_owned(), "stdio".into()],
        },
    ))
}

#[tokio::test]
async fn the_model_lists_and_reads_resources_through_read_only_tools() {
    use agcore::tools::{Permission, PermissionChecker, PermissionConfig, ToolKind};
    let Some(mut client) = everything_client() else {
        return;
    };
    client.connect().await.unwrap();
    // Read-only: the default permission checker (Delete denied, Read allowed) lets them run.
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(client.resource_tools()).unwrap();
    let list = registry.get("everything__list_resources").unwrap();
    assert_eq!(list.required_permissions(), vec![Permission::Read]);
    assert_eq!(list.kind(), ToolKind::Read);
    assert!(registry.get("everything__read_resource").is_some());
    assert_eq!(
        registry.explain("openai", "m").exposed().len(),
        2,
        "both are offered under the default permissions"
    );

    let listed = registry
        .invoke("everything__list_resources", serde_json::json!({}))
        .await
        .unwrap();
    let listed = listed.output.unwrap();
    let listed = listed.as_str().unwrap();
    let uri = listed
        .lines()
        .find_map(|l| {
            l.split(" — ")
                .next()
                .filter(|u| u.starts_with("demo://resource/static/document/"))
        })
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        listed.contains("templates (fill in the {placeholders}):"),
        "{listed}"
    );
    assert!(
        listed.contains("demo://resource/dynamic/text/{"),
        "{listed}"
    );

    let read = registry
        .invoke("everything__read_resource", serde_json::json!({"uri": uri}))
        .await
        .unwrap();
    let text = read.output.unwrap();
    let expected = client.read_resource(uri).await.unwrap()[0]
        .text
        .clone()
        .unwrap();
    let text = text.as_str().unwrap();
    if expected.len() <= agcore::tools::mcp::MAX_RESOURCE_OUTPUT_BYTES {
        assert_eq!(text, expected);
    } else {
        assert!(text.contains("call again with offset"), "{text}");
    }

    // A template filled in; a missing resource is a tool error the model reads.
    let dynamic = registry
        .invoke(
            "everything__read_resource",
            serde_json::json!({"uri": "demo://resource/dynamic/text/3"}),
        )
        .await
        .unwrap();
    assert!(!dynamic.output.unwrap().as_str().unwrap().is_empty());
    let missing = registry
        .invoke(
            "everything__read_resource",
            serde_json::json!({"uri": "demo://nothing/here"}),
        )
        .await
        .unwrap();
    assert!(missing.output.is_err(), "{missing:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_subscribed_resource_announces_its_updates() {
    use agcore::tools::mcp::McpResourceUpdate;
    let Some(mut client) = everything_client() else {
        return;
    };
    client.connect().await.unwrap();
    assert!(client.server_info().unwrap().can_subscribe);
    let mut updates = client.resource_updates();
    let uri = "demo://resource/dynamic/text/1";
    client.subscribe_resource(uri).await.unwrap();
    assert_eq!(client.handle().subscribed_resources(), vec![uri.to_owned()]);
    // server-everything sends updates for subscribed resources once this tool is on (one at
    // once, then every 5 s).
    client
        .call_tool("toggle-subscriber-updates", serde_json::json!({}))
        .await
        .unwrap();
    let update = tokio::time::timeout(std::time::Duration::from_secs(10), updates.recv())
        .await
        .expect("an update within 10 s")
        .unwrap();
    assert_eq!(
        update,
        McpResourceUpdate::Updated {
            server: "everything".into(),
            uri: uri.into()
        }
    );
    client.unsubscribe_resource(uri).await.unwrap();
    assert!(client.handle().subscribed_resources().is_empty());
    client.close().await.unwrap();
}
