//! A fake OpenAI chat-completions server for a team of agents: each request is routed to the
//! agent whose marker its system prompt holds, answered from that agent's own script, and
//! CHECKED — exactly one agent's marker in the system prompt, and exactly the agent's tools
//! offered. A request that fails a check is answered with HTTP 400 (so the run fails loudly)
//! and recorded; [`TeamModel::assert_clean`] fails the test on any.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use super::Reply;

/// One agent as the fake knows it.
#[derive(Debug, Clone)]
pub struct AgentScript {
    /// The agent's name (for the log).
    pub name: String,
    /// Text only this agent's system prompt holds (put it in its instructions).
    pub marker: String,
    /// The tool names it must be offered, no more, no fewer.
    pub tools: BTreeSet<String>,
    /// Its replies, in order (the last repeats).
    pub replies: Vec<Reply>,
}

impl AgentScript {
    /// An agent `name` whose instructions hold `marker`, offered exactly `tools`.
    pub fn new(name: &str, marker: &str, tools: &[&str], replies: Vec<Reply>) -> Self {
        AgentScript {
            name: name.to_owned(),
            marker: marker.to_owned(),
            tools: tools.iter().map(|tool| (*tool).to_owned()).collect(),
            replies,
        }
    }
}

/// What the fake saw.
#[derive(Debug, Default)]
struct Seen {
    /// Replies given so far, by agent.
    next: HashMap<String, usize>,
    /// Every request: the agent it was routed to, and its body.
    requests: Vec<(String, Value)>,
    /// Every failed check.
    violations: Vec<String>,
}

struct Router {
    agents: Vec<AgentScript>,
    seen: Arc<Mutex<Seen>>,
}

/// The system prompt of a chat-completions body (string or text parts).
pub fn system_prompt(body: &Value) -> String {
    let Some(messages) = body["messages"].as_array() else {
        return String::new();
    };
    messages
        .iter()
        .filter(|message| message["role"] == "system" || message["role"] == "developer")
        .map(|message| match &message["content"] {
            Value::String(text) => text.clone(),
            Value::Array(parts) => parts
                .iter()
                .filter_map(|part| part["text"].as_str())
                .collect::<Vec<_>>()
                .join(""),
            _ => String::new(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names of the tools a body offers.
pub fn offered_tools(body: &Value) -> BTreeSet<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .filter_map(|tool| tool["function"]["name"].as_str())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

impl Respond for Router {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let system = system_prompt(&body);
        let matching: Vec<&AgentScript> = self
            .agents
            .iter()
            .filter(|agent| system.contains(&agent.marker))
            .collect();
        let mut seen = self.seen.lock().unwrap();
        let [agent] = matching.as_slice() else {
            let names: Vec<&str> = matching.iter().map(|agent| agent.name.as_str()).collect();
            let violation =
                format!("a request for {names:?} (one agent expected); system prompt: {system:?}");
            seen.violations.push(violation.clone());
            seen.requests.push(("?".to_owned(), body));
            return reject(&violation);
        };
        seen.requests.push((agent.name.clone(), body.clone()));
        let offered = offered_tools(&body);
        if offered != agent.tools {
            let violation = format!(
                "agent {} was offered {offered:?}, expected {:?}",
                agent.name, agent.tools
            );
            seen.violations.push(violation.clone());
            return reject(&violation);
        }
        let index = seen.next.entry(agent.name.clone()).or_default();
        let reply = agent
            .replies
            .get(*index)
            .or(agent.replies.last())
            .cloned()
            .unwrap_or_else(|| Reply::text("(no script)"));
        *index += 1;
        super::render(&reply, body["stream"].as_bool().unwrap_or(false))
    }
}

fn reject(violation: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(serde_json::json!({"error": {
        "message": format!("the team fake refused this request: {violation}"),
        "type": "invalid_request_error", "code": null}}))
}

/// The fake server, and what it saw.
pub struct TeamModel {
    /// The server (`support::base_url(&model.server)` for `--base-url`).
    pub server: MockServer,
    seen: Arc<Mutex<Seen>>,
}

impl TeamModel {
    /// Start a server for `agents`.
    pub async fn start(agents: Vec<AgentScript>) -> Self {
        let server = MockServer::start().await;
        let seen = Arc::new(Mutex::new(Seen::default()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Router {
                agents,
                seen: seen.clone(),
            })
            .mount(&server)
            .await;
        TeamModel { server, seen }
    }

    /// `--base-url` of the server.
    pub fn base_url(&self) -> String {
        super::base_url(&self.server)
    }

    /// The bodies of the requests routed to `agent`, in order.
    pub fn requests_of(&self, agent: &str) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .requests
            .iter()
            .filter(|(name, _)| name == agent)
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// The agents the requests went to, in order.
    pub fn routed(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .requests
            .iter()
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Fail when any request failed a check.
    pub fn assert_clean(&self) {
        let seen = self.seen.lock().unwrap();
        assert!(
            seen.violations.is_empty(),
            "the team fake refused requests: {:#?}",
            seen.violations
        );
    }
}
