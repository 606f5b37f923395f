//! `agcore mcp skills` and `agcore mcp skill` against the real rmcp test server that serves
//! skills (`examples/mcp_mrtr_server.rs --skills`, which logs every `resources/read`): the
//! listing reads no file, a good skill prints verified, a tampered one fails naming the check.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use support::agcore;

fn config(dir: &Path, state: &Path) -> PathBuf {
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {
        "skilled": {
            "command": support::mcp::mrtr_server(),
            "args": ["--state", state, "--skills"],
            "protocolVersion": "2026-07-28",
        },
        "plain": {
            "command": support::mcp::mrtr_server(),
            "args": ["--state", state.join("plain")],
            "protocolVersion": "2026-07-28",
        },
    }});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

fn run(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let mut command = agcore(dir);
    command.args(args).stdin(std::process::Stdio::null());
    let out = Command::from_std(command).output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn reads(state: &Path) -> Vec<String> {
    std::fs::read_to_string(state.join("reads"))
        .map(|text| text.lines().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn skills_are_listed_without_reading_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), &state);
    let config = config.to_str().unwrap();

    // `mcp list` says which server offers skills.
    let (ok, out, err) = run(dir.path(), &["mcp", "list", "--mcp-config", config]);
    assert!(ok, "{out}{err}");
    let line = |name: &str| {
        out.lines()
            .find(|line| line.starts_with(&format!("{name}: connected")))
            .unwrap_or_else(|| panic!("{out}"))
            .to_owned()
    };
    assert!(line("skilled").ends_with("; offers skills"), "{out}");
    assert!(!line("plain").contains("skills"), "{out}");

    // Every server: only the one that offers skills is listed.
    let (ok, out, err) = run(dir.path(), &["mcp", "skills", "--mcp-config", config]);
    assert!(ok, "{out}{err}");
    assert!(out.contains("skilled: 7 skill(s)"), "{out}");
    assert!(!out.contains("plain"), "{out}");
    assert!(out.contains("greeting"), "{out}");
    assert!(out.contains("skill://greeting/SKILL.md"), "{out}");
    assert!(out.contains("2 file(s)"), "{out}");

    let (ok, out, err) = run(
        dir.path(),
        &["mcp", "skills", "--mcp-config", config, "skilled", "--json"],
    );
    assert!(ok, "{out}{err}");
    let skills: Value = serde_json::from_str(&out).unwrap();
    let skills = skills.as_array().unwrap();
    assert_eq!(skills.len(), 7);
    assert_eq!(skills[0]["name"], "greeting");
    assert_eq!(skills[0]["server"], "skilled");
    assert_eq!(skills[0]["frontmatter"]["license"], "MIT");
    assert!(
        skills[0]["files"][0]["digest"]
            .as_str()
            .unwrap()
            .starts_with("sha256:")
    );
    assert_eq!(reads(&state), Vec::<String>::new(), "a listing read files");

    // A server without the extension, asked by name: an error saying so.
    let (ok, out, err) = run(
        dir.path(),
        &["mcp", "skills", "--mcp-config", config, "plain"],
    );
    assert!(!ok, "{out}");
    assert!(err.contains("does not offer skills"), "{err}");
}

#[test]
fn a_verified_skill_prints_and_a_tampered_one_fails_naming_the_check() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = config(dir.path(), &state);
    let config = config.to_str().unwrap();

    let (ok, out, err) = run(
        dir.path(),
        &[
            "mcp",
            "skill",
            "--mcp-config",
            config,
            "skilled",
            "greeting",
        ],
    );
    assert!(ok, "{out}{err}");
    assert!(out.starts_with("---\nname: greeting\n"), "{out}");
    assert!(out.contains("# greeting"), "{out}");
    assert!(err.contains("verified skill://greeting/SKILL.md"), "{err}");
    assert_eq!(reads(&state), ["skill://greeting/SKILL.md"]);

    for (name, check) in [
        ("broken-digest", "digest check"),
        ("lying-size", "size check"),
        (
            "wrong-frontmatter",
            "frontmatter check: field `description`",
        ),
        ("renamed", "frontmatter check: its name is 'other'"),
    ] {
        let (ok, out, err) = run(
            dir.path(),
            &["mcp", "skill", "--mcp-config", config, "skilled", name],
        );
        assert!(!ok, "{name}: {out}");
        assert!(err.contains(check), "{name}: {err}");
        assert!(
            !out.contains("Say hello"),
            "{name}: unverified content printed: {out}"
        );
    }

    let (ok, _, err) = run(
        dir.path(),
        &["mcp", "skill", "--mcp-config", config, "skilled", "refunds"],
    );
    assert!(!ok);
    assert!(
        err.contains("skill://acme/billing/refunds/SKILL.md"),
        "{err}"
    );
}
