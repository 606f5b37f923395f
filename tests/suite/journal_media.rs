//! Media in the per-call journal: a run stopped mid-turn after an MCP tool returned an image is
//! restored from its session journal, and the model gets the same image parts (and the same
//! tool message) as it would have without the stop. Against the demo MCP server (`image`,
//! `hang`) and a local fake OpenAI server.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::{RunOutcome, RunRequest};
use agcore::session::{SessionJournal, SessionStore, SqliteStore};
use agcore::tools::{McpClient, ToolRegistry};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Scripted JSON replies in the OpenAI wire format; every request body kept.
#[derive(Clone, Default)]
struct Script {
    replies: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        self.requests
            .lock()
            .unwrap()
            .push(serde_json::from_slice(&request.body).unwrap());
        let mut replies = self.replies.lock().unwrap();
        assert!(!replies.is_empty(), "more requests than scripted replies");
        ResponseTemplate::new(200).set_body_json(replies.remove(0))
    }
}

fn reply(message: Value, finish: &str) -> Value {
    json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

async fn model_server() -> (MockServer, Script) {
    let server = MockServer::start().await;
    let script = Script::default();
    *script.replies.lock().unwrap() = vec![
        reply(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_img", "type": "function", "function": {"name": "image", "arguments": "{}"}},
                {"id": "call_hang", "type": "function", "function": {"name": "hang", "arguments": "{}"}}
            ]}),
            "tool_calls",
        ),
        reply(json!({"role": "assistant", "content": "a pixel"}), "stop"),
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(script.clone())
        .mount(&server)
        .await;
    (server, script)
}

/// A cycle on the fake server for a model that takes images, as a new process builds it.
fn cycle(server: &MockServer) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut config = CycleConfig::new("m");
    config.accepts_images = true;
    LlmCycle::new(client, config)
}

async fn demo_tools() -> ToolRegistry {
    let mut client = McpClient::new("demo", support::mcp::demo(&["--test-tools"]));
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    registry
}

/// Waits until the store holds `image`'s answer (both calls' starts ride with the run state
/// written before the batch): from the store's point of view the process dies right then.
async fn until_image_finished(store: &dyn SessionStore) {
    loop {
        let session = store.load("media").await.unwrap();
        let kinds: Vec<&str> = session
            .iter()
            .flat_map(|s| &s.steps)
            .map(|s| s.kind.as_str())
            .collect();
        if kinds.contains(&"call_finished") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn image_survives_a_restore() {
    let (server, script) = model_server().await;
    let registry = demo_tools().await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let _lease = store
        .lock("media", agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "media").await.unwrap();
    {
        let mut first = cycle(&server);
        let run = first.run_with(
            RunRequest::prompt("show me")
                .with_tools(&registry)
                .with_journal(&journal),
        );
        tokio::select! {
            outcome = run => panic!("the run ended: {outcome:?}"),
            () = until_image_finished(store.as_ref()) => {}
        }
    }

    // A new process: the run restored from the store.
    let (journal, restored) = SessionJournal::open(store.clone(), "media").await.unwrap();
    let state = restored.run.expect("a run in progress");
    let mut second = cycle(&server);
    let outcome = second
        .run_with(
            RunRequest::from_state(state)
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "a pixel"));

    let requests = script.requests.lock().unwrap();
    let messages = requests[1]["messages"].as_array().unwrap();
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "tool", "user"],
        "the image message follows the tool messages: {messages:?}"
    );
    let image_answer = messages[2]["content"].as_str().unwrap();
    assert!(
        image_answer.starts_with("a pixel\n[image: image/png")
            && image_answer.ends_with("they follow in the next user message]"),
        "{image_answer}"
    );
    let parts = messages[4]["content"].as_array().unwrap();
    assert!(
        parts[0]["text"].as_str().unwrap().contains("call_img"),
        "{parts:?}"
    );
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"),
        "{parts:?}"
    );
    // The history kept has the image message where it was sent.
    assert_eq!(
        serde_json::to_value(&second.messages()[4]).unwrap(),
        messages[4]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restored_run_gives_the_model_the_same_image_parts() {
    // Built (when stale) before the clock starts.
    support::mcp::demo_server();
    tokio::time::timeout(Duration::from_secs(60), image_survives_a_restore())
        .await
        .unwrap();
}
