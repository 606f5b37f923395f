//! The `--json` usage line by token kind, against a local OpenAI-compatible server that reports
//! cache reads and reasoning: `input_tokens` (cache reads and writes included),
//! `cached_tokens`, `cache_write_tokens`, `output_tokens` (reasoning included),
//! `reasoning_tokens`, and the cost at `[prices]` with `cache_write`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};
use support::agcore;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_line_counts_each_token_kind() {
    let server = MockServer::start().await;
    let chunk = json!({"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1,
        "model": "priced-model", "choices": [{"index": 0,
            "delta": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}]});
    let usage = json!({"id": "chatcmpl-u", "object": "chat.completion.chunk", "created": 1,
        "model": "priced-model", "choices": [],
        "usage": {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100,
            "prompt_tokens_details": {"cached_tokens": 600},
            "completion_tokens_details": {"reasoning_tokens": 40}}});
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(
            format!("data: {chunk}\n\ndata: {usage}\n\ndata: [DONE]\n\n"),
            "text/event-stream",
        ))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("prices.toml");
    std::fs::write(
        &config,
        "[model]\ncontext_window = 8192\n[prices.priced-model]\ninput = 3.0\n\
         cached_input = 0.3\ncache_write = 3.75\noutput = 15.0\n",
    )
    .unwrap();
    let mut command = agcore(dir.path());
    command
        .args([
            "run",
            "--json",
            "--base-url",
            &format!("{}/v1", server.uri()),
        ])
        .args([
            "--model",
            "priced-model",
            "--config",
            config.to_str().unwrap(),
            "hi",
        ]);
    let output = Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let usage = events
        .iter()
        .find(|event| event["type"] == "usage")
        .unwrap_or_else(|| panic!("{events:?}"));
    assert_eq!(usage["input_tokens"], 1000, "{usage}");
    assert_eq!(usage["cached_tokens"], 600, "{usage}");
    // Chat completions report no cache writes: the key is there, null.
    assert_eq!(
        usage.get("cache_write_tokens"),
        Some(&Value::Null),
        "{usage}"
    );
    assert_eq!(usage["output_tokens"], 100, "{usage}");
    assert_eq!(usage["reasoning_tokens"], 40, "{usage}");
    let cost = usage["cost_usd"].as_f64().unwrap();
    let expected = (400.0 * 3.0 + 600.0 * 0.3 + 100.0 * 15.0) / 1e6;
    assert!((cost - expected).abs() < 1e-12, "{cost} != {expected}");
}
