//! Recovery against our own fault server (`mcp-demo-server`): startup retries with backoff,
//! restarting a server that died (bounded; the call in flight fails clearly, the next works).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use agcore::tools::ToolRegistry;
use agcore::tools::mcp::{McpClient, McpRetry, McpServersConfig, register_mcp_tools};
use serde_json::json;
use support::mcp::{before_10s, demo, demo_server};

fn client(args: &[&str]) -> McpClient {
    McpClient::new("demo", demo(args))
        .with_timeout(600)
        .with_connect_timeout(Duration::from_secs(600))
}

fn counter() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("starts").to_string_lossy().into_owned();
    (dir, file)
}

fn starts(file: &str) -> u64 {
    std::fs::read_to_string(file)
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn a_server_failing_its_first_starts_is_retried_with_backoff_until_it_serves() {
    let (dir, file) = counter();
    let fault = format!("fail-starts=2@{file}");
    let mut client = client(&["--fault", &fault])
        // Sandboxed by default (issue 34): its counter file is in its directory.
        .with_cwd(dir.path())
        .with_startup_retry(McpRetry::new(3, Duration::from_millis(20)));
    before_10s(client.connect()).await.unwrap();
    assert_eq!(client.connect_attempts(), 3);
    assert_eq!(starts(&file), 3);
    let echo = client.call_tool("echo", json!({"message": "up"})).await;
    assert_eq!(echo.unwrap(), json!("Echo: up"));
    client.close().await.unwrap();
}

#[tokio::test]
async fn retries_are_bounded_and_the_error_says_how_many_attempts_it_made() {
    let (dir, file) = counter();
    let fault = format!("fail-starts=5@{file}");
    let mut client = client(&["--fault", &fault])
        // Sandboxed by default (issue 34): its counter file is in its directory.
        .with_cwd(dir.path())
        .with_startup_retry(McpRetry::new(1, Duration::from_millis(20)));
    let error = before_10s(client.connect()).await.unwrap_err().to_string();
    assert!(error.contains("exit status: 7"), "{error}");
    assert!(error.ends_with("(after 2 attempts)"), "{error}");
    assert_eq!(starts(&file), 2);
    assert!(!client.is_connected());
}

#[tokio::test]
async fn a_program_that_cannot_start_is_not_retried() {
    let mut client = McpClient::new(
        "missing",
        agcore::tools::mcp::McpTransport::stdio(
            "/nonexistent/agcore-test-server",
            Vec::<String>::new(),
        ),
    )
    .with_startup_retry(McpRetry::new(5, Duration::from_secs(5)));
    let error = before_10s(client.connect()).await.unwrap_err().to_string();
    assert!(error.contains("cannot start"), "{error}");
    assert_eq!(client.connect_attempts(), 1);
}

#[tokio::test]
async fn a_crashed_server_is_restarted_on_the_next_call_with_its_tools_kept() {
    let mut client = client(&["--test-tools"]).with_restarts(2);
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    let handle = client.handle();
    register_mcp_tools(&mut registry, vec![client]).unwrap();

    // The call in flight when the server dies fails, saying how it ended; it is not re-sent.
    let crash = before_10s(handle.call_tool("crash", json!({})))
        .await
        .unwrap_err()
        .to_string();
    assert!(crash.contains("exit status: 3"), "{crash}");
    assert!(crash.contains("tools/call 'crash'"), "{crash}");
    // The next call — through the registry's adapter, as the loop makes it — starts it again.
    let echo = before_10s(registry.invoke("echo", json!({"message": "back"})))
        .await
        .unwrap();
    assert_eq!(echo.output.unwrap(), json!("Echo: back"));
    assert!(handle.is_connected());
    assert!(handle.cached_tools().iter().any(|t| t.name == "echo"));

    // A second crash and restart, then the limit: the next call says so and does not restart.
    before_10s(handle.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let echo = before_10s(handle.call_tool("echo", json!({"message": "again"}))).await;
    assert_eq!(echo.unwrap(), json!("Echo: again"));
    before_10s(handle.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let refused = before_10s(handle.call_tool("echo", json!({"message": "no"})))
        .await
        .unwrap_err()
        .to_string();
    assert!(refused.contains("exit status: 3"), "{refused}");
    assert!(refused.contains("restarted 2 time(s) already"), "{refused}");
}

#[tokio::test]
async fn many_calls_after_a_crash_restart_the_server_once() {
    let mut client = client(&["--test-tools"]).with_restarts(5);
    client.connect().await.unwrap();
    let first_pid = client.pid().unwrap();
    before_10s(client.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let calls = (0..8).map(|i| {
        let handle = client.handle();
        async move {
            handle
                .call_tool("echo", json!({"message": i.to_string()}))
                .await
        }
    });
    let results = before_10s(futures::future::join_all(calls)).await;
    for (i, result) in results.into_iter().enumerate() {
        assert_eq!(result.unwrap(), json!(format!("Echo: {i}")));
    }
    assert_eq!(client.restarts(), 1);
    assert_ne!(client.pid().unwrap(), first_pid);
    assert!(support::mcp::process_gone(first_pid));
    client.close().await.unwrap();
}

#[tokio::test]
async fn without_restarts_a_dead_server_stays_dead_until_connect() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    before_10s(client.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let later = before_10s(client.call_tool("echo", json!({"message": "x"})))
        .await
        .unwrap_err()
        .to_string();
    assert!(later.contains("exit status: 3"), "{later}");
    assert_eq!(client.restarts(), 0);
}

#[tokio::test]
async fn a_configured_server_restarts_and_retries_by_default() {
    let (dir, file) = counter();
    // Its counter file is in its directory: a configured server is sandboxed (issue 34) and
    // writes only there.
    let json = json!({"mcpServers": {"demo": {
        "command": demo_server(),
        "cwd": dir.path(),
        "args": ["--test-tools", "--fault", format!("fail-starts=1@{file}")],
        "startupBackoffMs": 10,
    }}});
    let config = McpServersConfig::parse(&json.to_string()).unwrap();
    let (_, client) = before_10s(config.connect_all()).await.remove(0);
    let client = client.unwrap();
    assert_eq!(client.connect_attempts(), 2);
    before_10s(client.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let echo = before_10s(client.call_tool("echo", json!({"message": "ok"}))).await;
    assert_eq!(echo.unwrap(), json!("Echo: ok"));
    assert_eq!(client.restarts(), 1);
}
