//! A streamed reply that breaks after it began is sent again, and the CLI says so: with
//! `--json` a `{"type":"retry",...}` line before the new attempt (and no error line for it);
//! for people, a "stream disconnected — retrying (2/4) in …s" line on stderr. Against a local
//! server on 127.0.0.1 that drops its first connection mid-stream.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use support::agcore;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const PARTIAL: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Once upon\"},\"finish_reason\":null}]}\n\n";

const WHOLE: &str = "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"Érase una vez\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";

/// The first chat request gets [`PARTIAL`] and is dropped mid-body (chunked, no last chunk); the
/// others get [`WHOLE`].
async fn drops_once() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let count = Arc::new(AtomicUsize::new(0));
    tokio::spawn(async move {
        for _ in 0..20 {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let count = count.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buffer = [0u8; 4096];
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
                            break;
                        }
                    }
                }
                // Not a chat request (a discovery probe): nothing to say.
                if !String::from_utf8_lossy(&request).starts_with("POST /v1/chat/completions") {
                    let _ = socket
                        .write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n")
                        .await;
                    return;
                }
                let first = count.fetch_add(1, Ordering::SeqCst) == 0;
                let body = if first { PARTIAL } else { WHOLE };
                let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                            transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                let mut response = format!("{head}{:x}\r\n{body}\r\n", body.len());
                if !first {
                    response.push_str("0\r\n\r\n");
                }
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.flush().await;
            });
        }
    });
    format!("http://{address}/v1")
}

fn run(url: &str, extra: &[&str]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command
        .args(["run", "--base-url", url, "--model", "m"])
        .args(extra)
        .arg("hi");
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_output_has_a_retry_line_and_no_error_line() {
    let output = run(&drops_once().await, &["--json"]);
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let retry = types
        .iter()
        .position(|t| *t == "retry")
        .unwrap_or_else(|| panic!("{types:?}"));
    assert_eq!(events[retry]["attempt"], 2, "{}", events[retry]);
    assert_eq!(events[retry]["max_attempts"], 4, "{}", events[retry]);
    assert_eq!(events[retry]["kind"], "stream", "{}", events[retry]);
    assert!(events[retry]["delay_ms"].is_u64(), "{}", events[retry]);
    assert!(
        events[..retry].iter().any(|e| e["text"] == "Once upon"),
        "{events:?}"
    );
    assert!(
        events[retry..].iter().any(|e| e["text"] == "Érase una vez"),
        "{events:?}"
    );
    assert!(!types.contains(&"error"), "{types:?}");
    assert_eq!(types.last(), Some(&"turn_complete"), "{types:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn people_see_a_retry_line_on_stderr() {
    let output = run(&drops_once().await, &[]);
    assert!(output.status.success(), "{output:?}");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("stream disconnected — retrying (2/4) in "),
        "{stderr}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("Érase una vez"), "{stdout}");
}
