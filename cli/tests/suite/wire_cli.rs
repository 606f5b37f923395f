//! `agcore run` against replies real servers send that used to end a run as a success
//! (issue 10, item 21): a tool call cut by `finish_reason: length` with `--tools none`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use support::{agcore, assert_history_valid, base_url};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/../tests/fixtures/openai/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// Answers with the length-cut tool call, streamed or whole as the request asks.
struct CutToolCall;

impl Respond for CutToolCall {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        if body["stream"] == Value::Bool(true) {
            ResponseTemplate::new(200).set_body_raw(
                fixture("openai_length_cut_tool_call.sse"),
                "text/event-stream",
            )
        } else {
            ResponseTemplate::new(200).set_body_raw(
                fixture("openai_length_cut_tool_call.json"),
                "application/json",
            )
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_cut_by_the_token_limit_fails_the_run_without_tools_too() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(CutToolCall)
        .mount(&server)
        .await;
    for extra in [&["--no-stream"][..], &[], &["--json"]] {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("transcript.json");
        let mut command = agcore(dir.path());
        command.args(["run", "--base-url", &base_url(&server), "--model", "m"]);
        command.args(["--tools", "none", "--transcript", file.to_str().unwrap()]);
        command.args(extra);
        command.arg("Weather in Paris?");
        let output = Command::from_std(command)
            .timeout(std::time::Duration::from_secs(60))
            .output()
            .unwrap();
        assert!(!output.status.success(), "{extra:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            stderr.contains("finish_reason=length") || stdout.contains("truncated_tool_calls"),
            "{extra:?}: {output:?}"
        );
        let transcript: Vec<Value> =
            serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        assert_history_valid(&transcript);
        let text = serde_json::to_string(&transcript).unwrap();
        assert!(!text.contains("call_cut"), "{extra:?}: {text}");
    }
}
