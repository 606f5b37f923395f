//! `agcore mcp resources` and `agcore mcp prompts` against server-everything (installed by
//! `.ci/install-mcp-servers.sh`; without it the test skips with a notice, and fails on CI).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use support::agcore;

fn everything_config(dir: &Path) -> Option<PathBuf> {
    let script =
        support::mcp::npm_script("@modelcontextprotocol/server-everything", "dist/index.js")?;
    let file = dir.join("mcp.json");
    let config = serde_json::json!({"mcpServers": {"everything": {
        "command": "node", "args": [script, "stdio"]}}});
    std::fs::write(&file, config.to_string()).unwrap();
    Some(file)
}

fn run(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut command = agcore(dir);
    command.args(args);
    let out = Command::from_std(command).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn resources_and_prompts_are_listed_read_and_rendered() {
    let dir = tempfile::tempdir().unwrap();
    let Some(config) = everything_config(dir.path()) else {
        return;
    };
    let config = config.to_str().unwrap();
    let (ok, out) = run(
        dir.path(),
        &["mcp", "resources", "--mcp-config", config, "everything"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("demo://resource/static/document/"), "{out}");
    assert!(out.contains("templates ("), "{out}");

    let (ok, out) = run(
        dir.path(),
        &[
            "mcp",
            "resources",
            "--mcp-config",
            config,
            "everything",
            "demo://resource/dynamic/text/1",
        ],
    );
    assert!(ok, "{out}");
    assert!(!out.trim().is_empty(), "{out}");

    let (ok, out) = run(
        dir.path(),
        &["mcp", "prompts", "--mcp-config", config, "everything"],
    );
    assert!(ok, "{out}");
    assert!(out.contains("args-prompt"), "{out}");
    assert!(out.contains("--arg city=... (required)"), "{out}");

    let (ok, out) = run(
        dir.path(),
        &[
            "mcp",
            "prompts",
            "--mcp-config",
            config,
            "everything",
            "args-prompt",
            "--arg",
            "city=Paris",
        ],
    );
    assert!(ok, "{out}");
    assert!(out.contains("[user]\nWhat's weather in Paris?"), "{out}");
}
