//! The sandbox must not break ordinary work (issue 34): `cargo build`, `cargo test` and
//! `npm test` of a small real project run inside `workspace-write` with the network off — the
//! toolchains' caches read, the build written in the workspace. Each command also shows it ran
//! confined (a write beside the workspace fails), so with the sandbox off
//! (`AGCORE_DISABLE_SANDBOX_IN_TESTS=1`) these fail too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::path::Path;

use agcore::tools::builtin::{RunCommand, Workspace};
use agcore::tools::sandbox::SandboxPolicy;

use super::sandbox::{run, sandbox};
use crate::support::require::require;

/// A workspace `ws` and a directory `outside` beside it, in one temporary directory.
fn dirs() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(root.path()).unwrap();
    let (workspace, outside) = (base.join("ws"), base.join("outside"));
    std::fs::create_dir(&workspace).unwrap();
    std::fs::create_dir(&outside).unwrap();
    (root, workspace, outside)
}

fn tool(workspace: &Path, home: &Path) -> RunCommand {
    RunCommand::new(Workspace::new(workspace).unwrap())
        .with_sandbox(sandbox(SandboxPolicy::workspace_write(), home))
}

fn on_path(program: &str) -> Option<()> {
    std::process::Command::new(program)
        .arg("--version")
        .output()
        .ok()
        .filter(|output| output.status.success())
        .map(|_| ())
}

#[tokio::test]
async fn cargo_build_and_test_work_inside_workspace_write_without_network() {
    let (_root, workspace, outside) = dirs();
    std::fs::create_dir(workspace.join("src")).unwrap();
    std::fs::write(
        workspace.join("Cargo.toml"),
        "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    )
    .unwrap();
    std::fs::write(
        workspace.join("src/lib.rs"),
        "pub fn add(a: u32, b: u32) -> u32 { a + b }\n\
         #[cfg(test)]\nmod tests { #[test] fn adds() { assert_eq!(super::add(2, 2), 4); } }\n",
    )
    .unwrap();
    let home = std::env::var_os("HOME").unwrap();
    // The build goes to the workspace's own target/, whatever the caller's environment says.
    let command = format!(
        "unset CARGO_TARGET_DIR RUSTC_WRAPPER CARGO_BUILD_TARGET_DIR; \
         cargo build --offline 2>&1 && cargo test --offline 2>&1 && \
         if touch {}/escaped 2>/dev/null; then echo ESCAPED; fi",
        outside.display()
    );
    let output = run(&tool(&workspace, Path::new(&home)), &command).await;
    assert_eq!(output.exit_code, Some(0), "{output:?}");
    assert!(
        output.stdout.contains("test result: ok. 1 passed"),
        "{output:?}"
    );
    assert!(workspace.join("target/debug").is_dir());
    assert!(
        !output.stdout.contains("ESCAPED"),
        "not sandboxed: {output:?}"
    );
}

#[tokio::test]
async fn npm_test_works_inside_workspace_write_without_network() {
    if require("npm", "install Node.js and npm", on_path("npm")).is_none() {
        return;
    }
    let (_root, workspace, outside) = dirs();
    std::fs::write(
        workspace.join("package.json"),
        r#"{"name":"tiny","version":"1.0.0","scripts":{"test":"node --test"}}"#,
    )
    .unwrap();
    std::fs::write(
        workspace.join("add.test.js"),
        "const test = require('node:test');\nconst assert = require('node:assert');\n\
         test('adds', () => assert.strictEqual(1 + 1, 2));\n",
    )
    .unwrap();
    let home = std::env::var_os("HOME").unwrap();
    let command = format!(
        "npm test 2>&1 && if touch {}/escaped 2>/dev/null; then echo ESCAPED; fi",
        outside.display()
    );
    let output = run(&tool(&workspace, Path::new(&home)), &command).await;
    assert_eq!(output.exit_code, Some(0), "{output:?}");
    assert!(output.stdout.contains("# pass 1"), "{output:?}");
    assert!(
        !output.stdout.contains("ESCAPED"),
        "not sandboxed: {output:?}"
    );
}
