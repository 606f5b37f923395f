//! `agcore run` usage and budgets (issue 14, item 2) against a fake OpenAI server on
//! 127.0.0.1: the usage line on stderr (priced from `[prices]`), the `{"type":"usage"}` event
//! with `--json` before the terminal event, and `--max-requests` ending a run with a typed
//! error and a valid transcript.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies};

fn replies() -> Vec<Reply> {
    vec![
        Reply::tool("call_list", "list_directory", r#"{"path":"."}"#),
        Reply::text("There is one file: notes.txt."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_ends_with_a_priced_usage_line_on_stderr() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let config = dir.path().join("budget.toml");
    std::fs::write(
        &config,
        "[prices.fake-model]\ninput = 1000.0\ncached_input = 100.0\noutput = 2000.0\n",
    )
    .unwrap();
    let server = fake_openai(replies()).await;
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--no-stream", "--tools", "builtin", "--config"]);
    command.arg(&config).arg("what is here?");
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    // Two requests of 10 input and 5 output tokens each: 20 × 1000 + 10 × 2000 per million.
    assert_eq!(
        stderr.lines().last(),
        Some("usage: 2 requests, 1 tool call, 20 input tokens, 10 output tokens · $0.040000"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_requests_ends_the_run_with_a_usage_event_then_the_error() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let file = dir.path().join("transcript.json");
    let server = fake_openai(replies()).await;
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args([
        "--json",
        "--tools",
        "builtin",
        "--max-requests",
        "1",
        "--transcript",
    ]);
    command.arg(&file).arg("what is here?");
    let output = Command::from_std(command).output().unwrap();
    assert!(!output.status.success(), "{output:?}");
    let events: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let [.., usage, error] = events.as_slice() else {
        panic!("too few events: {events:?}");
    };
    assert_eq!(error["type"], "error", "{events:?}");
    assert_eq!(error["kind"], "usage_limit_exceeded", "{error}");
    assert!(
        error["message"]
            .as_str()
            .unwrap()
            .contains("max_requests = 1"),
        "{error}"
    );
    assert_eq!(usage["type"], "usage");
    assert_eq!(usage["requests"], 1);
    assert_eq!(usage["tool_calls"], 1);
    assert!(usage["cost_usd"].is_null(), "unpriced: {usage}");
    // The tool turn ran and is committed; the second request was never sent.
    assert_eq!(request_bodies(&server).await.len(), 1);
    let transcript: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_history_valid(&transcript);
    // The system prompt, the question, the tool turn and its result.
    assert_eq!(transcript.len(), 4, "{transcript:?}");
    assert_eq!(transcript[0]["role"], "system");
}
