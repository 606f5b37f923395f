//! What a journaled tool turn costs in commits (a SQLite store that counts its appends): two
//! per turn of one call — the history before the request, the run state with the call's start
//! before the tool — because the batch's last answer rides with the next history; a call that
//! finishes while another still runs commits its answer at once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::{RunOutcome, RunRequest};
use agcore::session::{
    LeaseFence, LockMode, Result as StoreResult, Session, SessionJournal, SessionLease,
    SessionStore, SessionSummary, SqliteStore, Step,
};
use agcore::tools::prelude::*;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// A store that counts its commits.
struct Counting {
    inner: SqliteStore,
    commits: AtomicUsize,
}

#[async_trait]
impl SessionStore for Counting {
    async fn load(&self, name: &str) -> StoreResult<Option<Session>> {
        self.inner.load(name).await
    }
    async fn append(&self, name: &str, expected: u64, steps: &[Step]) -> StoreResult<()> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.append(name, expected, steps).await
    }
    async fn append_fenced(
        &self,
        fence: &LeaseFence,
        expected: u64,
        steps: &[Step],
    ) -> StoreResult<()> {
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.inner.append_fenced(fence, expected, steps).await
    }
    async fn list(&self) -> StoreResult<Vec<SessionSummary>> {
        self.inner.list().await
    }
    async fn delete(&self, name: &str) -> StoreResult<bool> {
        self.inner.delete(name).await
    }
    async fn lock(&self, name: &str, mode: LockMode) -> StoreResult<SessionLease> {
        self.inner.lock(name, mode).await
    }
}

/// Calls `calls` tools per turn for `turns` turns (ids `call_<turn>_<i>`), then answers.
struct Script {
    turns: usize,
    calls: usize,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let answered = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "tool")
            .count();
        let turn = answered / self.calls;
        let message = if turn < self.turns {
            let calls: Vec<Value> = (0..self.calls)
                .map(|i| {
                    json!({"id": format!("call_{turn}_{i}"), "type": "function",
                                "function": {"name": "noop",
                                             "arguments": json!({"turn": turn, "i": i}).to_string()}})
                })
                .collect();
            json!({"role": "assistant", "content": null, "tool_calls": calls})
        } else {
            json!({"role": "assistant", "content": "done"})
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "r", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        }))
    }
}

struct Noop;

#[async_trait]
impl BaseTool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"turn": {"type": "integer"}, "i": {"type": "integer"}}})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("ok"))
    }
}

/// The commits of one journaled run of `turns` tool turns of `calls` calls each.
async fn commits(turns: usize, calls: usize) -> usize {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Script { turns, calls })
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Counting {
        inner: SqliteStore::open(dir.path().join("s.db")).await.unwrap(),
        commits: AtomicUsize::new(0),
    });
    let lease = store.lock("cost", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "cost").await.unwrap();
    let journal = journal.with_lease(&lease);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("m"));
    let outcome = cycle
        .run_with(
            RunRequest::prompt("go")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "done"));
    // What was committed is the whole conversation.
    let (_, restored) = SessionJournal::open(store.clone(), "cost").await.unwrap();
    assert!(restored.run.is_none());
    assert_eq!(restored.history, cycle.messages());
    store.commits.load(Ordering::SeqCst)
}

#[tokio::test]
async fn a_journaled_tool_turn_of_one_call_costs_two_commits() {
    // Each tool turn: the history before its request and the run state; then the history
    // before the last request and the final one.
    let (three, six) = (commits(3, 1).await, commits(6, 1).await);
    assert_eq!(three, 2 * 3 + 2);
    assert_eq!(six - three, 2 * 3, "two per tool turn");
}

#[tokio::test]
async fn in_a_batch_only_the_last_answer_waits_for_the_next_commit() {
    // Three calls a turn: the history, the run state, the two answers that finished while
    // another call still ran.
    let (two, four) = (commits(2, 3).await, commits(4, 3).await);
    assert_eq!(four - two, 2 * 4);
}
