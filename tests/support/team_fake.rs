//! A fake chat-completions server for teams of agents: each request is routed by its system
//! prompt to that agent's script (agents' instructions start with `AGENT <name>.`), so
//! concurrent children get their own replies whatever order their requests arrive in. Every
//! request body is recorded with its agent, and checked like a real server would: each
//! assistant tool call answered by one `tool` message with its id before the next message;
//! a broken rule is a 400, like the API.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

pub use super::control::Reply;

/// The instructions of agent `name` as the fake recognises them.
pub fn instructions(name: &str) -> String {
    format!("AGENT {name}. You are the {name} agent.")
}

/// The agent a request is for: from `AGENT <name>.` at the start of its system prompt.
pub fn agent_of(body: &Value) -> String {
    let system = body["messages"][0]["content"].as_str().unwrap_or_default();
    system
        .strip_prefix("AGENT ")
        .and_then(|rest| rest.split_once('.'))
        .map_or_else(|| "(none)".to_owned(), |(name, _)| name.to_owned())
}

/// The tool names a request offers.
pub fn tools_offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

/// `(tool_call_id, content)` of every tool message of a request.
pub fn tool_answers(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap_or_default().to_owned(),
                m["content"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// The content of a request's last user message.
pub fn last_user(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap_or_default()
        .to_owned()
}

/// What a real server checks of the history: every tool call answered right after its
/// assistant message, by id, and no tool message without its call.
fn wire_problem(body: &Value) -> Option<String> {
    let messages = body["messages"].as_array()?;
    let mut open: Vec<String> = Vec::new();
    for message in messages {
        match message["role"].as_str() {
            Some("tool") => {
                let id = message["tool_call_id"].as_str().unwrap_or_default();
                match open.iter().position(|o| o == id) {
                    Some(i) => {
                        open.remove(i);
                    }
                    None => return Some(format!("tool message for unknown call {id}")),
                }
            }
            _ if !open.is_empty() => return Some(format!("calls {open:?} not answered")),
            Some("assistant") => {
                open = message["tool_calls"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|c| c["id"].as_str().map(str::to_owned))
                    .collect();
            }
            _ => {}
        }
    }
    (!open.is_empty()).then(|| format!("calls {open:?} not answered"))
}

type Scripts = Arc<Mutex<HashMap<String, VecDeque<Reply>>>>;

/// The server: a script per agent, and what it received as `(agent, body)`.
pub struct TeamFake {
    pub server: MockServer,
    scripts: Scripts,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

struct Responder {
    scripts: Scripts,
    received: Arc<Mutex<Vec<(String, Value)>>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let agent = agent_of(&body);
        let stream = body["stream"].as_bool().unwrap_or(false);
        self.received
            .lock()
            .unwrap()
            .push((agent.clone(), body.clone()));
        if let Some(problem) = wire_problem(&body) {
            return ResponseTemplate::new(400).set_body_json(
                json!({"error": {"message": problem, "type": "invalid_request_error"}}),
            );
        }
        let next = self
            .scripts
            .lock()
            .unwrap()
            .get_mut(&agent)
            .and_then(VecDeque::pop_front);
        match next {
            Some(reply) if stream => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(reply.sse()),
            Some(reply) => ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(reply.json()),
            None => ResponseTemplate::new(400).set_body_json(json!({"error": {
                "message": format!("no more replies for agent {agent}"),
                "type": "invalid_request_error"}})),
        }
    }
}

impl TeamFake {
    /// A server on 127.0.0.1 with a script per agent.
    pub async fn start(scripts: Vec<(&str, Vec<Reply>)>) -> Self {
        let server = MockServer::start().await;
        let scripts: Scripts = Arc::new(Mutex::new(
            scripts
                .into_iter()
                .map(|(agent, replies)| (agent.to_owned(), replies.into_iter().collect()))
                .collect(),
        ));
        let received = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder {
                scripts: scripts.clone(),
                received: received.clone(),
            })
            .mount(&server)
            .await;
        TeamFake {
            server,
            scripts,
            received,
        }
    }

    /// Add a reply to `agent`'s script.
    pub fn push(&self, agent: &str, reply: Reply) {
        self.scripts
            .lock()
            .unwrap()
            .entry(agent.to_owned())
            .or_default()
            .push_back(reply);
    }

    /// Every request so far, with its agent.
    pub fn received(&self) -> Vec<(String, Value)> {
        self.received.lock().unwrap().clone()
    }

    /// The requests of `agent`.
    pub fn of(&self, agent: &str) -> Vec<Value> {
        self.received()
            .into_iter()
            .filter(|(a, _)| a == agent)
            .map(|(_, body)| body)
            .collect()
    }

    /// A client of this server.
    pub fn client(&self) -> OpenAiClient {
        OpenAiClient::new(
            OpenAiConfig::new(format!("{}/v1", self.server.uri())).with_api_key("test-key"),
        )
        .unwrap()
    }

    /// A conversation with this server (model `fake-model`).
    pub fn cycle(&self) -> LlmCycle {
        LlmCycle::new(self.client(), CycleConfig::new("fake-model"))
    }
}
