//! An MCP server's tools without annotations in `agcore run`: offered to the model, asked before
//! each call (never hidden without a word), and a line at start says per server how many tools
//! are hidden or need approval and why. Against the real demo MCP server (its `add` carries no
//! annotations) and a fake model on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

fn demo_config(dir: &Path) -> PathBuf {
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server"],
    }}});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

fn run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> std::process::Output {
    let config = demo_config(dir);
    let mut command = agcore(dir);
    command
        .args(["run", "--base-url", &base_url(server), "--model", "m"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .args(extra)
        .stdin(std::process::Stdio::null());
    Command::from_std(command).output().unwrap()
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn last_content(body: &Value) -> String {
    let message = body["messages"].as_array().unwrap().last().unwrap();
    message["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unannotated_tool_is_offered_and_its_call_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_add", "add", r#"{"a":1,"b":2}"#),
        Reply::text("Done."),
    ])
    .await;
    // No terminal and no --yes: nobody can answer, so the asked call is denied with a message
    // saying so (not refused by a permission, which would mean it was never askable).
    let output = run(dir.path(), &server, &["add 1 and 2"]);
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let tools = offered(&bodies[0]);
    assert!(tools.contains(&"add".to_owned()), "{tools:?}");
    let answer = last_content(&bodies[1]);
    assert!(
        answer.contains("nobody could approve this call"),
        "{answer}"
    );
    assert!(!answer.contains("permission denied"), "{answer}");

    // The start line: one per server, naming what asks and why, pointing at `agcore tools`.
    let stderr = String::from_utf8_lossy(&output.stderr);
    let line = stderr
        .lines()
        .find(|line| line.contains("mcp server 'demo'"))
        .unwrap_or_else(|| panic!("no start line for the server: {stderr}"));
    assert!(
        line.contains("1 of 3 tool(s) ask before each call"),
        "{line}"
    );
    assert!(line.contains("no annotations: add"), "{line}");
    assert!(line.contains("agcore tools"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_unannotated_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_add", "add", r#"{"a":1,"b":2}"#),
        Reply::text("Done."),
    ])
    .await;
    let output = run(dir.path(), &server, &["--yes", "add 1 and 2"]);
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    assert_eq!(last_content(&bodies[1]), "3");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stored_run_suspends_on_an_unannotated_call_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_add", "add", r#"{"a":1,"b":2}"#),
        Reply::text("Done."),
    ])
    .await;
    let output = run(dir.path(), &server, &["--session", "s", "add 1 and 2"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let pending = stderr
        .lines()
        .find(|line| line.contains("call_add"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(pending.contains("does not say what it does"), "{pending}");

    let output = run(
        dir.path(),
        &server,
        &["--session", "s", "--resume", "--approve", "call_add"],
    );
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    assert_eq!(last_content(&bodies[1]), "3");
}
