//! A fake Gemini API on 127.0.0.1 that checks each request the way Gemini does and answers
//! 400 `INVALID_ARGUMENT` like Gemini when a rule is broken, so an encoder regression fails
//! the test that made the request:
//!
//! - the key arrives in `x-goog-api-key` and never in the URL; the path is
//!   `/v1beta/models/{model}:streamGenerateContent?alt=sse` or `:generateContent`;
//! - `contents` alternate `user`/`model`, starting with `user`;
//! - a `model` turn with `functionCall` parts is followed by a `user` turn with exactly as many
//!   `functionResponse` parts, with the same names in the same order;
//! - every `thoughtSignature` the fake issued (for the same model) comes back byte-exact in its
//!   original part: on the `functionCall` with the same name and args, on a text part, or the
//!   whole thought part unchanged; a signature it never issued is refused (the documented
//!   placeholder aside);
//! - a `functionCall` the fake issued (for the same model) without a signature comes back as
//!   sent, without one: the placeholder is for calls the model did not make (agcore's rule,
//!   so a history is returned as the model wrote it);
//! - Gemini 3 models: the first `functionCall` of each step of the current turn has a signature;
//! - `parameters` schemas (the OpenAPI subset) have one upper-case string `type` and none of
//!   `$schema`, `$ref`, `$defs`, `additionalProperties`, `const`, `oneOf`, `allOf`.
//!
//! Replies are scripted (`Reply`); a stream is written in small random pieces (cut across
//! lines and UTF-8 characters), each flushed on its own.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The placeholder signature Gemini documents for calls whose signature is unknown.
pub const DUMMY_SIGNATURE: &str = "skip_thought_signature_validator";

/// The key the fake expects.
pub const API_KEY: &str = "AIza-fake-test-key";

/// A fixture under `tests/fixtures/providers/gemini/`.
pub fn fixture_path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/providers/gemini")
        .join(name)
}

/// The text of a fixture.
pub fn fixture(name: &str) -> String {
    std::fs::read_to_string(fixture_path(name)).unwrap()
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// `text/event-stream` or `application/json`.
    pub content_type: &'static str,
    /// The body.
    pub body: String,
}

impl Reply {
    /// A fixture as a 200 SSE stream.
    pub fn stream(name: &str) -> Reply {
        Reply {
            status: 200,
            content_type: "text/event-stream",
            body: fixture(name),
        }
    }

    /// A fixture as a JSON body with `status`.
    pub fn json(status: u16, name: &str) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            body: fixture(name),
        }
    }
}

/// One request the fake received.
#[derive(Clone, Debug)]
pub struct Received {
    /// Path and query.
    pub target: String,
    /// Headers, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The JSON body.
    pub body: Value,
    /// The rule it broke, when it broke one (it was answered 400).
    pub violation: Option<String>,
}

#[derive(Default)]
struct State {
    replies: VecDeque<Reply>,
    received: Vec<Received>,
    /// Parts that carried a signature, and `functionCall` parts that carried none, by the
    /// model they were issued for.
    issued: Vec<(String, Value)>,
}

/// The fake server.
#[derive(Clone)]
pub struct GeminiFake {
    /// `http://127.0.0.1:PORT/v1beta`.
    pub base_url: String,
    state: Arc<Mutex<State>>,
}

impl GeminiFake {
    /// Start a fake answering with `replies` in order.
    pub async fn start(replies: Vec<Reply>) -> GeminiFake {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let state = Arc::new(Mutex::new(State {
            replies: replies.into(),
            ..State::default()
        }));
        let shared = state.clone();
        tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let state = shared.clone();
                tokio::spawn(async move { serve(socket, state).await });
            }
        });
        GeminiFake {
            base_url: format!("http://127.0.0.1:{port}/v1beta"),
            state,
        }
    }

    /// The requests so far.
    pub fn received(&self) -> Vec<Received> {
        self.state.lock().unwrap().received.clone()
    }

    /// The last request's body.
    pub fn last_body(&self) -> Value {
        self.received().last().expect("a request").body.clone()
    }

    /// Pretend the signed parts of a reply were issued for `model` (for a history built by
    /// hand).
    pub fn issue(&self, model: &str, reply_body: &str) {
        let mut state = self.state.lock().unwrap();
        record_issued(&mut state, model, reply_body);
    }
}

async fn serve(mut socket: TcpStream, state: Arc<Mutex<State>>) {
    let Some((head, body)) = read_request(&mut socket).await else {
        return;
    };
    let mut lines = head.lines();
    let target = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .unwrap_or("")
        .to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(name, value)| (name.trim().to_ascii_lowercase(), value.trim().to_owned()))
        .collect();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let model = target
        .split("/models/")
        .nth(1)
        .and_then(|rest| rest.split(':').next())
        .unwrap_or("")
        .to_owned();
    let violation = {
        let state = state.lock().unwrap();
        check(&target, &headers, &body, &model, &state.issued).err()
    };
    let reply = {
        let mut state = state.lock().unwrap();
        state.received.push(Received {
            target: target.clone(),
            headers,
            body,
            violation: violation.clone(),
        });
        match &violation {
            Some(message) => Reply {
                status: 400,
                content_type: "application/json",
                body: json!({"error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}})
                    .to_string(),
            },
            None => {
                let reply = state.replies.pop_front().unwrap_or(Reply {
                    status: 500,
                    content_type: "application/json",
                    body: json!({"error": {"code": 500, "message": "the fake has no more replies", "status": "INTERNAL"}}).to_string(),
                });
                if reply.status == 200 {
                    record_issued(&mut state, &model, &reply.body);
                }
                reply
            }
        }
    };
    let head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: {}\r\nconnection: close\r\n\r\n",
        reply.status, reply.content_type
    );
    if socket.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    // Small random pieces, each flushed, so the client sees lines and characters split.
    let bytes = reply.body.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let end = (at + fastrand::usize(1..=7)).min(bytes.len());
        if socket.write_all(&bytes[at..end]).await.is_err() || socket.flush().await.is_err() {
            return;
        }
        at = end;
    }
    let _ = socket.shutdown().await;
}

async fn read_request(socket: &mut TcpStream) -> Option<(String, Vec<u8>)> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length: usize = head
        .lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .unwrap_or(0);
    let mut body = buffer[head_end + 4..].to_vec();
    while body.len() < length {
        let n = socket.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&chunk[..n]);
    }
    Some((head, body))
}

/// The parts of a reply body (SSE events or one JSON), merged over chunks.
fn reply_parts(body: &str) -> Vec<Value> {
    let payloads: Vec<Value> = if body.trim_start().starts_with('{') {
        vec![serde_json::from_str(body).unwrap_or(Value::Null)]
    } else {
        body.replace("\r\n", "\n")
            .split("\n\n")
            .filter_map(|event| event.trim().strip_prefix("data: "))
            .filter_map(|data| serde_json::from_str(data).ok())
            .collect()
    };
    payloads
        .iter()
        .filter_map(|payload| payload.pointer("/candidates/0/content/parts"))
        .filter_map(Value::as_array)
        .flatten()
        .cloned()
        .collect()
}

fn record_issued(state: &mut State, model: &str, body: &str) {
    for part in reply_parts(body) {
        if part.get("thoughtSignature").is_some() || part.get("functionCall").is_some() {
            state.issued.push((model.to_owned(), part));
        }
    }
}

fn header<'a>(headers: &'a [(String, String)], name: &str) -> Option<&'a str> {
    headers
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, v)| v.as_str())
}

/// Gemini's checks; `Err` is the 400 message.
fn check(
    target: &str,
    headers: &[(String, String)],
    body: &Value,
    model: &str,
    issued: &[(String, Value)],
) -> Result<(), String> {
    if header(headers, "x-goog-api-key") != Some(API_KEY) {
        return Err("API key not valid. Please pass a valid API key.".into());
    }
    if target.contains("key=") || target.contains(API_KEY) {
        return Err("the key must not be in the URL".into());
    }
    let streaming = target.ends_with(":streamGenerateContent?alt=sse");
    if !streaming && !target.ends_with(":generateContent") {
        return Err(format!("unknown method {target}"));
    }
    if !target.starts_with("/v1beta/models/") {
        return Err(format!("unknown path {target}"));
    }
    let contents = body
        .get("contents")
        .and_then(Value::as_array)
        .ok_or("* GenerateContentRequest.contents: contents is not specified")?;
    check_schemas(body)?;
    let mut previous: Option<&str> = None;
    for (index, content) in contents.iter().enumerate() {
        let role = content.get("role").and_then(Value::as_str).unwrap_or("");
        if role != "user" && role != "model" {
            return Err(format!("contents[{index}]: unknown role {role:?}"));
        }
        if previous == Some(role) || (previous.is_none() && role != "user") {
            return Err(format!(
                "contents[{index}]: roles must alternate, starting with user"
            ));
        }
        previous = Some(role);
        let parts = content
            .get("parts")
            .and_then(Value::as_array)
            .filter(|parts| !parts.is_empty())
            .ok_or(format!(
                "* GenerateContentRequest.contents[{index}].parts: contents.parts must not be empty."
            ))?;
        let calls: Vec<&Value> = parts.iter().filter_map(|p| p.get("functionCall")).collect();
        if role == "model" && !calls.is_empty() {
            let responses: Vec<&Value> = contents
                .get(index + 1)
                .and_then(|next| next.get("parts"))
                .and_then(Value::as_array)
                .map(|parts| {
                    parts
                        .iter()
                        .filter_map(|p| p.get("functionResponse"))
                        .collect()
                })
                .unwrap_or_default();
            if responses.len() != calls.len() {
                return Err(COUNT_MESSAGE.into());
            }
            for (call, response) in calls.iter().zip(&responses) {
                if call.get("name") != response.get("name") {
                    return Err(format!(
                        "function response name {} does not match the call {}",
                        response["name"], call["name"]
                    ));
                }
                if !call.get("args").is_some_and(Value::is_object)
                    || !response.get("response").is_some_and(Value::is_object)
                {
                    return Err("args and response must be objects".into());
                }
            }
        }
    }
    if model.starts_with("gemini-3") {
        check_current_turn(contents)?;
    }
    check_signatures(contents, model, issued)
}

/// What Gemini says when the counts differ.
pub const COUNT_MESSAGE: &str = "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.";

fn check_signatures(
    contents: &[Value],
    model: &str,
    issued: &[(String, Value)],
) -> Result<(), String> {
    let model_parts: Vec<&Value> = contents
        .iter()
        .filter(|c| c["role"] == "model")
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .collect();
    // Every signature sent is one the fake issued for this model (or the placeholder).
    for part in &model_parts {
        if let Some(signature) = part.get("thoughtSignature") {
            let known = signature == DUMMY_SIGNATURE
                || issued
                    .iter()
                    .any(|(m, p)| m == model && &p["thoughtSignature"] == signature);
            if !known {
                return Err(format!("Corrupted thought signature {signature}."));
            }
        }
    }
    // A call issued for this model without a signature comes back without one.
    for (_, original) in issued
        .iter()
        .filter(|(m, p)| m == model && p.get("thoughtSignature").is_none())
    {
        let call = &original["functionCall"];
        let placeholder = model_parts.iter().find(|p| {
            p.get("functionCall")
                .is_some_and(|sent| sent["name"] == call["name"] && sent["args"] == call["args"])
                && p.get("thoughtSignature").is_some()
        });
        if let Some(sent) = placeholder {
            return Err(format!(
                "the function call {call} was issued without a thought signature and came back with one: {sent}"
            ));
        }
    }
    // Every signature issued for this model comes back in its original part.
    for (_, original) in issued
        .iter()
        .filter(|(m, p)| m == model && p.get("thoughtSignature").is_some())
    {
        let signature = &original["thoughtSignature"];
        let Some(sent) = model_parts
            .iter()
            .find(|p| &p["thoughtSignature"] == signature)
        else {
            return Err(format!(
                "the thought signature {signature} was not sent back"
            ));
        };
        let same = if original.get("thought").is_some() {
            *sent == original
        } else if let Some(call) = original.get("functionCall") {
            sent.get("functionCall").is_some_and(|sent_call| {
                sent_call["name"] == call["name"] && sent_call["args"] == call["args"]
            })
        } else {
            sent.get("functionCall").is_none() && sent.get("text").is_some()
        };
        if !same {
            return Err(format!(
                "the thought signature {signature} came back in another part: {sent}"
            ));
        }
    }
    Ok(())
}

/// Gemini 3: in the current turn (after the last user turn with text), the first
/// `functionCall` of each model step has a signature.
fn check_current_turn(contents: &[Value]) -> Result<(), String> {
    let start = contents
        .iter()
        .rposition(|c| {
            c["role"] == "user"
                && c["parts"]
                    .as_array()
                    .is_some_and(|parts| parts.iter().any(|p| p.get("text").is_some()))
        })
        .unwrap_or(0);
    for (index, content) in contents.iter().enumerate().skip(start) {
        if content["role"] != "model" {
            continue;
        }
        let first_call = content["parts"]
            .as_array()
            .and_then(|parts| parts.iter().find(|p| p.get("functionCall").is_some()));
        if let Some(call) = first_call
            && call.get("thoughtSignature").is_none()
        {
            return Err(format!(
                "Function call is missing a thought_signature in functionCall parts. Additional data, function call `default_api:{}` , position {}.",
                call["functionCall"]["name"].as_str().unwrap_or(""),
                index + 1
            ));
        }
    }
    Ok(())
}

/// `parameters` in the OpenAPI subset.
fn check_schemas(body: &Value) -> Result<(), String> {
    let declarations = body
        .pointer("/tools/0/functionDeclarations")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for declaration in &declarations {
        match (
            declaration.get("parameters"),
            declaration.get("parametersJsonSchema"),
        ) {
            (Some(_), Some(_)) => {
                return Err("parameters and parametersJsonSchema are mutually exclusive".into());
            }
            (Some(schema), None) => openapi_schema(schema, "parameters")?,
            (None, Some(schema)) => {
                if schema.get("$schema").is_some() {
                    return Err("parametersJsonSchema: unsupported $schema".into());
                }
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn openapi_schema(schema: &Value, at: &str) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err(format!("{at}: a schema must be an object"));
    };
    for key in [
        "$schema",
        "$ref",
        "$defs",
        "definitions",
        "additionalProperties",
        "const",
        "oneOf",
        "allOf",
    ] {
        if object.contains_key(key) {
            return Err(format!(
                "Invalid JSON payload received. Unknown name \"{key}\" at '{at}': Cannot find field."
            ));
        }
    }
    match object.get("type") {
        None if object.contains_key("anyOf") => {}
        Some(Value::String(kind))
            if ["STRING", "NUMBER", "INTEGER", "BOOLEAN", "ARRAY", "OBJECT"]
                .contains(&kind.as_str()) => {}
        other => {
            return Err(format!("Invalid value at '{at}.type' ({other:?})"));
        }
    }
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            openapi_schema(property, &format!("{at}.properties[{name}]"))?;
        }
    }
    if let Some(items) = object.get("items") {
        openapi_schema(items, &format!("{at}.items"))?;
    }
    for (i, alternative) in object
        .get("anyOf")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        openapi_schema(alternative, &format!("{at}.anyOf[{i}]"))?;
    }
    Ok(())
}
