//! A fake OpenAI-compatible server on 127.0.0.1 that enforces a context window: it counts each
//! request's tokens with its own tokenizer (tiktoken o200k_base, see [`count_text`]), answers 400
//! `context_length_exceeded` in the OpenAI, vLLM or llama.cpp shape above the window, reports
//! truthful usage, and checks every request it receives: the wire rules of the OpenAI API on the
//! raw JSON ([`check_openai_wire`], written from the API's rules, not the library's
//! `check_wire`), and the history invariants.
//!
//! Its "model" works through a task `TASK: read chunks A to B`: it calls `read_chunk` for each
//! chunk in turn (reading where it is from the newest tool result) and then answers `DONE A-B`.
//! A summary request (the context engine's) is answered with a short summary.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};

use agcore::context::{SUMMARY_SYSTEM_PROMPT, estimate};
use agcore::llm::{OpenaiChatMessage, ToolDefinition};
use agcore::tools::prelude::*;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// How the server says a request does not fit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `{"error": {"code": "context_length_exceeded", ...}}` with the numbers in the message.
    OpenAi,
    /// `{"object": "error", "message": "... (N in the messages, M in the completion)"}`.
    Vllm,
    /// `{"error": {"type": "exceed_context_size_error", "n_ctx", "n_prompt_tokens"}}`.
    LlamaCpp,
}

/// One request the server received.
#[derive(Debug, Clone)]
pub struct Received {
    /// Its tokens by the server's tokenizer.
    pub tokens: u64,
    /// Its `max_tokens`.
    pub max_tokens: u64,
    /// Its size as the client's estimator counts bytes.
    pub bytes: usize,
    /// A summary request of the context engine.
    pub summary: bool,
    /// Its messages and tools (to replay the client's estimator on).
    pub messages: Vec<OpenaiChatMessage>,
    pub tools: Vec<ToolDefinition>,
    /// Answered with a context error.
    pub rejected: bool,
}

/// The server.
pub struct WindowedServer {
    pub server: MockServer,
    pub window: u64,
    received: Arc<Mutex<Vec<Received>>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl WindowedServer {
    pub async fn start(window: u64, shape: Shape, system: &str) -> Self {
        let server = MockServer::start().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let failures = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder {
                window,
                shape,
                system: system.to_owned(),
                received: received.clone(),
                failures: failures.clone(),
            })
            .mount(&server)
            .await;
        WindowedServer {
            server,
            window,
            received,
            failures,
        }
    }

    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    pub fn received(&self) -> Vec<Received> {
        self.received.lock().unwrap().clone()
    }

    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().unwrap().clone()
    }
}

impl Drop for WindowedServer {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let failures = self.failures.lock().unwrap();
            assert!(failures.is_empty(), "invariants broken: {failures:#?}");
        }
    }
}

/// The server's tokenizer: OpenAI's o200k_base (tiktoken-rs), 4 tokens per message and 3 per
/// tool call for the chat framing, the tool definitions' JSON as text.
pub fn count_text(text: &str) -> u64 {
    tiktoken_rs::o200k_base_singleton().count_ordinary(text) as u64
}

fn count_request(body: &Value) -> u64 {
    let mut tokens = 0;
    for message in body["messages"].as_array().into_iter().flatten() {
        tokens += 4;
        match &message["content"] {
            Value::String(text) => tokens += count_text(text),
            Value::Array(parts) => {
                for part in parts {
                    tokens += count_text(part["text"].as_str().unwrap_or_default());
                }
            }
            _ => {}
        }
        for call in message["tool_calls"].as_array().into_iter().flatten() {
            tokens += 3
                + count_text(call["function"]["name"].as_str().unwrap_or_default())
                + count_text(call["function"]["arguments"].as_str().unwrap_or_default());
        }
    }
    if let Some(tools) = body.get("tools") {
        tokens += count_text(&tools.to_string());
    }
    tokens
}

struct Responder {
    window: u64,
    shape: Shape,
    system: String,
    received: Arc<Mutex<Vec<Received>>>,
    failures: Arc<Mutex<Vec<String>>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.answer(request))) {
            Ok(template) => template,
            Err(panic) => {
                let message = panic
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                    .unwrap_or_default();
                self.failures.lock().unwrap().push(message.clone());
                ResponseTemplate::new(500).set_body_json(json!({"error": {"message": message}}))
            }
        }
    }
}

impl Responder {
    fn answer(&self, request: &Request) -> ResponseTemplate {
        let body: Value = request.body_json().expect("JSON body");
        let messages: Vec<OpenaiChatMessage> =
            serde_json::from_value(body["messages"].clone()).expect("messages parse");
        let tools: Vec<ToolDefinition> =
            serde_json::from_value(body.get("tools").cloned().unwrap_or(json!([])))
                .expect("tools parse");
        let summary = messages
            .first()
            .and_then(OpenaiChatMessage::text)
            .as_deref()
            == Some(SUMMARY_SYSTEM_PROMPT);
        let tokens = count_request(&body);
        let max_tokens = body["max_tokens"].as_u64().unwrap_or(0);
        let bytes = estimate::messages_bytes(&messages) + estimate::tools_bytes(&tools);
        let rejected = tokens + max_tokens > self.window;
        self.received.lock().unwrap().push(Received {
            tokens,
            max_tokens,
            bytes,
            summary,
            rejected,
            messages: messages.clone(),
            tools: tools.clone(),
        });
        if let Err(violation) = check_openai_wire(&body) {
            panic!("request not valid on the OpenAI wire: {violation}");
        }
        if !summary {
            check_invariants(&messages, &self.system);
        }
        if rejected {
            return self.overflow(tokens, max_tokens);
        }
        let (text, call) = if summary {
            (Some(summarise(&messages)), None)
        } else {
            next_move(&messages)
        };
        let completion = text.as_deref().map_or(8, count_text);
        let usage = json!({"prompt_tokens": tokens, "completion_tokens": completion, "total_tokens": tokens + completion});
        let tool_calls: Vec<Value> = call
            .iter()
            .map(|n| json!({"id": format!("call_{n}"), "type": "function", "function": {"name": "read_chunk", "arguments": json!({"n": n}).to_string()}}))
            .collect();
        let finish = if call.is_some() { "tool_calls" } else { "stop" };
        if body["stream"] == json!(true) {
            let mut delta = json!({"role": "assistant", "content": text});
            if !tool_calls.is_empty() {
                let indexed: Vec<Value> = tool_calls
                    .iter()
                    .enumerate()
                    .map(|(i, c)| {
                        let mut c = c.clone();
                        c["index"] = json!(i);
                        c
                    })
                    .collect();
                delta["tool_calls"] = json!(indexed);
            }
            let chunks = [
                json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]}),
                json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}),
                json!({"id": "c", "object": "chat.completion.chunk", "model": "m", "choices": [], "usage": usage}),
            ];
            let mut sse = String::new();
            for chunk in chunks {
                sse.push_str(&format!("data: {chunk}\n\n"));
            }
            sse.push_str("data: [DONE]\n\n");
            return ResponseTemplate::new(200).set_body_raw(sse, "text/event-stream");
        }
        let mut message = json!({"role": "assistant", "content": text});
        if !tool_calls.is_empty() {
            message["tool_calls"] = json!(tool_calls);
        }
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "c", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        }))
    }

    fn overflow(&self, tokens: u64, max_tokens: u64) -> ResponseTemplate {
        let window = self.window;
        let body = match self.shape {
            Shape::OpenAi => json!({"error": {
                "message": format!("This model's maximum context length is {window} tokens. However, your messages resulted in {tokens} tokens. Please reduce the length of the messages."),
                "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}),
            Shape::Vllm => json!({"object": "error",
                "message": format!("This model's maximum context length is {window} tokens. However, you requested {} tokens ({tokens} in the messages, {max_tokens} in the completion). Please reduce the length of the messages or completion.", tokens + max_tokens),
                "type": "BadRequestError", "param": null, "code": 400}),
            Shape::LlamaCpp => json!({"error": {"code": 400,
                "message": "the request exceeds the available context size, try increasing it",
                "type": "exceed_context_size_error", "n_prompt_tokens": tokens, "n_ctx": window}}),
        };
        ResponseTemplate::new(400).set_body_json(body)
    }
}

/// The rules the OpenAI Chat Completions API enforces on a request's `messages` and `tools`,
/// checked on the JSON as sent (independently of agcore's types and its `check_wire`):
///
/// - `messages` is a non-empty array of `system`, `developer`, `user`, `assistant` or `tool`
///   messages; a `system`, `developer`, `user` or `tool` message has `content` (a string, or an
///   array of content parts);
/// - an `assistant` message has `content` (or a `refusal`) unless it has `tool_calls`; its
///   `tool_calls`, when present, are a non-empty array of `{"id", "type": "function",
///   "function": {"name", "arguments": <a string>}}` with distinct ids (here: distinct in the
///   whole request, so no answer can be mistaken for another's);
/// - "An assistant message with 'tool_calls' must be followed by tool messages responding to
///   each 'tool_call_id'": right after it, one `tool` message per call, nothing in between;
/// - "messages with role 'tool' must be a response to a preceding message with 'tool_calls'":
///   a `tool` message answers a still unanswered call of the assistant message just before its
///   run of tool messages;
/// - `tools` (optional) are `{"type": "function", "function": {"name", "parameters"?}}` with
///   distinct names matching `^[a-zA-Z0-9_-]{1,64}$` and `parameters` a JSON object.
pub fn check_openai_wire(body: &Value) -> Result<(), String> {
    let messages = body["messages"]
        .as_array()
        .ok_or("`messages` is not an array")?;
    if messages.is_empty() {
        return Err("`messages` is empty".into());
    }
    if let Some(tools) = body.get("tools") {
        let tools = tools.as_array().ok_or("`tools` is not an array")?;
        let mut names = HashSet::new();
        for (index, tool) in tools.iter().enumerate() {
            if tool["type"] != "function" {
                return Err(format!("tools[{index}]: `type` is not \"function\""));
            }
            let name = tool["function"]["name"]
                .as_str()
                .ok_or(format!("tools[{index}]: no function name"))?;
            let valid = (1..=64).contains(&name.len())
                && name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
            if !valid {
                return Err(format!(
                    "tools[{index}]: name {name:?} does not match ^[a-zA-Z0-9_-]{{1,64}}$"
                ));
            }
            if !names.insert(name) {
                return Err(format!("tools[{index}]: the name {name:?} is used twice"));
            }
            if let Some(parameters) = tool["function"].get("parameters")
                && !parameters.is_object()
            {
                return Err(format!("tools[{index}]: `parameters` is not an object"));
            }
        }
    }
    let content_ok = |message: &Value| match &message["content"] {
        Value::String(_) => true,
        Value::Array(parts) => parts.iter().all(|part| {
            part["type"].is_string() && (part["type"] != "text" || part["text"].is_string())
        }),
        _ => false,
    };
    let mut ids = HashSet::new();
    // The calls of the last assistant message still waiting for their tool messages.
    let mut open: Option<(usize, Vec<String>)> = None;
    for (index, message) in messages.iter().enumerate() {
        let role = message["role"]
            .as_str()
            .ok_or(format!("messages[{index}]: no `role`"))?;
        if role != "tool" {
            if let Some((at, unanswered)) = &open
                && !unanswered.is_empty()
            {
                return Err(format!(
                    "messages[{at}]: an assistant message with 'tool_calls' must be followed by \
                     tool messages responding to each 'tool_call_id'; not answered before \
                     messages[{index}]: {unanswered:?}"
                ));
            }
            open = None;
        }
        match role {
            "system" | "developer" | "user" => {
                if !content_ok(message) {
                    return Err(format!("messages[{index}] ({role}): no valid `content`"));
                }
            }
            "assistant" => {
                let calls = match message.get("tool_calls") {
                    None | Some(Value::Null) => Vec::new(),
                    Some(Value::Array(calls)) if calls.is_empty() => {
                        return Err(format!("messages[{index}]: `tool_calls` is [] (too short)"));
                    }
                    Some(Value::Array(calls)) => calls.clone(),
                    Some(_) => {
                        return Err(format!("messages[{index}]: `tool_calls` is not an array"));
                    }
                };
                let has_content = content_ok(message) || message["refusal"].is_string();
                if calls.is_empty() && !has_content {
                    return Err(format!(
                        "messages[{index}]: an assistant message without `tool_calls` needs `content`"
                    ));
                }
                if !(message["content"].is_null() || content_ok(message)) {
                    return Err(format!(
                        "messages[{index}]: `content` is neither text nor parts"
                    ));
                }
                let mut pending = Vec::new();
                for call in &calls {
                    let id = call["id"]
                        .as_str()
                        .filter(|id| !id.is_empty())
                        .ok_or(format!("messages[{index}]: a tool call without an id"))?;
                    if call["type"] != "function" {
                        return Err(format!(
                            "messages[{index}]: call {id}: `type` is not \"function\""
                        ));
                    }
                    if call["function"]["name"].as_str().is_none_or(str::is_empty) {
                        return Err(format!("messages[{index}]: call {id}: no function name"));
                    }
                    if !call["function"]["arguments"].is_string() {
                        return Err(format!(
                            "messages[{index}]: call {id}: `arguments` is not a string"
                        ));
                    }
                    if !ids.insert(id.to_owned()) {
                        return Err(format!("messages[{index}]: the call id {id} is used twice"));
                    }
                    pending.push(id.to_owned());
                }
                open = (!pending.is_empty()).then_some((index, pending));
            }
            "tool" => {
                let id = message["tool_call_id"].as_str().ok_or(format!(
                    "messages[{index}]: a tool message without `tool_call_id`"
                ))?;
                if !content_ok(message) {
                    return Err(format!("messages[{index}] (tool): no valid `content`"));
                }
                let Some((_, unanswered)) = &mut open else {
                    return Err(format!(
                        "messages[{index}]: messages with role 'tool' must be a response to a \
                         preceding message with 'tool_calls' ({id})"
                    ));
                };
                let Some(position) = unanswered.iter().position(|open| open == id) else {
                    return Err(format!(
                        "messages[{index}]: the tool message for {id} answers no unanswered call \
                         of the assistant message before it"
                    ));
                };
                unanswered.remove(position);
            }
            other => return Err(format!("messages[{index}]: unknown role {other:?}")),
        }
    }
    if let Some((at, unanswered)) = open
        && !unanswered.is_empty()
    {
        return Err(format!(
            "messages[{at}]: calls {unanswered:?} are not answered by the end of the request"
        ));
    }
    Ok(())
}

/// The invariants every conversation request keeps (besides [`check_openai_wire`]): the system
/// prompt first and unchanged, the task (the newest user message that is not the engine's
/// marker) present, and the newest tool result whole.
fn check_invariants(messages: &[OpenaiChatMessage], system: &str) {
    assert_eq!(
        messages
            .first()
            .and_then(OpenaiChatMessage::text)
            .as_deref(),
        Some(system),
        "the system prompt is first and unchanged"
    );
    assert!(
        messages
            .iter()
            .any(|m| matches!(m, OpenaiChatMessage::User { .. })
                && m.text().is_some_and(|t| t.starts_with("TASK:"))),
        "the task is in the request"
    );
    if let Some(last @ OpenaiChatMessage::Tool { .. }) = messages.last() {
        assert!(
            last.text().is_some_and(|t| t.starts_with("chunk ")),
            "the newest tool result is whole: {:?}",
            last.text().map(|t| t.chars().take(100).collect::<String>())
        );
    }
}

/// The task's range `A..=B` from the newest `TASK:` message.
fn task(messages: &[OpenaiChatMessage]) -> (u64, u64) {
    let text = messages
        .iter()
        .rev()
        .find_map(|m| m.text().filter(|t| t.starts_with("TASK:")))
        .expect("a task");
    let numbers: Vec<u64> = text
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|s| s.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

/// The model's next move: the next chunk to read, or the final answer.
fn next_move(messages: &[OpenaiChatMessage]) -> (Option<String>, Option<u64>) {
    let (first, last) = task(messages);
    let next = match messages.last() {
        Some(OpenaiChatMessage::Tool { content, .. }) => {
            let text = content.text();
            let n: u64 = text
                .strip_prefix("chunk ")
                .and_then(|rest| rest.split(' ').next())
                .and_then(|n| n.parse().ok())
                .expect("the newest tool result names its chunk");
            n + 1
        }
        _ => first,
    };
    if next > last {
        (Some(format!("DONE {first}-{last}")), None)
    } else {
        (None, Some(next))
    }
}

fn summarise(messages: &[OpenaiChatMessage]) -> String {
    let text = messages
        .last()
        .and_then(OpenaiChatMessage::text)
        .unwrap_or_default();
    let chunks = text.matches("read_chunk(").count();
    format!(
        "The assistant read {chunks} more chunks of the log with read_chunk; every line had status=ok."
    )
}

/// The `read_chunk` tool: 4–8 KB of log lines for chunk `n`, starting `chunk N of the log`.
pub struct ReadChunk;

pub fn chunk_text(n: u64) -> String {
    let size = 4_096 + (n.wrapping_mul(2_654_435_761) % 4_096) as usize;
    let mut text = format!("chunk {n} of the log:\n");
    let mut line = 0u64;
    while text.len() < size {
        text.push_str(&format!(
            "line {line}: value={} status=ok path=/srv/app/module_{}.rs elapsed_ms={}\n",
            (n * 31 + line * 7) % 977,
            line % 13,
            (line * n) % 250
        ));
        line += 1;
    }
    text
}

#[async_trait]
impl BaseTool for ReadChunk {
    fn name(&self) -> &str {
        "read_chunk"
    }
    fn description(&self) -> &str {
        "Read one chunk of the log"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        Ok(json!(chunk_text(args["n"].as_u64().unwrap_or(0))))
    }
}

/// A registry with `read_chunk`.
pub fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_default_timeout(std::time::Duration::from_secs(5));
    registry.register(Arc::new(ReadChunk)).unwrap();
    registry
}

/// The median and 95th percentile of `values`.
pub fn median_p95(values: &mut [f64]) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    if values.is_empty() {
        return (0.0, 0.0);
    }
    let at = |q: f64| values[((values.len() - 1) as f64 * q).round() as usize];
    (at(0.5), at(0.95))
}
