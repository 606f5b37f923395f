//! `agcore run --session` and an MCP server (protocol 2026-07-28) that asks a question inside
//! a `tools/call`: with no terminal the run suspends (exit code 3) naming the question and the
//! call; `--resume --answer JSON` in another process answers it, and the call goes on from the
//! server's stored `requestState` — the server sees one original call and one retry; a URL
//! question shows its URL and `--answer accept` resumes it; a task's question suspends the run
//! and the answer goes to the same task. Against
//! the real rmcp test server `examples/mcp_mrtr_server.rs` (which counts calls in files) and a
//! fake model on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

/// The test server, built on first use into this test's target directory.
fn mrtr_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let exe = std::env::current_exe().unwrap();
        let profile = exe.parent().and_then(Path::parent).unwrap().to_path_buf();
        let target = profile.parent().unwrap().to_path_buf();
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "--quiet",
                "-p",
                "agcore",
                "--example",
                "mcp_mrtr_server",
            ])
            .env("CARGO_TARGET_DIR", &target)
            .current_dir(repo)
            .status()
            .unwrap();
        assert!(status.success(), "building the test server failed");
        profile.join("examples/mcp_mrtr_server")
    })
    .clone()
}

fn config(dir: &Path, state: &Path) -> PathBuf {
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"jobs": {
        "command": mrtr_server(),
        "args": ["--state", state],
        "protocolVersion": "2026-07-28",
    }}});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

fn run(
    dir: &Path,
    state: &Path,
    server: &wiremock::MockServer,
    extra: &[&str],
) -> std::process::Output {
    let config = config(dir, state);
    let mut command = agcore(dir);
    command
        .args(["run", "--base-url", &base_url(server), "--model", "m"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .args(extra)
        .stdin(std::process::Stdio::null());
    Command::from_std(command).output().unwrap()
}

fn count(state: &Path, name: &str) -> usize {
    std::fs::read_to_string(state.join(name))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

fn last_content(body: &Value) -> String {
    let message = body["messages"].as_array().unwrap().last().unwrap();
    message["content"].as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_question_inside_a_call_suspends_the_run_and_answer_resumes_it_from_the_stored_state() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![
        Reply::tool("call_greet", "greet", "{}"),
        Reply::text("Done."),
    ])
    .await;
    let output = run(dir.path(), &state, &server, &["--session", "s", "greet me"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("0 call(s) wait for approval, 1 for input"),
        "{stderr}"
    );
    let pending = stderr
        .lines()
        .find(|line| line.contains("call_greet"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(pending.contains("greet"), "{pending}");
    assert!(
        pending.contains("MCP server 'jobs' asks: What is your name?"),
        "{pending}"
    );
    assert!(stderr.contains("--resume --answer"), "{stderr}");
    assert_eq!(count(&state, "greet.calls"), 1);
    assert_eq!(count(&state, "greet.retries"), 0);

    // Resumed without an answer and still no terminal: it suspends again, nothing is called.
    let output = run(dir.path(), &state, &server, &["--session", "s", "--resume"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert_eq!(count(&state, "greet.calls"), 1);
    assert_eq!(count(&state, "greet.retries"), 0);

    let output = run(
        dir.path(),
        &state,
        &server,
        &[
            "--session",
            "s",
            "--resume",
            "--answer",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(count(&state, "greet.calls"), 1, "not called from scratch");
    assert_eq!(count(&state, "greet.retries"), 1);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(last_content(&bodies[1]), "Hello, Ada!");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_question_suspends_showing_the_url_and_answer_accept_resumes_it() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![
        Reply::tool("call_login", "sign_in", "{}"),
        Reply::text("Done."),
    ])
    .await;
    let output = run(dir.path(), &state, &server, &["--session", "s", "sign in"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let pending = stderr
        .lines()
        .find(|line| line.contains("call_login"))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        pending.contains(
            "asks: Sign in to the job board (URL to open: https://jobs.example/sign-in?session=42)"
        ),
        "{pending}"
    );
    assert!(stderr.contains("--answer accept"), "{stderr}");
    assert_eq!(count(&state, "sign_in.calls"), 1);
    assert_eq!(count(&state, "sign_in.retries"), 0);

    let output = run(
        dir.path(),
        &state,
        &server,
        &["--session", "s", "--resume", "--answer", "accept"],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(count(&state, "sign_in.calls"), 1, "not called from scratch");
    assert_eq!(count(&state, "sign_in.retries"), 1);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(last_content(&bodies[1]), "sign-in: accept");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_question_suspends_and_answer_resumes_the_same_task() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![
        Reply::tool("call_job", "ask_job", "{}"),
        Reply::text("Done."),
    ])
    .await;
    let output = run(dir.path(), &state, &server, &["--session", "s", "run it"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("0 call(s) wait for approval, 1 for input"),
        "{stderr}"
    );
    assert!(
        stderr.contains("MCP server 'jobs' asks: Which colour?"),
        "{stderr}"
    );
    assert_eq!(count(&state, "ask_job.calls"), 1);
    assert_eq!(
        count(&state, "cancels"),
        0,
        "the waiting task was cancelled"
    );

    let output = run(
        dir.path(),
        &state,
        &server,
        &[
            "--session",
            "s",
            "--resume",
            "--answer",
            r#"{"colour": "teal"}"#,
        ],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(count(&state, "ask_job.calls"), 1, "not called again");
    assert_eq!(count(&state, "tasks"), 1, "the same task");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_eq!(last_content(&bodies[1]), "colour: teal");
}

/// `--deny` on a call whose task waits for an answer: the resumed process cancels that task
/// on the server (`tasks/cancel`) instead of leaving it running, and the model reads the
/// denial; the tool is not called again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn denying_a_tasks_question_cancels_the_task_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![
        Reply::tool("call_job", "ask_job", "{}"),
        Reply::text("Understood."),
    ])
    .await;
    let output = run(dir.path(), &state, &server, &["--session", "s", "run it"]);
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    assert_eq!(count(&state, "cancels"), 0);

    let output = run(
        dir.path(),
        &state,
        &server,
        &["--session", "s", "--resume", "--deny", "call_job"],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        count(&state, "cancels"),
        1,
        "the waiting task was left running"
    );
    assert_eq!(count(&state, "ask_job.calls"), 1, "not called again");
    assert_eq!(count(&state, "tasks"), 1);
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let answer = last_content(&bodies[1]);
    assert!(answer.contains("was not approved"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_for_a_session_that_waits_for_nothing_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![Reply::text("Hi.")]).await;
    let output = run(dir.path(), &state, &server, &["--session", "s", "hello"]);
    assert!(output.status.success(), "{output:?}");
    let output = run(
        dir.path(),
        &state,
        &server,
        &[
            "--session",
            "s",
            "--resume",
            "--answer",
            r#"{"name": "Ada"}"#,
        ],
    );
    assert!(!output.status.success(), "{output:?}");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("nothing in this session waits for input"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_polled_to_its_result_with_progress_as_json_events() {
    use std::io::BufRead;

    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("server-state");
    let server = fake_openai(vec![
        Reply::tool("call_job", "slow_job", "{}"),
        Reply::text("Done."),
    ])
    .await;
    let config = config(dir.path(), &state);
    let mut command = agcore(dir.path());
    command
        .args([
            "run",
            "--json",
            "--base-url",
            &base_url(&server),
            "--model",
            "m",
        ])
        .args(["--mcp-config", config.to_str().unwrap()])
        .arg("run the job")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = command.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let release = state.join("release");
    // Read the events as they come; the job is released once its progress was seen.
    let lines = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for line in std::io::BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if line.contains("\"mcp_progress\"") && !release.exists() {
                std::fs::write(&release, "").unwrap();
            }
            lines.push(line);
        }
        lines
    })
    .await
    .unwrap();
    let status = child.wait().unwrap();
    assert!(status.success(), "{lines:?}");
    let events: Vec<Value> = lines
        .iter()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let progress: Vec<&Value> = events
        .iter()
        .filter(|event| event["type"] == "mcp_progress")
        .collect();
    assert!(!progress.is_empty(), "{lines:?}");
    assert_eq!(progress[0]["server"], "jobs");
    assert_eq!(progress[0]["message"], "poll 1");
    assert_eq!(count(&state, "slow_job.calls"), 1);
    let bodies = request_bodies(&server).await;
    assert_eq!(last_content(&bodies[1]), "job done");
}
