//! A local OpenAI Responses server (127.0.0.1) that serves recorded replies and checks each
//! request the way the real API does for `store: false`, answering 400 with the API's own
//! error text when a rule is broken:
//!
//! - every `reasoning` item sent is one this server issued, byte for byte (its JSON text, with
//!   `encrypted_content`, appears verbatim in the body), and it needs
//!   `include: ["reasoning.encrypted_content"]`-style statelessness: `store` is `false`;
//! - a reasoning item is immediately followed by the item that followed it in the reply;
//! - a `function_call` or `message` item sent with the `id` this server gave it comes after
//!   the reasoning item that preceded it in the reply;
//! - every `function_call_output` answers an earlier `function_call` by `call_id`, and every
//!   `function_call` is answered.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A fixture of `tests/fixtures/providers/openai_responses/`.
pub fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/providers/openai_responses/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// What the server answers to one request.
pub enum Answer {
    /// A recorded reply: the stream fixture when the request streams, else the whole one.
    Reply {
        /// The `.sse` fixture.
        stream: &'static str,
        /// The `.json` fixture.
        whole: &'static str,
    },
    /// Anything else (an error status, a broken stream).
    Raw(ResponseTemplate),
}

/// What the server answers to request `n` (0-based), given its body.
pub type Script = dyn Fn(&Value, usize) -> Answer + Send + Sync;

/// The items of a reply as served: the `output_item.done` items of a stream, or `output`.
fn served_items(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    if let Ok(whole) = serde_json::from_str::<Value>(&text) {
        return whole["output"].as_array().cloned().unwrap_or_default();
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data: "))
        .filter_map(|data| serde_json::from_str::<Value>(data).ok())
        .filter(|event| event["type"] == "response.output_item.done")
        .map(|event| event["item"].clone())
        .collect()
}

/// What the server issued: each reasoning item's exact text and the item that followed it,
/// and for each item id the reasoning item it needs.
#[derive(Default)]
struct Issued {
    reasoning: HashMap<String, (String, Option<Value>)>,
    /// Each hosted tool item (`web_search_call`, ...) as issued, by id.
    hosted: HashMap<String, String>,
    needs: HashMap<String, String>,
}

impl Issued {
    fn learn(&mut self, items: &[Value]) {
        let mut last_reasoning: Option<String> = None;
        for (index, item) in items.iter().enumerate() {
            let id = item["id"].as_str().unwrap_or_default().to_owned();
            if item["type"]
                .as_str()
                .is_some_and(|kind| kind.ends_with("_call") && kind != "function_call")
            {
                self.hosted
                    .insert(id.clone(), serde_json::to_string(item).unwrap());
            }
            if item["type"] == "reasoning" {
                let text = serde_json::to_string(item).unwrap();
                self.reasoning
                    .insert(id.clone(), (text, items.get(index + 1).cloned()));
                last_reasoning = Some(id);
            } else if let Some(reasoning) = &last_reasoning {
                self.needs.insert(id, reasoning.clone());
            }
        }
    }

    /// The API's 400 for the first broken rule of `body` (its raw text `raw`), if any.
    fn check(&self, body: &Value, raw: &str) -> Option<String> {
        let input = body["input"].as_array()?;
        let stateless = body["store"] == json!(false);
        let mut seen_reasoning = HashSet::new();
        let mut calls = HashSet::new();
        let mut answered = HashSet::new();
        for (index, item) in input.iter().enumerate() {
            let kind = item["type"].as_str().unwrap_or("message");
            let id = item["id"].as_str();
            match kind {
                "reasoning" => {
                    let id = id.unwrap_or_default();
                    let Some((text, next)) = self.reasoning.get(id) else {
                        return Some(format!(
                            "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
                        ));
                    };
                    if !stateless || item.get("encrypted_content").is_none() {
                        return Some(format!(
                            "Item with id '{id}' not found. Items are not persisted when `store` is set to false. Try again with `store` set to true, or remove this item from your input."
                        ));
                    }
                    if !raw.contains(text.as_str()) {
                        return Some(format!(
                            "The encrypted content for item {id} could not be verified. Reason: Encrypted content could not be decrypted or parsed."
                        ));
                    }
                    if let Some(next) = next {
                        let following = input.get(index + 1);
                        let same = following.is_some_and(|following| {
                            following["type"] == next["type"]
                                && match next["type"].as_str() {
                                    Some("function_call") => {
                                        following["call_id"] == next["call_id"]
                                    }
                                    _ => following.get("id").is_none_or(|fid| *fid == next["id"]),
                                }
                        });
                        if !same {
                            return Some(format!(
                                "Item '{id}' of type 'reasoning' was provided without its required following item."
                            ));
                        }
                    }
                    seen_reasoning.insert(id.to_owned());
                }
                "function_call" | "message" => {
                    if let Some(id) = id
                        && let Some(reasoning) = self.needs.get(id)
                        && !seen_reasoning.contains(reasoning)
                    {
                        return Some(format!(
                            "Item '{id}' of type '{kind}' was provided without its required 'reasoning' item: '{reasoning}'."
                        ));
                    }
                    if kind == "function_call" {
                        calls.insert(item["call_id"].as_str().unwrap_or_default().to_owned());
                    }
                }
                hosted if hosted.ends_with("_call") => {
                    let id = id.unwrap_or_default();
                    let issued = self.hosted.get(id);
                    if !issued.is_some_and(|text| raw.contains(text.as_str())) {
                        return Some(format!(
                            "Item with id '{id}' not found or not as it was issued."
                        ));
                    }
                }
                "function_call_output" => {
                    let call_id = item["call_id"].as_str().unwrap_or_default();
                    if !calls.contains(call_id) {
                        return Some(format!(
                            "No tool call found for function call output with call_id {call_id}."
                        ));
                    }
                    answered.insert(call_id.to_owned());
                }
                _ => {}
            }
        }
        calls
            .difference(&answered)
            .next()
            .map(|call_id| format!("No tool output found for function call {call_id}."))
    }
}

/// The 400 body the API sends for `message`.
pub fn invalid_request(message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!({"error": {
        "message": message, "type": "invalid_request_error", "param": "input", "code": null
    }}))
}

struct Checking {
    script: Box<Script>,
    received: Arc<Mutex<Vec<Value>>>,
    rejected: Arc<Mutex<Vec<String>>>,
    issued: Arc<Mutex<Issued>>,
}

impl Respond for Checking {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let raw = String::from_utf8_lossy(&request.body).into_owned();
        let body: Value = serde_json::from_str(&raw).unwrap_or(Value::Null);
        let n = {
            let mut received = self.received.lock().unwrap();
            received.push(body.clone());
            received.len() - 1
        };
        if let Some(message) = self.issued.lock().unwrap().check(&body, &raw) {
            self.rejected.lock().unwrap().push(message.clone());
            return invalid_request(&message);
        }
        match (self.script)(&body, n) {
            Answer::Reply { stream, whole } => {
                let streaming = body["stream"] == json!(true);
                let served = fixture(if streaming { stream } else { whole });
                self.issued
                    .lock()
                    .unwrap()
                    .learn(&served_items(served.as_bytes()));
                let mime = if streaming {
                    "text/event-stream"
                } else {
                    "application/json"
                };
                ResponseTemplate::new(200).set_body_raw(served, mime)
            }
            Answer::Raw(template) => template,
        }
    }
}

/// The server: `POST /v1/responses` checked, then answered by the script.
pub struct ResponsesFake {
    /// The mock server (its `uri()` + `/v1` is the base URL).
    pub server: MockServer,
    received: Arc<Mutex<Vec<Value>>>,
    rejected: Arc<Mutex<Vec<String>>>,
}

impl ResponsesFake {
    /// Start a server answering with `script` after the checks.
    pub async fn start(script: impl Fn(&Value, usize) -> Answer + Send + Sync + 'static) -> Self {
        let server = MockServer::start().await;
        let received = Arc::new(Mutex::new(Vec::new()));
        let rejected = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/responses"))
            .respond_with(Checking {
                script: Box::new(script),
                received: received.clone(),
                rejected: rejected.clone(),
                issued: Arc::new(Mutex::new(Issued::default())),
            })
            .mount(&server)
            .await;
        ResponsesFake {
            server,
            received,
            rejected,
        }
    }

    /// The base URL (`http://127.0.0.1:PORT/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.uri())
    }

    /// Every request body, in order.
    pub fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }

    /// The errors of the requests the checks rejected.
    pub fn rejected(&self) -> Vec<String> {
        self.rejected.lock().unwrap().clone()
    }
}
