//! Security claims of the README that no other test stated as such (see docs/security.md):
//! the default permissions, the order of the gates, and that every refusal says why.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use agcore::llm::testing::ScriptedModel;
use agcore::llm::{CycleConfig, LlmCycle, ToolCall};
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, ExposurePolicy, ToolsConfig};

/// A tool that needs `permission`; `{"mode": "ok" | "sleep" | "panic"}`; counts its runs.
struct Probe {
    name: &'static str,
    permission: Permission,
    runs: Arc<AtomicUsize>,
}

fn probe(name: &'static str, permission: Permission) -> (Arc<Probe>, Arc<AtomicUsize>) {
    let runs = Arc::new(AtomicUsize::new(0));
    let tool = Arc::new(Probe {
        name,
        permission,
        runs: runs.clone(),
    });
    (tool, runs)
}

#[async_trait]
impl BaseTool for Probe {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "A probe"
    }
    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {"mode": {"enum": ["ok", "sleep", "panic"]}},
            "required": ["mode"],
        })
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![self.permission.clone()]
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        match args["mode"].as_str() {
            Some("sleep") => tokio::time::sleep(Duration::from_secs(60)).await,
            Some("panic") => panic!("probe panicked"),
            _ => {}
        }
        Ok(json!("ran"))
    }
}

/// Answers with a fixed decision and counts the questions.
struct Counting {
    decision: ApprovalDecision,
    asked: AtomicUsize,
}

#[async_trait]
impl Approver for Counting {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.decision.clone()
    }
}

fn approver(decision: ApprovalDecision) -> Arc<Counting> {
    Arc::new(Counting {
        decision,
        asked: AtomicUsize::new(0),
    })
}

// README: "Safe by default: Shell and Delete are denied" / "Default: allow Read and Network,
// deny Delete and Shell."
#[tokio::test]
async fn default_permissions_deny_shell_and_delete_and_allow_read_and_network() {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    let mut runs = Vec::new();
    for (name, permission) in [
        ("shell", Permission::Shell),
        ("delete", Permission::Delete),
        ("read", Permission::Read),
        ("network", Permission::Network),
    ] {
        let (tool, count) = probe(name, permission);
        registry.register(tool).unwrap();
        runs.push(count);
    }
    for name in ["shell", "delete"] {
        let error = registry
            .invoke(name, json!({"mode": "ok"}))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(tool, detail) if tool == name && detail.contains("denied list")),
            "{error}"
        );
    }
    for name in ["read", "network"] {
        let record = registry.invoke(name, json!({"mode": "ok"})).await.unwrap();
        assert_eq!(record.output.unwrap(), json!("ran"));
    }
    let counts: Vec<usize> = runs.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [0, 0, 1, 1], "a denied tool ran");
    // Neither is offered to the model either.
    let offered: Vec<String> = registry
        .exposed_definitions("openai", "gpt-4o")
        .into_iter()
        .map(|d| d.function.name)
        .collect();
    assert_eq!(offered, ["read", "network"]);
}

// docs/5: "in a config file a missing field keeps the safe default (writing only
// `allowed = [...]` keeps Delete and Shell denied)" — through the `[tools]` TOML the CLI reads.
#[tokio::test]
async fn a_config_that_only_lists_allowed_still_denies_shell_and_delete() {
    let config: ToolsConfig =
        toml::from_str("[permissions]\nallowed = [\"read\", \"shell\", \"delete\"]\n").unwrap();
    let mut registry = config.apply(ToolRegistry::new()).unwrap();
    let (shell, shell_runs) = probe("shell", Permission::Shell);
    let (delete, delete_runs) = probe("delete", Permission::Delete);
    registry.register(shell).unwrap();
    registry.register(delete).unwrap();
    for name in ["shell", "delete"] {
        let error = registry
            .invoke(name, json!({"mode": "ok"}))
            .await
            .unwrap_err();
        assert!(matches!(error, ToolError::PermissionDenied(..)), "{error}");
    }
    assert_eq!(shell_runs.load(Ordering::SeqCst), 0);
    assert_eq!(delete_runs.load(Ordering::SeqCst), 0);
}

// README: "Every call passes the same gates, in this order: the tool exists → exposure (profile,
// restricted mode, feature flags) → permissions → argument validation against the tool's JSON
// Schema → approval (for *ask* permissions) → execution (with a timeout, panic-isolated)."
// Each step is checked with a call that would also fail every later step: the earliest gate
// answers, and nothing after it (the approver, the tool) is reached.
#[tokio::test]
async fn every_call_passes_the_gates_in_the_documented_order() {
    let bad_args = json!({"mode": "nonsense"});
    let registry_with = |restricted: bool, denied: bool, approver: &Arc<Counting>| {
        let config = PermissionConfig {
            allowed: vec![],
            denied: if denied {
                vec![Permission::Shell]
            } else {
                vec![]
            },
            allow_unspecified: true,
        };
        let mut registry = ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(config))
            .with_exposure(ExposurePolicy::default().with_restricted_mode(restricted))
            .with_approval_policy(ApprovalPolicy::ask([Permission::Shell]))
            .with_approver(approver.clone())
            .with_default_timeout(Duration::from_millis(200));
        let (tool, runs) = probe("probe", Permission::Shell);
        registry.register(tool).unwrap();
        (registry, runs)
    };
    let allow = approver(ApprovalDecision::AllowOnce);

    // 1. The tool exists.
    let (registry, runs) = registry_with(true, true, &allow);
    let error = registry.invoke("nope", bad_args.clone()).await.unwrap_err();
    assert!(matches!(error, ToolError::NotFound(_)), "{error}");
    // 2. Exposure before permissions, arguments and approval.
    let error = registry
        .invoke("probe", bad_args.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::NotExposed { .. }), "{error}");
    // 3. Permissions before arguments and approval.
    let (registry, _) = registry_with(false, true, &allow);
    let error = registry
        .invoke("probe", bad_args.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::PermissionDenied(..)), "{error}");
    // 4. Argument validation before approval.
    let (registry, _) = registry_with(false, false, &allow);
    let error = registry
        .invoke("probe", bad_args.clone())
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::InvalidArguments(..)), "{error}");
    assert_eq!(
        allow.asked.load(Ordering::SeqCst),
        0,
        "asked before validation"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // 5. Approval before execution.
    let deny = approver(ApprovalDecision::Deny {
        message: Some("not today".into()),
    });
    let (registry, runs) = registry_with(false, false, &deny);
    let error = registry
        .invoke("probe", json!({"mode": "ok"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::ApprovalDenied { .. }), "{error}");
    assert_eq!(deny.asked.load(Ordering::SeqCst), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 0);
    // 6. Execution, with a timeout and panics caught.
    let (registry, runs) = registry_with(false, false, &allow);
    let ran = registry
        .invoke("probe", json!({"mode": "ok"}))
        .await
        .unwrap();
    assert_eq!(ran.output.unwrap(), json!("ran"));
    let slow = tokio::time::timeout(
        Duration::from_secs(20),
        registry.invoke("probe", json!({"mode": "sleep"})),
    )
    .await
    .expect("the registry's timeout did not fire")
    .unwrap();
    assert!(
        matches!(slow.output, Err(ToolError::Timeout { .. })),
        "{:?}",
        slow.output
    );
    let panicked = registry
        .invoke("probe", json!({"mode": "panic"}))
        .await
        .unwrap();
    assert!(
        matches!(&panicked.output, Err(ToolError::ExecutionFailed(_, m)) if m.contains("probe panicked")),
        "{:?}",
        panicked.output
    );
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    assert_eq!(allow.asked.load(Ordering::SeqCst), 3);
    // The registry keeps working after the panic.
    assert!(
        registry
            .invoke("probe", json!({"mode": "ok"}))
            .await
            .unwrap()
            .output
            .is_ok()
    );
}

// README: "every hidden or refused tool comes with a reason you can ask for" and "A refusal is
// a tool error the model reads; the loop goes on." Each refusal reaches the model as an
// `Error: ` text that names its reason, and the loop continues to the model's answer.
#[tokio::test]
async fn every_refusal_reaches_the_model_with_its_reason_and_the_loop_goes_on() {
    let deny = approver(ApprovalDecision::Deny {
        message: Some("the user said no".into()),
    });
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig {
            allowed: vec![],
            denied: vec![Permission::Delete],
            allow_unspecified: true,
        }))
        .with_exposure(ExposurePolicy::default().with_restricted_mode(true))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
        .with_approver(deny.clone());
    let mut all_runs = Vec::new();
    for (name, permission) in [
        ("net", Permission::Network),
        ("del", Permission::Delete),
        ("write", Permission::Write),
        ("read", Permission::Read),
    ] {
        let (tool, runs) = probe(name, permission);
        registry.register(tool).unwrap();
        all_runs.push(runs);
    }
    // The hidden tools say why in the report.
    let report = registry.explain("openai", "gpt-4o");
    for tool in &report.tools {
        let hidden = !tool.hidden_because.is_empty();
        assert_eq!(
            hidden,
            ["net", "del"].contains(&tool.name.as_str()),
            "{report}"
        );
    }
    let text = report.to_string();
    assert!(text.contains("restricted mode: needs Network"), "{text}");
    assert!(text.contains("Delete (it is in the denied list)"), "{text}");

    let model = ScriptedModel::new()
        .reply_tool_calls(vec![
            ToolCall::new("c1", "nope", "{}"),
            ToolCall::new("c2", "net", r#"{"mode":"ok"}"#),
            ToolCall::new("c3", "del", r#"{"mode":"ok"}"#),
            ToolCall::new("c4", "read", r#"{"mode":"nonsense"}"#),
            ToolCall::new("c5", "read", "{not json"),
            ToolCall::new("c6", "write", r#"{"mode":"ok"}"#),
        ])
        .reply_text("I will do without them.");
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let reply = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "I will do without them.");
    let answers: Vec<String> = cycle.messages()[2..8]
        .iter()
        .map(|m| m.text().unwrap())
        .collect();
    let reasons = [
        "Available tools: write, read.",
        "restricted mode: needs Network",
        "Delete (it is in the denied list)",
        "field `mode`",
        "not valid JSON",
        "the user said no",
    ];
    for (answer, reason) in answers.iter().zip(reasons) {
        assert!(answer.starts_with("Error: "), "{answer}");
        assert!(answer.contains(reason), "{answer:?} lacks {reason:?}");
    }
    let counts: Vec<usize> = all_runs.iter().map(|c| c.load(Ordering::SeqCst)).collect();
    assert_eq!(counts, [0, 0, 0, 0], "a refused tool ran");
}
