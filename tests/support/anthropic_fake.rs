//! A fake Anthropic Messages server on 127.0.0.1 that serves the fixtures of
//! `tests/fixtures/providers/anthropic/` (`NAME.sse` to a streaming request, `NAME.json` to
//! another) and checks every request the way the API does, answering 400
//! `invalid_request_error` when a rule is broken:
//!
//! - headers: `x-api-key`, `anthropic-version: 2023-06-01`;
//! - `model`, a positive `max_tokens`, roles alternating from `user`, no empty content or
//!   empty text block, at most 4 `cache_control` markers;
//! - every `tool_use` answered by a `tool_result` with its id, first in the very next user
//!   message, and no `tool_result` without its `tool_use` right before it;
//! - the replies it served come back whole: to the same model, each assistant message equals
//!   the reply it served (thinking and redacted thinking blocks byte-exact, in their place);
//!   to another model, none of that reply's signed blocks;
//! - thinking: a budget of at least 1024 below `max_tokens`, no `temperature`, no forced tool,
//!   and in a tool loop the last assistant message starts with a thinking block.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The fixture directory.
pub fn fixture_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/providers/anthropic")
}

/// The text of fixture `file`.
pub fn fixture(file: &str) -> String {
    let path = fixture_dir().join(file);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub enum Reply {
    /// Fixture `NAME`: `NAME.sse` when the request streams, else `NAME.json`.
    Fixture(&'static str),
    /// This SSE body, whatever the request.
    Sse(String),
    /// A status with headers and a body (an error fixture's text).
    Status(u16, Vec<(&'static str, String)>, String),
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Received {
    /// The parsed body.
    pub body: Value,
    /// The body's text.
    pub text: String,
    /// What the fake answered when a rule was broken.
    pub rejection: Option<String>,
}

/// A reply the fake served: the model asked for and the content blocks sent.
#[derive(Clone, Debug)]
pub struct Served {
    model: String,
    content: Vec<Value>,
}

impl Served {
    /// A reply with `content` served to `model` (for checks of [`check_request`] itself).
    pub fn new(model: &str, content: Vec<Value>) -> Self {
        Served {
            model: model.to_owned(),
            content,
        }
    }
}

#[derive(Default)]
struct State {
    script: VecDeque<Reply>,
    received: Vec<Received>,
    served: Vec<Served>,
}

/// The fake server.
pub struct AnthropicFake {
    /// The wiremock server (127.0.0.1).
    pub server: MockServer,
    state: Arc<Mutex<State>>,
}

struct Responder {
    state: Arc<Mutex<State>>,
}

fn error_body(kind: &str, message: &str) -> String {
    json!({"type": "error", "error": {"type": kind, "message": message}, "request_id": "req_fake"})
        .to_string()
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let text = String::from_utf8_lossy(&request.body).into_owned();
        let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        let mut state = self.state.lock().unwrap();
        let beta = request
            .headers
            .get("anthropic-beta")
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        let rejection = check_headers(request)
            .and_then(|()| check_hosted_tools(&beta, &body))
            .and_then(|()| check_request(&body, &state.served))
            .err();
        state.received.push(Received {
            body: body.clone(),
            text,
            rejection: rejection.clone(),
        });
        if let Some(message) = rejection {
            return ResponseTemplate::new(400)
                .insert_header("content-type", "application/json")
                .set_body_string(error_body("invalid_request_error", &message));
        }
        let stream = body["stream"].as_bool().unwrap_or(false);
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        match state.script.pop_front() {
            Some(Reply::Fixture(name)) => {
                let whole: Value = serde_json::from_str(&fixture(&format!("{name}.json"))).unwrap();
                state.served.push(Served {
                    model,
                    content: whole["content"].as_array().cloned().unwrap_or_default(),
                });
                if stream {
                    ResponseTemplate::new(200)
                        .insert_header("content-type", "text/event-stream")
                        .set_body_string(fixture(&format!("{name}.sse")))
                } else {
                    ResponseTemplate::new(200)
                        .insert_header("content-type", "application/json")
                        .set_body_string(fixture(&format!("{name}.json")))
                }
            }
            Some(Reply::Sse(body)) => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(body),
            Some(Reply::Status(status, headers, body)) => {
                let mut template = ResponseTemplate::new(status)
                    .insert_header("content-type", "application/json")
                    .set_body_string(body);
                for (name, value) in headers {
                    template = template.insert_header(name, value.as_str());
                }
                template
            }
            None => ResponseTemplate::new(500).set_body_string(error_body(
                "api_error",
                "the fake's script has no more replies",
            )),
        }
    }
}

/// The API's 400 for a server tool entry it does not know, or whose beta (`anthropic-beta`,
/// comma-separated) the request does not name.
pub fn check_hosted_tools(beta: &str, body: &Value) -> Result<(), String> {
    let betas: Vec<&str> = beta.split(',').map(str::trim).collect();
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    for (index, tool) in tools.iter().enumerate() {
        let Some(kind) = tool["type"].as_str() else {
            continue;
        };
        let (name, needs) = match kind {
            "custom" => continue,
            "web_search_20250305" => ("web_search", None),
            "web_fetch_20250910" => ("web_fetch", Some("web-fetch-2025-09-10")),
            "code_execution_20250825" => ("code_execution", Some("code-execution-2025-08-25")),
            "tool_search_tool_bm25_20251119" => ("tool_search_tool_bm25", None),
            other => {
                return Err(format!(
                    "tools.{index}: Input tag '{other}' found using 'type' does not match any of the expected tags"
                ));
            }
        };
        if tool["name"] != name {
            return Err(format!("tools.{index}.name: Input should be '{name}'"));
        }
        if let Some(needs) = needs
            && !betas.contains(&needs)
        {
            return Err(format!(
                "tools.{index}: '{kind}' needs the beta header 'anthropic-beta: {needs}'"
            ));
        }
    }
    Ok(())
}

fn check_headers(request: &Request) -> Result<(), String> {
    let header = |name: &str| {
        request
            .headers
            .get(name)
            .and_then(|value| value.to_str().ok())
            .unwrap_or_default()
            .to_owned()
    };
    if header("x-api-key") != "test-key" {
        return Err("x-api-key header is required".into());
    }
    if header("anthropic-version") != "2023-06-01" {
        return Err("anthropic-version: header is required".into());
    }
    if !header("content-type").starts_with("application/json") {
        return Err("content-type must be application/json".into());
    }
    Ok(())
}

fn kind(block: &Value) -> &str {
    block["type"].as_str().unwrap_or_default()
}

/// A block without its cache marker (not part of the content).
fn unmarked(block: &Value) -> Value {
    let mut block = block.clone();
    if let Some(fields) = block.as_object_mut() {
        fields.remove("cache_control");
    }
    block
}

fn tool_use_ids(content: &[Value]) -> Vec<&str> {
    content
        .iter()
        .filter(|b| kind(b) == "tool_use")
        .filter_map(|b| b["id"].as_str())
        .collect()
}

/// The API's rules (see the module docs); the error message when one is broken.
pub fn check_request(body: &Value, served: &[Served]) -> Result<(), String> {
    let model = body["model"].as_str().ok_or("model: Field required")?;
    let max_tokens = body["max_tokens"]
        .as_u64()
        .filter(|n| *n > 0)
        .ok_or("max_tokens: Field required")?;
    let messages = body["messages"]
        .as_array()
        .filter(|m| !m.is_empty())
        .ok_or("messages: at least one message is required")?;
    let markers = body.to_string().matches("\"cache_control\"").count();
    if markers > 4 {
        return Err(format!(
            "A maximum of 4 blocks with cache_control may be provided. Found {markers}."
        ));
    }
    for (index, message) in messages.iter().enumerate() {
        let expected = if index % 2 == 0 { "user" } else { "assistant" };
        if message["role"] != expected {
            return Err(format!(
                "messages.{index}: roles must alternate between \"user\" and \"assistant\", starting with \"user\""
            ));
        }
        let content = message["content"]
            .as_array()
            .filter(|c| !c.is_empty())
            .ok_or(format!(
                "messages.{index}: all messages must have non-empty content"
            ))?;
        if content
            .iter()
            .any(|b| kind(b) == "text" && b["text"].as_str().is_none_or(str::is_empty))
        {
            return Err(format!(
                "messages.{index}: text content blocks must be non-empty"
            ));
        }
    }
    // Tool results: first in the next user message, one per call, nowhere else.
    for (index, message) in messages.iter().enumerate() {
        let content = message["content"].as_array().unwrap();
        let results: Vec<&str> = content
            .iter()
            .filter(|b| kind(b) == "tool_result")
            .filter_map(|b| b["tool_use_id"].as_str())
            .collect();
        if message["role"] == "assistant" {
            let calls = tool_use_ids(content);
            if calls.is_empty() {
                continue;
            }
            let next = messages.get(index + 1).ok_or(format!("messages.{index}: `tool_use` ids were found without `tool_result` blocks immediately after"))?;
            let next = next["content"].as_array().unwrap();
            let leading: Vec<&str> = next
                .iter()
                .take_while(|b| kind(b) == "tool_result")
                .filter_map(|b| b["tool_use_id"].as_str())
                .collect();
            let mut want = calls.clone();
            let mut got = leading.clone();
            want.sort_unstable();
            got.sort_unstable();
            if want != got {
                return Err(format!(
                    "messages.{}: `tool_use` ids were found without `tool_result` blocks immediately after: {calls:?} vs {leading:?}. Each `tool_use` block must have a corresponding `tool_result` block in the next message, and the tool results must come first",
                    index + 1
                ));
            }
        } else if !results.is_empty() {
            let previous = index
                .checked_sub(1)
                .map(|p| messages[p]["content"].as_array().unwrap());
            let calls = previous.map(|p| tool_use_ids(p)).unwrap_or_default();
            if let Some(orphan) = results.iter().find(|id| !calls.contains(id)) {
                return Err(format!(
                    "messages.{index}: unexpected `tool_use_id` found in `tool_result` blocks: {orphan}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message."
                ));
            }
            if content
                .iter()
                .skip(results.len())
                .any(|b| kind(b) == "tool_result")
            {
                return Err(format!(
                    "messages.{index}: `tool_result` blocks must come first in the user message"
                ));
            }
        }
    }
    // The served replies come back whole (same model) or without their signed blocks.
    for (index, message) in messages
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "assistant")
    {
        let content: Vec<Value> = message["content"]
            .as_array()
            .unwrap()
            .iter()
            .map(unmarked)
            .collect();
        let calls = tool_use_ids(&content);
        let Some(original) = served.iter().rev().find(|s| {
            let ids = tool_use_ids(&s.content);
            if calls.is_empty() {
                ids.is_empty()
                    && s.content
                        .iter()
                        .filter(|b| kind(b) == "text")
                        .map(|b| &b["text"])
                        .eq(content
                            .iter()
                            .filter(|b| kind(b) == "text")
                            .map(|b| &b["text"]))
            } else {
                ids == calls
            }
        }) else {
            continue;
        };
        if original.model == model {
            if content.len() != original.content.len() {
                return Err(format!(
                    "messages.{index}: the assistant message is not the reply as sent ({} blocks, sent {})",
                    content.len(),
                    original.content.len()
                ));
            }
            for (position, (got, sent)) in content.iter().zip(&original.content).enumerate() {
                let same = match kind(sent) {
                    // Signed and server-run blocks: byte for byte.
                    "thinking" | "redacted_thinking" | "server_tool_use" => {
                        serde_json::to_string(got).unwrap() == serde_json::to_string(sent).unwrap()
                    }
                    other if other.ends_with("_tool_result") => {
                        serde_json::to_string(got).unwrap() == serde_json::to_string(sent).unwrap()
                    }
                    "text" => kind(got) == "text" && got["text"] == sent["text"],
                    "tool_use" => {
                        kind(got) == "tool_use"
                            && got["id"] == sent["id"]
                            && got["name"] == sent["name"]
                            && got["input"] == sent["input"]
                    }
                    _ => true,
                };
                if !same {
                    return Err(format!(
                        "messages.{index}.content.{position}: Invalid `signature` in `thinking` block, or a block out of place: got {got}, sent {sent}"
                    ));
                }
            }
        } else if content
            .iter()
            .any(|b| matches!(kind(b), "thinking" | "redacted_thinking"))
        {
            return Err(format!(
                "messages.{index}: a thinking block of another model (Invalid `signature` in `thinking` block)"
            ));
        }
    }
    if let Some(thinking) = body.get("thinking") {
        let budget = thinking["budget_tokens"]
            .as_u64()
            .ok_or("thinking.budget_tokens: Field required")?;
        if thinking["type"] != "enabled" || budget < 1024 {
            return Err(
                "thinking.enabled.budget_tokens: Input should be greater than or equal to 1024"
                    .into(),
            );
        }
        if budget >= max_tokens {
            return Err("`max_tokens` must be greater than `thinking.budget_tokens`".into());
        }
        if body.get("temperature").is_some() {
            return Err("`temperature` may only be set to 1 when thinking is enabled".into());
        }
        if matches!(body["tool_choice"]["type"].as_str(), Some("any" | "tool")) {
            return Err("Thinking may not be enabled when tool_choice forces tool use.".into());
        }
        let last = messages.last().unwrap()["content"].as_array().unwrap();
        if last.iter().any(|b| kind(b) == "tool_result") {
            let reply = messages
                .iter()
                .rev()
                .find(|m| m["role"] == "assistant")
                .unwrap();
            let first = kind(&reply["content"][0]);
            if first != "thinking" && first != "redacted_thinking" {
                return Err(format!(
                    "Expected `thinking` or `redacted_thinking`, but found `{first}`. When `thinking` is enabled, a final `assistant` message must start with a thinking block."
                ));
            }
        }
    }
    Ok(())
}

impl AnthropicFake {
    /// A fake answering with `replies` in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let server = MockServer::start().await;
        let state = Arc::new(Mutex::new(State {
            script: replies.into(),
            ..State::default()
        }));
        Mock::given(method("POST"))
            .and(path("/v1/messages"))
            .respond_with(Responder {
                state: state.clone(),
            })
            .mount(&server)
            .await;
        AnthropicFake { server, state }
    }

    /// Add replies to the script.
    pub fn push(&self, reply: Reply) {
        self.state.lock().unwrap().script.push_back(reply);
    }

    /// Every request received so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// The base URL of the fake (up to `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Panics when a request broke a rule.
    pub fn assert_no_rejections(&self) {
        for (n, received) in self.received().iter().enumerate() {
            assert!(
                received.rejection.is_none(),
                "request {n} was rejected: {:?}\n{}",
                received.rejection,
                received.text
            );
        }
    }
}
