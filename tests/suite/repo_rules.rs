//! Rules the test suite keeps about itself. A test never skips silently: every skip goes through
//! the one helper (`tests/support/require.rs`), whose notice gets past the harness's output
//! capture (so `.ci/run` can refuse it) and which fails the test on CI.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

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
    let repo = support::mcp::repo();
    let mut files = rust_files(&repo.join("tests"));
    files.extend(rust_files(&repo.join("cli/tests")));
    files
}

#[test]
fn no_test_skips_except_through_the_shared_helper() {
    // Spelled in pieces so this file does not match itself.
    let env_read = ["env::var(\"", "env::var_os(\""];
    let ci = format!("{}CI\"", "\"");
    let helper = Path::new("support").join("require.rs");
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
        "skips outside tests/support/require.rs (use support::mcp::require / require_env):\n{}",
        found.join("\n")
    );
}

/// Run as a child by the test below: skips through the helper.
#[test]
#[ignore = "run by a_skip_is_announced_past_the_capture_and_fails_on_ci as a child process"]
fn skipping_child() {
    let value: Option<()> =
        support::mcp::require("the thing this child needs", "nothing to install", None);
    assert!(value.is_none());
}

/// The helper's notice reaches the test binary's output although the harness captures what a
/// passing test prints (`.ci/run` looks for it there); with `CI` set the test fails.
#[test]
fn a_skip_is_announced_past_the_capture_and_fails_on_ci() {
    let child = |ci: bool| {
        let mut command = Command::new(std::env::current_exe().unwrap());
        command.args([
            "--exact",
            "suite::repo_rules::skipping_child",
            "--ignored",
            "--test-threads=1",
        ]);
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
    let notice = format!("{}: the thing this child needs", support::mcp::SKIP_MARKER);

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

// ---- the tests the docs cite exist -------------------------------------------------------

/// Every `.rs` file of the workspace's sources and tests.
fn workspace_sources() -> Vec<PathBuf> {
    let repo = support::mcp::repo();
    [
        "tests",
        "cli/tests",
        "src",
        "cli/src",
        "examples",
        "benches",
    ]
    .iter()
    .flat_map(|dir| rust_files(&repo.join(dir)))
    .collect()
}

/// The names one citation stands for: `a`, `{a, b}_c` → `a_c`, `b_c`; `*` stays a wildcard.
fn expand(names: &str) -> Vec<String> {
    match (names.find('{'), names.find('}')) {
        (Some(open), Some(close)) if open < close => names[open + 1..close]
            .split(',')
            .map(|middle| format!("{}{}{}", &names[..open], middle.trim(), &names[close + 1..]))
            .collect(),
        _ => vec![names.to_owned()],
    }
}

/// Where `file` (a cited path like `tests/builtin_tools.rs`) is now: the file itself when it
/// exists, else every source with its stem (a test file moved into `tests/suite/` keeps it).
fn cited_files(file: &str, sources: &[PathBuf]) -> Vec<PathBuf> {
    let exact = support::mcp::repo().join(file);
    if exact.is_file() {
        return vec![exact];
    }
    let stem = Path::new(file).file_stem().unwrap_or_default();
    sources
        .iter()
        .filter(|path| {
            path.file_stem() == Some(stem)
                || (path.file_name().is_some_and(|name| name == "mod.rs")
                    && path.parent().and_then(Path::file_name) == Some(stem))
        })
        .cloned()
        .collect()
}

/// Whether `text` defines the function (or module) `name`, whose `*` matches any identifier
/// characters.
fn defines(text: &str, name: &str) -> bool {
    let pattern = regex::escape(name).replace(r"\*", "[A-Za-z0-9_]*");
    let pattern = format!(r"\b(fn|mod)\s+{pattern}\s*[<({{]");
    regex::Regex::new(&pattern).unwrap().is_match(text)
}

/// Every `file.rs::name` the docs and the README cite (`file::test`, `file.rs::{a, b}`,
/// `file.rs::prefix_*`), with where it is cited.
fn citations() -> Vec<(String, String, String)> {
    let repo = support::mcp::repo();
    let mut docs: Vec<PathBuf> = std::fs::read_dir(repo.join("docs"))
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "md"))
        .collect();
    docs.push(repo.join("README.md"));
    docs.sort();
    let cite =
        regex::Regex::new(r"([A-Za-z0-9_./-]+\.rs)::([A-Za-z0-9_*]*(\{[^}]*\})?[A-Za-z0-9_*]*)")
            .unwrap();
    let mut found = Vec::new();
    for doc in docs {
        let text = std::fs::read_to_string(&doc).unwrap();
        let name = doc.strip_prefix(&repo).unwrap().display().to_string();
        for (number, line) in text.lines().enumerate() {
            for capture in cite.captures_iter(line) {
                for test in expand(&capture[2]) {
                    found.push((
                        format!("{name}:{}", number + 1),
                        capture[1].to_owned(),
                        test,
                    ));
                }
            }
        }
    }
    found
}

#[test]
fn every_test_the_docs_cite_exists() {
    let citations = citations();
    // The parser itself: docs/security.md alone cites well over a hundred tests.
    assert!(citations.len() > 100, "{citations:#?}");
    assert!(
        citations
            .iter()
            .any(|(_, file, test)| file == "tests/suite/builtin_tools.rs"
                && test == "read_file_refuses_every_escape")
    );
    let sources = workspace_sources();
    let mut missing = Vec::new();
    for (place, file, test) in &citations {
        let files = cited_files(file, &sources);
        let found = !test.is_empty()
            && files
                .iter()
                .any(|path| defines(&std::fs::read_to_string(path).unwrap(), test));
        if !found {
            missing.push(format!("{place}: {file}::{test} (looked in {files:?})"));
        }
    }
    assert!(
        missing.is_empty(),
        "cited tests that do not exist:\n{}",
        missing.join("\n")
    );
}
