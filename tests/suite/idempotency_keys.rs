//! Idempotency keys through `OpenAiClient` against a local fake OpenAI server: each call's key
//! is given before its tool starts, recorded with its start in the session journal, seen by
//! the tool ([`ToolContext`]), the same after a suspension and after a crash, sent to an MCP
//! server (the demo server, an rmcp server) in `_meta`, and named in an interrupted call's
//! answer.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::idempotency::MCP_META_KEY;
use agcore::run::{Decision, Phase, RunOutcome, RunRequest, RunState, idempotency_key};
use agcore::session::{LockMode, SessionJournal, SessionStore, SqliteStore};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, DeferAll, McpClient, ToolContext};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

#[derive(Clone, Default)]
struct Script {
    replies: Arc<Mutex<Vec<Value>>>,
    requests: Arc<Mutex<Vec<Value>>>,
}

impl Respond for Script {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        self.requests.lock().unwrap().push(body);
        let mut replies = self.replies.lock().unwrap();
        assert!(!replies.is_empty(), "more requests than scripted replies");
        ResponseTemplate::new(200).set_body_json(replies.remove(0))
    }
}

fn calls_reply(calls: &[(&str, &str)]) -> Value {
    let calls: Vec<(&str, &str, Value)> = calls
        .iter()
        .map(|(id, name)| (*id, *name, json!({})))
        .collect();
    calls_reply_with(&calls)
}

fn calls_reply_with(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
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

fn cycle(server: &MockServer) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    LlmCycle::new(client, CycleConfig::new("m"))
}

/// The tool answers of a request body, by call id.
fn tool_answer(body: &Value, call_id: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == call_id)
        .and_then(|m| m["content"].as_str())
        .unwrap_or_else(|| panic!("no answer to {call_id}: {body}"))
        .to_owned()
}

/// A tool that writes down the idempotency key of every run it makes ([`ToolContext`]), and
/// can hang on its first run (a process that dies while the tool runs).
struct Keyed {
    name: &'static str,
    permissions: Vec<Permission>,
    idempotent: bool,
    hang_first: bool,
    keys: Mutex<Vec<Option<String>>>,
}

impl Keyed {
    fn new(name: &'static str, permissions: Vec<Permission>) -> Arc<Self> {
        Arc::new(Keyed {
            name,
            permissions,
            idempotent: false,
            hang_first: false,
            keys: Mutex::new(Vec::new()),
        })
    }

    fn hanging(name: &'static str, idempotent: bool) -> Arc<Self> {
        Arc::new(Keyed {
            name,
            permissions: vec![],
            idempotent,
            hang_first: true,
            keys: Mutex::new(Vec::new()),
        })
    }

    fn keys(&self) -> Vec<Option<String>> {
        self.keys.lock().unwrap().clone()
    }
}

#[async_trait]
impl BaseTool for Keyed {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "writes down its key"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        self.permissions.clone()
    }
    fn idempotent(&self) -> bool {
        self.idempotent
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        let key = ToolContext::current().map(|context| context.idempotency_key().to_owned());
        let first = {
            let mut keys = self.keys.lock().unwrap();
            keys.push(key);
            keys.len() == 1
        };
        if self.hang_first && first {
            std::future::pending::<()>().await;
        }
        Ok(json!(format!("{} done", self.name)))
    }
}

/// The starts session `name`'s journal holds, in the order they were first recorded: call id
/// → the key recorded with it. A start rides with the run state written before its batch
/// (`started: true` there), or — for a call that may ask the approver — is a `call_started`
/// step of its own.
async fn started_keys(store: &dyn SessionStore, name: &str) -> Vec<(String, Option<String>)> {
    let Some(session) = store.load(name).await.unwrap() else {
        return Vec::new();
    };
    let mut starts: Vec<(String, Option<String>)> = Vec::new();
    let mut add = |id: &str, key: Option<&str>| {
        if !starts.iter().any(|(seen, _)| seen == id) {
            starts.push((id.to_owned(), key.map(str::to_owned)));
        }
    };
    for step in &session.steps {
        match step.kind.as_str() {
            "call_started" => add(
                step.payload["call_id"].as_str().unwrap(),
                step.payload["idempotency_key"].as_str(),
            ),
            "run" => {
                let calls = step.payload["phase"]["turn"]["calls"]
                    .as_array()
                    .cloned()
                    .unwrap_or_default();
                for call in calls.iter().filter(|c| c["started"] == true) {
                    add(
                        call["call"]["id"].as_str().unwrap(),
                        call["idempotency_key"].as_str(),
                    );
                }
            }
            _ => {}
        }
    }
    starts
}

/// The keys the state gives the calls of its tool turn, by call id.
fn state_keys(state: &RunState) -> Vec<(String, Option<String>)> {
    let turn = match &state.phase {
        Phase::AwaitingTools { turn } | Phase::AwaitingApproval { turn, .. } => turn,
        other => panic!("no tool turn: {other:?}"),
    };
    turn.calls
        .iter()
        .map(|call| (call.call.id.clone(), call.idempotency_key.clone()))
        .collect()
}

async fn sqlite_store(dir: &tempfile::TempDir) -> Arc<dyn SessionStore> {
    Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap())
}

#[tokio::test]
async fn a_call_keeps_its_key_across_a_suspension_and_the_journal_records_it_with_the_start() {
    let (server, script) = server(vec![
        calls_reply(&[("call_l", "lookup"), ("call_d", "deploy")]),
        text_reply("deployed"),
    ])
    .await;
    let lookup = Keyed::new("lookup", vec![Permission::Read]);
    let deploy = Keyed::new("deploy", vec![Permission::Write]);
    let registry = || {
        let mut registry = ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
            .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
            .with_approver(Arc::new(DeferAll));
        registry.register(lookup.clone()).unwrap();
        registry.register(deploy.clone()).unwrap();
        registry
    };
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let _lease = store.lock("keys", LockMode::FailFast).await.unwrap();

    // The first process: `lookup` runs, `deploy` waits for a decision.
    let (journal, _) = SessionJournal::open(store.clone(), "keys").await.unwrap();
    let first_registry = registry();
    let outcome = cycle(&server)
        .run_with(
            RunRequest::prompt("ship it")
                .with_tools(&first_registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    let RunOutcome::Suspended(suspension) = outcome else {
        panic!("expected a suspension: {outcome:?}")
    };
    let suspended = suspension.state().clone();
    let keys = state_keys(&suspended);
    let (lookup_key, deploy_key) = match &keys[..] {
        [(l, Some(lk)), (d, Some(dk))] if l == "call_l" && d == "call_d" => {
            (lk.clone(), dk.clone())
        }
        other => panic!("every call has a key before it runs: {other:?}"),
    };
    assert_ne!(lookup_key, deploy_key);
    // The documented derivation: session, run id, turn, call id.
    let run_id = suspended.run_id.clone().expect("a run id");
    assert_eq!(
        deploy_key,
        idempotency_key(Some("keys"), &run_id, suspended.turns, "call_d")
    );
    assert_eq!(lookup.keys(), [Some(lookup_key.clone())], "the tool saw it");
    assert_eq!(
        started_keys(store.as_ref(), "keys").await,
        [("call_l".to_owned(), Some(lookup_key.clone()))],
        "recorded with the start"
    );

    // "Another process": the run restored from the store, approved.
    let (journal, restored) = SessionJournal::open(store.clone(), "keys").await.unwrap();
    let state = restored.run.expect("a suspended run");
    assert_eq!(state_keys(&state), keys, "the keys are stored with the run");
    let second_registry = registry();
    let outcome = cycle(&server)
        .run_with(
            RunRequest::from_state(state)
                .with_decisions(vec![Decision::allow("call_d")])
                .with_tools(&second_registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "deployed"));
    assert_eq!(deploy.keys(), [Some(deploy_key.clone())]);
    assert_eq!(
        started_keys(store.as_ref(), "keys").await,
        [
            ("call_l".to_owned(), Some(lookup_key)),
            ("call_d".to_owned(), Some(deploy_key))
        ]
    );
    assert_eq!(script.requests.lock().unwrap().len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_crash_an_idempotent_call_reruns_with_its_key_and_the_other_is_answered_with_it() {
    let (server, script) = server(vec![
        calls_reply(&[("call_f", "fetch"), ("call_c", "charge")]),
        text_reply("recovered"),
    ])
    .await;
    let fetch = Keyed::hanging("fetch", true);
    let charge = Keyed::hanging("charge", false);
    let mut registry = ToolRegistry::new();
    registry.register(fetch.clone()).unwrap();
    registry.register(charge.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let _lease = store.lock("crash", LockMode::FailFast).await.unwrap();

    let (journal, _) = SessionJournal::open(store.clone(), "crash").await.unwrap();
    {
        let mut first = cycle(&server);
        let run = first.run_with(
            RunRequest::prompt("go")
                .with_tools(&registry)
                .with_journal(&journal),
        );
        let (store, fetch, charge) = (store.clone(), fetch.clone(), charge.clone());
        let both_running = async move {
            loop {
                if started_keys(store.as_ref(), "crash").await.len() == 2
                    && fetch.keys().len() == 1
                    && charge.keys().len() == 1
                {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            outcome = run => panic!("the run ended: {outcome:?}"),
            () = both_running => {}
        }
    } // dropped: from the store's point of view the process died here
    let recorded = started_keys(store.as_ref(), "crash").await;
    let key_of = |id: &str| {
        recorded
            .iter()
            .find(|(call, _)| call == id)
            .and_then(|(_, key)| key.clone())
            .unwrap()
    };
    let (fetch_key, charge_key) = (key_of("call_f"), key_of("call_c"));

    let (journal, restored) = SessionJournal::open(store.clone(), "crash").await.unwrap();
    let state = restored.run.expect("a run in progress");
    let outcome = cycle(&server)
        .run_with(
            RunRequest::from_state(state)
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "recovered"));
    // The idempotent tool ran again, with the same key; the other did not run again.
    assert_eq!(fetch.keys(), [Some(fetch_key.clone()), Some(fetch_key)]);
    assert_eq!(charge.keys(), [Some(charge_key.clone())]);
    let requests = script.requests.lock().unwrap();
    assert_eq!(tool_answer(&requests[1], "call_f"), "fetch done");
    let interrupted = tool_answer(&requests[1], "call_c");
    assert!(
        interrupted.contains("interrupted") && interrupted.contains(&charge_key),
        "{interrupted}"
    );
}

#[tokio::test]
async fn an_mcp_server_gets_the_key_in_meta() {
    let (server, script) =
        server(vec![calls_reply(&[("call_m", "meta")]), text_reply("seen")]).await;
    let mut client = McpClient::new("demo", support::mcp::demo(&["--echo-meta"]));
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let _lease = store.lock("mcp", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "mcp").await.unwrap();
    let outcome = cycle(&server)
        .run_with(
            RunRequest::prompt("what do you get?")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "seen"));
    let recorded = started_keys(store.as_ref(), "mcp").await;
    let [(call, Some(key))] = &recorded[..] else {
        panic!("one started call with a key: {recorded:?}")
    };
    assert_eq!(call, "call_m");
    // What the server answered: the `_meta` of its request.
    let answer = tool_answer(&script.requests.lock().unwrap()[1], "call_m");
    let answer: Value = serde_json::from_str(&answer).unwrap();
    assert_eq!(answer["meta"][MCP_META_KEY], json!(key), "{answer}");
}

#[tokio::test]
async fn a_call_outside_a_run_has_no_context() {
    let tool = Keyed::new("lookup", vec![]);
    let mut registry = ToolRegistry::new();
    registry.register(tool.clone()).unwrap();
    registry.invoke("lookup", json!({})).await.unwrap();
    assert_eq!(tool.keys(), [None]);
    assert!(ToolContext::current().is_none());
}

#[tokio::test]
async fn fetch_url_sends_the_key_as_idempotency_key_when_asked() {
    let site = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/page"))
        .respond_with(
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/plain")
                .set_body_string("a page"),
        )
        .mount(&site)
        .await;
    let url = format!("{}/page", site.uri());
    let (server, _script) = server(vec![
        calls_reply_with(&[("call_a", "fetch_url", json!({ "url": url }))]),
        text_reply("fetched"),
        calls_reply_with(&[("call_b", "fetch_url", json!({ "url": url }))]),
        text_reply("fetched again"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(&dir).await;
    let _lease = store.lock("fetch", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "fetch").await.unwrap();
    let fetch = |send: bool| {
        agcore::tools::builtin::FetchUrl::new()
            .allow_private_network(true)
            .with_dial_check(agcore::tools::builtin::LoopbackOnly::new())
            .with_idempotency_key(send)
    };
    for send in [true, false] {
        let mut registry = ToolRegistry::new();
        registry.register(fetch(send).erase()).unwrap();
        let prompt = if send { "fetch it" } else { "again, without" };
        let outcome = cycle(&server)
            .run_with(
                RunRequest::prompt(prompt)
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
    }
    let recorded = started_keys(store.as_ref(), "fetch").await;
    let [(_, Some(key)), (_, Some(_))] = &recorded[..] else {
        panic!("two started calls with keys: {recorded:?}")
    };
    let received = site.received_requests().await.unwrap();
    assert_eq!(received.len(), 2);
    let header = |i: usize| {
        received[i]
            .headers
            .get("idempotency-key")
            .map(|v| v.to_str().unwrap().to_owned())
    };
    assert_eq!(header(0).as_deref(), Some(key.as_str()));
    assert_eq!(header(1), None, "not sent unless asked");
}
