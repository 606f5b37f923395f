//! `agcore run` end to end against a fake OpenAI server on 127.0.0.1: JSON events, transcripts,
//! error exits, `--no-stream --json`, `--max-turns`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use agcore::llm::{ChatResponse, StreamEvent};
use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies, trust};

fn run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> std::process::Output {
    let mut command = agcore(dir);
    command.args([
        "run",
        "--base-url",
        &base_url(server),
        "--model",
        "fake-model",
    ]);
    command.args(extra);
    Command::from_std(command).output().unwrap()
}

fn transcript(path: &Path) -> Vec<Value> {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

fn tool_server_replies() -> Vec<Reply> {
    vec![
        Reply::tool("call_list", "list_directory", r#"{"path":"."}"#),
        Reply::text("There is one file: notes.txt."),
    ]
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_prints_one_event_per_line_and_the_transcript_has_the_tool_messages() {
    let dir = workspace();
    let server = fake_openai(tool_server_replies()).await;
    let file = dir.path().join("transcript.json");
    let output = run(
        dir.path(),
        &server,
        &[
            "--json",
            "--tools",
            "builtin",
            "--transcript",
            file.to_str().unwrap(),
            "what is here?",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let events: Vec<StreamEvent> = stdout
        .lines()
        .map(|line| serde_json::from_str::<Value>(line).unwrap())
        // The usage event is the CLI's own (see usage_cli.rs), not a stream event.
        .filter(|value| value["type"] != "usage")
        .map(|value| {
            let line = value.to_string();
            assert!(value["type"].is_string(), "{line}");
            serde_json::from_value(value).unwrap()
        })
        .collect();
    let started = events
        .iter()
        .position(|e| matches!(e, StreamEvent::ToolExecutionStarted { tool_name, .. } if tool_name == "list_directory"))
        .expect("a tool_execution_started event");
    let completed = events
        .iter()
        .position(|e| {
            matches!(
                e,
                StreamEvent::ToolExecutionCompleted {
                    is_error: false,
                    ..
                }
            )
        })
        .expect("a successful tool_execution_completed event");
    assert!(started < completed);
    let text: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(text, "There is one file: notes.txt.");
    assert!(matches!(
        events.last(),
        Some(StreamEvent::TurnComplete { .. })
    ));

    let messages = transcript(&file);
    assert_history_valid(&messages);
    // agcore's base instructions come first.
    assert_eq!(
        roles(&messages),
        ["system", "user", "assistant", "tool", "assistant"]
    );
    assert!(
        messages[3]["content"]
            .as_str()
            .unwrap()
            .contains("notes.txt")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_authentication_error_exits_non_zero_with_one_line_naming_it() {
    let dir = workspace();
    let server = fake_openai(vec![Reply::Status(
        401,
        "Incorrect API key provided".into(),
    )])
    .await;
    let file = dir.path().join("transcript.json");
    let output = run(
        dir.path(),
        &server,
        &["--transcript", file.to_str().unwrap(), "hi"],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("error: authentication failed (HTTP 401)"),
        "{stderr}"
    );
    assert!(lines[0].contains("Incorrect API key"), "{stderr}");
    assert!(output.stdout.is_empty());
    // Not retried, and the transcript is written on failure too (the history as it was).
    assert_eq!(request_bodies(&server).await.len(), 1);
    assert_eq!(roles(&transcript(&file)), ["system"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_json_error_exit_also_names_the_kind() {
    let dir = workspace();
    let server = fake_openai(vec![Reply::Status(401, "bad key".into())]).await;
    let output = run(dir.path(), &server, &["--json", "hi"]);
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.starts_with("error: authentication failed (HTTP 401)"),
        "{stderr}"
    );
    // stdout holds events only: the terminal error event (see run_json_errors.rs).
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let event: Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(event["type"], "error");
    assert_eq!(event["kind"], "authentication");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_stream_json_prints_one_chat_response() {
    let dir = workspace();
    let server = fake_openai(tool_server_replies()).await;
    let output = run(
        dir.path(),
        &server,
        &[
            "--no-stream",
            "--json",
            "--tools",
            "builtin",
            "what is here?",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let stdout = String::from_utf8(output.stdout).unwrap();
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 1, "{stdout}");
    let response: ChatResponse = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(response.text(), "There is one file: notes.txt.");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert!(!bodies[0]["stream"].as_bool().unwrap_or(false));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_turns_exits_non_zero_and_leaves_a_valid_transcript() {
    let dir = workspace();
    // The model keeps calling tools; one request is all it gets.
    let server = fake_openai(vec![Reply::tool(
        "call_list",
        "list_directory",
        r#"{"path":"."}"#,
    )])
    .await;
    let file = dir.path().join("transcript.json");
    let output = run(
        dir.path(),
        &server,
        &[
            "--max-turns",
            "1",
            "--tools",
            "builtin",
            "--transcript",
            file.to_str().unwrap(),
            "loop forever",
        ],
    );
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("error: the tool loop reached max_turns (1)"),
        "{stderr}"
    );
    assert_eq!(request_bodies(&server).await.len(), 1);
    let messages = transcript(&file);
    assert_history_valid(&messages);
    assert_eq!(roles(&messages), ["system", "user", "assistant", "tool"]);
}

fn ask_for_writes(dir: &Path) {
    std::fs::write(
        dir.join("agcore.toml"),
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
    )
    .unwrap();
    trust(dir);
}

fn write_replies() -> Vec<Reply> {
    vec![
        Reply::tool(
            "call_w",
            "write_file",
            r#"{"path":"out.txt","content":"hi"}"#,
        ),
        Reply::text("Done."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_terminal_an_ask_is_denied_and_the_model_is_told_about_yes() {
    let dir = workspace();
    ask_for_writes(dir.path());
    let server = fake_openai(write_replies()).await;
    let output = run(dir.path(), &server, &["--tools", "builtin", "write it"]);
    assert!(output.status.success(), "{output:?}");
    assert!(!dir.path().join("out.txt").exists());
    let bodies = request_bodies(&server).await;
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(tool["role"], "tool");
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("non-interactively"), "{content}");
    assert!(content.contains("--yes"), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yes_allows_every_ask() {
    let dir = workspace();
    ask_for_writes(dir.path());
    let server = fake_openai(write_replies()).await;
    let output = run(
        dir.path(),
        &server,
        &["--yes", "--tools", "builtin", "write it"],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hi"
    );
    assert_eq!(String::from_utf8(output.stdout).unwrap(), "Done.\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_does_not_see_the_key_named_by_api_key_env() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("agcore.toml"),
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    trust(dir.path());
    let server = fake_openai(vec![
        Reply::tool(
            "call_env",
            "run_command",
            r#"{"command":"echo key=${MY_MODEL_KEY:-unset}"}"#,
        ),
        Reply::text("Done."),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .env("MY_MODEL_KEY", "s3cret-key")
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--api-key-env", "MY_MODEL_KEY", "--tools", "builtin", "go"]);
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("key=unset"), "{content}");
    assert!(!content.contains("s3cret-key"), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_started_by_run_do_not_see_the_key_named_by_api_key_env() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = dir.path().join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server", "--test-tools"],
    }}});
    std::fs::write(&mcp, json.to_string()).unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_key", "env", r#"{"name":"MY_MODEL_KEY"}"#),
        Reply::tool("call_other", "env", r#"{"name":"AGCORE_VISIBLE"}"#),
        Reply::text("Done."),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .env("MY_MODEL_KEY", "s3cret-key")
        .env("AGCORE_VISIBLE", "visible")
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--api-key-env", "MY_MODEL_KEY"])
        .args(["--mcp-config", mcp.to_str().unwrap(), "go"]);
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let last = |body: &Value| -> String {
        let message = body["messages"].as_array().unwrap().last().unwrap();
        message["content"].as_str().unwrap().to_owned()
    };
    let key = last(&bodies[1]);
    assert!(key.contains("\"value\":null"), "{key}");
    assert!(!key.contains("s3cret-key"), "{key}");
    assert!(
        last(&bodies[2]).contains("\"value\":\"visible\""),
        "{}",
        last(&bodies[2])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetch_url_refuses_loopback_unless_the_config_allows_private_networks() {
    let page = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::path("/page"))
        .respond_with(wiremock::ResponseTemplate::new(200).set_body_raw("local page", "text/plain"))
        .mount(&page)
        .await;
    let url = format!("{}/page", page.uri());
    let fetched = |config: Option<&'static str>| {
        let url = url.clone();
        async move {
            let dir = tempfile::tempdir().unwrap();
            if let Some(config) = config {
                std::fs::write(dir.path().join("agcore.toml"), config).unwrap();
                trust(dir.path());
            }
            let server = fake_openai(vec![
                Reply::tool("call_fetch", "fetch_url", &format!(r#"{{"url":"{url}"}}"#)),
                Reply::text("Done."),
            ])
            .await;
            let output = run(dir.path(), &server, &["--tools", "builtin", "go"]);
            assert!(output.status.success(), "{output:?}");
            let bodies = request_bodies(&server).await;
            let message = bodies[1]["messages"]
                .as_array()
                .unwrap()
                .last()
                .unwrap()
                .clone();
            message["content"].as_str().unwrap().to_owned()
        }
    };
    let refused = fetched(None).await;
    assert!(
        refused.contains("'127.0.0.1' is a loopback address"),
        "{refused}"
    );
    let allowed = fetched(Some("[builtin]\nallow_private_network = true\n")).await;
    assert_eq!(allowed, "local page");
    assert_eq!(page.received_requests().await.unwrap().len(), 1);
}
