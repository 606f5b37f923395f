//! Rules on `run_command` judge what the command line will run, through the real
//! `run_command` tool and the registry: an allow rule never lets operators, substitutions or
//! redirections it did not name through, deny rules see every simple command with its options
//! normalised, and a command that does not parse is never allowed by a rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::sync::{Arc, Mutex};

use agcore::tools::builtin::{RunCommand, Workspace};
use agcore::tools::{
    ApprovalDecision, ApprovalRequest, Approver, ArgumentRule, RuleAction, Tool, ToolError,
    ToolRegistry, ToolsConfig,
};
use async_trait::async_trait;
use serde_json::json;

/// Records the commands it was asked about; declines them all.
#[derive(Default)]
struct Decline(Mutex<Vec<String>>);

#[async_trait]
impl Approver for Decline {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let command = request.arguments["command"].as_str().unwrap_or_default();
        self.0.lock().unwrap().push(command.to_owned());
        ApprovalDecision::Deny { message: None }
    }
}

fn rule(test: &str, value: &str, action: RuleAction) -> ArgumentRule {
    let mut rule = ArgumentRule {
        tool: "run_command".into(),
        argument: "command".into(),
        matches: None,
        contains: None,
        host_in: Vec::new(),
        action,
    };
    match test {
        "matches" => rule.matches = Some(value.into()),
        _ => rule.contains = Some(value.into()),
    }
    rule
}

/// What happened to one call.
#[derive(Debug, PartialEq)]
enum Outcome {
    /// It ran without asking.
    Ran,
    /// The approver was asked (and declined).
    Asked,
}

/// `Shell` configured as ask; the docs' allow rule and a deny rule on `rm -rf`.
struct Fixture {
    root: tempfile::TempDir,
    registry: ToolRegistry,
    approver: Arc<Decline>,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        std::fs::create_dir(root.path().join("victim")).unwrap();
        let mut config: ToolsConfig = toml::from_str(
            r#"
            ask = ["shell"]
            [permissions]
            allowed = ["read", "shell"]
            denied = []
            "#,
        )
        .unwrap();
        config.rules = vec![
            rule("matches", "^cargo (test|build)( |$)", RuleAction::Allow),
            rule("contains", "rm -rf", RuleAction::Deny),
        ];
        let approver = Arc::new(Decline::default());
        let mut registry = config
            .apply(ToolRegistry::new())
            .unwrap()
            .with_approver(approver.clone());
        let workspace = Workspace::new(root.path()).unwrap();
        registry
            .register(RunCommand::new(workspace).erase())
            .unwrap();
        registry.check_exposure().unwrap();
        Fixture {
            root,
            registry,
            approver,
        }
    }

    /// Run `command`: whether it ran without asking or the approver was asked (and
    /// declined), or the error.
    async fn run(&self, command: &str) -> Result<Outcome, ToolError> {
        self.approver.0.lock().unwrap().clear();
        let result = self
            .registry
            .invoke("run_command", json!({ "command": command }))
            .await;
        let asked = !self.approver.0.lock().unwrap().is_empty();
        match result {
            Ok(_) if !asked => Ok(Outcome::Ran),
            Err(ToolError::ApprovalDenied { .. }) if asked => Ok(Outcome::Asked),
            Ok(_) => panic!("{command:?} ran after being asked, though the approver declined"),
            Err(error) => Err(error),
        }
    }

    fn touched(&self) -> bool {
        self.root.path().join("X").exists()
    }
}

#[tokio::test]
async fn an_allow_rule_does_not_let_operators_or_substitutions_through() {
    let fixture = Fixture::new();
    for command in [
        "cargo test ; touch X",
        "cargo build $(touch X)",
        "cargo build `touch X`",
        "cargo test && touch X",
        "cargo test | touch X",
        "cargo test\ntouch X",
        "cargo test > X",
    ] {
        assert_eq!(
            fixture.run(command).await.unwrap(),
            Outcome::Asked,
            "{command:?} ran without asking"
        );
        assert!(!fixture.touched(), "{command:?} created X");
    }
}

#[tokio::test]
async fn a_plain_command_the_allow_rule_names_still_runs_without_asking() {
    let fixture = Fixture::new();
    assert_eq!(fixture.run("cargo test --lib").await.unwrap(), Outcome::Ran);
}

#[tokio::test]
async fn an_unparsable_command_is_not_allowed_by_the_rule() {
    let fixture = Fixture::new();
    assert_eq!(
        fixture.run("cargo test \"unclosed").await.unwrap(),
        Outcome::Asked,
        "an unparsable command ran without asking"
    );
}

#[tokio::test]
async fn a_deny_rule_matches_every_spelling_of_the_flags() {
    let fixture = Fixture::new();
    for command in [
        "rm -r -f victim",
        "rm -fr victim",
        "rm --recursive --force victim",
        "cargo test; rm -R -f victim",
        "sh -c 'rm -r -f victim'",
    ] {
        let error = fixture.run(command).await.unwrap_err();
        assert!(
            matches!(&error, ToolError::DeniedByRule { because, .. } if because.contains("contains \"rm -rf\"")),
            "{command:?}: {error:?}"
        );
        assert!(fixture.root.path().join("victim").exists(), "{command:?}");
    }
}
