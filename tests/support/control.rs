//! A fake OpenAI server for the control tests (usage, hooks, rules, traces): it answers each
//! request with the next scripted reply in the real wire format — one `chat.completion` JSON
//! body, or SSE chunks ending with `[DONE]` when the request asks to stream — and records
//! every request body.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::tools::prelude::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One scripted reply: text, tool calls `(id, name, arguments)` and usage.
#[derive(Clone, Debug)]
pub struct Reply {
    pub text: Option<String>,
    pub calls: Vec<(String, String, String)>,
    /// `(prompt, completion, cached, reasoning)`.
    pub usage: (u64, u64, u64, u64),
}

impl Reply {
    pub fn text(text: &str) -> Self {
        Reply {
            text: Some(text.to_owned()),
            calls: Vec::new(),
            usage: (10, 5, 0, 0),
        }
    }

    pub fn calls(calls: &[(&str, &str, &str)]) -> Self {
        Reply {
            text: None,
            calls: calls
                .iter()
                .map(|(id, name, arguments)| {
                    (
                        (*id).to_owned(),
                        (*name).to_owned(),
                        (*arguments).to_owned(),
                    )
                })
                .collect(),
            usage: (10, 5, 0, 0),
        }
    }

    pub fn usage(mut self, prompt: u64, completion: u64, cached: u64, reasoning: u64) -> Self {
        self.usage = (prompt, completion, cached, reasoning);
        self
    }

    fn finish(&self) -> &'static str {
        if self.calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        }
    }

    fn wire_usage(&self) -> Value {
        let (prompt, completion, cached, reasoning) = self.usage;
        json!({"prompt_tokens": prompt, "completion_tokens": completion,
            "total_tokens": prompt.saturating_add(completion),
            "prompt_tokens_details": {"cached_tokens": cached},
            "completion_tokens_details": {"reasoning_tokens": reasoning}})
    }

    fn wire_calls(&self, indexed: bool) -> Vec<Value> {
        self.calls
            .iter()
            .enumerate()
            .map(|(index, (id, name, arguments))| {
                let mut call = json!({"id": id, "type": "function",
                    "function": {"name": name, "arguments": arguments}});
                if indexed {
                    call["index"] = json!(index);
                }
                call
            })
            .collect()
    }

    pub fn json(&self) -> String {
        let mut message = json!({"role": "assistant", "content": self.text});
        if !self.calls.is_empty() {
            message["tool_calls"] = json!(self.wire_calls(false));
        }
        json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish()}],
            "usage": self.wire_usage()})
        .to_string()
    }

    pub fn sse(&self) -> String {
        let chunk = |delta: Value, finish: Option<&str>| {
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
                "model": "fake-model", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
        };
        let mut chunks = vec![chunk(
            json!({"role": "assistant", "content": self.text}),
            None,
        )];
        if !self.calls.is_empty() {
            chunks.push(chunk(json!({"tool_calls": self.wire_calls(true)}), None));
        }
        chunks.push(chunk(json!({}), Some(self.finish())));
        chunks.push(
            json!({"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1,
            "model": "fake-model", "choices": [], "usage": self.wire_usage()}),
        );
        let mut body = String::new();
        for chunk in chunks {
            body.push_str(&format!("data: {chunk}\n\n"));
        }
        body.push_str("data: [DONE]\n\n");
        body
    }
}

/// The fake server: its script and what it received.
pub struct FakeModel {
    pub server: MockServer,
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Value>>>,
}

struct Responder {
    script: Arc<Mutex<VecDeque<Reply>>>,
    received: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let stream = body["stream"].as_bool().unwrap_or(false);
        self.received.lock().unwrap().push(body);
        match self.script.lock().unwrap().pop_front() {
            Some(reply) if stream => ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(reply.sse()),
            Some(reply) => ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .set_body_string(reply.json()),
            None => ResponseTemplate::new(400).set_body_json(
                json!({"error": {"message": "the script has no more replies", "type": "invalid_request_error"}}),
            ),
        }
    }
}

impl FakeModel {
    /// A server on 127.0.0.1 answering with `replies`, in order.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let server = MockServer::start().await;
        let script = Arc::new(Mutex::new(replies.into_iter().collect::<VecDeque<_>>()));
        let received = Arc::new(Mutex::new(Vec::new()));
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(Responder {
                script: script.clone(),
                received: received.clone(),
            })
            .mount(&server)
            .await;
        FakeModel {
            server,
            script,
            received,
        }
    }

    /// Add replies to the script.
    pub fn push(&self, reply: Reply) {
        self.script.lock().unwrap().push_back(reply);
    }

    /// The request bodies received so far.
    pub fn received(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }

    /// An `OpenAiClient` for this server.
    pub fn client(&self) -> OpenAiClient {
        OpenAiClient::new(
            OpenAiConfig::new(format!("{}/v1", self.server.uri())).with_api_key("test-key"),
        )
        .unwrap()
    }

    /// A conversation with this server under `config`.
    pub fn cycle(&self, config: CycleConfig) -> LlmCycle {
        LlmCycle::new(self.client(), config)
    }
}

/// Checks the history invariant: every assistant tool call is answered by exactly one `tool`
/// message, right after it, in call order.
pub fn assert_valid_history(messages: &[agcore::llm::OpenaiChatMessage]) {
    let value = serde_json::to_value(messages).unwrap();
    let messages = value.as_array().unwrap();
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        index += 1;
        let Some(calls) = message["tool_calls"].as_array() else {
            continue;
        };
        for call in calls {
            let answer = &messages[index];
            assert_eq!(
                answer["role"], "tool",
                "call {} unanswered in {value}",
                call["id"]
            );
            assert_eq!(
                answer["tool_call_id"], call["id"],
                "answers out of order in {value}"
            );
            index += 1;
        }
    }
}

/// `echo`: returns its `text` argument; counts its runs. `fail`: always fails.
pub struct Echo {
    pub runs: Arc<std::sync::atomic::AtomicUsize>,
}

#[async_trait]
impl BaseTool for Echo {
    fn name(&self) -> &str {
        "echo"
    }
    fn description(&self) -> &str {
        "Echo a text"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(json!({"echo": args["text"]}))
    }
}

/// Always fails.
pub struct Fail;

#[async_trait]
impl BaseTool for Fail {
    fn name(&self) -> &str {
        "fail"
    }
    fn description(&self) -> &str {
        "Always fails"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Err(ToolError::ExecutionFailed(
            "fail".into(),
            "it always fails".into(),
        ))
    }
}

/// A registry with `echo` and `fail`; the counter of `echo` runs.
pub fn registry() -> (ToolRegistry, Arc<std::sync::atomic::AtomicUsize>) {
    let runs = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry
        .register(Arc::new(Echo { runs: runs.clone() }))
        .unwrap();
    registry.register(Arc::new(Fail)).unwrap();
    (registry, runs)
}
