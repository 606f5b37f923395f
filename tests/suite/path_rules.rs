//! Rules on a file tool's `path` match the path the tool will act on (resolved in the
//! workspace), not the text the model wrote: `./private.txt`, `sub/../private.txt`,
//! `private.txt/`, an absolute path and a symlink all hit a deny on `^private\.txt$`, and an
//! allow on `^docs/` does not let `docs/../private.txt` through.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::sync::Arc;

use agcore::tools::builtin::{ListDirectory, ReadFile, SearchFiles, Workspace, WriteFile};
use agcore::tools::{
    ApprovalDecision, ApprovalRequest, Approver, ArgumentRule, RuleAction, Tool, ToolError,
    ToolRegistry, ToolsConfig,
};
use async_trait::async_trait;
use serde_json::json;

/// Declines everything it is asked about.
struct Decline;

#[async_trait]
impl Approver for Decline {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Deny { message: None }
    }
}

fn rule(tool: &str, pattern: &str, action: RuleAction) -> ArgumentRule {
    ArgumentRule {
        tool: tool.into(),
        argument: "path".into(),
        matches: Some(pattern.into()),
        contains: None,
        host_in: Vec::new(),
        action,
    }
}

/// A workspace with `private.txt`, `docs/guide.md`, `sub/`, and `link -> private.txt`;
/// `Read` and `Write` configured as ask.
fn fixture(rules: Vec<ArgumentRule>) -> (tempfile::TempDir, ToolRegistry) {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("private.txt"), "SECRET\n").unwrap();
    std::fs::create_dir(root.path().join("docs")).unwrap();
    std::fs::write(root.path().join("docs/guide.md"), "guide\n").unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    std::os::unix::fs::symlink("private.txt", root.path().join("link")).unwrap();
    let mut config: ToolsConfig = toml::from_str(
        r#"
        ask = ["read", "write"]
        [permissions]
        allowed = ["read", "write"]
        denied = []
        "#,
    )
    .unwrap();
    config.rules = rules;
    let mut registry = config
        .apply(ToolRegistry::new())
        .unwrap()
        .with_approver(Arc::new(Decline));
    let workspace = Workspace::new(root.path()).unwrap();
    registry
        .register(ReadFile::new(workspace.clone()).erase())
        .unwrap();
    registry
        .register(WriteFile::new(workspace.clone()).erase())
        .unwrap();
    registry
        .register(ListDirectory::new(workspace.clone()).erase())
        .unwrap();
    registry
        .register(SearchFiles::new(workspace).erase())
        .unwrap();
    registry.check_exposure().unwrap();
    (root, registry)
}

#[tokio::test]
async fn a_deny_on_a_path_matches_every_spelling_of_it() {
    let (root, registry) = fixture(vec![
        rule("read_file", r"^private\.txt$", RuleAction::Deny),
        rule("write_file", r"^private\.txt$", RuleAction::Deny),
    ]);
    let absolute = root.path().join("private.txt").display().to_string();
    for path in [
        "private.txt",
        "./private.txt",
        "sub/../private.txt",
        "private.txt/",
        ".//private.txt",
        absolute.as_str(),
        "link",
    ] {
        for (tool, args) in [
            ("read_file", json!({"path": path})),
            (
                "write_file",
                json!({"path": path, "content": "overwritten"}),
            ),
        ] {
            let error = registry.invoke(tool, args).await.unwrap_err();
            assert!(
                matches!(&error, ToolError::DeniedByRule { .. }),
                "{tool} {path:?}: {error:?}"
            );
        }
    }
    assert_eq!(
        std::fs::read_to_string(root.path().join("private.txt")).unwrap(),
        "SECRET\n"
    );
}

#[tokio::test]
async fn an_allow_on_a_path_matches_where_the_path_leads() {
    let (_root, registry) = fixture(vec![
        rule("read_file", r"^docs/", RuleAction::Allow),
        rule("list_directory", r"^docs$", RuleAction::Allow),
    ]);
    // Allowed without asking: the rule names where it leads.
    registry
        .invoke("read_file", json!({"path": "./docs/guide.md"}))
        .await
        .unwrap();
    registry
        .invoke("list_directory", json!({"path": "docs/"}))
        .await
        .unwrap();
    // Leads elsewhere: asked (and declined).
    for path in ["docs/../private.txt", "docs/../link"] {
        let error = registry
            .invoke("read_file", json!({"path": path}))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::ApprovalDenied { .. }),
            "{path:?}: {error:?}"
        );
    }
}
