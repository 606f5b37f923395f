//! The context engine in the CLI (issue 12): `agcore run --json` prints the compaction events,
//! `--context-window` sets the budget, and without it the window is asked of the server
//! (llama.cpp's `GET /props`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai};
use wiremock::matchers::{method, path};
use wiremock::{Mock, ResponseTemplate};

/// Three reads of three 3 KB files, then the answer.
fn replies() -> Vec<Reply> {
    vec![
        Reply::tool("call_a", "read_file", r#"{"path":"a.txt"}"#),
        Reply::tool("call_b", "read_file", r#"{"path":"b.txt"}"#),
        Reply::tool("call_c", "read_file", r#"{"path":"c.txt"}"#),
        Reply::text("Read all three."),
    ]
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        let text: String = (0..200)
            .map(|i| format!("{name} line {i}: the quick brown fox jumps\n"))
            .collect();
        std::fs::write(dir.path().join(format!("{name}.txt")), text).unwrap();
    }
    dir
}

fn run_json(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> (Vec<Value>, Vec<Value>) {
    let transcript = dir.join("transcript.json");
    let mut command = agcore(dir);
    command.args([
        "run",
        "--base-url",
        &base_url(server),
        "--model",
        "fake-model",
        "--json",
        "--tools",
        "builtin",
    ]);
    command.args(["--transcript", transcript.to_str().unwrap()]);
    command.args(extra);
    command.arg("read the files");
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let events = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let messages = serde_json::from_str(&std::fs::read_to_string(transcript).unwrap()).unwrap();
    (events, messages)
}

fn compactions(events: &[Value]) -> Vec<&Value> {
    events
        .iter()
        .filter(|e| e["type"] == "context_compacted")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_json_prints_compaction_events_and_the_transcript_keeps_the_stub() {
    let dir = workspace();
    let server = fake_openai(replies()).await;
    // The built-in tools' definitions alone are about 20 KB of the request: with 16k tokens,
    // the third read puts the request over the threshold and the first read is stubbed.
    let (events, messages) = run_json(dir.path(), &server, &["--context-window", "16384"]);
    let compacted = compactions(&events);
    assert!(!compacted.is_empty(), "{events:#?}");
    assert_eq!(compacted[0]["tier"], "stub_tool_outputs");
    assert_eq!(compacted[0]["window"], 16384);
    assert!(compacted[0]["tokens_after"].as_u64() < compacted[0]["tokens_before"].as_u64());
    assert_history_valid(&messages);
    let stub = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|t| t.starts_with("[output of read_file(path=a.txt) removed to save context: "));
    assert!(stub.is_some(), "{compacted:#?} {messages:#?}");
    // The newest reads are whole.
    assert!(
        messages
            .iter()
            .filter_map(|m| m["content"].as_str())
            .any(|t| t.contains("c line 59"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_on_compaction_hook_command_gets_each_compaction() {
    let dir = workspace();
    let server = fake_openai(replies()).await;
    let log = dir.path().join("compactions.jsonl");
    let script = dir.path().join("log.sh");
    std::fs::write(
        &script,
        format!("cat >> '{}'\necho >> '{}'\n", log.display(), log.display()),
    )
    .unwrap();
    let config = dir.path().join("hooks.toml");
    std::fs::write(
        &config,
        format!(
            "[[hooks.on_compaction]]\ncommand = [\"sh\", \"{}\"]\n",
            script.display()
        ),
    )
    .unwrap();
    let (events, _) = run_json(
        dir.path(),
        &server,
        &[
            "--context-window",
            "16384",
            "--config",
            config.to_str().unwrap(),
        ],
    );
    let compacted = compactions(&events);
    assert!(!compacted.is_empty(), "{events:#?}");
    let seen: Vec<Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    // One event per compaction, in order, with the event's numbers.
    assert_eq!(seen.len(), compacted.len(), "{seen:#?}");
    for (hook, event) in seen.iter().zip(&compacted) {
        assert_eq!(hook["event"], "on_compaction");
        assert_eq!(hook["tier"], 1);
        assert_eq!(hook["window"], 16384);
        assert_eq!(hook["tokens_before"], event["tokens_before"]);
        assert_eq!(hook["tokens_after"], event["tokens_after"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_configured_window_the_server_is_asked() {
    let dir = workspace();
    let server = fake_openai(replies()).await;
    Mock::given(method("GET"))
        .and(path("/props"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_json(json!({"default_generation_settings": {"n_ctx": 16384}})),
        )
        .mount(&server)
        .await;
    let (events, _) = run_json(dir.path(), &server, &[]);
    let compacted = compactions(&events);
    assert!(!compacted.is_empty(), "{events:#?}");
    assert!(compacted.iter().all(|e| e["window"] == 16384));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_window_compacts_nothing() {
    let dir = workspace();
    let server = fake_openai(replies()).await;
    let (events, messages) = run_json(dir.path(), &server, &["--context-window", "128000"]);
    assert!(compactions(&events).is_empty());
    assert!(
        messages
            .iter()
            .filter_map(|m| m["content"].as_str())
            .any(|t| t.contains("a line 59"))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn large_outputs_are_kept_whole_when_the_config_says_so() {
    let dir = workspace();
    std::fs::write(
        dir.path().join("agcore.toml"),
        "[context]\nkeep_large_outputs = true\n[context.tool_output_limits]\nread_file = 1000\n",
    )
    .unwrap();
    support::trust(dir.path());
    let server = fake_openai(replies()).await;
    let (events, messages) = run_json(dir.path(), &server, &["--context-window", "128000"]);
    // read_output is offered next to the built-in tools.
    let first = &support::request_bodies(&server).await[0];
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["function"]["name"] == "read_output")
    );
    let cut = messages
        .iter()
        .filter_map(|m| m["content"].as_str())
        .find(|t| t.contains("[... agcore cut "))
        .expect("a cut output");
    assert!(
        cut.len() < 1_200 && cut.contains("call read_output with"),
        "{cut}"
    );
    let kept = dir.path().join(".home/data/agcore/outputs");
    let files = std::fs::read_dir(&kept).unwrap().count();
    assert_eq!(
        files,
        6,
        "three outputs and their cut points in {}",
        kept.display()
    );
    assert!(compactions(&events).is_empty());
}

/// A llama.cpp server: the CLI counts tokens with its `POST /tokenize` (a model tiktoken does
/// not know), unless `[context] discover = false`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_llama_cpp_server_counts_the_tokens() {
    for discover in [true, false] {
        let dir = workspace();
        if !discover {
            std::fs::write(
                dir.path().join("agcore.toml"),
                "[context]\ndiscover = false\n",
            )
            .unwrap();
            support::trust(dir.path());
        }
        let server = fake_openai(replies()).await;
        Mock::given(method("POST"))
            .and(path("/tokenize"))
            .respond_with(|request: &wiremock::Request| {
                let body: Value = serde_json::from_slice(&request.body).unwrap();
                // llama.cpp's shape; one id per word is enough for the CLI's use.
                let words = body["content"].as_str().unwrap().split_whitespace().count();
                ResponseTemplate::new(200).set_body_json(json!({"tokens": vec![1; words.max(1)]}))
            })
            .mount(&server)
            .await;
        let (events, _) = run_json(dir.path(), &server, &["--context-window", "65536"]);
        assert!(
            events
                .iter()
                .any(|e| e["type"] == "done" || e["type"] == "completed" || e["type"] == "usage"),
            "{events:#?}"
        );
        let tokenize = server
            .received_requests()
            .await
            .unwrap()
            .iter()
            .filter(|r| r.url.path() == "/tokenize")
            .count();
        if discover {
            // The probe, then the messages as they appear (not the whole history each turn).
            assert!(tokenize >= 2, "{tokenize}");
        } else {
            assert_eq!(tokenize, 0);
        }
    }
}
