//! MCP against hostile or sloppy servers (issue 10): unannotated tools need approval-level
//! permissions, bad tools are skipped with a reason, `tools/list` paging is bounded, an
//! oversized line fails its call at once, a stray id during initialize is ignored, and a clean
//! shutdown logs no failure.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::{Duration, Instant};

use agcore::tools::mcp::{
    McpClient, McpServerStatus, McpServersConfig, McpSkipReason, McpTransport, register_mcp_tools,
    register_mcp_tools_with_report,
};
use agcore::tools::{Permission, PermissionChecker, PermissionConfig, ToolError, ToolRegistry};
use serde_json::json;
use support::mcp::{demo, repo};

/// The hostile stdio server in `mode` (see `tests/fixtures/mcp/hostile_server.py`).
fn hostile(mode: &str) -> McpTransport {
    let script = repo().join("tests/fixtures/mcp/hostile_server.py");
    McpTransport::stdio("python3", [script.display().to_string(), mode.to_owned()])
}

fn default_registry() -> ToolRegistry {
    ToolRegistry::new().with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
}

/// `future` within 20 s (the clients under test have far longer timeouts where it matters).
async fn within_20s<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(20), future)
        .await
        .expect("did not finish within 20 s")
}

// ---- item 5: unannotated tools -------------------------------------------------------------

#[tokio::test]
async fn an_unannotated_tool_is_refused_by_the_default_permissions() {
    // The demo server's `add` has no annotations: per the spec it may write, destroy and reach
    // the outside world.
    let mut client = McpClient::new("demo", demo(&[]));
    client.connect().await.unwrap();
    let mut registry = default_registry();
    register_mcp_tools(&mut registry, [client]).unwrap();
    assert_eq!(
        registry.get("add").unwrap().required_permissions(),
        vec![Permission::Write, Permission::Delete, Permission::Network]
    );
    let error = registry
        .invoke("add", json!({"a": 1, "b": 2}))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::PermissionDenied(tool, why) if tool == "add" && why.contains("Delete")),
        "{error}"
    );
    // An annotated read-only tool of the same server still runs.
    assert!(
        registry
            .invoke("echo", json!({"message": "hi"}))
            .await
            .is_ok()
    );
}

/// Records what it is asked and allows once.
#[derive(Default)]
struct Recording(std::sync::Mutex<Vec<agcore::tools::ApprovalRequest>>);

#[async_trait::async_trait]
impl agcore::tools::Approver for Recording {
    async fn approve(
        &self,
        request: &agcore::tools::ApprovalRequest,
    ) -> agcore::tools::ApprovalDecision {
        self.0.lock().unwrap().push(request.clone());
        agcore::tools::ApprovalDecision::AllowOnce
    }
}

#[tokio::test]
async fn with_unannotated_ask_an_unannotated_tool_is_offered_and_every_call_asked() {
    use agcore::tools::{ApprovalPolicy, UnannotatedTools};
    let mut client = McpClient::new("demo", demo(&[]));
    client.connect().await.unwrap();
    let approver = std::sync::Arc::new(Recording::default());
    let mut registry = default_registry()
        .with_approval_policy(ApprovalPolicy::default().with_unannotated(UnannotatedTools::Ask))
        .with_approver(approver.clone());
    register_mcp_tools(&mut registry, [client]).unwrap();
    assert!(registry.get("add").unwrap().permissions_assumed());
    assert!(!registry.get("echo").unwrap().permissions_assumed());
    let offered: Vec<String> = registry
        .exposed_definitions("openai", "m")
        .into_iter()
        .map(|definition| definition.function.name)
        .collect();
    assert!(offered.contains(&"add".to_owned()), "{offered:?}");
    let decision = registry.permission_decision(registry.get("add").unwrap().as_ref());
    assert!(
        decision.refused.is_empty() && decision.unannotated,
        "{decision:?}"
    );
    for _ in 0..2 {
        let sum = registry
            .invoke("add", json!({"a": 1, "b": 2}))
            .await
            .unwrap();
        assert!(sum.output.is_ok(), "{sum:?}");
    }
    registry
        .invoke("echo", json!({"message": "hi"}))
        .await
        .unwrap();
    let asked = approver.0.lock().unwrap();
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(
        asked[0].reason.contains("does not say what it does"),
        "{}",
        asked[0].reason
    );
    assert_eq!(
        asked[0].permissions,
        [Permission::Write, Permission::Delete]
    );
}

#[tokio::test]
async fn a_per_tool_override_in_the_config_lets_an_unannotated_tool_run() {
    let config = McpServersConfig::parse(&format!(
        r#"{{"mcpServers": {{"demo": {{"command": {:?}, "toolPermissions": {{"add": ["read"]}}}}}}}}"#,
        support::mcp::demo_server().display().to_string()
    ))
    .unwrap();
    let mut client = config.client("demo").unwrap();
    client.connect().await.unwrap();
    let mut registry = default_registry();
    register_mcp_tools(&mut registry, [client]).unwrap();
    assert_eq!(
        registry.get("add").unwrap().required_permissions(),
        vec![Permission::Read]
    );
    let sum = registry
        .invoke("add", json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert!(sum.output.is_ok(), "{sum:?}");
}

#[tokio::test]
async fn distrusted_annotations_do_not_make_a_tool_read_only() {
    let config = McpServersConfig::parse(&format!(
        r#"{{"mcpServers": {{"demo": {{"command": {:?}, "trustAnnotations": false}}}}}}"#,
        support::mcp::demo_server().display().to_string()
    ))
    .unwrap();
    let mut client = config.client("demo").unwrap();
    client.connect().await.unwrap();
    let mut registry = default_registry();
    register_mcp_tools(&mut registry, [client]).unwrap();
    // `echo` claims readOnlyHint: true; the user does not believe this server.
    let error = registry
        .invoke("echo", json!({"message": "hi"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::PermissionDenied(..)), "{error}");
}

// ---- item 6: bad tools are skipped ---------------------------------------------------------

#[tokio::test]
async fn bad_tools_are_skipped_and_the_rest_registers() {
    let mut client = McpClient::new("hostile", hostile("tools"));
    within_20s(client.connect()).await.unwrap();
    // Every skipped tool is listed with its typed reason, before and after registration.
    let skipped = client.skipped_tools();
    let reason = |tool: &str| {
        skipped
            .iter()
            .find(|s| s.tool == tool)
            .map(|s| s.reason.clone())
            .unwrap_or_else(|| panic!("{tool} is not among the skipped {skipped:?}"))
    };
    assert!(matches!(
        reason("bad_regex"),
        McpSkipReason::InvalidSchema { .. }
    ));
    assert!(matches!(
        reason("bad_ref"),
        McpSkipReason::InvalidSchema { .. }
    ));
    assert_eq!(reason("a_b"), McpSkipReason::DuplicateName);
    assert_eq!(skipped.len(), 3, "{skipped:?}");
    let connected: Result<McpClient, ToolError> = Ok(client);
    let status = McpServerStatus::of("hostile", &connected);
    assert_eq!(status.skipped.len(), 3);
    let json = serde_json::to_value(&status).unwrap();
    assert_eq!(
        json["skipped"][0]["reason"]["kind"], "invalid_schema",
        "{json}"
    );
    let Ok(client) = connected else {
        unreachable!()
    };
    let mut registry = ToolRegistry::new();
    let report = register_mcp_tools_with_report(&mut registry, [client]);
    assert_eq!(report.skipped.len(), 3);
    let registered = report.registered;
    let mut names: Vec<&str> = registered.iter().map(|r| r.name.as_str()).collect();
    names.sort_unstable();
    // Three raw names that sanitise alike get three distinct names; the repeated `a_b` is
    // skipped (one name on the server cannot be two tools).
    assert_eq!(registered.len(), 5, "{names:?}");
    assert!(registry.get("plain").is_some());
    assert!(registry.get("reader").is_some());
    for raw in ["a.b", "a_b", "a b"] {
        assert_eq!(
            registered.iter().filter(|r| r.tool == raw).count(),
            1,
            "{raw}: {names:?}"
        );
    }
    assert!(registry.get("bad_regex").is_none());
    assert!(registry.get("bad_ref").is_none());
}

// ---- item 9: bounded paging ----------------------------------------------------------------

#[tokio::test]
async fn endless_tools_list_pages_end_with_a_clear_error() {
    let mut client = McpClient::new("pages", hostile("endless-pages"));
    let started = Instant::now();
    let result = within_20s(client.connect()).await;
    let error = result.expect_err("an endless tool list must not connect");
    let text = error.to_string();
    assert!(text.contains("tools/list"), "{text}");
    assert!(
        text.contains("100 pages") || text.contains("10000 tools"),
        "{text}"
    );
    eprintln!("endless pages: error after {:?}: {text}", started.elapsed());
}

#[tokio::test]
async fn a_repeated_cursor_ends_the_listing() {
    let mut client = McpClient::new("loop", hostile("repeat-cursor"));
    let error = within_20s(client.connect())
        .await
        .expect_err("a cursor loop must fail");
    assert!(error.to_string().contains("cursor"), "{error}");
}

// ---- item 15: oversized lines, stray ids ---------------------------------------------------

#[tokio::test]
async fn an_oversized_result_line_fails_its_call_at_once_saying_why() {
    let mut client = McpClient::new("big", hostile("big-result")).with_timeout(60);
    within_20s(client.connect()).await.unwrap();
    for tool in ["big", "big_head"] {
        let started = Instant::now();
        let error = within_20s(client.call_tool(tool, json!({})))
            .await
            .expect_err("an oversized answer is an error");
        let text = error.to_string();
        assert!(text.contains("16 MiB"), "{tool}: {text}");
        assert!(!text.contains("did not answer"), "{tool}: {text}");
        eprintln!("{tool}: error after {:?}: {text}", started.elapsed());
    }
    // The connection survives: the next call works.
    let small = within_20s(client.call_tool("small", json!({})))
        .await
        .unwrap();
    assert_eq!(small, "ran small");
    client.close().await.unwrap();
}

/// A request over the message limit is not sent (the demo server — rmcp's line codec, like
/// every rmcp server — drops a line over 16 MiB, so the call would wait out its whole timeout):
/// it fails at once with a typed error naming the sizes, and the connection goes on.
#[tokio::test]
async fn an_oversized_request_fails_at_once_with_a_typed_error() {
    let mut client = McpClient::new("demo", demo(&[]));
    within_20s(client.connect()).await.unwrap();
    let message = "x".repeat(agcore::tools::mcp::MAX_MESSAGE_BYTES + 1);
    let started = Instant::now();
    let error = support::mcp::before_10s(client.call_tool("echo", json!({"message": message})))
        .await
        .expect_err("an oversized request is an error");
    eprintln!("error after {:?}: {error}", started.elapsed());
    match &error {
        ToolError::McpMessageTooLarge {
            server,
            method,
            bytes,
            limit,
        } => {
            assert_eq!((server.as_str(), method.as_str()), ("demo", "tools/call"));
            assert!(*bytes > agcore::tools::mcp::MAX_MESSAGE_BYTES, "{bytes}");
            assert_eq!(*limit, agcore::tools::mcp::MAX_MESSAGE_BYTES);
        }
        other => panic!("not McpMessageTooLarge: {other:?}"),
    }
    assert!(error.to_string().contains("16 MiB"), "{error}");
    // Nothing was sent, the session is intact: the next call works.
    let echoed = within_20s(client.call_tool("echo", json!({"message": "hi"})))
        .await
        .unwrap();
    assert_eq!(echoed, "Echo: hi");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_response_with_an_unknown_id_during_initialize_is_ignored() {
    let mut client = McpClient::new("stray", hostile("stray-id"));
    within_20s(client.connect()).await.unwrap();
    let small = within_20s(client.call_tool("small", json!({})))
        .await
        .unwrap();
    assert_eq!(small, "ran small");
    client.close().await.unwrap();
}

// ---- item 23: a clean shutdown logs no failure ---------------------------------------------

/// Collects every event at DEBUG and above (level, target and fields) on this thread, and wakes
/// [`Logged::wait_for`] on each.
#[derive(Clone, Default)]
struct Logged {
    events: std::sync::Arc<std::sync::Mutex<Vec<(tracing::Level, String)>>>,
    changed: std::sync::Arc<tokio::sync::Notify>,
}

impl Logged {
    /// The WARN and ERROR events so far.
    fn warnings(&self) -> Vec<String> {
        self.events
            .lock()
            .unwrap()
            .iter()
            .filter(|(level, _)| *level <= tracing::Level::WARN)
            .map(|(_, text)| text.clone())
            .collect()
    }

    /// Wait (at most 20 s) for an event that `found` accepts; return it.
    async fn wait_for(&self, what: &str, found: impl Fn(&str) -> bool) -> String {
        let waiting = async {
            loop {
                // Registered before the check, so an event logged in between still wakes us.
                let notified = self.changed.notified();
                if let Some((_, text)) = self.events.lock().unwrap().iter().find(|(_, t)| found(t))
                {
                    return text.clone();
                }
                notified.await;
            }
        };
        match tokio::time::timeout(Duration::from_secs(20), waiting).await {
            Ok(text) => text,
            Err(_) => {
                // Formatted first: the lock is not held while the panic unwinds.
                let logged = format!("{:#?}", self.events.lock().unwrap());
                panic!("no event for {what} within 20 s; logged: {logged}")
            }
        }
    }
}

impl tracing::Subscriber for Logged {
    fn enabled(&self, metadata: &tracing::Metadata<'_>) -> bool {
        *metadata.level() <= tracing::Level::DEBUG
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        struct Text(String);
        impl tracing::field::Visit for Text {
            fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
                self.0.push_str(&format!(" {}={value:?}", field.name()));
            }
        }
        let mut text = Text(format!(
            "{} {}",
            event.metadata().level(),
            event.metadata().target()
        ));
        event.record(&mut text);
        self.events
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((*event.metadata().level(), text.0));
        self.changed.notify_waiters();
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// How a tool-list refresh ends (`handler.rs`): refreshed, cut short by the session's end, or
/// failed.
fn refresh_outcome(event: &str) -> bool {
    [
        "tool list changed",
        "tool list refresh ended with the session",
        "refreshing the tool list failed",
        "refreshing the tool list timed out",
    ]
    .iter()
    .any(|outcome| event.contains(outcome))
}

#[test]
fn closing_while_a_tool_list_refresh_is_in_flight_logs_no_failure() {
    in_a_process_of_its_own("closing_while_a_tool_list_refresh_is_in_flight_logs_no_failure_alone");
}

#[tokio::test]
#[ignore = "run by closing_while_a_tool_list_refresh_is_in_flight_logs_no_failure in a process of its own"]
async fn closing_while_a_tool_list_refresh_is_in_flight_logs_no_failure_alone() {
    // A current-thread runtime: every task of the client logs to this thread's collector.
    let logged = Logged::default();
    let _guard = crate::support::trace::scoped(logged.clone());
    let mut client = McpClient::new("refresh", hostile("list-changed"));
    within_20s(client.connect()).await.unwrap();
    // The server sent tools/list_changed; the refresh it caused is in flight once the server
    // says (on stderr) it got it — it answers only 2 s later.
    logged
        .wait_for("the refresh to reach the server", |event| {
            event.contains("agcore::mcp::stderr") && event.contains("refresh received")
        })
        .await;
    within_20s(client.close()).await.unwrap();
    // The refresh ends with the session, after `close` returned: wait for how it ended.
    let outcome = logged
        .wait_for("the refresh's outcome", refresh_outcome)
        .await;
    assert!(
        outcome.contains("tool list refresh ended with the session"),
        "{outcome}"
    );
    let warnings = logged.warnings();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[test]
fn a_clean_exit_from_server_everything_logs_no_failure() {
    in_a_process_of_its_own("a_clean_exit_from_server_everything_logs_no_failure_alone");
}

#[tokio::test]
#[ignore = "run by a_clean_exit_from_server_everything_logs_no_failure in a process of its own"]
async fn a_clean_exit_from_server_everything_logs_no_failure_alone() {
    let Some(script) =
        support::mcp::npm_script("@modelcontextprotocol/server-everything", "dist/index.js")
    else {
        return;
    };
    let logged = Logged::default();
    let _guard = crate::support::trace::scoped(logged.clone());
    let transport = McpTransport::stdio("node", [script.display().to_string(), "stdio".into()]);
    let mut client = McpClient::new("everything", transport);
    within_20s(client.connect()).await.unwrap();
    let pid = client.pid().unwrap();
    within_20s(client.close()).await.unwrap();
    // The shutdown this checks has happened: the session's loop finished, the server was reaped.
    logged
        .wait_for("rmcp's loop to finish", |event| {
            event.contains("serve finished")
        })
        .await;
    // The server was reaped (its exit is observed here, not through a log line: under load,
    // node may take a while to exit after its stdin closed).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !support::mcp::process_gone(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "the server process {pid} did not end within 60 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    let warnings = logged.warnings();
    assert!(warnings.is_empty(), "{warnings:#?}");
}

#[tokio::test]
async fn a_fully_annotated_real_server_keeps_its_permissions() {
    // mcp-server-time annotates every tool (readOnlyHint: true, openWorldHint: false): the
    // spec's defaults for absent hints change nothing for it.
    let Some(program) = support::mcp::python_script("mcp-server-time") else {
        return;
    };
    let transport = McpTransport::stdio(program.display().to_string(), ["--local-timezone", "UTC"]);
    let mut client = McpClient::new("time", transport);
    within_20s(client.connect()).await.unwrap();
    let mut registry = default_registry();
    register_mcp_tools(&mut registry, [client]).unwrap();
    let tool = registry.get("get_current_time").unwrap();
    assert_eq!(tool.required_permissions(), vec![Permission::Read]);
    let now = registry
        .invoke("get_current_time", json!({"timezone": "UTC"}))
        .await
        .unwrap();
    assert!(now.output.is_ok(), "{now:?}");
}

/// Run the ignored test `name` of this file in a child process of this test binary, alone:
/// a test that collects log events needs the process's `tracing` to itself (thread-local
/// subscribers of the other tests running beside it race with the callsites' interest cache).
fn in_a_process_of_its_own(name: &str) {
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            &format!("suite::mcp_hardening::{name}"),
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    // It ran: one test passed (a skip through the shared helper prints its marker, and fails
    // under CI).
    assert!(stdout.contains("1 passed"), "{stdout}\n{stderr}");
    eprint!("{stderr}");
}
