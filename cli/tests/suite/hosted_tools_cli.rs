//! Hosted tools in the CLI (issue 36, item 2): `agcore tools` lists them with their kind and
//! the gate that keeps one off (restricted mode, permissions), and a tool the provider's API
//! does not have stops `agcore run` before any request, naming what each API has.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use support::agcore;

#[test]
fn agcore_tools_lists_hosted_tools_with_their_gates() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[model]\nprovider = \"anthropic\"\nhosted_tools = [\"web_search\", \"code_execution\"]\n",
    )
    .unwrap();
    let mut command = agcore(dir.path());
    command
        .args(["tools", "--restricted", "--json", "--config"])
        .arg(&config);
    let out = Command::from_std(command).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = report["report"]["tools"].as_array().unwrap();
    let row = |name: &str| {
        rows.iter()
            .find(|row| row["name"] == name)
            .unwrap_or_else(|| panic!("{name} in {rows:?}"))
    };
    let search = row("web_search");
    assert_eq!(search["source"]["type"], "hosted");
    assert_eq!(search["kind"], "search");
    assert_eq!(search["exposed"], false);
    assert_eq!(search["hidden_because"][0]["gate"], "restricted_mode");
    let code = row("code_execution");
    assert_eq!(code["kind"], "execute");
    assert_eq!(code["exposed"], false);

    // Not restricted: web search is on; code execution still waits for Shell (denied by
    // default), and the text says so.
    let mut command = agcore(dir.path());
    command.args(["tools", "--config"]).arg(&config);
    let out = Command::from_std(command).output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(out.status.success(), "{stdout}");
    let line = |name: &str| {
        stdout
            .lines()
            .find(|line| line.contains(name))
            .unwrap_or_else(|| panic!("{name} in {stdout}"))
            .to_owned()
    };
    assert!(line("web_search").contains("hosted"), "{stdout}");
    assert!(stdout.contains("Shell"), "{stdout}");
}

#[test]
fn a_hosted_tool_the_api_lacks_stops_the_run_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--provider",
        "gemini",
        "--base-url",
        "http://127.0.0.1:9/v1beta",
        "--model",
        "gemini-2.5-flash",
        "--hosted-tool",
        "web_search",
        "hello",
    ]);
    let out = Command::from_std(command).output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("the gemini API has no hosted tool `web_search`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("gemini: google_search, code_execution, url_context"),
        "{stderr}"
    );
}
