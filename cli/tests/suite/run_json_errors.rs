//! Issue 10, item 19: a failed `agcore run --json` ends with exactly one terminal
//! `{"type":"error","kind","message","status","retryable"}` event on stdout — for HTTP errors,
//! in-stream errors (llama.cpp's `error:` line, a `data: {"error":...}` chunk) and transport
//! errors (connection refused, a server that closes mid-stream).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server on 127.0.0.1 answering every connection with `response` (raw HTTP), then closing.
async fn raw_server(response: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        // Bounded: a run makes at most a handful of attempts.
        for _ in 0..20 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let response = response.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
                // Read the headers and the body (Content-Length) before answering.
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    loop {
                        let Ok(read) = socket.read(&mut buffer).await else {
                            return;
                        };
                        if read == 0 {
                            return;
                        }
                        request.extend_from_slice(&buffer[..read]);
                        let text = String::from_utf8_lossy(&request).to_lowercase();
                        if let Some(end) = text.find("\r\n\r\n") {
                            let length = text
                                .lines()
                                .find_map(|line| line.strip_prefix("content-length:"))
                                .and_then(|value| value.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if request.len() >= end + 4 + length {
                                return;
                            }
                        }
                    }
                })
                .await;
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    format!("http://{address}/v1")
}

fn sse_response(body: &str) -> String {
    format!("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n{body}")
}

const DELTA: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Hi\"},\"finish_reason\":null}]}\n\n";

/// Run `agcore run --json` against `url`; the exit status and the stdout lines as JSON.
fn run_json(url: &str, extra: &[&str]) -> (std::process::Output, Vec<Value>) {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command
        .args(["run", "--json", "--base-url", url, "--model", "m"])
        .args(extra)
        .arg("hi");
    let output = Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    let events = String::from_utf8(output.stdout.clone())
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|_| panic!("not JSON: {line}")))
        .collect();
    (output, events)
}

/// Exactly one error event, the last line; returns it.
fn the_error(output: &std::process::Output, events: &[Value]) -> Value {
    assert!(!output.status.success(), "{output:?}");
    let errors: Vec<&Value> = events.iter().filter(|e| e["type"] == "error").collect();
    assert_eq!(errors.len(), 1, "one error event: {events:?}");
    let last = events.last().unwrap().clone();
    assert_eq!(last["type"], "error", "{events:?}");
    for field in ["kind", "message", "status", "retryable"] {
        assert!(last.get(field).is_some(), "no {field}: {last}");
    }
    assert!(last["retryable"].is_boolean(), "{last}");
    last
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http_errors_end_with_one_error_event_with_the_status() {
    for (status, kind, retryable) in [
        (400, "bad_request", false),
        (401, "authentication", false),
        (500, "server", true),
    ] {
        let server = fake_openai(vec![Reply::Status(status, format!("failure {status}"))]).await;
        let (output, events) = run_json(&base_url(&server), &[]);
        let error = the_error(&output, &events);
        assert_eq!(error["kind"], kind, "{error}");
        assert_eq!(error["status"], status, "{error}");
        assert_eq!(error["retryable"], retryable, "{error}");
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains(&format!("failure {status}")),
            "{error}"
        );
        // --no-stream too.
        let (output, events) = run_json(&base_url(&server), &["--no-stream"]);
        let error = the_error(&output, &events);
        assert_eq!(error["status"], status, "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_stream_errors_end_with_one_error_event() {
    let context = r#"{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}"#;
    for body in [
        // llama.cpp: a bare `error:` line, after some text or as the first event.
        format!("{DELTA}error: {context}\n\n"),
        format!("error: {context}\n\n"),
        // OpenRouter and others: an error object in a data chunk.
        format!("{DELTA}data: {{\"error\":{context}}}\n\n"),
    ] {
        let url = raw_server(sse_response(&body)).await;
        let (output, events) = run_json(&url, &[]);
        let error = the_error(&output, &events);
        assert!(
            error["message"]
                .as_str()
                .unwrap()
                .contains("exceeds the available context size"),
            "{error}"
        );
        assert_eq!(error["status"], Value::Null, "{error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transport_errors_end_with_one_error_event() {
    // Connection refused: a port nobody listens on any more.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let (output, events) = run_json(&format!("http://127.0.0.1:{port}/v1"), &[]);
    let error = the_error(&output, &events);
    assert_eq!(error["kind"], "connection", "{error}");
    assert_eq!(error["status"], Value::Null, "{error}");
    assert_eq!(error["retryable"], true, "{error}");

    // The server closes the connection mid-stream.
    let url = raw_server(sse_response(DELTA)).await;
    let (output, events) = run_json(&url, &[]);
    let error = the_error(&output, &events);
    assert_eq!(error["kind"], "stream", "{error}");
    assert!(events.iter().any(|e| e["type"] == "assistant_text_delta"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_setup_error_is_an_error_event_too() {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--json",
        "--model",
        "m",
        "--config",
        "missing.toml",
        "hi",
    ]);
    let output = Command::from_std(command).output().unwrap();
    let stdout = String::from_utf8(output.stdout.clone()).unwrap();
    let events: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let error = the_error(&output, &events);
    assert!(
        error["message"].as_str().unwrap().contains("missing.toml"),
        "{error}"
    );
}
