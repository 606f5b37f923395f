//! MCP tools in the registry: adapters, permissions from annotations, result shapes, naming on
//! clashes, concurrent calls over one connection, `mcpServers` config, HTTP headers.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use agcore::tools::mcp::{
    McpClient, McpServersConfig, McpToolNaming, McpTransport, register_mcp_tools,
};
use agcore::tools::{
    Permission, PermissionChecker, PermissionConfig, ToolError, ToolKind, ToolRegistry, ToolSource,
};
use serde_json::json;
use support::mcp::{demo, demo_server};

async fn connected(name: &str, args: &[&str]) -> McpClient {
    let mut client = McpClient::new(name, demo(args));
    client.connect().await.unwrap();
    client
}

#[tokio::test]
async fn adapters_register_next_to_local_tools_and_take_permissions_from_annotations() {
    let client = connected("demo", &["--test-tools"]).await;
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(client.into_tools()).unwrap();

    let weather = registry.get("get_weather").unwrap();
    assert_eq!(weather.required_permissions(), vec![Permission::Read]);
    assert_eq!(weather.kind(), ToolKind::Read);
    assert_eq!(weather.title(&json!({})), "Get weather");
    assert_eq!(
        weather.source(),
        ToolSource::Mcp {
            server: "demo".into()
        }
    );
    // Only openWorldHint: the other hints take the spec's defaults (not read-only,
    // destructive), so the tool may write and delete too.
    assert_eq!(
        registry.get("open_world").unwrap().required_permissions(),
        vec![Permission::Write, Permission::Delete, Permission::Network]
    );
    // No openWorldHint: the spec's default (true) adds Network.
    assert_eq!(
        registry.get("crash").unwrap().required_permissions(),
        vec![Permission::Write, Permission::Delete, Permission::Network]
    );

    // Structured content comes back as the value.
    let invocation = registry
        .invoke("get_weather", json!({"city": "Oslo"}))
        .await
        .unwrap();
    let output = invocation.output.unwrap();
    assert_eq!(output["city"], "Oslo");
    assert_eq!(output["conditions"], "sunny");

    // The default permission config denies Delete: the crash tool never runs.
    let denied = registry.invoke("crash", json!({})).await.unwrap_err();
    assert!(matches!(denied, ToolError::PermissionDenied(tool, _) if tool == "crash"));

    // Schema validation happens in the registry, before the server sees the call.
    let invalid = registry.invoke("get_weather", json!({})).await.unwrap_err();
    assert!(matches!(invalid, ToolError::InvalidArguments(..)));
}

#[tokio::test]
async fn result_shapes_reach_the_model_as_readable_text() {
    let client = connected("demo", &["--test-tools"]).await;
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();

    let image = registry.invoke("image", json!({})).await.unwrap();
    let output = image.output.unwrap();
    assert_eq!(output[1]["type"], "image");
    assert_eq!(output[1]["mimeType"], "image/png");
    let tool = registry.get("image").unwrap();
    let text = tool.model_content(&output);
    assert!(text.starts_with("a pixel\n[image: image/png,"), "{text}");

    let multi = registry.invoke("multi_text", json!({})).await.unwrap();
    assert_eq!(multi.output.unwrap(), json!("first\nsecond"));

    let failed = registry.invoke("fail", json!({})).await.unwrap();
    assert!(matches!(
        failed.output,
        Err(ToolError::ExecutionFailed(tool, text)) if tool == "fail" && text == "the demo tool failed on purpose"
    ));
}

#[tokio::test]
async fn concurrent_calls_share_one_connection() {
    let client = connected("demo", &["--test-tools"]).await;
    let pid = client.pid();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    let calls: Vec<(String, serde_json::Value)> = (0..64)
        .map(|i| ("echo".to_owned(), json!({"message": format!("m{i}")})))
        .collect();
    let results = registry.invoke_all(calls).await;
    for (i, invocation) in results.into_iter().enumerate() {
        assert_eq!(invocation.output.unwrap(), json!(format!("Echo: m{i}")));
    }
    assert!(pid.is_some());
}

#[tokio::test]
async fn slow_calls_overlap_on_one_connection() {
    let mut client = McpClient::new("demo", demo(&["--test-tools"]));
    client.connect().await.unwrap();
    let handle = client.handle();
    // Ten 2 s calls in flight at once; a 10 s timer shows they did not run one after another.
    let calls =
        futures::future::join_all((0..10).map(|_| handle.call_tool("slow", json!({"ms": 2000}))));
    let results = support::mcp::before_10s(calls).await;
    assert!(results.iter().all(Result::is_ok));
}

#[tokio::test]
async fn qualified_naming_prefixes_the_server() {
    let mut client = McpClient::new("my demo", demo(&[])).with_naming(McpToolNaming::Qualified);
    client.connect().await.unwrap();
    let names: Vec<String> = client
        .into_tools()
        .iter()
        .map(|tool| tool.name().to_owned())
        .collect();
    assert_eq!(
        names,
        ["my_demo__get_weather", "my_demo__echo", "my_demo__add"]
    );
}

#[tokio::test]
async fn clashing_tool_names_of_two_servers_get_server_prefixes() {
    let a = connected("alpha", &[]).await;
    let b = connected("beta", &[]).await;
    let mut registry = ToolRegistry::new();
    let registered = register_mcp_tools(&mut registry, [a, b]).unwrap();
    assert_eq!(registered.len(), 6);
    assert!(registry.get("alpha__echo").is_some());
    assert!(registry.get("beta__echo").is_some());
    assert!(registry.get("echo").is_none());
    let echo = registry
        .invoke("beta__echo", json!({"message": "hi"}))
        .await
        .unwrap();
    assert_eq!(echo.output.unwrap(), json!("Echo: hi"));
}

#[tokio::test]
async fn config_connects_all_servers_and_reports_each_failure() {
    let server = demo_server();
    let server = serde_json::to_string(&server).unwrap();
    // Raw text: file order matters (json! would sort the keys).
    let text = format!(
        r#"{{"mcpServers": {{
            "good": {{"command": {server}, "args": ["--test-tools"], "env": {{"DEMO": "1"}}}},
            "broken": {{"command": "/nonexistent/server"}},
            "bad-entry": {{"args": []}},
            "off": {{"command": {server}, "disabled": true}}
        }}}}"#
    );
    let config = McpServersConfig::parse(&text).unwrap();
    let results = config.connect_all().await;
    let names: Vec<&str> = results.iter().map(|(name, _)| name.as_str()).collect();
    assert_eq!(names, ["good", "broken", "bad-entry"]);
    let good = results[0].1.as_ref().unwrap();
    assert!(good.is_connected());
    assert_eq!(good.server_info().unwrap().name, "mcp-demo-server");
    assert!(matches!(&results[1].1, Err(ToolError::McpError(m)) if m.contains("cannot start")));
    assert!(matches!(&results[2].1, Err(ToolError::McpError(m)) if m.contains("'bad-entry'")));
}

#[tokio::test]
async fn config_file_loads_from_disk() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mcp.json");
    std::fs::write(
        &path,
        r#"{"mcpServers": {"t": {"type": "stdio", "command": "x", "args": ["--y"], "cwd": "/tmp"}}}"#,
    )
    .unwrap();
    let config = McpServersConfig::load(&path).unwrap();
    assert_eq!(config.server_names(), ["t"]);
    let missing = McpServersConfig::load(dir.path().join("nope.json")).unwrap_err();
    assert!(missing.to_string().contains("nope.json"));
}

#[tokio::test]
async fn http_transport_sends_bearer_token_and_custom_headers() {
    use wiremock::matchers::{body_partial_json, header, method};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer t0ken"))
        .and(header("x-team", "agcore"))
        .and(body_partial_json(json!({"method": "initialize"})))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .insert_header("mcp-session-id", "s1")
                .set_body_json(json!({"jsonrpc": "2.0", "id": 0, "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {},
                    "serverInfo": {"name": "mock", "version": "1"}
                }})),
        )
        .mount(&server)
        .await;
    Mock::given(method("POST"))
        .and(header("authorization", "Bearer t0ken"))
        .and(body_partial_json(
            json!({"method": "notifications/initialized"}),
        ))
        .respond_with(ResponseTemplate::new(202))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(405))
        .mount(&server)
        .await;
    Mock::given(method("DELETE"))
        .respond_with(ResponseTemplate::new(200))
        .mount(&server)
        .await;

    let transport = McpTransport::http(format!("{}/mcp", server.uri()))
        .with_bearer_token("t0ken")
        .with_header("X-Team", "agcore");
    let mut client = McpClient::new("mock", transport);
    client.connect().await.unwrap();
    let info = client.server_info().unwrap();
    assert_eq!(info.name, "mock");
    assert!(!info.has_tools);
    client.close().await.unwrap();
}

#[tokio::test]
async fn http_server_that_is_not_there_fails_to_connect() {
    let mut client = McpClient::new("nobody", McpTransport::http("http://127.0.0.1:9/mcp"));
    let error = client.connect().await.unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(m) if m.contains("'nobody'") && m.contains("127.0.0.1:9")),
        "{error:?}"
    );
}

#[tokio::test]
async fn sync_registry_registers_tools_that_appear_after_list_changed_and_descriptions_follow() {
    let client = connected("demo", &["--test-tools"]).await;
    let handle = client.handle();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    assert!(registry.get("extra").is_none());
    let mut changes = handle.tool_changes();
    changes.borrow_and_update();
    registry.invoke("change_tools", json!({})).await.unwrap();
    support::mcp::before_10s(changes.changed()).await.unwrap();
    let sync = handle.sync_registry(&mut registry).unwrap();
    assert_eq!(sync.added, ["extra"]);
    assert!(sync.removed.is_empty());
    let extra = registry.invoke("extra", json!({})).await.unwrap();
    assert_eq!(extra.output.unwrap(), json!("ok"));
    // A tool that stayed is sent with its new description.
    let definitions = registry.definitions();
    let change = definitions
        .iter()
        .find(|definition| definition.function.name == "change_tools")
        .unwrap();
    assert_eq!(
        change.function.description.as_deref(),
        Some("Already added the tool `extra`")
    );
    // Nothing changes on a second sync.
    assert_eq!(
        handle.sync_registry(&mut registry).unwrap(),
        Default::default()
    );
}

#[tokio::test]
async fn server_status_lists_tools_with_permissions_and_errors_as_text() {
    let server = serde_json::to_string(&demo_server()).unwrap();
    let text = format!(
        r#"{{"mcpServers": {{"demo": {{"command": {server}}}, "gone": {{"command": "/nonexistent/x"}}}}}}"#
    );
    let config = McpServersConfig::parse(&text).unwrap();
    let statuses: Vec<agcore::tools::mcp::McpServerStatus> = config
        .connect_all()
        .await
        .iter()
        .map(|(name, result)| agcore::tools::mcp::McpServerStatus::of(name, result))
        .collect();
    let json = serde_json::to_value(&statuses).unwrap();
    assert_eq!(json[0]["name"], "demo");
    assert_eq!(json[0]["connected"], true);
    assert_eq!(json[0]["info"]["name"], "mcp-demo-server");
    assert_eq!(json[0]["tools"][0]["name"], "get_weather");
    assert_eq!(json[0]["tools"][0]["title"], "Get weather");
    assert_eq!(json[0]["tools"][0]["permissions"], json!(["read"]));
    assert_eq!(json[0]["tools"][0]["kind"], "read");
    assert_eq!(json[1]["connected"], false);
    assert!(json[1]["error"].as_str().unwrap().contains("cannot start"));
}

#[tokio::test]
async fn a_withheld_variable_does_not_reach_a_stdio_server_but_the_others_do() {
    // Both inherited from this process (cargo sets CARGO_MANIFEST_DIR for the tests it runs):
    // no test has to change its own environment.
    let visible = std::env::var("CARGO_MANIFEST_DIR").expect("cargo test sets CARGO_MANIFEST_DIR");
    assert!(std::env::var_os("PATH").is_some());
    let mut client = McpClient::new("demo", demo(&["--test-tools"]))
        .without_env("PATH")
        .without_env("AGCORE_EXPLICIT")
        .with_env("AGCORE_EXPLICIT", "asked-for");
    client.connect().await.unwrap();
    let seen = |value: serde_json::Value| value["value"].clone();
    assert_eq!(
        seen(
            client
                .call_tool("env", json!({"name": "PATH"}))
                .await
                .unwrap()
        ),
        serde_json::Value::Null
    );
    assert_eq!(
        seen(
            client
                .call_tool("env", json!({"name": "CARGO_MANIFEST_DIR"}))
                .await
                .unwrap()
        ),
        json!(visible)
    );
    // A variable the caller sets explicitly is passed even when also withheld.
    assert_eq!(
        seen(
            client
                .call_tool("env", json!({"name": "AGCORE_EXPLICIT"}))
                .await
                .unwrap()
        ),
        "asked-for"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn restricted_mode_hides_mcp_tools_unless_they_say_open_world_false() {
    use agcore::tools::exposure::{ExposurePolicy, HiddenBecause};
    let client = connected("demo", &[]).await;
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_exposure(ExposurePolicy::default().with_restricted_mode(true));
    registry.register_all(client.into_tools()).unwrap();

    // `add` has no annotations (the spec's defaults: it may write, delete and reach the outside
    // world), `echo` only readOnlyHint. `get_weather` says readOnlyHint: true and
    // openWorldHint: false.
    assert_eq!(
        registry.get("add").unwrap().required_permissions(),
        vec![Permission::Write, Permission::Delete, Permission::Network]
    );
    let offered: Vec<String> = registry
        .exposed_definitions("openai", "m")
        .into_iter()
        .map(|definition| definition.function.name)
        .collect();
    assert_eq!(offered, ["get_weather"]);
    let report = registry.explain("openai", "m");
    for name in ["add", "echo"] {
        let entry = report.tools.iter().find(|tool| tool.name == name).unwrap();
        assert!(
            entry.hidden_because.iter().any(|reason| matches!(
                reason,
                HiddenBecause::RestrictedMode { permissions } if permissions.contains(&Permission::Network)
            )),
            "{name}: {:?}",
            entry.hidden_because
        );
    }
    let error = registry
        .invoke("add", json!({"a": 1, "b": 2}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool 'add' is not available: restricted mode: needs Network"
    );
    let weather = registry
        .invoke("get_weather", json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(weather.output.unwrap()["city"], "Oslo");

    // Without restricted mode, and with the user vouching for `add` (it only computes), it runs.
    let mut client =
        McpClient::new("demo", demo(&[])).with_tool_permissions("add", vec![Permission::Network]);
    client.connect().await.unwrap();
    let mut open = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    open.register_all(client.into_tools()).unwrap();
    assert!(open.invoke("add", json!({"a": 1, "b": 2})).await.is_ok());
}
