//! McpClient against our own misbehaving server (`mcp-demo-server`): every fault gives its
//! typed error or behaviour, fast.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use agcore::tools::ToolError;
use agcore::tools::mcp::McpClient;
use serde_json::json;
use support::mcp::{before_10s, demo, wait_gone};

/// A client whose timeouts are far beyond the 10 s evidence timer.
fn client(args: &[&str]) -> McpClient {
    McpClient::new("demo", demo(args))
        .with_timeout(600)
        .with_connect_timeout(Duration::from_secs(600))
}

#[tokio::test]
async fn crash_mid_call_fails_fast_with_exit_status_and_stderr() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    let error = before_10s(client.call_tool("crash", json!({})))
        .await
        .unwrap_err();
    let ToolError::McpError(message) = &error else {
        panic!("expected McpError, got {error:?}");
    };
    assert!(message.contains("'demo'"), "{message}");
    assert!(message.contains("exit status: 3"), "{message}");
    assert!(message.contains("tools/call 'crash'"), "{message}");
    assert!(message.contains("crashing on purpose"), "{message}");
    assert!(!client.is_connected());

    // Later calls fail at once too; connect() starts the server again.
    let later = before_10s(client.call_tool("echo", json!({"message": "x"})))
        .await
        .unwrap_err();
    assert!(matches!(later, ToolError::McpError(m) if m.contains("exit status: 3")));
    client.connect().await.unwrap();
    assert!(client.is_connected());
    let echo = client.call_tool("echo", json!({"message": "again"})).await;
    assert_eq!(echo.unwrap(), json!("Echo: again"));
}

#[tokio::test]
async fn every_pending_call_fails_when_the_server_exits() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    let handle = client.handle();
    let hanging: Vec<_> = (0..5)
        .map(|_| {
            let handle = handle.clone();
            tokio::spawn(async move { handle.call_tool("hang", json!({})).await })
        })
        .collect();
    tokio::task::yield_now().await;
    let crash = client.call_tool("crash", json!({})).await;
    assert!(crash.is_err());
    for call in hanging {
        let result = before_10s(call).await.unwrap();
        assert!(matches!(result, Err(ToolError::McpError(m)) if m.contains("exit status: 3")));
    }
}

#[tokio::test]
async fn hanging_call_times_out_names_server_method_and_limit_and_is_cancelled() {
    let mut client = McpClient::new("demo", demo(&["--test-tools"]))
        .with_request_timeout(Duration::from_millis(300));
    client.connect().await.unwrap();
    let error = client.call_tool("hang", json!({})).await.unwrap_err();
    let ToolError::McpTimeout(message) = &error else {
        panic!("expected McpTimeout, got {error:?}");
    };
    assert!(message.contains("'demo'"), "{message}");
    assert!(message.contains("tools/call 'hang'"), "{message}");
    assert!(message.contains("0.300s"), "{message}");
    assert!(message.contains("cancelled"), "{message}");
    // The server saw notifications/cancelled for the request.
    before_10s(async {
        while !client
            .stderr_tail()
            .iter()
            .any(|line| line.contains("hang was cancelled"))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // The connection is still usable.
    assert!(client.is_connected());
    let echo = client.call_tool("echo", json!({"message": "ok"})).await;
    assert_eq!(echo.unwrap(), json!("Echo: ok"));
}

#[tokio::test]
async fn exit_during_initialize_fails_fast_with_exit_status_and_stderr() {
    let mut client = client(&["--fault", "exit-during-init"]);
    let error = before_10s(client.connect()).await.unwrap_err();
    let ToolError::McpError(message) = &error else {
        panic!("expected McpError, got {error:?}");
    };
    assert!(message.contains("exit status: 7"), "{message}");
    assert!(message.contains("during initialize"), "{message}");
    assert!(
        message.contains("exiting during initialize"),
        "stderr quoted: {message}"
    );
    assert!(!client.is_connected());
}

#[tokio::test]
async fn missing_program_is_a_clear_start_error() {
    let mut client = McpClient::new(
        "ghost",
        agcore::tools::mcp::McpTransport::Stdio {
            command: "/nonexistent/mcp-server".into(),
            args: vec![],
        },
    );
    let error = client.connect().await.unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(m) if m.contains("cannot start") && m.contains("/nonexistent/mcp-server")),
        "{error:?}"
    );
}

#[tokio::test]
async fn hung_initialize_times_out_quoting_stderr() {
    let mut client = McpClient::new("demo", demo(&["--fault", "hang-init"]))
        .with_connect_timeout(Duration::from_secs(2));
    let error = client.connect().await.unwrap_err();
    let ToolError::McpTimeout(message) = &error else {
        panic!("expected McpTimeout, got {error:?}");
    };
    assert!(
        message.contains("initialize") && message.contains("within 2s"),
        "{message}"
    );
    assert!(
        message.contains("will never answer"),
        "stderr quoted: {message}"
    );
}

#[tokio::test]
async fn slow_initialize_within_the_connect_timeout_succeeds() {
    let mut client = client(&["--fault", "slow-init=700"]);
    client.connect().await.unwrap();
    let sum = client.call_tool("add", json!({"a": 2, "b": 3})).await;
    assert_eq!(sum.unwrap(), json!("5"));
}

#[tokio::test]
async fn garbage_on_stdout_is_ignored() {
    let mut client = client(&["--fault", "garbage"]);
    before_10s(client.connect()).await.unwrap();
    let echo = client.call_tool("echo", json!({"message": "clean"})).await;
    assert_eq!(echo.unwrap(), json!("Echo: clean"));
}

#[tokio::test]
async fn stderr_flood_does_not_block_calls_and_keeps_only_a_short_tail() {
    let mut client = client(&["--fault", "stderr-flood"]);
    before_10s(client.connect()).await.unwrap();
    for i in 0..20 {
        let echo = before_10s(client.call_tool("echo", json!({"message": i}))).await;
        assert!(echo.is_ok());
    }
    let tail = client.stderr_tail();
    assert!(!tail.is_empty() && tail.len() <= agcore::tools::mcp::STDERR_TAIL_LINES);
    assert!(tail.iter().all(|line| line.starts_with("flood line")));
}

#[tokio::test]
async fn five_megabyte_result_arrives_whole() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    let big = client
        .call_tool("big", json!({"bytes": 5_000_000}))
        .await
        .unwrap();
    assert_eq!(big.as_str().map(str::len), Some(5_000_000));
}

#[tokio::test]
async fn list_changed_notification_refreshes_the_cached_list() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    let before = client.list_tools().await.unwrap();
    assert!(!before.iter().any(|tool| tool.name() == "extra"));
    let handle = client.handle();
    let mut changes = handle.tool_changes();
    changes.borrow_and_update();
    client.call_tool("change_tools", json!({})).await.unwrap();
    before_10s(changes.changed()).await.unwrap();
    let after = client.list_tools().await.unwrap();
    assert!(after.iter().any(|tool| tool.name() == "extra"));
}

#[tokio::test]
async fn paginated_tool_list_is_followed_to_the_end() {
    let mut client = client(&["--test-tools", "--page-size", "2"]);
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    assert_eq!(names.len(), 14, "{names:?}");
    assert_eq!(&names[..3], ["get_weather", "echo", "add"]);
    assert!(names.contains(&"open_world"));
}

#[tokio::test]
async fn close_reaps_the_server_process() {
    let mut client = client(&[]);
    client.connect().await.unwrap();
    let pid = client.pid().unwrap();
    client.close().await.unwrap();
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still exists after close()"
    );
    let error = client.call_tool("echo", json!({})).await.unwrap_err();
    assert!(matches!(error, ToolError::McpNotInitialized(m) if m.contains("'demo'")));
}

#[tokio::test]
async fn closing_a_handle_closes_the_server_for_the_client_too() {
    let mut client = client(&[]);
    client.connect().await.unwrap();
    let pid = client.pid().unwrap();
    let handle = client.handle();
    handle.close().await;
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "pid {pid} still exists after close()"
    );
    assert!(!handle.is_connected());
    let error = client.call_tool("echo", json!({})).await.unwrap_err();
    assert!(matches!(error, ToolError::McpNotInitialized(m) if m.contains("'demo'")));
}

#[tokio::test]
async fn dropping_the_client_stops_the_server() {
    let mut client = client(&[]);
    client.connect().await.unwrap();
    let pid = client.pid().unwrap();
    drop(client);
    assert!(wait_gone(pid, 10).await, "pid {pid} survived the drop");
}

#[tokio::test]
async fn calls_before_connect_are_not_initialized_errors() {
    let mut client = client(&[]);
    let error = client.call_tool("echo", json!({})).await.unwrap_err();
    assert!(matches!(error, ToolError::McpNotInitialized(_)));
    let error = client.list_tools().await.unwrap_err();
    assert!(matches!(error, ToolError::McpNotInitialized(_)));
}

#[tokio::test]
async fn non_object_arguments_are_rejected_before_sending() {
    let mut client = client(&[]);
    client.connect().await.unwrap();
    let error = client.call_tool("echo", json!([1, 2])).await.unwrap_err();
    assert!(matches!(error, ToolError::InvalidArguments(tool, _) if tool == "echo"));
}

#[tokio::test]
async fn unknown_tool_is_an_mcp_error_from_the_server() {
    let mut client = client(&[]);
    client.connect().await.unwrap();
    let error = client.call_tool("nope", json!({})).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(m) if m.contains("unknown tool 'nope'")),
        "{error:?}"
    );
}

#[tokio::test]
async fn dropping_a_pending_call_cancels_it_on_the_server() {
    let mut client = client(&["--test-tools"]);
    client.connect().await.unwrap();
    let handle = client.handle();
    let call = tokio::spawn(async move { handle.call_tool("hang", json!({})).await });
    // Let the request reach the server, then drop the call.
    tokio::time::sleep(Duration::from_millis(200)).await;
    call.abort();
    before_10s(async {
        while !client
            .stderr_tail()
            .iter()
            .any(|line| line.contains("hang was cancelled"))
        {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    let echo = client
        .call_tool("echo", json!({"message": "still here"}))
        .await;
    assert_eq!(echo.unwrap(), json!("Echo: still here"));
}

#[tokio::test]
async fn server_closing_stdout_while_running_fails_initialize_fast() {
    let mut client = McpClient::new(
        "closer",
        agcore::tools::mcp::McpTransport::Stdio {
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "exec >&-; echo stdout is closed >&2; exec sleep 60".into(),
            ],
        },
    )
    .with_connect_timeout(Duration::from_secs(600));
    let error = before_10s(client.connect()).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(m) if m.contains("closed its stdout during initialize")),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_server_that_closes_stdin_and_exits_is_reported_by_its_exit_not_a_broken_pipe() {
    // Our initialize request meets a closed pipe (EPIPE) while the server's stdout is still
    // open: the error must still say how the server ended and quote its stderr.
    let script = "exec 0<&-; printf 'config missing\\n' >&2; sleep 0.3; exit 3";
    for _ in 0..5 {
        let mut client = McpClient::new(
            "closer",
            agcore::tools::mcp::McpTransport::Stdio {
                command: "sh".into(),
                args: vec!["-c".into(), script.into()],
            },
        );
        let error = before_10s(client.connect()).await.unwrap_err();
        let message = error.to_string();
        assert!(message.contains("exit status: 3"), "{message}");
        assert!(message.contains("config missing"), "{message}");
    }
}
