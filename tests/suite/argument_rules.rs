//! Rules on arguments (issue 14, item 4) through the registry's public API: a table of calls
//! against allow / ask / deny rules (conflicts included), the permission check first, host
//! lists, rules that name an unknown tool or argument, explanations, and an MCP tool's
//! arguments.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Mutex;

use agcore::tools::prelude::*;
use agcore::tools::{
    ApprovalDecision, ApprovalRequest, Approver, ArgumentRule, RuleAction, ToolsConfig,
};

/// `run_command` (needs Shell) and `fetch_url` (needs Network), echoing their input.
struct Fake {
    name: &'static str,
    argument: &'static str,
    permission: Permission,
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
        json!({"type": "object", "properties": {self.argument: {"type": "string"}, "timeout": {"type": "integer"}},
            "required": [self.argument]})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![self.permission.clone()]
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        Ok(args)
    }
}

/// Records the reasons it was asked with; answers allow.
#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

#[async_trait]
impl Approver for Recorder {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.0.lock().unwrap().push(request.reason.clone());
        ApprovalDecision::AllowOnce
    }
}

fn rule(tool: &str, argument: &str, test: (&str, &str), action: RuleAction) -> ArgumentRule {
    let mut rule = ArgumentRule {
        tool: tool.into(),
        argument: argument.into(),
        matches: None,
        contains: None,
        host_in: Vec::new(),
        action,
    };
    match test {
        ("matches", pattern) => rule.matches = Some(pattern.into()),
        ("contains", text) => rule.contains = Some(text.into()),
        ("host_in", hosts) => rule.host_in = hosts.split(',').map(str::to_owned).collect(),
        other => panic!("{other:?}"),
    }
    rule
}

/// The rules of the issue's example, with `Shell` and `Network` configured as ask.
fn config(rules: Vec<ArgumentRule>) -> ToolsConfig {
    ToolsConfig::parse_toml(
        r#"
        ask = ["shell", "network"]
        [permissions]
        allowed = ["read", "shell", "network"]
        denied = ["delete"]
        "#,
    )
    .with_rules(rules)
}

trait Parse {
    fn parse_toml(text: &str) -> Self;
    fn with_rules(self, rules: Vec<ArgumentRule>) -> Self;
}

impl Parse for ToolsConfig {
    fn parse_toml(text: &str) -> Self {
        toml::from_str(text).unwrap()
    }
    fn with_rules(mut self, rules: Vec<ArgumentRule>) -> Self {
        self.rules = rules;
        self
    }
}

fn registry(config: &ToolsConfig, approver: Arc<Recorder>) -> ToolRegistry {
    let mut registry = config
        .apply(ToolRegistry::new())
        .unwrap()
        .with_approver(approver);
    registry
        .register(Arc::new(Fake {
            name: "run_command",
            argument: "command",
            permission: Permission::Shell,
        }))
        .unwrap();
    registry
        .register(Arc::new(Fake {
            name: "fetch_url",
            argument: "url",
            permission: Permission::Network,
        }))
        .unwrap();
    registry.check_exposure().unwrap();
    registry
}

/// What happened to one call.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// Ran without asking.
    Ran,
    /// Ran after asking, with this reason.
    Asked(String),
    /// Refused, with this error text.
    Refused(String),
}

async fn call(registry: &ToolRegistry, approver: &Recorder, tool: &str, args: Value) -> Outcome {
    approver.0.lock().unwrap().clear();
    let result = registry.invoke(tool, args).await;
    let asked = approver.0.lock().unwrap().pop();
    match (result, asked) {
        (Ok(_), None) => Outcome::Ran,
        (Ok(_), Some(reason)) => Outcome::Asked(reason),
        (Err(error), _) => Outcome::Refused(error.to_string()),
    }
}

#[tokio::test]
async fn a_table_of_rules_deny_beats_ask_beats_allow_and_no_match_keeps_the_permission() {
    let rules = vec![
        rule(
            "run_command",
            "command",
            ("matches", "^cargo (test|build)( |$)"),
            RuleAction::Allow,
        ),
        rule(
            "run_command",
            "command",
            ("contains", "rm -rf"),
            RuleAction::Deny,
        ),
        rule(
            "run_command",
            "command",
            ("matches", "--release"),
            RuleAction::Ask,
        ),
        rule(
            "fetch_url",
            "url",
            ("host_in", "docs.rs,crates.io"),
            RuleAction::Allow,
        ),
    ];
    let approver = Arc::new(Recorder::default());
    let registry = registry(&config(rules), approver.clone());
    let shell_ask = "tool 'run_command' needs Shell, which is configured as ask".to_owned();
    let net_ask = "tool 'fetch_url' needs Network, which is configured as ask".to_owned();
    let table = [
        ("run_command", json!({"command": "cargo test"}), Outcome::Ran),
        ("run_command", json!({"command": "cargo build --locked"}), Outcome::Ran),
        // No rule matches: the permission's ask stands.
        ("run_command", json!({"command": "cargo testing"}), Outcome::Asked(shell_ask.clone())),
        ("run_command", json!({"command": "make"}), Outcome::Asked(shell_ask)),
        // Allow and deny both match: deny wins.
        (
            "run_command",
            json!({"command": "cargo test && rm -rf /"}),
            Outcome::Refused(
                "tool 'run_command' was denied by a rule on its arguments: rule 2: run_command.command contains \"rm -rf\" → deny"
                    .into(),
            ),
        ),
        // Allow and ask both match: ask wins.
        (
            "run_command",
            json!({"command": "cargo build --release"}),
            Outcome::Asked(
                "tool 'run_command': a rule on its arguments asks for approval (rule 3: run_command.command matches \"--release\" → ask)"
                    .into(),
            ),
        ),
        ("fetch_url", json!({"url": "https://docs.rs/regex"}), Outcome::Ran),
        ("fetch_url", json!({"url": "https://api.crates.io/v1/crates"}), Outcome::Ran),
        ("fetch_url", json!({"url": "https://evildocs.rs/"}), Outcome::Asked(net_ask.clone())),
        ("fetch_url", json!({"url": "https://docs.rs.evil.example/"}), Outcome::Asked(net_ask.clone())),
        ("fetch_url", json!({"url": "not a url"}), Outcome::Asked(net_ask)),
    ];
    for (tool, args, expected) in table {
        let outcome = call(&registry, &approver, tool, args.clone()).await;
        assert_eq!(outcome, expected, "{tool} {args}");
    }
}

#[tokio::test]
async fn rules_come_after_the_permission_check_and_an_ask_rule_needs_an_approver() {
    // Shell denied: an allow rule does not let the tool run.
    let mut config = config(vec![
        rule(
            "run_command",
            "command",
            ("matches", "^ls$"),
            RuleAction::Allow,
        ),
        rule(
            "fetch_url",
            "url",
            ("contains", "internal"),
            RuleAction::Ask,
        ),
    ]);
    config.permissions = Some(PermissionConfig {
        allowed: vec![Permission::Network],
        denied: vec![Permission::Shell],
        allow_unspecified: true,
    });
    config.ask.clear();
    let approver = Arc::new(Recorder::default());
    let registry = registry(&config, approver.clone());
    let outcome = call(
        &registry,
        &approver,
        "run_command",
        json!({"command": "ls"}),
    )
    .await;
    assert_eq!(
        outcome,
        Outcome::Refused(
            "permission denied: tool 'run_command' requires Shell (it is in the denied list)"
                .into()
        )
    );
    // Network allowed: an ask rule still asks.
    let outcome = call(
        &registry,
        &approver,
        "fetch_url",
        json!({"url": "https://internal.example"}),
    )
    .await;
    assert!(
        matches!(outcome, Outcome::Asked(ref reason) if reason.contains("rule 2")),
        "{outcome:?}"
    );

    let unapproved = config.apply(ToolRegistry::new()).unwrap();
    let mut unapproved = unapproved;
    unapproved
        .register(Arc::new(Fake {
            name: "fetch_url",
            argument: "url",
            permission: Permission::Network,
        }))
        .unwrap();
    let error = unapproved
        .invoke("fetch_url", json!({"url": "https://internal.example"}))
        .await
        .unwrap_err();
    assert!(
        error
            .to_string()
            .contains("a rule on its arguments asks for approval")
            && error.to_string().contains("no approver is configured"),
        "{error}"
    );
}

#[test]
fn a_rule_naming_an_unknown_tool_or_argument_is_an_error_and_bad_patterns_too() {
    let config = config(vec![
        rule("run_command", "cmd", ("contains", "x"), RuleAction::Deny),
        rule("run_comand", "command", ("contains", "x"), RuleAction::Deny),
    ]);
    let mut registry = config.apply(ToolRegistry::new()).unwrap();
    registry
        .register(Arc::new(Fake {
            name: "run_command",
            argument: "command",
            permission: Permission::Shell,
        }))
        .unwrap();
    let error = registry.check_exposure().unwrap_err().to_string();
    assert!(
        error.contains("argument rule 1 names argument 'cmd' of tool 'run_command', which it does not declare (its arguments: command, timeout)"),
        "{error}"
    );
    assert!(
        error.contains("argument rule 2 names tool 'run_comand', which is not registered"),
        "{error}"
    );
    // The same problems in the explain report.
    assert_eq!(registry.explain("openai", "m").problems.len(), 2);

    let bad = self::config(vec![rule(
        "run_command",
        "command",
        ("matches", "(unclosed"),
        RuleAction::Allow,
    )]);
    let error = bad.apply(ToolRegistry::new()).unwrap_err().to_string();
    assert!(
        error.starts_with("argument rule 1 (tool 'run_command') is invalid: matches \"(unclosed\""),
        "{error}"
    );
    let mut two = rule(
        "run_command",
        "command",
        ("contains", "x"),
        RuleAction::Allow,
    );
    two.matches = Some("y".into());
    let error = self::config(vec![two])
        .apply(ToolRegistry::new())
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("exactly one of matches, contains and host_in"),
        "{error}"
    );
}

#[test]
fn the_explain_report_lists_each_tools_rules() {
    let config = config(vec![
        rule(
            "run_command",
            "command",
            ("matches", "^cargo test$"),
            RuleAction::Allow,
        ),
        rule(
            "fetch_url",
            "url",
            ("host_in", "docs.rs"),
            RuleAction::Allow,
        ),
    ]);
    let registry = registry(&config, Arc::new(Recorder::default()));
    let report = registry.explain("openai", "m");
    assert_eq!(
        report.tool("run_command").unwrap().rules,
        ["rule 1: run_command.command matches \"^cargo test$\" → allow"]
    );
    let text = report.to_string();
    assert!(
        text.contains("\n    rule 2: fetch_url.url has a host in [docs.rs] → allow\n"),
        "{text}"
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(
        json["tools"][1]["rules"][0],
        "rule 2: fetch_url.url has a host in [docs.rs] → allow"
    );
}

#[tokio::test]
async fn an_mcp_tools_arguments_are_covered_the_same_way() {
    let mut client = agcore::tools::McpClient::new("demo", support::mcp::demo(&["--test-tools"]));
    client.connect().await.unwrap();
    let config = ToolsConfig {
        rules: vec![
            rule(
                "get_weather",
                "city",
                ("matches", "(?i)^atlantis$"),
                RuleAction::Deny,
            ),
            rule(
                "get_weather",
                "country",
                ("contains", "x"),
                RuleAction::Deny,
            ),
        ],
        ..ToolsConfig::default()
    };
    let mut registry = config.apply(ToolRegistry::new()).unwrap();
    registry.register_all(client.into_tools()).unwrap();
    let error = registry.check_exposure().unwrap_err().to_string();
    assert!(
        error.contains("argument 'country' of tool 'get_weather'"),
        "{error}"
    );

    let config = ToolsConfig {
        rules: config.rules[..1].to_vec(),
        ..ToolsConfig::default()
    };
    let mut client = agcore::tools::McpClient::new("demo", support::mcp::demo(&["--test-tools"]));
    client.connect().await.unwrap();
    let mut registry = config.apply(ToolRegistry::new()).unwrap();
    registry.register_all(client.into_tools()).unwrap();
    registry.check_exposure().unwrap();
    let error = registry
        .invoke("get_weather", json!({"city": "Atlantis"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::DeniedByRule { .. }), "{error}");
    let ran = registry
        .invoke("get_weather", json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(ran.output.unwrap()["city"], "Oslo");
}
