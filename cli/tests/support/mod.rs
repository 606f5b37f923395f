//! A fake OpenAI-compatible server on 127.0.0.1 that answers turn by turn, and helpers to run
//! the `agcore` binary against it. [`mcp`] is the library tests' `tests/mcp_support`: where the
//! real MCP test servers are (`.ci/install-mcp-servers.sh`), and the one skip helper
//! ([`mcp::require`]: a failure on CI).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "../../../tests/support/mcp.rs"]
pub mod mcp;
#[path = "../../../tests/support/require.rs"]
pub mod require;
pub mod team_cli;
pub mod team_model;

use std::process::Command;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One model reply.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Assistant text, streamed in a few chunks.
    Text(String),
    /// Tool calls: (id, name, arguments JSON).
    Tools(Vec<(String, String, String)>),
    /// An HTTP error status with an OpenAI error body.
    Status(u16, String),
    /// The reply, after a delay.
    Delayed(Duration, Box<Reply>),
}

impl Reply {
    /// Assistant text.
    pub fn text(text: &str) -> Self {
        Reply::Text(text.to_owned())
    }

    /// One tool call.
    pub fn tool(id: &str, name: &str, arguments: &str) -> Self {
        Reply::Tools(vec![(id.to_owned(), name.to_owned(), arguments.to_owned())])
    }
}

/// Answers request N with reply N (the last reply repeats when the script runs out).
pub struct Script {
    replies: Vec<Reply>,
    next: Mutex<usize>,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let index = {
            let mut next = self.next.lock().unwrap();
            let index = *next;
            *next += 1;
            index
        };
        let reply = self
            .replies
            .get(index)
            .or(self.replies.last())
            .cloned()
            .unwrap_or_else(|| Reply::text("(no script)"));
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let streaming = body["stream"].as_bool().unwrap_or(false);
        render(&reply, streaming)
    }
}

/// `reply` as the server's response (SSE when the request asked to stream).
pub fn render(reply: &Reply, streaming: bool) -> ResponseTemplate {
    match reply {
        Reply::Delayed(delay, inner) => render(inner, streaming).set_delay(*delay),
        Reply::Status(status, message) => ResponseTemplate::new(*status).set_body_json(
            json!({"error": {"message": message, "type": "invalid_request_error", "code": null}}),
        ),
        reply if streaming => ResponseTemplate::new(200)
            .insert_header("content-type", "text/event-stream")
            .set_body_string(sse(reply)),
        reply => ResponseTemplate::new(200).set_body_json(whole(reply)),
    }
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// The SSE body of a streamed reply, shaped like OpenAI's.
pub fn sse(reply: &Reply) -> String {
    let mut body = chunk(json!({"role": "assistant", "content": ""}), None);
    let finish = match reply {
        Reply::Text(text) => {
            for piece in text.split_inclusive(' ') {
                body.push_str(&chunk(json!({"content": piece}), None));
            }
            "stop"
        }
        Reply::Tools(calls) => {
            for (index, (id, name, arguments)) in calls.iter().enumerate() {
                body.push_str(&chunk(
                    json!({"tool_calls": [{"index": index, "id": id, "type": "function",
                        "function": {"name": name, "arguments": ""}}]}),
                    None,
                ));
                let middle = arguments.len() / 2;
                let middle = (middle..=arguments.len())
                    .find(|at| arguments.is_char_boundary(*at))
                    .unwrap_or(arguments.len());
                for piece in [&arguments[..middle], &arguments[middle..]] {
                    body.push_str(&chunk(
                        json!({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}),
                        None,
                    ));
                }
            }
            "tool_calls"
        }
        Reply::Status(..) | Reply::Delayed(..) => unreachable!("rendered elsewhere"),
    };
    body.push_str(&chunk(json!({}), Some(finish)));
    body.push_str("data: [DONE]\n\n");
    body
}

fn whole(reply: &Reply) -> Value {
    let (message, finish) = match reply {
        Reply::Text(text) => (json!({"role": "assistant", "content": text}), "stop"),
        Reply::Tools(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function",
                        "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            (
                json!({"role": "assistant", "content": null, "tool_calls": calls}),
                "tool_calls",
            )
        }
        Reply::Status(..) | Reply::Delayed(..) => unreachable!("rendered elsewhere"),
    };
    json!({
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    })
}

/// A server that answers `POST /v1/chat/completions` from `replies`, in order.
pub async fn fake_openai(replies: Vec<Reply>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script {
            replies,
            next: Mutex::new(0),
        })
        .mount(&server)
        .await;
    server
}

/// The base URL of `server` for `--base-url`.
pub fn base_url(server: &MockServer) -> String {
    format!("{}/v1", server.uri())
}

/// The JSON bodies of every chat request `server` received, in order (the CLI's probes for
/// the context window, `GET /props` and the like, are not chat requests).
pub async fn request_bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .filter(|request| request.url.path() == "/v1/chat/completions")
        .map(|request| serde_json::from_slice(&request.body).unwrap())
        .collect()
}

/// The `agcore` binary with a clean environment (no key, base URL or model from the outside),
/// run in `dir` so no stray `agcore.toml` is picked up, with `HOME`, `XDG_CONFIG_HOME` and
/// `XDG_DATA_HOME` under `dir/.home` so the real user's config and trust records are never read.
pub fn agcore(dir: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agcore"));
    let home = dir.join(".home");
    command
        .current_dir(dir)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join("config"))
        .env("XDG_DATA_HOME", home.join("data"))
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
        .env_remove("GEMINI_API_KEY")
        .env_remove("GOOGLE_API_KEY")
        .env_remove("OPENAI_BASE_URL")
        .env_remove("AGCORE_MODEL")
        .env_remove("AGCORE_PROVIDER")
        .env_remove("AGCORE_LOG")
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env_remove("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")
        .env("NO_COLOR", "1");
    command
}

/// Trust `dir`'s `agcore.toml` (under the test's own `XDG_DATA_HOME`, see [`agcore`]).
pub fn trust(dir: &std::path::Path) {
    let output = agcore(dir)
        .arg("trust")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "agcore trust failed: {output:?}");
}

/// Assert that `messages` (a saved history) is valid for the next request: every assistant
/// tool call is answered by a `tool` message with its id before the next assistant/user message.
pub fn assert_history_valid(messages: &[Value]) {
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        let role = message["role"].as_str().unwrap_or_default();
        match role {
            "tool" => {
                let id = message["tool_call_id"].as_str().unwrap();
                let position = open
                    .iter()
                    .position(|open| open == id)
                    .unwrap_or_else(|| panic!("tool message {id} answers no open call"));
                open.remove(position);
            }
            _ => {
                assert!(
                    open.is_empty(),
                    "calls {open:?} unanswered before a {role} message"
                );
                if let Some(calls) = message["tool_calls"].as_array() {
                    open.extend(
                        calls
                            .iter()
                            .map(|call| call["id"].as_str().unwrap().to_owned()),
                    );
                }
            }
        }
    }
    assert!(open.is_empty(), "calls {open:?} unanswered at the end");
}
