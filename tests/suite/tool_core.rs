//! Tool core behaviour: the design's acceptance criteria 3–9 (one named test each) and what
//! users rely on beyond them (names, validation messages, panics, timeouts, ordering, concurrency).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agcore::llm::types::ToolCall;
use agcore::tools::prelude::*;
use futures::StreamExt;
use tokio::time::Instant;

/// `(name, start, end)` of every run.
type RunLog = Arc<Mutex<Vec<(&'static str, Instant, Instant)>>>;

/// A tool configurable per test: name, permissions, a sleep, a panic, and a call counter.
struct TestTool {
    name: &'static str,
    permissions: Vec<Permission>,
    sleep: Duration,
    panics: bool,
    timeout: Option<Duration>,
    calls: AtomicUsize,
    /// `(name, start, end)` of every run, to prove overlap without wall-clock bounds.
    log: Option<RunLog>,
    in_flight: Option<Arc<(AtomicUsize, AtomicUsize)>>,
}

impl TestTool {
    fn new(name: &'static str) -> Self {
        TestTool {
            name,
            permissions: Vec::new(),
            sleep: Duration::ZERO,
            panics: false,
            timeout: None,
            calls: AtomicUsize::new(0),
            log: None,
            in_flight: None,
        }
    }
    fn permissions(mut self, permissions: Vec<Permission>) -> Self {
        self.permissions = permissions;
        self
    }
    fn sleeping(mut self, sleep: Duration) -> Self {
        self.sleep = sleep;
        self
    }
}

#[async_trait]
impl BaseTool for TestTool {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A test tool"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        self.permissions.clone()
    }
    fn timeout(&self) -> Option<Duration> {
        self.timeout
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.panics {
            panic!("boom in {}", self.name);
        }
        if let Some(counters) = &self.in_flight {
            let now = counters.0.fetch_add(1, Ordering::SeqCst) + 1;
            counters.1.fetch_max(now, Ordering::SeqCst);
        }
        let start = Instant::now();
        tokio::time::sleep(self.sleep).await;
        if let Some(counters) = &self.in_flight {
            counters.0.fetch_sub(1, Ordering::SeqCst);
        }
        if let Some(log) = &self.log {
            log.lock().unwrap().push((self.name, start, Instant::now()));
        }
        Ok(json!({"tool": self.name, "args": args}))
    }
}

fn registry_with(tools: Vec<TestTool>) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(Arc::new(tool)).unwrap();
    }
    registry
}

// ---- Acceptance criteria 3–9 ----------------------------------------------------------------

#[test]
fn criterion_3_module_files_are_where_the_design_puts_them() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    for file in [
        "src/tools.rs",
        "src/tools/base.rs",
        "src/tools/registry.rs",
        "src/tools/permission.rs",
        "src/tools/mcp.rs",
        "src/tools/error.rs",
    ] {
        assert!(root.join(file).is_file(), "{file} is missing");
    }
    // And the design's paths resolve.
    fn _paths(
        _: &dyn agcore::tools::base::BaseTool,
        _: agcore::tools::registry::ToolRegistry,
        _: agcore::tools::permission::PermissionChecker,
        _: agcore::tools::mcp::McpClient,
        _: agcore::tools::error::ToolError,
    ) {
    }
}

#[tokio::test]
async fn criterion_4_a_custom_tool_implements_base_tool_and_its_four_methods_work() {
    let tool = TestTool::new("probe");
    assert_eq!(tool.name(), "probe");
    assert_eq!(tool.description(), "A test tool");
    assert_eq!(tool.parameters()["type"], "object");
    assert!(tool.required_permissions().is_empty());
    let output = tool.execute(json!({"n": 1})).await.unwrap();
    assert_eq!(output, json!({"tool": "probe", "args": {"n": 1}}));
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(tool)).unwrap();
}

#[tokio::test]
async fn criterion_5_registry_registers_finds_lists_and_unregisters() {
    let mut registry = registry_with(vec![
        TestTool::new("a"),
        TestTool::new("b"),
        TestTool::new("c"),
    ]);
    assert_eq!(registry.list_tools(), ["a", "b", "c"]);
    assert_eq!(registry.get("b").unwrap().name(), "b");
    assert!(registry.get("zzz").is_none());
    let invocation = registry.invoke("c", json!({})).await.unwrap();
    assert_eq!(invocation.output.unwrap()["tool"], "c");

    let removed = registry.unregister("b").unwrap();
    assert_eq!(removed.name(), "b");
    assert!(registry.unregister("b").is_none());
    assert_eq!(registry.list_tools(), ["a", "c"]);
    assert!(matches!(
        registry.invoke("b", json!({})).await.unwrap_err(),
        ToolError::NotFound(name) if name == "b"
    ));
}

#[test]
fn criterion_6_definitions_are_correct_and_in_registration_order() {
    let registry = registry_with(vec![TestTool::new("zeta"), TestTool::new("alpha")]);
    let definitions = registry.definitions();
    let wire = serde_json::to_value(&definitions).unwrap();
    assert_eq!(
        wire,
        json!([
            {"type": "function", "function": {"name": "zeta", "description": "A test tool",
              "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}},
            {"type": "function", "function": {"name": "alpha", "description": "A test tool",
              "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}}},
        ])
    );
    // Stable: the same every time (prompt caches hit).
    assert_eq!(wire, serde_json::to_value(registry.definitions()).unwrap());
}

#[tokio::test]
async fn criterion_7_invoke_checks_permissions_before_execute() {
    let shell = Arc::new(TestTool::new("shell").permissions(vec![Permission::Shell]));
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register(shell.clone()).unwrap();

    let error = registry.invoke("shell", json!({})).await.unwrap_err();
    match &error {
        ToolError::PermissionDenied(tool, detail) => {
            assert_eq!(tool, "shell");
            assert!(detail.contains("Shell"), "{detail}");
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
    assert_eq!(
        shell.calls.load(Ordering::SeqCst),
        0,
        "execute must not be entered"
    );

    // The batch path refuses the same way, as a record the loop feeds back to the model.
    let records = registry
        .invoke_all(vec![("shell".to_owned(), json!({}))])
        .await;
    assert!(matches!(
        records[0].output,
        Err(ToolError::PermissionDenied(..))
    ));
    assert_eq!(shell.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn criterion_8_invoke_all_runs_calls_in_parallel() {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = ToolRegistry::new();
    for name in ["one", "two", "three"] {
        let mut tool = TestTool::new(name).sleeping(Duration::from_millis(300));
        tool.log = Some(log.clone());
        registry.register(Arc::new(tool)).unwrap();
    }
    let calls = ["one", "two", "three"].map(|name| (name.to_owned(), json!({})));
    let records = registry.invoke_all(calls.to_vec()).await;
    assert!(records.iter().all(|r| r.output.is_ok()));

    // Overlap evidence: every call started before any call ended.
    let log = log.lock().unwrap();
    assert_eq!(log.len(), 3);
    let last_start = log.iter().map(|(_, start, _)| *start).max().unwrap();
    let first_end = log.iter().map(|(_, _, end)| *end).min().unwrap();
    assert!(
        last_start < first_end,
        "calls ran one after another: {log:?}"
    );
}

#[tokio::test]
async fn criterion_9_permission_checker_applies_whitelist_blacklist_and_default() {
    let default = PermissionChecker::new(PermissionConfig::default());
    assert!(
        default
            .check("t", &[Permission::Read, Permission::Network])
            .is_ok()
    );
    assert!(default.check("t", &[Permission::Shell]).is_err());
    assert!(
        default.check("t", &[Permission::Write]).is_err(),
        "whitelist excludes Write"
    );
    assert!(default.check("t", &[]).is_ok(), "allow_unspecified");

    let blacklist = PermissionChecker::new(PermissionConfig {
        allowed: vec![],
        denied: vec![Permission::Delete],
        allow_unspecified: true,
    });
    assert!(blacklist.check("t", &[Permission::Write]).is_ok());
    assert!(blacklist.check("t", &[Permission::Delete]).is_err());

    let closed = PermissionChecker::new(PermissionConfig {
        allowed: vec![],
        denied: vec![],
        allow_unspecified: false,
    });
    assert!(closed.check("t", &[]).is_err());
    assert!(closed.check("t", &[Permission::Read]).is_err());
}

// ---- Registration ---------------------------------------------------------------------------

#[test]
fn register_rejects_a_duplicate_name() {
    let mut registry = registry_with(vec![TestTool::new("dup")]);
    let error = registry
        .register(Arc::new(TestTool::new("dup")))
        .unwrap_err();
    assert!(matches!(error, ToolError::DuplicateName(name) if name == "dup"));
    assert_eq!(registry.len(), 1);
}

#[test]
fn register_rejects_names_the_openai_wire_format_rejects() {
    for bad in ["", "has space", "dotted.name", "ünicode"] {
        let mut registry = ToolRegistry::new();
        let error = registry.register(Arc::new(TestTool::new(bad))).unwrap_err();
        assert!(
            matches!(&error, ToolError::InvalidName { name, .. } if name == bad),
            "{error}"
        );
    }
    let long: &'static str = Box::leak("x".repeat(65).into_boxed_str());
    let error = ToolRegistry::new()
        .register(Arc::new(TestTool::new(long)))
        .unwrap_err();
    assert!(error.to_string().contains("64"), "{error}");
}

#[test]
fn register_rejects_an_invalid_schema() {
    struct BadSchema;
    #[async_trait]
    impl BaseTool for BadSchema {
        fn name(&self) -> &str {
            "bad_schema"
        }
        fn description(&self) -> &str {
            ""
        }
        fn parameters(&self) -> Value {
            json!({"type": "no-such-type"})
        }
        async fn execute(&self, _: Value) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }
    let error = ToolRegistry::new()
        .register(Arc::new(BadSchema))
        .unwrap_err();
    assert!(matches!(error, ToolError::InvalidSchema { tool, .. } if tool == "bad_schema"));
}

#[test]
fn unregister_keeps_the_order_of_the_others() {
    let mut registry = registry_with(vec![
        TestTool::new("a"),
        TestTool::new("b"),
        TestTool::new("c"),
    ]);
    registry.unregister("a");
    registry.register(Arc::new(TestTool::new("a"))).unwrap();
    assert_eq!(registry.list_tools(), ["b", "c", "a"]);
}

// ---- Arguments ------------------------------------------------------------------------------

#[tokio::test]
async fn schema_violation_names_the_field_and_what_was_expected() {
    let registry = registry_with(vec![TestTool::new("count")]);
    let error = registry
        .invoke("count", json!({"n": "three"}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid arguments for tool 'count': field `n`: expected integer, got string \"three\""
    );
}

#[tokio::test]
async fn invalid_json_arguments_are_refused_before_execute() {
    let tool = Arc::new(TestTool::new("count"));
    let mut registry = ToolRegistry::new();
    registry.register(tool.clone()).unwrap();
    let call = ToolCall::new("call_1", "count", "{\"n\": 1");
    let record = registry.invoke_call(ToolCallRequest::from(&call)).await;
    assert_eq!(record.id, "call_1");
    let error = record.output.unwrap_err();
    assert!(
        matches!(&error, ToolError::InvalidArguments(_, message) if message.contains("not valid JSON")),
        "{error}"
    );
    assert_eq!(
        record.input,
        json!("{\"n\": 1"),
        "the raw text is kept for the record"
    );
    assert_eq!(tool.calls.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn empty_argument_text_means_an_empty_object() {
    let registry = registry_with(vec![TestTool::new("count")]);
    let record = registry
        .invoke_call(ToolCallRequest::from(&ToolCall::new("c", "count", "")))
        .await;
    assert_eq!(record.output.unwrap()["args"], json!({}));
}

// ---- Failures stay per call -----------------------------------------------------------------

#[tokio::test]
async fn a_panicking_tool_becomes_execution_failed_and_the_registry_keeps_working() {
    let mut panicking = TestTool::new("panicky");
    panicking.panics = true;
    let registry = registry_with(vec![panicking, TestTool::new("fine")]);
    let records = registry
        .invoke_all(vec![
            ("panicky".to_owned(), json!({})),
            ("fine".to_owned(), json!({})),
        ])
        .await;
    match &records[0].output {
        Err(ToolError::ExecutionFailed(tool, message)) => {
            assert_eq!(tool, "panicky");
            assert!(message.contains("boom in panicky"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    assert!(records[1].output.is_ok());
    assert!(
        registry
            .invoke("fine", json!({}))
            .await
            .unwrap()
            .output
            .is_ok()
    );
}

#[tokio::test(start_paused = true)]
async fn a_slow_tool_times_out_with_a_typed_error() {
    let registry = registry_with(vec![
        TestTool::new("slow").sleeping(Duration::from_secs(60)),
    ])
    .with_default_timeout(Duration::from_millis(50));
    let record = registry.invoke("slow", json!({})).await.unwrap();
    assert!(matches!(
        record.output,
        Err(ToolError::Timeout { ref tool, limit }) if tool == "slow" && limit == Duration::from_millis(50)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_tool_timeout_overrides_the_registry_default() {
    let mut tool = TestTool::new("patient").sleeping(Duration::from_secs(2));
    tool.timeout = Some(Duration::from_secs(5));
    let registry = registry_with(vec![tool]).with_default_timeout(Duration::from_secs(1));
    assert!(
        registry
            .invoke("patient", json!({}))
            .await
            .unwrap()
            .output
            .is_ok()
    );
}

#[tokio::test]
async fn one_failing_call_does_not_stop_the_others() {
    let registry = registry_with(vec![TestTool::new("a"), TestTool::new("b")]);
    let records = registry
        .invoke_all(vec![
            ("a".to_owned(), json!({})),
            ("missing".to_owned(), json!({})),
            ("b".to_owned(), json!({"n": "bad"})),
            ("b".to_owned(), json!({"n": 2})),
        ])
        .await;
    assert!(records[0].output.is_ok());
    assert!(matches!(records[1].output, Err(ToolError::NotFound(_))));
    assert!(matches!(
        records[2].output,
        Err(ToolError::InvalidArguments(..))
    ));
    assert!(records[3].output.is_ok());
}

// ---- Ordering and concurrency ---------------------------------------------------------------

#[tokio::test(start_paused = true)]
async fn invoke_all_returns_results_in_input_order_even_when_they_finish_out_of_order() {
    let registry = registry_with(vec![
        TestTool::new("slow").sleeping(Duration::from_millis(300)),
        TestTool::new("medium").sleeping(Duration::from_millis(200)),
        TestTool::new("fast").sleeping(Duration::from_millis(100)),
    ]);
    let calls: Vec<ToolCallRequest> = ["slow", "medium", "fast"]
        .iter()
        .enumerate()
        .map(|(i, name)| ToolCallRequest::new(format!("call_{i}"), *name, json!({})))
        .collect();

    let finished: Vec<usize> = registry
        .invoke_stream(calls.clone())
        .map(|(position, _)| position)
        .collect()
        .await;
    assert_eq!(finished, [2, 1, 0], "the stream yields in completion order");

    let records = registry.invoke_requests(calls).await;
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["call_0", "call_1", "call_2"]);
    let names: Vec<&str> = records.iter().map(|r| r.tool_name.as_str()).collect();
    assert_eq!(names, ["slow", "medium", "fast"]);
}

#[tokio::test(start_paused = true)]
async fn the_concurrency_limit_bounds_calls_in_flight() {
    let counters = Arc::new((AtomicUsize::new(0), AtomicUsize::new(0)));
    let mut tool = TestTool::new("work").sleeping(Duration::from_millis(100));
    tool.in_flight = Some(counters.clone());
    let registry = registry_with(vec![tool]).with_concurrency_limit(2);
    let calls: Vec<(String, Value)> = (0..6)
        .map(|n| ("work".to_owned(), json!({"n": n})))
        .collect();
    let records = registry.invoke_all(calls).await;
    assert_eq!(records.len(), 6);
    for (n, record) in records.iter().enumerate() {
        assert_eq!(record.input, json!({"n": n}));
    }
    assert_eq!(
        counters.1.load(Ordering::SeqCst),
        2,
        "at most two at a time, and two did overlap"
    );
}

// ---- What the model reads -------------------------------------------------------------------

#[tokio::test]
async fn model_content_prefixes_errors_and_lists_tools_for_unknown_names() {
    let registry = registry_with(vec![TestTool::new("a"), TestTool::new("b")]);
    let ok = registry.invoke("a", json!({"n": 1})).await.unwrap();
    // Compared as JSON: the text's key order is serde_json's (insertion order when its
    // `preserve_order` feature is on), which no model gives meaning to.
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&registry.model_content(&ok)).unwrap(),
        json!({"args": {"n": 1}, "tool": "a"})
    );
    let missing = registry
        .invoke_call(ToolCallRequest::new("c1", "nope", json!({})))
        .await;
    assert_eq!(
        registry.model_content(&missing),
        "Error: tool 'nope' is not registered. Available tools: a, b."
    );
    let invalid = registry
        .invoke_call(ToolCallRequest::new("c2", "a", json!({"n": false})))
        .await;
    let text = registry.model_content(&invalid);
    assert!(
        text.starts_with("Error: invalid arguments for tool 'a': field `n`"),
        "{text}"
    );
    assert!(
        text.ends_with("that match its parameters schema."),
        "{text}"
    );
}

#[test]
fn exposed_definitions_leave_out_unsupported_providers_and_never_permitted_tools() {
    struct OpenAiOnly;
    #[async_trait]
    impl BaseTool for OpenAiOnly {
        fn name(&self) -> &str {
            "openai_only"
        }
        fn description(&self) -> &str {
            ""
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn supports_provider(&self, provider: &str, _model: &str) -> bool {
            provider == "openai"
        }
        async fn execute(&self, _: Value) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry
        .register(Arc::new(
            TestTool::new("reader").permissions(vec![Permission::Read]),
        ))
        .unwrap();
    registry
        .register(Arc::new(
            TestTool::new("shell").permissions(vec![Permission::Shell]),
        ))
        .unwrap();
    registry.register(Arc::new(OpenAiOnly)).unwrap();
    let names = |provider: &str| -> Vec<String> {
        registry
            .exposed_definitions(provider, "m")
            .into_iter()
            .map(|d| d.function.name)
            .collect()
    };
    assert_eq!(names("openai"), ["reader", "openai_only"]);
    assert_eq!(names("ollama"), ["reader"]);
}

#[test]
fn the_registry_and_its_call_futures_can_cross_threads() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    fn send<T: Send>(_: T) {}
    let registry = ToolRegistry::new();
    send_sync(&registry);
    send(registry.invoke_call(ToolCallRequest::new("c", "x", json!({}))));
    send(registry.invoke_stream(Vec::new()));
    send(registry.invoke_all(Vec::new()));
    send(registry.invoke_requests(Vec::new()));
}
