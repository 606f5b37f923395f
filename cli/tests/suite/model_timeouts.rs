//! `[model]` timeouts in `agcore.toml` (`request_timeout`, `stream_idle_timeout`,
//! `response_deadline`): the configured limit is the one that fires, and nonsense is a config
//! error. Against a model server on 127.0.0.1 that starts a streamed reply and then stalls.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use support::{agcore, trust};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// A server on 127.0.0.1 that answers every request with the headers of an SSE stream and one
/// chunk, then sends nothing more while the connection stays open. Returns its base URL.
async fn stalling_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let mut held = Vec::new();
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            // Read the request head (the body may follow; it is not needed).
            let mut buffer = vec![0u8; 64 * 1024];
            let mut read = 0;
            while !buffer[..read].windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buffer[read..]).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => read += n,
                }
            }
            let chunk = serde_json::json!({
                "id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
                "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Thinking"},
                    "finish_reason": null}],
            });
            let event = format!("data: {chunk}\n\n");
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            let body = format!("{:x}\r\n{event}\r\n", event.len());
            let _ = socket.write_all(head.as_bytes()).await;
            let _ = socket.write_all(body.as_bytes()).await;
            let _ = socket.flush().await;
            // Never finish: keep the connection open until the test ends.
            held.push(socket);
        }
    });
    format!("http://{address}/v1")
}

fn run_with_config(dir: &Path, config: &str) -> std::process::Output {
    // No window discovery: the stalling server would stall the probe too.
    let config = format!("{config}[context]\ndiscover = false\n");
    std::fs::write(dir.join("agcore.toml"), config).unwrap();
    trust(dir);
    let mut command = agcore(dir);
    command
        .args(["run", "--json", "hello"])
        .stdin(std::process::Stdio::null());
    Command::from_std(command).output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_stream_idle_timeout_fires() {
    let base_url = stalling_server().await;
    let dir = tempfile::tempdir().unwrap();
    let output = run_with_config(
        dir.path(),
        &format!(
            "[model]\nbase_url = {base_url:?}\nmodel = \"m\"\nstream_idle_timeout = 1\n\
             response_deadline = 600\nrequest_timeout = 600\n"
        ),
    );
    assert!(!output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let error: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "error")
        .unwrap_or_else(|| panic!("no error event: {output:?}"));
    assert_eq!(error["kind"], "timeout", "{error}");
    let message = error["message"].as_str().unwrap();
    assert!(
        message.contains("waiting for more of the streamed reply"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_configured_response_deadline_fires() {
    let base_url = stalling_server().await;
    let dir = tempfile::tempdir().unwrap();
    let output = run_with_config(
        dir.path(),
        &format!(
            "[model]\nbase_url = {base_url:?}\nmodel = \"m\"\nstream_idle_timeout = 600\n\
             response_deadline = 1.5\n"
        ),
    );
    assert!(!output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let error: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "error")
        .unwrap_or_else(|| panic!("no error event: {output:?}"));
    assert_eq!(error["kind"], "response_limit_exceeded", "{error}");
}

#[test]
fn a_zero_or_nonsense_timeout_is_a_config_error() {
    for (value, expected) in [
        ("0", "stream_idle_timeout"),
        ("-3", "stream_idle_timeout"),
        ("\"soon\"", "stream_idle_timeout"),
        ("1e30", "stream_idle_timeout"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("bad.toml");
        std::fs::write(
            &config,
            format!(
                "[model]\nbase_url = \"http://127.0.0.1:9/v1\"\nmodel = \"m\"\nstream_idle_timeout = {value}\n"
            ),
        )
        .unwrap();
        let mut command = agcore(dir.path());
        command
            .args(["run", "--config", config.to_str().unwrap(), "hello"])
            .stdin(std::process::Stdio::null());
        let output = Command::from_std(command).output().unwrap();
        assert!(!output.status.success(), "{value}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("invalid config file"), "{value}: {stderr}");
        assert!(stderr.contains(expected), "{value}: {stderr}");
        assert!(
            stderr.contains("a number of seconds greater than 0"),
            "{value}: {stderr}"
        );
    }
}
