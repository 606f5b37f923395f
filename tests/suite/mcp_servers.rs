//! McpClient against real MCP servers: server-everything (stdio and streamable HTTP),
//! server-filesystem, mcp-server-time. They are installed by `.ci/run` (see `mcp_support`);
//! without them these tests skip locally and fail on CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use agcore::tools::mcp::{McpClient, McpTransport};
use agcore::tools::{Permission, ToolError, ToolRegistry};
use serde_json::json;
use support::mcp::{before_10s, npm_script, python_script};

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";
const FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem";

fn node(script: &std::path::Path, args: &[&str]) -> McpTransport {
    let mut all = vec![script.display().to_string()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    McpTransport::Stdio {
        command: "node".into(),
        args: all,
    }
}

#[tokio::test]
async fn everything_over_stdio_lists_and_calls_tools() {
    let Some(script) = npm_script(EVERYTHING, "dist/index.js") else {
        return;
    };
    let (progress_tx, mut progress_rx) = tokio::sync::mpsc::unbounded_channel();
    let mut client = McpClient::new("everything", node(&script, &["stdio"]))
        .with_progress_callback(move |progress| {
            let _ = progress_tx.send(progress);
        });
    client.connect().await.unwrap();
    let info = client.server_info().unwrap();
    assert_eq!(info.protocol_version, "2025-11-25");

    let tools = client.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    for expected in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "get-structured-content",
    ] {
        assert!(
            names.contains(&expected),
            "{expected} missing from {names:?}"
        );
    }

    let echo = client.call_tool("echo", json!({"message": "hello"})).await;
    assert_eq!(echo.unwrap(), json!("Echo: hello"));

    // Structured content comes back as the value itself.
    let weather = client
        .call_tool("get-structured-content", json!({"location": "Chicago"}))
        .await
        .unwrap();
    assert_eq!(weather["temperature"], 36);

    // Images stay typed.
    let image = client.call_tool("get-tiny-image", json!({})).await.unwrap();
    let blocks = image.as_array().unwrap();
    let png = blocks.iter().find(|b| b["type"] == "image").unwrap();
    assert_eq!(png["mimeType"], "image/png");
    assert!(png["data"].as_str().unwrap().len() > 100);

    // Progress notifications reach the callback.
    let done = client
        .call_tool(
            "trigger-long-running-operation",
            json!({"duration": 0.3, "steps": 3}),
        )
        .await
        .unwrap();
    assert!(done.as_str().unwrap().contains("completed"));
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let progress = before_10s(progress_rx.recv()).await.unwrap();
        assert_eq!(progress.server, "everything");
        assert_eq!(progress.total, Some(3.0));
        seen.push(progress.progress);
    }
    seen.sort_by(f64::total_cmp);
    assert_eq!(seen, [1.0, 2.0, 3.0]);

    // Bad arguments (sent past the registry's validation) are reported, not swallowed.
    let error = client
        .call_tool("get-sum", json!({"a": "x"}))
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            ToolError::ExecutionFailed(..) | ToolError::McpError(_)
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().to_lowercase().contains("invalid"),
        "{error}"
    );

    // Adapters: the read-only annotation becomes the Read permission.
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    assert_eq!(
        registry
            .get("get-structured-content")
            .unwrap()
            .required_permissions(),
        vec![Permission::Read]
    );
    let sum = registry
        .invoke("get-sum", json!({"a": 2, "b": 40}))
        .await
        .unwrap();
    assert!(sum.output.unwrap().to_string().contains("42"));
}

/// A free localhost port (bound, read, released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn everything_over_streamable_http_lists_and_calls_tools() {
    let Some(script) = npm_script(EVERYTHING, "dist/index.js") else {
        return;
    };
    let port = free_port();
    let mut server = tokio::process::Command::new("node")
        .arg(&script)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // Wait until it listens (up to 30 s: node starts slowly on a loaded 2-core machine).
    let mut listening = false;
    for _ in 0..600 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            listening = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listening, "server-everything did not listen on {port}");

    let url = format!("http://127.0.0.1:{port}/mcp");
    let mut client = McpClient::new("everything-http", McpTransport::http(url));
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name() == "echo"));
    let handle = client.handle();
    let echoes = futures::future::join_all(
        (0..8).map(|i| handle.call_tool("echo", json!({"message": format!("h{i}")}))),
    )
    .await;
    for (i, echo) in echoes.into_iter().enumerate() {
        assert_eq!(echo.unwrap(), json!(format!("Echo: h{i}")));
    }
    let weather = client
        .call_tool("get-structured-content", json!({"location": "New York"}))
        .await
        .unwrap();
    assert_eq!(weather["humidity"], 82);

    // The server goes away: calls fail fast with McpError, not after the 30 s timeout.
    server.kill().await.unwrap();
    let error = before_10s(client.call_tool("echo", json!({"message": "x"})))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(m) if m.contains("everything-http")),
        "{error:?}"
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn filesystem_server_reads_and_writes_in_its_root_and_reports_denials() {
    let Some(script) = npm_script(FILESYSTEM, "dist/index.js") else {
        return;
    };
    let root = tempfile::tempdir().unwrap();
    let root_path = root.path().canonicalize().unwrap();
    let root_str = root_path.display().to_string();
    let mut client = McpClient::new("fs", node(&script, &[&root_str]));
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(tools.iter().any(|tool| tool.name() == "read_text_file"));

    let file = root_path.join("note.txt").display().to_string();
    client
        .call_tool("write_file", json!({"path": file, "content": "hello fs"}))
        .await
        .unwrap();
    let read = client
        .call_tool("read_text_file", json!({"path": file}))
        .await
        .unwrap();
    let text = read
        .get("content")
        .and_then(|c| c.as_str())
        .or(read.as_str());
    assert_eq!(text, Some("hello fs"));

    // Outside the root: the server's isError result becomes ExecutionFailed with its text.
    let error = client
        .call_tool("read_text_file", json!({"path": "/etc/hostname"}))
        .await
        .unwrap_err();
    let ToolError::ExecutionFailed(tool, message) = &error else {
        panic!("expected ExecutionFailed, got {error:?}");
    };
    assert_eq!(tool, "read_text_file");
    assert!(message.to_lowercase().contains("denied"), "{message}");

    // Annotations: read tools need Read, destructive ones Delete.
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    assert_eq!(
        registry
            .get("read_text_file")
            .unwrap()
            .required_permissions(),
        vec![Permission::Read]
    );
}

#[tokio::test]
async fn time_server_answers_in_the_requested_timezone() {
    let Some(program) = python_script("mcp-server-time") else {
        return;
    };
    let mut client = McpClient::new(
        "time",
        McpTransport::Stdio {
            command: program.display().to_string(),
            args: vec!["--local-timezone".into(), "UTC".into()],
        },
    );
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    assert!(names.contains(&"get_current_time"), "{names:?}");
    assert!(names.contains(&"convert_time"), "{names:?}");
    let now = client
        .call_tool("get_current_time", json!({"timezone": "Asia/Tokyo"}))
        .await
        .unwrap();
    assert!(now.to_string().contains("Asia/Tokyo"), "{now}");
    let error = client
        .call_tool("get_current_time", json!({"timezone": "Not/AZone"}))
        .await
        .unwrap_err();
    assert!(error.to_string().contains("Not/AZone"), "{error}");
    let pid = client.pid().unwrap();
    client.close().await.unwrap();
    assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
}

/// The npm servers are pinned, transitive versions too: `.ci/npm/package-lock.json` is
/// committed, names every top-level package at the exact version `package.json` asks for, and
/// the installed tree (`npm ci`, `.ci/install-mcp-servers.sh`) is exactly the lock's.
#[test]
fn the_installed_npm_servers_are_exactly_the_lockfiles() {
    let npm = support::mcp::repo().join(".ci/npm");
    let read = |path: &std::path::Path| -> serde_json::Value {
        let text = std::fs::read_to_string(path)
            .unwrap_or_else(|error| panic!("{}: {error}", path.display()));
        serde_json::from_str(&text).unwrap()
    };
    // `npm ci` installs the lock's tree or fails; `npm install` would re-resolve.
    let script =
        std::fs::read_to_string(support::mcp::repo().join(".ci/install-mcp-servers.sh")).unwrap();
    assert!(
        script
            .lines()
            .any(|line| line.trim_start().starts_with("npm ci "))
            && !script
                .lines()
                .any(|line| line.trim_start().starts_with("npm install")),
        ".ci/install-mcp-servers.sh must install with `npm ci`:\n{script}"
    );
    let manifest = read(&npm.join("package.json"));
    let lock = read(&npm.join("package-lock.json"));
    assert_eq!(lock["lockfileVersion"], 3);
    let packages = lock["packages"].as_object().unwrap();
    let wanted = manifest["dependencies"].as_object().unwrap();
    assert!(wanted.contains_key(EVERYTHING) && wanted.contains_key(FILESYSTEM));
    for (name, spec) in wanted {
        let spec = spec.as_str().unwrap();
        // An npm alias (`npm:@scope/pkg@1.2.3`) installs that package under `name`.
        let (package, version) = match spec.strip_prefix("npm:") {
            Some(aliased) => {
                let at = aliased
                    .rfind('@')
                    .unwrap_or_else(|| panic!("{name}: {spec}"));
                (Some(&aliased[..at]), &aliased[at + 1..])
            }
            None => (None, spec),
        };
        // Exact: digits and dots, with an optional pre-release tag (`0.2.0-alpha.12`).
        let (release, pre) = version.split_once('-').unwrap_or((version, ""));
        assert!(
            !release.is_empty()
                && release.chars().all(|c| c.is_ascii_digit() || c == '.')
                && pre.chars().all(|c| c.is_ascii_alphanumeric() || c == '.'),
            "{name}@{spec} is not an exact version"
        );
        let installed = &packages[&format!("node_modules/{name}")];
        assert_eq!(
            installed["version"], version,
            "{name}: package.json and the lock disagree"
        );
        if let Some(package) = package {
            assert_eq!(
                installed["name"], package,
                "{name}: the alias names another package"
            );
        }
    }
    assert!(
        packages.len() > wanted.len(),
        "the lock pins the transitive packages"
    );
    for (path, entry) in packages {
        assert!(
            path.is_empty() || entry["integrity"].is_string() || entry["link"] == true,
            "{path} has no integrity hash"
        );
    }

    let Some(modules) = support::mcp::require(
        "the npm MCP servers",
        "run `.ci/install-mcp-servers.sh`",
        support::mcp::node_modules(),
    ) else {
        return;
    };
    // The tree the tests use (`AGCORE_TEST_NODE_MODULES` may point elsewhere) is the lock's.
    let root = modules.parent().unwrap();
    let mut differ = Vec::new();
    for (path, entry) in packages {
        let Some(version) = entry["version"].as_str().filter(|_| !path.is_empty()) else {
            continue;
        };
        let installed = root.join(path).join("package.json");
        let installed = std::fs::read_to_string(&installed)
            .ok()
            .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok());
        let installed = installed.as_ref().and_then(|m| m["version"].as_str());
        // Optional packages for other platforms are in the lock but not installed.
        let optional = entry["optional"] == true;
        if installed != Some(version) && !(optional && installed.is_none()) {
            differ.push(format!("{path}: lock {version}, installed {installed:?}"));
        }
    }
    assert!(
        differ.is_empty(),
        "installed tree differs from the lock:\n{}",
        differ.join("\n")
    );
}

/// A server's `notifications/progress` on a call reach that call's card in a run (as
/// `ToolCallUpdate`s with progress, tied to the call id, in order), not only the client-wide
/// callback. Before, they reached only the callback and an editor's card showed nothing
/// until the call ended.
#[tokio::test]
async fn a_servers_progress_on_a_call_updates_that_calls_card() {
    use agcore::llm::testing::ScriptedModel;
    use agcore::llm::{CycleConfig, LlmCycle, StreamEvent, ToolCall};
    use futures::StreamExt;

    let Some(script) = npm_script(EVERYTHING, "dist/index.js") else {
        return;
    };
    let mut client = McpClient::new("everything", node(&script, &["stdio"]));
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![ToolCall::new(
            "long1",
            "trigger-long-running-operation",
            r#"{"duration": 0.6, "steps": 3}"#,
        )])
        .reply_text("Done.");
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let events: Vec<StreamEvent> = before_10s(async {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), &registry)
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        events
    })
    .await;
    let progress: Vec<(u64, Option<u64>)> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallUpdate { id, update } if id == "long1" => update
                .progress
                .as_ref()
                .map(|progress| (progress.done, progress.total)),
            _ => None,
        })
        .collect();
    assert_eq!(progress, [(1, Some(3)), (2, Some(3)), (3, Some(3))]);
    // Each before the call's end.
    let last_update = events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::ToolCallUpdate { id, .. } if id == "long1"))
        .unwrap();
    let completed = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolExecutionCompleted { .. }))
        .unwrap();
    assert!(last_update < completed, "{events:#?}");
}
