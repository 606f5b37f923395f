//! Durable runs (issue 11, item 4) through `OpenAiClient` against a local fake OpenAI server:
//! a deferred approval suspends the run; its state (JSON) is continued with decisions by another
//! cycle (another process, as far as the run can tell); a run stopped mid-turn is restored from
//! its session journal (SQLite and PostgreSQL) without running a finished call again; a journal
//! that fails stops the run before the next effect.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, LlmError, OpenAiClient, OpenAiConfig, OpenaiChatMessage};
use agcore::run::{
    Decision, JournalEntry, JournalError, RunJournal, RunOutcome, RunRequest, RunState,
};
use agcore::session::{PostgresStore, SessionJournal, SessionStore, SqliteStore};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, DeferAll};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

// ---------------------------------------------------------------------------------------------
// The fake server: scripted JSON replies in the OpenAI wire format, every request recorded.

#[derive(Clone, Default)]
struct Script {
    replies: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        check_wire_valid(&body["messages"]);
        self.requests.lock().unwrap().push(body);
        let mut replies = self.replies.lock().unwrap();
        assert!(!replies.is_empty(), "more requests than scripted replies");
        ResponseTemplate::new(200).set_body_json(replies.remove(0))
    }
}

/// Every assistant tool call is answered by exactly one `tool` message right after it.
fn check_wire_valid(messages: &Value) {
    let messages = messages.as_array().unwrap();
    let mut i = 0;
    while i < messages.len() {
        let calls = messages[i]["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        i += 1;
        for call in &calls {
            let answer = &messages[i];
            assert_eq!(
                answer["role"], "tool",
                "call {call} unanswered: {messages:?}"
            );
            assert_eq!(answer["tool_call_id"], call["id"], "{messages:?}");
            assert!(
                answer.get("is_error").is_none(),
                "is_error sent on the wire"
            );
            i += 1;
        }
    }
}

fn calls_reply(calls: &[(&str, &str)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": "{}"}}))
        .collect();
    json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": calls}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

fn text_reply(text: &str) -> Value {
    json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": text}}],
        "usage": {"prompt_tokens": 20, "completion_tokens": 2, "total_tokens": 22}
    })
}

async fn server(replies: Vec<Value>) -> (MockServer, Script) {
    let server = MockServer::start().await;
    let script = Script::default();
    *script.replies.lock().unwrap() = replies;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(script.clone())
        .mount(&server)
        .await;
    (server, script)
}

/// A new cycle on the fake server, as a new process would build it.
fn cycle(server: &MockServer) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    LlmCycle::new(client, CycleConfig::new("m"))
}

// ---------------------------------------------------------------------------------------------
// Tools that count their runs.

struct Counting {
    name: &'static str,
    permissions: Vec<Permission>,
    runs: AtomicUsize,
    /// Hang on the first run (a process that dies while the tool runs).
    hang: bool,
}

impl Counting {
    fn new(name: &'static str, permissions: Vec<Permission>) -> Arc<Self> {
        Arc::new(Counting {
            name,
            permissions,
            runs: AtomicUsize::new(0),
            hang: false,
        })
    }

    fn runs(&self) -> usize {
        self.runs.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl BaseTool for Counting {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "counts its runs"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        self.permissions.clone()
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        let run = self.runs.fetch_add(1, Ordering::SeqCst);
        if self.hang && run == 0 {
            std::future::pending::<()>().await;
        }
        Ok(json!(format!("{} done", self.name)))
    }
}

/// `lookup` (read, no approval) and `deploy` (write, asked; the approver defers).
fn registry(lookup: &Arc<Counting>, deploy: &Arc<Counting>) -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
        .with_approver(Arc::new(DeferAll));
    registry.register(lookup.clone()).unwrap();
    registry.register(deploy.clone()).unwrap();
    registry
}

fn tools() -> (Arc<Counting>, Arc<Counting>) {
    (
        Counting::new("lookup", vec![Permission::Read]),
        Counting::new("deploy", vec![Permission::Write]),
    )
}

fn tool_answers(body: &Value) -> Vec<(String, String)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap().to_owned(),
                m["content"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Suspend and resume.

/// Suspends on `deploy`; returns the state as JSON text, as a process would store it.
async fn suspend(server: &MockServer, lookup: &Arc<Counting>, deploy: &Arc<Counting>) -> String {
    let registry = registry(lookup, deploy);
    let mut first = cycle(server);
    let outcome = first
        .run_with(RunRequest::prompt("ship it").with_tools(&registry))
        .await
        .unwrap();
    let RunOutcome::Suspended(suspension) = outcome else {
        panic!("expected a suspension: {outcome:?}")
    };
    assert_eq!(suspension.requests().len(), 1);
    let request = &suspension.requests()[0];
    assert_eq!(
        (request.tool.as_str(), request.call_id.as_str()),
        ("deploy", "call_d")
    );
    assert_eq!(request.permissions, [Permission::Write]);
    // The call that needed no approval ran; the deferred one did not.
    assert_eq!((lookup.runs(), deploy.runs()), (1, 0));
    // The cycle keeps the committed history only (the suspended turn lives in the state).
    assert_eq!(first.messages().len(), 0);
    serde_json::to_string(suspension.state()).unwrap()
}

#[tokio::test]
async fn a_suspended_run_continues_in_another_cycle_with_an_approval() {
    let (server, script) = server(vec![
        calls_reply(&[("call_l", "lookup"), ("call_d", "deploy")]),
        text_reply("deployed"),
    ])
    .await;
    let (lookup, deploy) = tools();
    let saved = suspend(&server, &lookup, &deploy).await;

    // "Another process": a new cycle and registry, the state loaded from its JSON.
    let registry = registry(&lookup, &deploy);
    let state: RunState = serde_json::from_str(&saved).unwrap();
    let mut second = cycle(&server);
    let outcome = second
        .run_with(
            RunRequest::from_state(state)
                .with_decisions(vec![Decision::allow("call_d")])
                .with_tools(&registry),
        )
        .await
        .unwrap();
    let RunOutcome::Finished(reply) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(reply.text(), "deployed");
    // Each tool ran once: the finished call was not run again.
    assert_eq!((lookup.runs(), deploy.runs()), (1, 1));
    let requests = script.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        tool_answers(&requests[1]),
        [
            ("call_l".to_owned(), "lookup done".to_owned()),
            ("call_d".to_owned(), "deploy done".to_owned())
        ]
    );
    // The history: prompt, the turn, its two answers in call order, the answer.
    let roles: Vec<&str> = second
        .messages()
        .iter()
        .map(|m| match m {
            OpenaiChatMessage::User { .. } => "user",
            OpenaiChatMessage::Assistant { .. } => "assistant",
            OpenaiChatMessage::Tool { .. } => "tool",
            _ => "other",
        })
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "tool", "assistant"]);
}

#[tokio::test]
async fn a_denial_reaches_the_model_and_the_call_never_runs() {
    let (server, script) = server(vec![
        calls_reply(&[("call_l", "lookup"), ("call_d", "deploy")]),
        text_reply("ok, not deploying"),
    ])
    .await;
    let (lookup, deploy) = tools();
    let saved = suspend(&server, &lookup, &deploy).await;
    let registry = registry(&lookup, &deploy);
    let mut second = cycle(&server);
    let request = RunRequest::from_state(serde_json::from_str(&saved).unwrap())
        .with_decisions(vec![Decision::deny("call_d", Some("freeze week".into()))])
        .with_tools(&registry);
    let outcome = second.run_with(request).await.unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)));
    assert_eq!(deploy.runs(), 0);
    let requests = script.requests.lock().unwrap();
    let answers = tool_answers(&requests[1]);
    assert_eq!(answers[1].0, "call_d");
    assert!(
        answers[1]
            .1
            .contains("'deploy' was not approved: freeze week"),
        "{answers:?}"
    );
    // The denial is in the history as data too.
    assert!(second.messages().iter().any(|m| matches!(
        m,
        OpenaiChatMessage::Tool { tool_call_id, is_error: true, .. } if tool_call_id == "call_d"
    )));
}

#[tokio::test]
async fn resuming_without_a_decision_asks_the_approver_again_and_suspends_again() {
    let (server, script) = server(vec![calls_reply(&[
        ("call_l", "lookup"),
        ("call_d", "deploy"),
    ])])
    .await;
    let (lookup, deploy) = tools();
    let saved = suspend(&server, &lookup, &deploy).await;
    let registry = registry(&lookup, &deploy);
    let outcome = cycle(&server)
        .run_with(
            RunRequest::from_state(serde_json::from_str(&saved).unwrap()).with_tools(&registry),
        )
        .await
        .unwrap();
    let RunOutcome::Suspended(again) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(again.requests()[0].call_id, "call_d");
    assert_eq!(
        script.requests.lock().unwrap().len(),
        1,
        "no model request while suspended"
    );
    assert_eq!((lookup.runs(), deploy.runs()), (1, 0));
}

#[tokio::test]
async fn a_decision_on_a_call_that_does_not_wait_is_a_typed_error() {
    let (server, _script) = server(vec![calls_reply(&[
        ("call_l", "lookup"),
        ("call_d", "deploy"),
    ])])
    .await;
    let (lookup, deploy) = tools();
    let saved = suspend(&server, &lookup, &deploy).await;
    let registry = registry(&lookup, &deploy);
    let error = cycle(&server)
        .run_with(
            RunRequest::from_state(serde_json::from_str(&saved).unwrap())
                .with_decisions(vec![Decision::allow("call_l")])
                .with_tools(&registry),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::NotPending { call_id } if call_id == "call_l"),
        "{error}"
    );
}

#[tokio::test]
async fn the_designs_calls_cannot_wait_so_a_deferred_call_is_refused_with_a_reason() {
    let (server, script) = server(vec![
        calls_reply(&[("call_l", "lookup"), ("call_d", "deploy")]),
        text_reply("done"),
    ])
    .await;
    let (lookup, deploy) = tools();
    let registry = registry(&lookup, &deploy);
    let reply = cycle(&server)
        .submit_with_tools("ship it".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    assert_eq!(deploy.runs(), 0);
    let answers = tool_answers(&script.requests.lock().unwrap()[1]);
    assert!(
        answers[1]
            .1
            .contains("approval was deferred and this caller cannot wait"),
        "{answers:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// Journals.

/// Runs a two-call turn whose second call hangs, and drops the run once the first call is
/// journaled as finished — from the store's point of view, the process died right then (a
/// dropped run cannot write anything more). Then restores the run from the store in a new
/// cycle: the finished call is not run again, the unfinished one is answered as interrupted —
/// or, when `second_idempotent` counts its tool as idempotent, runs again — and the
/// conversation completes.
async fn crash_and_restore(store: Arc<dyn SessionStore>, second_idempotent: bool) {
    let (server, script) = server(vec![
        calls_reply(&[("call_a", "first"), ("call_b", "second")]),
        text_reply("recovered"),
    ])
    .await;
    let first = Counting::new("first", vec![]);
    let second = Arc::new(Counting {
        name: "second",
        permissions: vec![],
        runs: AtomicUsize::new(0),
        hang: true,
    });
    let idempotent = if second_idempotent {
        vec!["second".to_owned()]
    } else {
        vec![]
    };
    let mut registry = ToolRegistry::new().with_idempotent_tools(idempotent);
    registry.register(first.clone()).unwrap();
    registry.register(second.clone()).unwrap();
    registry.check_exposure().unwrap();
    assert_eq!(registry.is_idempotent("second"), second_idempotent);
    assert!(!registry.is_idempotent("first"));

    let _lease = store
        .lock("crash", agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "crash").await.unwrap();
    assert!(restored.history.is_empty() && restored.run.is_none());
    {
        let mut cycle = cycle(&server);
        let run = cycle.run_with(
            RunRequest::prompt("go")
                .with_tools(&registry)
                .with_journal(&journal),
        );
        let store = store.clone();
        let second_started = second.clone();
        let finished = async move {
            // Until the store holds the first call's answer and the second call's start.
            loop {
                let session = store.load("crash").await.unwrap();
                let kinds: Vec<&str> = session
                    .iter()
                    .flat_map(|s| &s.steps)
                    .map(|s| s.kind.as_str())
                    .collect();
                // The second call's start rides with the run state written before the batch.
                if kinds.contains(&"call_finished") && second_started.runs() == 1 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            outcome = run => panic!("the run ended: {outcome:?}"),
            () = finished => {}
        }
    }
    assert_eq!((first.runs(), second.runs()), (1, 1));

    // A new process: the run restored from the store.
    let (journal, restored) = SessionJournal::open(store.clone(), "crash").await.unwrap();
    let state = restored.run.expect("a run in progress");
    assert_eq!(state.messages, restored.history);
    let mut cycle = cycle(&server);
    let outcome = cycle
        .run_with(
            RunRequest::from_state(state)
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "recovered"));
    let answers = tool_answers(&script.requests.lock().unwrap()[1]);
    assert_eq!(answers[0], ("call_a".to_owned(), "first done".to_owned()));
    if second_idempotent {
        assert_eq!(
            (first.runs(), second.runs()),
            (1, 2),
            "only the cut-off call ran again"
        );
        assert_eq!(answers[1], ("call_b".to_owned(), "second done".to_owned()));
    } else {
        assert_eq!((first.runs(), second.runs()), (1, 1), "no call ran again");
        assert!(
            answers[1].1.contains("interrupted")
                && answers[1]
                    .1
                    .contains("whether it had any effect is unknown"),
            "{answers:?}"
        );
    }
    // What the store holds now is the finished conversation, and nothing in progress.
    let (_, stored) = SessionJournal::open(store, "crash").await.unwrap();
    assert!(stored.run.is_none());
    assert_eq!(stored.history, cycle.messages());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_crashed_run_resumes_without_running_a_finished_call_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        crash_and_restore(Arc::new(store), false),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_off_call_of_a_tool_configured_idempotent_runs_again_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        crash_and_restore(Arc::new(store), true),
    )
    .await
    .unwrap();
}

#[test]
fn an_unregistered_idempotent_tool_is_reported() {
    let config: agcore::tools::ToolsConfig =
        toml::from_str("idempotent = [\"first\", \"frist\"]").unwrap();
    let mut registry = config.apply(ToolRegistry::new()).unwrap();
    registry.register(Counting::new("first", vec![])).unwrap();
    assert!(registry.is_idempotent("first"));
    assert!(!registry.is_idempotent("frist"));
    let error = registry.check_exposure().unwrap_err().to_string();
    assert!(
        error.contains("idempotent tool 'frist' is not registered") && !error.contains("'first'"),
        "{error}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_crashed_run_resumes_without_running_a_finished_call_again() {
    let Some(url) = support::session::fresh_db("durable").await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    tokio::time::timeout(
        Duration::from_secs(60),
        crash_and_restore(Arc::new(store), false),
    )
    .await
    .unwrap();
}

/// A journal that fails from the `fail_at`-th record on, and remembers what it got.
struct FailingJournal {
    fail_at: usize,
    seen: Mutex<Vec<String>>,
}

#[async_trait]
impl RunJournal for FailingJournal {
    async fn record(&self, entry: JournalEntry<'_>) -> Result<(), JournalError> {
        let name = match entry {
            JournalEntry::History(_) => "history",
            JournalEntry::Run(_) => "run",
            JournalEntry::CallStarted { .. } => "call_started",
            JournalEntry::CallFinished { .. } => "call_finished",
            _ => "other",
        };
        let mut seen = self.seen.lock().unwrap();
        seen.push(name.to_owned());
        if seen.len() >= self.fail_at {
            return Err(JournalError::message("disk full"));
        }
        Ok(())
    }
}

#[tokio::test]
async fn a_journal_that_cannot_record_a_start_stops_the_run_before_the_tool_runs() {
    let (server, script) = server(vec![calls_reply(&[("call_a", "first")])]).await;
    let first = Counting::new("first", vec![]);
    let mut registry = ToolRegistry::new();
    registry.register(first.clone()).unwrap();
    // history, then the run state, which holds the call's start, fails.
    let journal = FailingJournal {
        fail_at: 2,
        seen: Mutex::default(),
    };
    let error = cycle(&server)
        .run_with(
            RunRequest::prompt("go")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&error, LlmError::Journal { message } if message.contains("disk full")),
        "{error}"
    );
    assert_eq!(first.runs(), 0, "the tool must not run unrecorded");
    assert_eq!(script.requests.lock().unwrap().len(), 1);
    assert_eq!(journal.seen.lock().unwrap()[..2], ["history", "run"]);
}

#[tokio::test]
async fn a_damaged_or_future_journal_is_a_clear_error_naming_the_step() {
    use agcore::session::{SessionError, Step};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let history = json!({"messages": [{"role": "user", "content": "hi"}]});
    let cases = [
        (
            "future",
            json!({"version": 3}),
            "run",
            "run state version 3 is not supported",
        ),
        ("unknown", json!({}), "teleport", "unknown to this agcore"),
        (
            "orphan",
            json!({"call_id": "c"}),
            "call_started",
            "outside a run",
        ),
    ];
    for (name, payload, kind, expected) in cases {
        store
            .append(
                name,
                0,
                &[
                    Step::new(0, "messages", history.clone()),
                    Step::new(1, kind, payload),
                ],
            )
            .await
            .unwrap();
        let error = SessionJournal::open(store.clone(), name).await.unwrap_err();
        assert!(
            matches!(&error, SessionError::BadRecord { seq: 1, .. }),
            "{error}"
        );
        assert!(error.to_string().contains(expected), "{name}: {error}");
    }
}

#[tokio::test]
async fn syncing_an_unchanged_history_closes_a_run_in_progress() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let (journal, _) = SessionJournal::open(store.clone(), "s").await.unwrap();
    let history = vec![OpenaiChatMessage::user_text("hi")];
    journal
        .record(JournalEntry::History(&history))
        .await
        .unwrap();
    let state = RunState::new(
        history.clone(),
        agcore::run::RunRules::of(&CycleConfig::new("m")),
        true,
    );
    journal
        .record(JournalEntry::Run(&state.without_messages()))
        .await
        .unwrap();
    let (_, restored) = SessionJournal::open(store.clone(), "s").await.unwrap();
    assert!(restored.run.is_some());
    // A cancelled run whose history did not change (e.g. Ctrl-C before any tool started).
    journal.sync_history(&history).await.unwrap();
    let (_, restored) = SessionJournal::open(store, "s").await.unwrap();
    assert!(restored.run.is_none(), "the run stayed open");
    assert_eq!(restored.history, history);
}
