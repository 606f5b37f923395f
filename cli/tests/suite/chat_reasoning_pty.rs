//! `agcore chat --show-reasoning` through a pseudo-terminal against a local server that streams
//! DeepSeek-style `reasoning_content` before the answer: shown dimmed with the flag (its escape
//! sequences stripped like the answer's), not shown without it.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use expectrl::{ControlCode, Session, WaitStatus};
use serde_json::json;
use support::agcore;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

const TIMEOUT: Duration = Duration::from_secs(20);

/// A server that streams a thought (with a terminal escape in it), then the answer.
async fn thinking_server() -> MockServer {
    let chunk = |delta: serde_json::Value, finish: Option<&str>| {
        json!({"id": "chatcmpl-r", "object": "chat.completion.chunk", "created": 1,
            "model": "deepseek-reasoner",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let body = format!(
        "data: {}\n\ndata: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        chunk(
            json!({"role": "assistant", "content": null,
            "reasoning_content": "PONDERING the question\u{1b}[2J deeply"}),
            None
        ),
        chunk(json!({"content": "FINAL ANSWER"}), None),
        chunk(json!({}), Some("stop")),
    );
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
        .mount(&server)
        .await;
    server
}

/// Everything the terminal showed up to the answer, with or without `--show-reasoning`.
fn shown_before_the_answer(url: &str, show: bool) -> String {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command
        .env("TERM", "xterm")
        .args(["chat", "--base-url", url, "--model", "deepseek-reasoner"])
        .args(["--context-window", "8192"]);
    if show {
        command.arg("--show-reasoning");
    }
    let mut session = Session::spawn(command).unwrap();
    session.set_expect_timeout(Some(TIMEOUT));
    session.expect("you> ").unwrap();
    session.send_line("why?").unwrap();
    let captured = session.expect("FINAL ANSWER").unwrap();
    let before = String::from_utf8_lossy(captured.before()).into_owned();
    session.expect("you> ").unwrap();
    session.send(ControlCode::EndOfTransmission).unwrap();
    let status = session.get_process().wait().unwrap();
    assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
    before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_is_shown_dimmed_only_with_show_reasoning() {
    let server = thinking_server().await;
    let url = format!("{}/v1", server.uri());
    let shown = tokio::task::block_in_place(|| shown_before_the_answer(&url, true));
    assert!(
        shown.contains("\u{1b}[2m[thinking] PONDERING the question"),
        "{shown:?}"
    );
    // The server's escape sequence is shown as text, never sent to the terminal.
    assert!(shown.contains("\\x1b[2J deeply"), "{shown:?}");
    assert!(!shown.contains("\u{1b}[2J"), "{shown:?}");
    let hidden = tokio::task::block_in_place(|| shown_before_the_answer(&url, false));
    assert!(!hidden.contains("PONDERING"), "{hidden:?}");
    assert!(!hidden.contains("[thinking]"), "{hidden:?}");
}
