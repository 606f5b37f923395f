//! `agcore run --output-schema` is a mode of the same run: with `--session` it is stored, and a
//! typed run that suspends for an approval resumes with `--resume --approve`, still typed.
//! Against a fake model on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::Stdio;

use assert_cmd::Command;
use serde_json::{Value, json};
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies};

fn run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> std::process::Output {
    let mut command = agcore(dir);
    command
        .args(["run", "--base-url", &base_url(server), "--model", "m"])
        .args(extra)
        .stdin(Stdio::null());
    Command::from_std(command).output().unwrap()
}

fn schema(dir: &Path) -> String {
    let file = dir.join("answer.json");
    let schema = json!({
        "type": "object",
        "properties": {"answer": {"type": "integer"}},
        "required": ["answer"],
        "additionalProperties": false,
    });
    std::fs::write(&file, schema.to_string()).unwrap();
    file.to_string_lossy().into_owned()
}

fn stored(dir: &Path, name: &str) -> Vec<Value> {
    let output = agcore(dir)
        .args(["sessions", "show", name, "--json"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    serde_json::from_slice(&output.stdout).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_typed_run_with_a_session_is_stored() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema(dir.path());
    let server = fake_openai(vec![Reply::text(r#"{"answer": 42}"#)]).await;
    let output = run(
        dir.path(),
        &server,
        &[
            "--session",
            "typed",
            "--output-schema",
            &schema,
            "the answer?",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value, json!({"answer": 42}));
    let messages = stored(dir.path(), "typed");
    assert_history_valid(&messages);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant"], "{messages:?}");
    assert_eq!(messages[2]["content"], r#"{"answer": 42}"#);

    // The next prompt of the session continues the stored conversation.
    let output = run(
        dir.path(),
        &server,
        &[
            "--session",
            "typed",
            "--output-schema",
            &schema,
            "and again?",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies[1]["messages"].as_array().unwrap().len(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_typed_run_resumes_with_approve_and_gives_its_typed_answer() {
    let dir = tempfile::tempdir().unwrap();
    let schema = schema(dir.path());
    let config = dir.path().join("ask.toml");
    std::fs::write(&config, "[tools]\nask = [\"read\"]\n").unwrap();
    let config = config.to_str().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_list", "list_directory", r#"{"path":"."}"#),
        Reply::text(r#"{"answer": 7}"#),
    ])
    .await;
    let common = ["--tools", "builtin", "--config", config, "--session", "s"];
    let mut first = common.to_vec();
    first.extend(["--output-schema", &schema, "how many files?"]);
    let output = run(dir.path(), &server, &first);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("call_list"), "{stderr}");

    let mut again = common.to_vec();
    again.extend(["--resume", "--approve", "call_list"]);
    let output = run(dir.path(), &server, &again);
    assert!(output.status.success(), "{output:?}");
    // Still typed: the validated JSON is what stdout holds.
    let value: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(value, json!({"answer": 7}));
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    // The approved call ran (its answer is not a refusal) and the schema went out again.
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap()
        .clone();
    assert!(
        !tool["content"].as_str().unwrap().starts_with("Error"),
        "{tool}"
    );
    assert!(bodies[1]["response_format"].is_object(), "{}", bodies[1]);
    let messages = stored(dir.path(), "s");
    assert_history_valid(&messages);
    assert_eq!(messages.last().unwrap()["content"], r#"{"answer": 7}"#);
}
