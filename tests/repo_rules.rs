//! Rules the test suite keeps about itself. A test never skips silently: every skip goes through
//! the one helper (`tests/require_support`), whose notice gets past the harness's output
//! capture (so `.ci/run` can refuse it) and which fails the test on CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use std::path::{Path, PathBuf};
use std::process::Command;

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|ext| ext == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The test sources of both crates.
fn test_sources() -> Vec<PathBuf> {
    let repo = mcp_support::repo();
    let mut files = rust_files(&repo.join("tests"));
    files.extend(rust_files(&repo.join("cli/tests")));
    files
}

#[test]
fn no_test_skips_except_through_the_shared_helper() {
    // Spelled in pieces so this file does not match itself.
    let env_read = ["env::var(\"", "env::var_os(\""];
    let ci = format!("{}CI\"", "\"");
    let helper = Path::new("require_support").join("mod.rs");
    let mut found = Vec::new();
    for file in test_sources() {
        if file.ends_with(&helper) || file.ends_with(file!()) {
            continue;
        }
        // The support modules find the dependencies (and hand them to the helper).
        let support = file
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|dir| dir.to_string_lossy().ends_with("_support") || dir == "support");
        let text = std::fs::read_to_string(&file).unwrap();
        for (number, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or_default();
            let lower = code.to_ascii_lowercase();
            // Reading `CI`, or an external dependency's variable, outside the helper: a test
            // deciding on its own whether to skip. (The lease test's child handshake variable
            // is not a dependency.)
            let reads_ci = code.contains(&ci) && env_read.iter().any(|r| code.contains(r));
            let reads_dependency = env_read
                .iter()
                .any(|r| code.contains(&format!("{r}AGCORE_TEST_")))
                && !support
                && !code.contains("HOLDER_URL");
            // A skip notice printed by hand.
            let prints_skip = (lower.contains("eprintln!(") || lower.contains("println!("))
                && lower.contains("skip");
            if reads_ci || reads_dependency || prints_skip {
                found.push(format!(
                    "{}:{}: {}",
                    file.display(),
                    number + 1,
                    line.trim()
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "skips outside tests/require_support (use mcp_support::require / require_env):\n{}",
        found.join("\n")
    );
}

/// Run as a child by the test below: skips through the helper.
#[test]
#[ignore = "run by a_skip_is_announced_past_the_capture_and_fails_on_ci as a child process"]
fn skipping_child() {
    let value: Option<()> =
        mcp_support::require("the thing this child needs", "nothing to install", None);
    assert!(value.is_none());
}

/// The helper's notice reaches the test binary's output although the harness captures what a
/// passing test prints (`.ci/run` looks for it there); with `CI` set the test fails.
#[test]
fn a_skip_is_announced_past_the_capture_and_fails_on_ci() {
    let child = |ci: bool| {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args(["--exact", "skipping_child", "--ignored", "--test-threads=1"]);
        if ci {
            command.env("CI", "true");
        } else {
            command.env_remove("CI");
        }
        let output = command.output().unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        (output.status.success(), text)
    };
    let notice = format!("{}: the thing this child needs", mcp_support::SKIP_MARKER);

    let (passed, text) = child(false);
    assert!(passed, "without CI the child skips: {text}");
    assert!(
        text.contains(&notice),
        "the notice is not in the output: {text}"
    );
    assert!(text.contains("1 passed"), "{text}");

    let (passed, text) = child(true);
    assert!(!passed, "with CI set the child fails: {text}");
    assert!(text.contains(&notice), "{text}");
    assert!(
        text.contains("CI is set, so this fails instead of skipping"),
        "{text}"
    );
}
