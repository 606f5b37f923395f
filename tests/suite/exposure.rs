//! Exposure gates (profiles, restricted mode, flags, provider, permissions), their explanations,
//! profile checks, the `[tools]` config section, and approvals.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use agcore::llm::types::ToolCall;
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
use agcore::tools::exposure::{ExposureError, ExposurePolicy, HiddenBecause};
use agcore::tools::permission::{DenialReason, PermissionDenial};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, Profile, ProfileEntry, ToolsConfig};

// A static tool set checked for duplicate names at compile time.
agcore::assert_unique_tool_names!("read_file", "edit_file", "fetch", "terminal", "rename");

/// A fake tool: name, kind, permissions, flags, source, provider support, and a run counter.
struct Fake {
    name: &'static str,
    kind: ToolKind,
    permissions: Vec<Permission>,
    flags: Vec<String>,
    source: ToolSource,
    openai_only: bool,
    runs: AtomicUsize,
}

fn fake(name: &'static str, kind: ToolKind) -> Fake {
    Fake {
        name,
        kind,
        permissions: kind.default_permissions(),
        flags: Vec::new(),
        source: ToolSource::Local,
        openai_only: false,
        runs: AtomicUsize::new(0),
    }
}

impl Fake {
    fn flags(mut self, flags: &[&str]) -> Self {
        self.flags = flags.iter().map(|f| (*f).to_owned()).collect();
        self
    }
    fn mcp(mut self, server: &str, permissions: Vec<Permission>) -> Self {
        self.source = ToolSource::Mcp {
            server: server.to_owned(),
        };
        self.permissions = permissions;
        self
    }
    fn openai_only(mut self) -> Self {
        self.openai_only = true;
        self
    }
}

#[async_trait]
impl BaseTool for Fake {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "fake"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        self.permissions.clone()
    }
    fn kind(&self) -> ToolKind {
        self.kind
    }
    fn title(&self, input: &Value) -> String {
        format!("{} {}", self.name, input["path"].as_str().unwrap_or("?"))
    }
    fn source(&self) -> ToolSource {
        self.source.clone()
    }
    fn required_flags(&self) -> Vec<String> {
        self.flags.clone()
    }
    fn supports_provider(&self, provider: &str, _model: &str) -> bool {
        !self.openai_only || provider == "openai"
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"ran": self.name, "args": args}))
    }
}

/// A registry with one tool of each interesting shape; returns the tools to count runs.
fn tools() -> Vec<Arc<Fake>> {
    vec![
        Arc::new(fake("read_file", ToolKind::Read)),
        Arc::new(fake("edit_file", ToolKind::Edit)),
        Arc::new(fake("fetch", ToolKind::Fetch)),
        Arc::new(fake("terminal", ToolKind::Execute)),
        Arc::new(fake("rename", ToolKind::Edit).flags(&["lsp"])),
        Arc::new(fake("web_search", ToolKind::Search).openai_only()),
        Arc::new(fake("gh_issues", ToolKind::Other).mcp("github", vec![Permission::Network])),
    ]
}

fn registry_from(tools: &[Arc<Fake>], registry: ToolRegistry) -> ToolRegistry {
    let mut registry = registry;
    for tool in tools {
        registry.register(tool.clone()).unwrap();
    }
    registry
}

/// Permissive permissions so each test isolates the gate it is about.
fn open_permissions() -> PermissionChecker {
    PermissionChecker::new(PermissionConfig {
        allowed: vec![],
        denied: vec![],
        allow_unspecified: true,
    })
}

fn exposed(registry: &ToolRegistry, provider: &str) -> Vec<String> {
    registry
        .exposed_definitions(provider, "m")
        .into_iter()
        .map(|d| d.function.name)
        .collect()
}

// ---- Each gate alone ------------------------------------------------------------------------

#[tokio::test]
async fn profile_gate_offers_only_the_profiles_tools_and_refuses_the_others() {
    let tools = tools();
    let policy = ExposurePolicy::default().with_profile("ask").unwrap();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(policy),
    );
    assert_eq!(exposed(&registry, "openai"), ["read_file", "web_search"]);

    let error = registry.invoke("edit_file", json!({})).await.unwrap_err();
    assert!(matches!(
        &error,
        ToolError::NotExposed { tool, reasons }
            if tool == "edit_file" && reasons == &[HiddenBecause::Profile { profile: "ask".into() }]
    ));
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn restricted_mode_hides_network_and_shell_tools() {
    let tools = tools();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(
                ExposurePolicy::default()
                    .with_restricted_mode(true)
                    .with_flags(["lsp"]),
            ),
    );
    assert_eq!(
        exposed(&registry, "openai"),
        ["read_file", "edit_file", "rename", "web_search"]
    );
    let report = registry.explain("openai", "m");
    assert_eq!(
        report.tool("terminal").unwrap().hidden_because,
        [HiddenBecause::RestrictedMode {
            permissions: vec![Permission::Shell]
        }]
    );
}

#[tokio::test]
async fn restricted_mode_refuses_a_hidden_tool_the_model_calls_anyway() {
    let tools = tools();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(ExposurePolicy::default().with_restricted_mode(true)),
    );
    assert!(!exposed(&registry, "openai").contains(&"fetch".to_owned()));

    // The model names it anyway, as a wire tool call.
    let call = ToolCall::new("call_9", "fetch", r#"{"path": "https://example.com"}"#);
    let record = registry.invoke_call(ToolCallRequest::from(&call)).await;
    assert_eq!(record.id, "call_9");
    assert!(matches!(record.output, Err(ToolError::NotExposed { .. })));
    assert_eq!(tools[2].runs.load(Ordering::SeqCst), 0, "never run");
    assert_eq!(
        registry.model_content(&record),
        "Error: tool 'fetch' is not available: restricted mode: needs Network. \
         Do not retry this call; continue without it or ask the user."
    );
}

#[test]
fn feature_flags_hide_a_tool_until_enabled() {
    let tools = tools();
    let without = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(ExposurePolicy::default()),
    );
    assert!(!exposed(&without, "openai").contains(&"rename".to_owned()));
    assert_eq!(
        without
            .explain("openai", "m")
            .tool("rename")
            .unwrap()
            .hidden_because,
        [HiddenBecause::FeatureFlags {
            missing: vec!["lsp".into()]
        }]
    );
    let with = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(ExposurePolicy::default().with_flags(["lsp"])),
    );
    assert!(exposed(&with, "openai").contains(&"rename".to_owned()));
}

#[test]
fn provider_gate_hides_tools_that_do_not_support_the_provider() {
    let registry = registry_from(
        &tools(),
        ToolRegistry::new().with_permission_checker(open_permissions()),
    );
    assert!(exposed(&registry, "openai").contains(&"web_search".to_owned()));
    assert!(!exposed(&registry, "ollama").contains(&"web_search".to_owned()));
    assert_eq!(
        registry
            .explain("ollama", "llama3")
            .tool("web_search")
            .unwrap()
            .hidden_because,
        [HiddenBecause::Provider {
            provider: "ollama".into(),
            model: "llama3".into()
        }]
    );
}

#[test]
fn permission_gate_hides_tools_whose_permissions_can_never_pass() {
    let registry = registry_from(
        &tools(),
        ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default())),
    );
    let report = registry.explain("openai", "m");
    assert_eq!(
        report.tool("terminal").unwrap().hidden_because,
        [HiddenBecause::Permissions {
            refused: vec![PermissionDenial {
                permission: Permission::Shell,
                reason: DenialReason::Denied
            }]
        }]
    );
    assert!(
        !report.tool("edit_file").unwrap().exposed,
        "Write is not in the default allowlist"
    );
    assert!(report.tool("read_file").unwrap().exposed);
}

// ---- Combined, and the report ---------------------------------------------------------------

#[test]
fn one_tool_hidden_by_every_gate_lists_every_reason() {
    let tool = Arc::new(
        fake("everything_wrong", ToolKind::Execute)
            .flags(&["beta"])
            .openai_only(),
    );
    let registry = registry_from(
        &[tool],
        ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
            .with_exposure(
                ExposurePolicy::default()
                    .with_profile("ask")
                    .unwrap()
                    .with_restricted_mode(true),
            ),
    );
    let report = registry.explain("ollama", "qwen3");
    let gates: Vec<&str> = report.tools[0]
        .hidden_because
        .iter()
        .map(|reason| match reason {
            HiddenBecause::Profile { .. } => "profile",
            HiddenBecause::RestrictedMode { .. } => "restricted",
            HiddenBecause::FeatureFlags { .. } => "flags",
            HiddenBecause::Provider { .. } => "provider",
            HiddenBecause::Permissions { .. } => "permissions",
            _ => "other",
        })
        .collect();
    assert_eq!(
        gates,
        ["profile", "restricted", "flags", "provider", "permissions"]
    );
    assert!(registry.exposed_definitions("ollama", "qwen3").is_empty());
}

#[test]
fn explain_without_a_policy() {
    let registry = registry_from(
        &tools(),
        ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default())),
    );
    let report = registry.explain("openai", "gpt-4o");
    insta::assert_snapshot!("explain_default_text", report.to_string());
    insta::assert_json_snapshot!("explain_default_json", report);
}

#[test]
fn explain_with_profile_restricted_flags_and_asks() {
    let registry = registry_from(
        &tools(),
        ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
            .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
            .with_exposure(
                ExposurePolicy::default()
                    .with_profile_definition(
                        "coding",
                        Profile::new(
                            "Edit code and read GitHub",
                            ["kind:read", "kind:edit", "mcp:github", "raed_file"]
                                .map(|e| e.parse::<ProfileEntry>().unwrap()),
                        ),
                    )
                    .with_profile("coding")
                    .unwrap()
                    .with_restricted_mode(true)
                    .with_flags(["lsp"]),
            ),
    );
    let report = registry.explain("ollama", "qwen3");
    insta::assert_snapshot!("explain_coding_restricted_text", report.to_string());
    insta::assert_json_snapshot!("explain_coding_restricted_json", report);
}

// ---- Profile checks -------------------------------------------------------------------------

#[test]
fn selecting_an_unknown_profile_is_an_error() {
    let error = ExposurePolicy::default().with_profile("aks").unwrap_err();
    assert_eq!(
        error.to_string(),
        "unknown profile 'aks'; profiles are: ask, write, minimal"
    );
}

#[test]
fn a_typo_in_a_profile_is_an_error_with_a_suggestion() {
    let policy = ExposurePolicy::default().with_profile_definition(
        "review",
        Profile::new("", ["raed_file", "mcp:gitlab"].map(|e| e.parse().unwrap())),
    );
    let registry = registry_from(&tools(), ToolRegistry::new().with_exposure(policy.clone()));
    let error = registry.check_exposure().unwrap_err();
    assert_eq!(
        error.problems,
        [
            ExposureError::UnknownTool {
                profile: "review".into(),
                tool: "raed_file".into(),
                suggestion: Some("read_file".into())
            },
            ExposureError::UnknownMcpServer {
                profile: "review".into(),
                server: "gitlab".into()
            },
        ]
    );
    assert!(
        error.to_string().contains("(did you mean 'read_file'?)"),
        "{error}"
    );
    assert!(policy.check(&registry).is_err());
}

#[test]
fn every_registered_tool_must_be_reachable_in_some_profile() {
    let policy = ExposurePolicy::empty()
        .with_profile_definition(
            "readers",
            Profile::new("", [ProfileEntry::Kind(ToolKind::Read)]),
        )
        .with_profile_definition("github", Profile::new("", ["mcp:github".parse().unwrap()]));
    let registry = registry_from(&tools(), ToolRegistry::new());
    let error = policy.check(&registry).unwrap_err();
    let unreachable: Vec<&str> = error
        .problems
        .iter()
        .map(|p| match p {
            ExposureError::Unreachable { tool } => tool.as_str(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(
        unreachable,
        ["edit_file", "fetch", "terminal", "rename", "web_search"]
    );
    // With the built-in profiles (`write` = every tool) everything is reachable.
    ExposurePolicy::default().check(&registry).unwrap();
}

// ---- MCP tools ------------------------------------------------------------------------------

#[tokio::test]
async fn mcp_tools_obey_profiles_and_restricted_mode() {
    let tools = tools();
    let github = Profile::new("", ["mcp:github".parse().unwrap()]);
    let in_profile = registry_from(
        &tools,
        ToolRegistry::new().with_exposure(
            ExposurePolicy::default()
                .with_profile_definition("github", github.clone())
                .with_profile("github")
                .unwrap(),
        ),
    );
    assert_eq!(exposed(&in_profile, "openai"), ["gh_issues"]);
    assert!(in_profile.invoke("gh_issues", json!({})).await.is_ok());

    let ask = registry_from(
        &tools,
        ToolRegistry::new().with_exposure(ExposurePolicy::default().with_profile("ask").unwrap()),
    );
    assert!(!exposed(&ask, "openai").contains(&"gh_issues".to_owned()));

    // openWorld MCP tools declare Network, so restricted mode cuts them even in their profile.
    let restricted = registry_from(
        &tools,
        ToolRegistry::new().with_exposure(
            ExposurePolicy::default()
                .with_profile_definition("github", github)
                .with_profile("github")
                .unwrap()
                .with_restricted_mode(true),
        ),
    );
    assert!(exposed(&restricted, "openai").is_empty());
    let error = restricted.invoke("gh_issues", json!({})).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool 'gh_issues' is not available: restricted mode: needs Network"
    );
    assert_eq!(
        tools[6].runs.load(Ordering::SeqCst),
        1,
        "only the unrestricted call ran"
    );
}

// ---- Config ---------------------------------------------------------------------------------

#[tokio::test]
async fn tools_config_from_toml_configures_the_registry() {
    let text = r#"
        profile = "review"
        restricted = true
        flags = ["lsp"]
        ask = ["write"]

        [permissions]
        allowed = ["read", "network"]
        denied = ["delete", "shell"]

        [profiles.review]
        description = "Read and edit, no network"
        tools = ["kind:read", "kind:edit"]
    "#;
    let config: ToolsConfig = toml::from_str(text).unwrap();
    assert_eq!(config.ask, [Permission::Write]);
    let registry = registry_from(&tools(), config.apply(ToolRegistry::new()).unwrap());
    registry.check_exposure().unwrap();
    assert_eq!(
        exposed(&registry, "openai"),
        ["read_file", "edit_file", "rename"]
    );
    // Write is asked, and there is no approver: denied with a clear message.
    let error = registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::ApprovalDenied { .. }));
}

#[test]
fn tools_config_rejects_unknown_keys_profiles_and_entries() {
    let typo_key = toml::from_str::<ToolsConfig>("restriced = true").unwrap_err();
    assert!(typo_key.to_string().contains("restriced"), "{typo_key}");

    let bad_entry =
        toml::from_str::<ToolsConfig>("[profiles.x]\ntools = [\"kind:reading\"]").unwrap_err();
    assert!(
        bad_entry.to_string().contains("unknown kind 'reading'"),
        "{bad_entry}"
    );

    let config: ToolsConfig = toml::from_str("profile = \"wirte\"").unwrap();
    assert!(matches!(
        config.exposure_policy().unwrap_err(),
        ExposureError::UnknownProfile { name, .. } if name == "wirte"
    ));
}

// ---- Approvals ------------------------------------------------------------------------------

/// Answers from a script and records every request.
struct ScriptedApprover {
    answers: Mutex<Vec<ApprovalDecision>>,
    requests: Mutex<Vec<ApprovalRequest>>,
}

impl ScriptedApprover {
    fn new(answers: Vec<ApprovalDecision>) -> Arc<Self> {
        Arc::new(ScriptedApprover {
            answers: Mutex::new(answers),
            requests: Mutex::new(Vec::new()),
        })
    }
    fn asked(&self) -> usize {
        self.requests.lock().unwrap().len()
    }
}

#[async_trait]
impl Approver for ScriptedApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.requests.lock().unwrap().push(request.clone());
        let mut answers = self.answers.lock().unwrap();
        assert!(
            !answers.is_empty(),
            "asked more often than scripted: {request:?}"
        );
        answers.remove(0)
    }
}

fn approving_registry(approver: Option<Arc<ScriptedApprover>>) -> (ToolRegistry, Vec<Arc<Fake>>) {
    let tools = tools();
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write, Permission::Shell]));
    if let Some(approver) = approver {
        registry = registry.with_approver(approver);
    }
    (registry_from(&tools, registry), tools)
}

#[tokio::test]
async fn allow_once_asks_again_for_the_next_call() {
    let approver = ScriptedApprover::new(vec![
        ApprovalDecision::AllowOnce,
        ApprovalDecision::AllowOnce,
    ]);
    let (registry, tools) = approving_registry(Some(approver.clone()));
    for _ in 0..2 {
        let record = registry
            .invoke("edit_file", json!({"path": "a.rs"}))
            .await
            .unwrap();
        assert!(record.output.is_ok());
    }
    assert_eq!(approver.asked(), 2);
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 2);

    let request = approver.requests.lock().unwrap()[0].clone();
    assert_eq!(request.tool, "edit_file");
    assert_eq!(request.title, "edit_file a.rs");
    assert_eq!(request.arguments, json!({"path": "a.rs"}));
    assert_eq!(request.permissions, [Permission::Write]);
    assert_eq!(
        request.reason,
        "tool 'edit_file' needs Write, which is configured as ask"
    );
}

#[tokio::test]
async fn allow_for_session_covers_later_calls_of_that_tool_only() {
    let approver = ScriptedApprover::new(vec![
        ApprovalDecision::AllowForSession,
        ApprovalDecision::AllowOnce,
        ApprovalDecision::AllowOnce,
    ]);
    let (registry, _) = approving_registry(Some(approver.clone()));
    registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap();
    registry
        .invoke("edit_file", json!({"path": "b"}))
        .await
        .unwrap();
    assert_eq!(approver.asked(), 1);
    registry
        .invoke("rename", json!({"path": "c"}))
        .await
        .unwrap();
    assert_eq!(approver.asked(), 2, "another tool is asked again");

    registry.clear_session_grants();
    registry
        .invoke("edit_file", json!({"path": "d"}))
        .await
        .unwrap();
    assert_eq!(approver.asked(), 3, "a cleared grant is asked again");
}

#[tokio::test]
async fn allow_for_session_with_args_covers_only_the_same_arguments() {
    let approver = ScriptedApprover::new(vec![
        ApprovalDecision::AllowForSessionWithArgs,
        ApprovalDecision::Deny { message: None },
    ]);
    let (registry, _) = approving_registry(Some(approver.clone()));
    registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap();
    registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap();
    assert_eq!(approver.asked(), 1);
    let error = registry
        .invoke("edit_file", json!({"path": "b"}))
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool 'edit_file' was not approved: the user declined this call"
    );
    assert_eq!(approver.asked(), 2);
}

#[tokio::test]
async fn deny_passes_the_message_to_the_model_and_never_runs_the_tool() {
    let approver = ScriptedApprover::new(vec![ApprovalDecision::Deny {
        message: Some("edit files under /tmp only".into()),
    }]);
    let (registry, tools) = approving_registry(Some(approver));
    let record = registry
        .invoke_call(ToolCallRequest::new(
            "c1",
            "edit_file",
            json!({"path": "/etc/x"}),
        ))
        .await;
    assert!(matches!(
        record.output,
        Err(ToolError::ApprovalDenied { .. })
    ));
    assert_eq!(record.input, json!({"path": "/etc/x"}));
    assert_eq!(
        registry.model_content(&record),
        "Error: tool 'edit_file' was not approved: edit files under /tmp only. \
         Do not retry this call; continue without it or ask the user."
    );
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 0);
}

/// A [`ScriptedApprover`] that yields before answering, as a human at a prompt would.
struct SlowApprover(Arc<ScriptedApprover>);

#[async_trait]
impl Approver for SlowApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        self.0.approve(request).await
    }
}

#[tokio::test]
async fn an_allow_for_session_answer_covers_parallel_calls_waiting_for_approval() {
    let approver = ScriptedApprover::new(vec![ApprovalDecision::AllowForSession]);
    let tools = tools();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
            .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
            .with_approver(Arc::new(SlowApprover(approver.clone()))),
    );
    let records = registry
        .invoke_all(vec![
            ("edit_file".to_owned(), json!({"path": "a"})),
            ("edit_file".to_owned(), json!({"path": "b"})),
            ("edit_file".to_owned(), json!({"path": "c"})),
        ])
        .await;
    for record in &records {
        assert!(record.output.is_ok(), "{:?}", record.output);
    }
    assert_eq!(approver.asked(), 1, "one answer covers the parallel calls");
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_session_grant_does_not_carry_over_to_a_new_tool_under_the_same_name() {
    let approver = ScriptedApprover::new(vec![
        ApprovalDecision::AllowForSession,
        ApprovalDecision::Deny { message: None },
    ]);
    let (mut registry, _) = approving_registry(Some(approver.clone()));
    registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap();
    // E.g. an MCP server's tool list changed: another tool now has the name.
    registry.unregister("edit_file");
    registry
        .register(Arc::new(fake("edit_file", ToolKind::Edit)))
        .unwrap();
    let error = registry
        .invoke("edit_file", json!({"path": "a"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::ApprovalDenied { .. }), "{error}");
    assert_eq!(approver.asked(), 2);
}

#[tokio::test]
async fn ask_without_an_approver_is_a_clear_denial() {
    let (registry, tools) = approving_registry(None);
    let error = registry.invoke("edit_file", json!({})).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool 'edit_file' was not approved: it needs Write, which requires approval, and no approver is configured"
    );
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 0);
    // Tools that need no asked permission still run.
    assert!(
        registry
            .invoke("read_file", json!({}))
            .await
            .unwrap()
            .output
            .is_ok()
    );
}

#[tokio::test]
async fn an_explicit_deny_wins_over_ask_and_the_approver_is_not_asked() {
    let approver = ScriptedApprover::new(vec![]);
    let (registry, _) = approving_registry(Some(approver.clone()));
    let error = registry.invoke("terminal", json!({})).await.unwrap_err();
    assert!(matches!(error, ToolError::PermissionDenied(..)));
    assert_eq!(approver.asked(), 0);
}

#[tokio::test]
async fn invalid_arguments_are_rejected_before_anyone_is_asked() {
    let approver = ScriptedApprover::new(vec![]);
    let (registry, _) = approving_registry(Some(approver.clone()));
    let error = registry
        .invoke("edit_file", json!({"path": 7}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::InvalidArguments(..)));
    assert_eq!(approver.asked(), 0);
}

#[tokio::test]
async fn a_panicking_approver_denies_the_call() {
    struct Broken;
    #[async_trait]
    impl Approver for Broken {
        async fn approve(&self, _: &ApprovalRequest) -> ApprovalDecision {
            panic!("terminal went away")
        }
    }
    let tools = tools();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
            .with_approver(Arc::new(Broken)),
    );
    let error = registry.invoke("edit_file", json!({})).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "tool 'edit_file' was not approved: the approver failed (terminal went away)"
    );
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 0);
}

// ---- Through the tool loop (scripted model) -------------------------------------------------

/// The text of the tool message answering `id`.
fn tool_message(cycle: &agcore::llm::LlmCycle, id: &str) -> String {
    cycle
        .messages()
        .iter()
        .find_map(|m| match m {
            agcore::llm::OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == id => Some(content.text()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn the_loop_never_offers_nor_runs_a_tool_hidden_by_restricted_mode() {
    use agcore::llm::testing::ScriptedModel;
    use agcore::llm::{CycleConfig, LlmCycle};

    let tools = tools();
    let registry = registry_from(
        &tools,
        ToolRegistry::new()
            .with_permission_checker(open_permissions())
            .with_exposure(ExposurePolicy::default().with_restricted_mode(true)),
    );
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![ToolCall::new(
            "c1",
            "fetch",
            r#"{"path":"https://x"}"#,
        )])
        .reply_text("I cannot fetch in this workspace.");
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let response = cycle
        .submit_with_tools("Fetch x".into(), &registry)
        .await
        .unwrap();
    assert_eq!(response.text(), "I cannot fetch in this workspace.");

    let offered = model.requests()[0].tool_names();
    assert!(!offered.contains(&"fetch".to_owned()), "{offered:?}");
    assert!(!offered.contains(&"terminal".to_owned()), "{offered:?}");
    assert!(
        tool_message(&cycle, "c1")
            .starts_with("Error: tool 'fetch' is not available: restricted mode: needs Network"),
        "{}",
        tool_message(&cycle, "c1")
    );
    assert_eq!(tools[2].runs.load(Ordering::SeqCst), 0);
}

#[tokio::test]
async fn the_loop_feeds_an_approval_denial_to_the_model_and_goes_on() {
    use agcore::llm::testing::ScriptedModel;
    use agcore::llm::{CycleConfig, LlmCycle};

    let approver = ScriptedApprover::new(vec![
        ApprovalDecision::Deny {
            message: Some("not on Fridays".into()),
        },
        ApprovalDecision::AllowOnce,
    ]);
    let (registry, tools) = approving_registry(Some(approver.clone()));
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![ToolCall::new("c1", "edit_file", r#"{"path":"a"}"#)])
        .reply_tool_calls(vec![ToolCall::new("c2", "edit_file", r#"{"path":"b"}"#)])
        .reply_text("Done.");
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let response = cycle
        .submit_with_tools("Edit".into(), &registry)
        .await
        .unwrap();
    assert_eq!(response.text(), "Done.");
    assert!(
        tool_message(&cycle, "c1").contains("was not approved: not on Fridays"),
        "{}",
        tool_message(&cycle, "c1")
    );
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&tool_message(&cycle, "c2")).unwrap(),
        serde_json::json!({"args": {"path": "b"}, "ran": "edit_file"})
    );
    assert_eq!(tools[1].runs.load(Ordering::SeqCst), 1);
    assert_eq!(approver.asked(), 2);
}

// ---- Agents of a team (issue 33 item 8) -----------------------------------------------------

fn only(names: &[&str]) -> Profile {
    Profile::new(
        "",
        names
            .iter()
            .map(|name| ProfileEntry::Tool((*name).to_owned())),
    )
}

#[test]
fn agent_tool_gates_stack_so_a_sub_agent_never_widens_its_parent() {
    let tools = tools();
    let policy = ExposurePolicy::default()
        .with_agent_tools("lead", only(&["read_file", "edit_file"]))
        .with_agent_tools("lead/worker", only(&["edit_file", "fetch"]));
    let gate = |name: &str| {
        let tool = tools.iter().find(|tool| tool.name == name).unwrap();
        policy.gate(tool.as_ref())
    };
    // Both list it: offered.
    assert_eq!(gate("edit_file"), []);
    // Only the parent lists it: the worker's gate hides it, and names the worker.
    assert_eq!(
        gate("read_file"),
        [HiddenBecause::Agent {
            agent: "lead/worker".into()
        }]
    );
    // Only the worker lists it: the parent's gate still hides it (no widening).
    assert_eq!(
        gate("fetch"),
        [HiddenBecause::Agent {
            agent: "lead".into()
        }]
    );
    // Neither: both gates say so.
    assert_eq!(gate("terminal").len(), 2);
}

#[tokio::test]
async fn an_agents_registry_refuses_calls_outside_its_list_and_keeps_the_runs_denials() {
    let tools = tools();
    let parent = registry_from(
        &tools,
        ToolRegistry::new().with_permission_checker(PermissionChecker::new(PermissionConfig {
            allowed: vec![],
            denied: vec![Permission::Shell],
            allow_unspecified: true,
        })),
    );
    let worker = parent.narrowed_for_agent("lead/worker", only(&["read_file", "terminal"]));
    assert_eq!(exposed(&worker, "openai"), ["read_file"]);
    // Outside its list: refused with the agent named, never run.
    let call = ToolCall::new("call_1", "edit_file", "{}");
    let record = worker.invoke_call(ToolCallRequest::from(&call)).await;
    assert!(
        matches!(
            &record.output,
            Err(ToolError::NotExposed { reasons, .. })
                if reasons == &[HiddenBecause::Agent { agent: "lead/worker".into() }]
        ),
        "{:?}",
        record.output
    );
    // On its list but denied by the run: still refused, never run.
    let call = ToolCall::new("call_2", "terminal", "{}");
    let record = worker.invoke_call(ToolCallRequest::from(&call)).await;
    assert!(record.output.is_err(), "{:?}", record.output);
    // On its list and allowed: runs.
    worker.invoke("read_file", json!({})).await.unwrap();
    let runs = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.name == name)
            .unwrap()
            .runs
            .load(Ordering::SeqCst)
    };
    assert_eq!(
        (runs("edit_file"), runs("terminal"), runs("read_file")),
        (0, 0, 1)
    );
    // The parent is not narrowed.
    assert!(exposed(&parent, "openai").contains(&"edit_file".to_owned()));
}
