//! Tools that talk while they work (issue 32 items 1–3): updates reported through the tool
//! context reach the caller in order, tied to the call, before its end; a tool watching its
//! streamed input sees partial values and cannot act before the final input is approved; the
//! run reports streamed titles; a failed call's structured output reaches the model (at the
//! HTTP fake) and the caller; `authorize` mid-run asks the approver; updates are journaled
//! and replayed after the process running the call was killed (SIGKILL) and the run resumed
//! in another process.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::testing::ScriptedModel;
use agcore::llm::{
    CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, OpenaiChatMessage, StreamEvent, ToolCall,
};
use agcore::run::replay::replay_with_updates;
use agcore::run::{RunOutcome, RunRequest};
use agcore::session::{LockMode, SessionJournal, SessionStore, SqliteStore, call_updates};
use agcore::tools::context::report;
use agcore::tools::prelude::*;
use agcore::tools::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, Approver, StreamingInput, ToolCallCard,
    ToolCallUpdate, ToolContent, ToolContext,
};
use futures::StreamExt;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Every wait of these tests ends by then.
const BOUND: Duration = Duration::from_secs(60);

async fn events_of(cycle: &mut LlmCycle, registry: &ToolRegistry) -> Vec<StreamEvent> {
    let run = async {
        let mut stream = cycle
            .submit_stream_with_tools("go".into(), registry)
            .await
            .unwrap();
        let mut events = Vec::new();
        while let Some(event) = stream.next().await {
            events.push(event);
        }
        events
    };
    tokio::time::timeout(BOUND, run).await.unwrap()
}

fn position(events: &[StreamEvent], wanted: impl Fn(&StreamEvent) -> bool) -> usize {
    events
        .iter()
        .position(wanted)
        .unwrap_or_else(|| panic!("no such event in {events:#?}"))
}

fn completed(id: &'static str) -> impl Fn(&StreamEvent) -> bool {
    move |event| matches!(event, StreamEvent::ToolExecutionCompleted { id: i, .. } if i == id)
}

fn updates_of<'a>(events: &'a [StreamEvent], id: &str) -> Vec<&'a ToolCallUpdate> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolCallUpdate { id: i, update } if i == id => Some(update),
            _ => None,
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Updates through the context.

/// Reports ten lines of output and a title, then returns.
struct Reporter;

#[async_trait]
impl BaseTool for Reporter {
    fn name(&self) -> &str {
        "report"
    }
    fn description(&self) -> &str {
        "Reports while it works"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        for line in 0..10 {
            assert!(report(ToolCallUpdate::text(format!("line {line}\n"))));
            tokio::task::yield_now().await;
        }
        report(ToolCallUpdate::title("Reported ten lines"));
        Ok(json!("done"))
    }
}

#[tokio::test]
async fn a_tools_updates_reach_the_caller_in_order_before_its_end() {
    let model = Arc::new(
        ScriptedModel::new()
            .reply_tool_calls(vec![ToolCall::new("c1", "report", "{}")])
            .reply_text("ok"),
    );
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Reporter)).unwrap();
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let events = events_of(&mut cycle, &registry).await;

    let updates = updates_of(&events, "c1");
    assert_eq!(updates.len(), 11, "{events:#?}");
    let mut card = ToolCallCard::new("c1", "report");
    for update in &updates {
        card.apply(update);
    }
    let expected: String = (0..10).map(|line| format!("line {line}\n")).collect();
    assert_eq!(card.content, vec![ToolContent::Text { text: expected }]);
    assert_eq!(card.title, "Reported ten lines");
    // Every update between the call's start and its end.
    let last_update = events
        .iter()
        .rposition(|e| matches!(e, StreamEvent::ToolCallUpdate { .. }))
        .unwrap();
    let started = position(
        &events,
        |e| matches!(e, StreamEvent::ToolExecutionStarted { id, .. } if id == "c1"),
    );
    let first_update = position(&events, |e| matches!(e, StreamEvent::ToolCallUpdate { .. }));
    assert!(started < first_update && last_update < position(&events, completed("c1")));
    // Outside a call of a run, nobody listens.
    assert!(!report(ToolCallUpdate::text("nobody")));
}

// ---------------------------------------------------------------------------------------------
// Input that streams.

/// Writes a note. Watches its input as it streams: logs each partial `content`, then whether
/// the call was approved; logs `execute` when it acts.
struct WatchingWriter {
    log: Mutex<Vec<String>>,
    approved: Mutex<Option<Option<Value>>>,
    wrote: AtomicUsize,
}

impl WatchingWriter {
    fn new() -> Arc<Self> {
        Arc::new(WatchingWriter {
            log: Mutex::new(Vec::new()),
            approved: Mutex::new(None),
            wrote: AtomicUsize::new(0),
        })
    }

    fn partials(&self) -> Vec<String> {
        self.log
            .lock()
            .unwrap()
            .iter()
            .filter_map(|entry| entry.strip_prefix("partial:").map(str::to_owned))
            .collect()
    }
}

#[async_trait]
impl BaseTool for WatchingWriter {
    fn name(&self) -> &str {
        "write_note"
    }
    fn description(&self) -> &str {
        "Write a note"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path", "content"]})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Write]
    }
    fn title(&self, input: &Value) -> String {
        match input["path"].as_str() {
            Some(path) => format!("Write {path}"),
            None => "Write a note".to_owned(),
        }
    }
    fn supports_input_streaming(&self) -> bool {
        true
    }
    async fn watch_input(&self, mut input: StreamingInput) {
        while let Some(partial) = input.next_partial().await {
            let content = partial["content"].as_str().unwrap_or_default().to_owned();
            report(ToolCallUpdate::diff("note.txt", None, content.clone()));
            self.log.lock().unwrap().push(format!("partial:{content}"));
        }
        let approved = input.approved().await;
        *self.approved.lock().unwrap() = Some(approved);
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.log.lock().unwrap().push("execute".to_owned());
        self.wrote.fetch_add(1, Ordering::SeqCst);
        Ok(json!("written"))
    }
}

/// Answers every request the same way, and keeps them.
struct Answering {
    decision: ApprovalDecision,
    asked: Mutex<Vec<ApprovalRequest>>,
}

impl Answering {
    fn new(decision: ApprovalDecision) -> Arc<Self> {
        Arc::new(Answering {
            decision,
            asked: Mutex::new(Vec::new()),
        })
    }
}

#[async_trait]
impl Approver for Answering {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request.clone());
        self.decision.clone()
    }
}

const NOTE: &str = r#"{"path": "note.txt", "content": "a note that streams in small pieces"}"#;

fn streaming_model() -> Arc<ScriptedModel> {
    Arc::new(
        ScriptedModel::new()
            .with_chunk_size(4)
            .with_chunk_delay(Duration::from_millis(2))
            .reply_tool_calls(vec![ToolCall::new("c1", "write_note", NOTE)])
            .reply_text("ok"),
    )
}

fn asking_registry(tool: &Arc<WatchingWriter>, approver: Arc<dyn Approver>) -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
        .with_approver(approver);
    registry.register(tool.clone()).unwrap();
    registry
}

/// The partial `content`s grow in the order the model wrote them, each a prefix of the next.
fn assert_grows_in_order(partials: &[String]) {
    let full = "a note that streams in small pieces";
    assert!(partials.len() >= 2, "too few partial values: {partials:?}");
    for pair in partials.windows(2) {
        assert!(pair[1].starts_with(&pair[0]), "out of order: {partials:?}");
    }
    assert!(partials.iter().all(|p| full.starts_with(p.as_str())));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watching_tool_sees_partials_in_order_and_cannot_act_when_its_call_is_denied() {
    let tool = WatchingWriter::new();
    let approver = Answering::new(ApprovalDecision::Deny { message: None });
    let registry = asking_registry(&tool, approver.clone());
    let mut cycle = LlmCycle::new(streaming_model(), CycleConfig::new("m"));
    let events = events_of(&mut cycle, &registry).await;

    assert_grows_in_order(&tool.partials());
    // The watcher learnt that the call was refused; the action never happened.
    assert_eq!(*tool.approved.lock().unwrap(), Some(None));
    assert_eq!(tool.wrote.load(Ordering::SeqCst), 0);
    assert!(!tool.log.lock().unwrap().contains(&"execute".to_owned()));
    assert_eq!(approver.asked.lock().unwrap().len(), 1);
    // What the watcher reported reached the caller as the call's updates (a growing diff).
    let diffs = updates_of(&events, "c1")
        .into_iter()
        .filter(|u| matches!(u.content.first(), Some(ToolContent::Diff { .. })))
        .count();
    assert!(diffs >= 2, "{events:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watching_tool_gets_the_final_input_only_once_approved() {
    let tool = WatchingWriter::new();
    let approver = Answering::new(ApprovalDecision::AllowOnce);
    let registry = asking_registry(&tool, approver.clone());
    let mut cycle = LlmCycle::new(streaming_model(), CycleConfig::new("m"));
    events_of(&mut cycle, &registry).await;

    assert_grows_in_order(&tool.partials());
    let full: Value = serde_json::from_str(NOTE).unwrap();
    assert_eq!(*tool.approved.lock().unwrap(), Some(Some(full)));
    assert_eq!(tool.wrote.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn the_run_reports_a_streamed_calls_title_before_the_call_is_complete() {
    let tool = WatchingWriter::new();
    let mut registry = ToolRegistry::new().with_input_updates(true);
    registry.register(tool.clone()).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .with_chunk_size(4)
            .reply_tool_calls(vec![ToolCall::new("c1", "write_note", NOTE)])
            .reply_text("ok"),
    );
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let events = events_of(&mut cycle, &registry).await;
    let ready = position(
        &events,
        |e| matches!(e, StreamEvent::ToolCallReady { id, .. } if id == "c1"),
    );
    let streamed: Vec<(usize, &ToolCallUpdate)> = events[..ready]
        .iter()
        .enumerate()
        .filter_map(|(i, e)| match e {
            StreamEvent::ToolCallUpdate { id, update } if id == "c1" => Some((i, update)),
            _ => None,
        })
        .filter(|(_, update)| update.partial_input.is_some())
        .collect();
    assert!(streamed.len() >= 2, "{events:#?}");
    let titles: Vec<&str> = streamed
        .iter()
        .filter_map(|(_, u)| u.title.as_deref())
        .collect();
    assert_eq!(titles.first().copied(), Some("Write a note"), "{titles:?}");
    assert_eq!(titles.last().copied(), Some("Write note.txt"), "{titles:?}");

    // Nobody listens (no updates asked, the tool does not watch): nothing is parsed early.
    let mut quiet = ToolRegistry::new();
    quiet.register(Arc::new(Reporter)).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .with_chunk_size(2)
            .reply_tool_calls(vec![ToolCall::new("c2", "report", r#"{"x": "yz"}"#)])
            .reply_text("ok"),
    );
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let events = events_of(&mut cycle, &quiet).await;
    assert!(
        updates_of(&events, "c2")
            .iter()
            .all(|u| u.partial_input.is_none())
    );
}

// ---------------------------------------------------------------------------------------------
// A failed call's structured output, at the HTTP fake.

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

fn reply(message: Value, finish: &str) -> Value {
    json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    })
}

/// Runs the tests it is asked to and fails with the report.
struct RunTests;

#[async_trait]
impl BaseTool for RunTests {
    fn name(&self) -> &str {
        "run_tests"
    }
    fn description(&self) -> &str {
        "Run the tests"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Err(ToolError::failed_with_output(
            "run_tests",
            "2 of 5 tests failed",
            json!({"failed": ["parse_empty", "parse_nested"], "passed": 3}),
        ))
    }
}

#[tokio::test]
async fn a_failed_calls_structured_output_reaches_the_model_and_the_caller() {
    let server = MockServer::start().await;
    let script = Script::default();
    *script.replies.lock().unwrap() = vec![
        reply(
            json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "run_tests", "arguments": "{}"}}
            ]}),
            "tool_calls",
        ),
        reply(
            json!({"role": "assistant", "content": "two failed"}),
            "stop",
        ),
    ];
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(script.clone())
        .mount(&server)
        .await;
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("m"));
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(RunTests)).unwrap();
    let events = events_of(&mut cycle, &registry).await;

    // The caller gets the output itself, flagged as an error.
    let output = events
        .iter()
        .find_map(|e| match e {
            StreamEvent::ToolExecutionCompleted {
                id,
                output,
                is_error: true,
                ..
            } if id == "t1" => Some(output.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        output,
        json!({"failed": ["parse_empty", "parse_nested"], "passed": 3})
    );
    // The model reads the message and the structured output.
    let requests = script.requests.lock().unwrap();
    assert_eq!(requests.len(), 2);
    let answer = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "t1")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer.contains("2 of 5 tests failed"), "{answer}");
    assert!(
        answer.contains(r#"{"failed":["parse_empty","parse_nested"],"passed":3}"#),
        "{answer}"
    );
}

// ---------------------------------------------------------------------------------------------
// Mid-run authorize.

/// Deploys after asking mid-run; counts deployments.
struct Deploy {
    deployed: AtomicUsize,
}

#[async_trait]
impl BaseTool for Deploy {
    fn name(&self) -> &str {
        "deploy"
    }
    fn description(&self) -> &str {
        "Deploy the site"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"site": {"type": "string"}}})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let site = args["site"].as_str().unwrap_or_default().to_owned();
        report(ToolCallUpdate::title(format!("Deploying {site}")));
        ToolContext::authorize(format!("overwrite {site}")).await?;
        self.deployed.fetch_add(1, Ordering::SeqCst);
        Ok(json!(format!("deployed {site}")))
    }
}

/// Denies the call whose site is `prod`, allows the others.
struct DenyProd(Mutex<Vec<ApprovalRequest>>);

#[async_trait]
impl Approver for DenyProd {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.0.lock().unwrap().push(request.clone());
        if request.arguments["site"] == "prod" {
            ApprovalDecision::Deny {
                message: Some("not prod".to_owned()),
            }
        } else {
            ApprovalDecision::AllowOnce
        }
    }
}

fn tool_answer(messages: &[OpenaiChatMessage], id: &str) -> String {
    messages
        .iter()
        .find_map(|m| match m {
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == id => Some(content.text()),
            _ => None,
        })
        .unwrap()
}

#[tokio::test]
async fn authorize_mid_run_asks_the_approver_and_a_denial_stops_the_action() {
    let deploy = Arc::new(Deploy {
        deployed: AtomicUsize::new(0),
    });
    let approver = Arc::new(DenyProd(Mutex::new(Vec::new())));
    let mut registry = ToolRegistry::new().with_approver(approver.clone());
    registry.register(deploy.clone()).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .reply_tool_calls(vec![
                ToolCall::new("p", "deploy", r#"{"site": "prod"}"#),
                ToolCall::new("s", "deploy", r#"{"site": "staging"}"#),
            ])
            .reply_text("ok"),
    );
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    events_of(&mut cycle, &registry).await;

    assert_eq!(deploy.deployed.load(Ordering::SeqCst), 1);
    let asked = approver.0.lock().unwrap().clone();
    assert_eq!(asked.len(), 2);
    assert!(
        asked
            .iter()
            .all(|r| r.reason.contains("asks while it runs"))
    );
    assert!(
        asked
            .iter()
            .any(|r| r.call_id == "p" && r.reason.ends_with("overwrite prod"))
    );
    let sent = &model.requests()[1].messages;
    let denied = tool_answer(sent, "p");
    assert!(
        denied.contains("not approved") && denied.contains("not prod"),
        "{denied}"
    );
    assert_eq!(tool_answer(sent, "s"), "deployed staging");

    // Nobody to ask: refused, as a before-call approval would be.
    let mut alone = ToolRegistry::new();
    alone.register(deploy.clone()).unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .reply_tool_calls(vec![ToolCall::new("q", "deploy", r#"{"site": "qa"}"#)])
            .reply_text("ok"),
    );
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    events_of(&mut cycle, &alone).await;
    assert_eq!(deploy.deployed.load(Ordering::SeqCst), 1);
    let refused = tool_answer(&model.requests()[1].messages, "q");
    assert!(refused.contains("no approver is configured"), "{refused}");
}

// ---------------------------------------------------------------------------------------------
// Journaled and replayed after SIGKILL.

const STORE_ENV: &str = "AGCORE_TEST_TOOL_EVENTS_STORE";

/// Edits a file: reports its title, diff and location, then (the first time) hangs — the
/// process is killed while it runs.
struct HangingEdit {
    hang: bool,
}

#[async_trait]
impl BaseTool for HangingEdit {
    fn name(&self) -> &str {
        "edit"
    }
    fn description(&self) -> &str {
        "Edit a file"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        report(ToolCallUpdate::title("Edit a.txt"));
        report(
            ToolCallUpdate::diff("a.txt", Some("one\n".into()), "two\n")
                .with_locations(vec![agcore::tools::ToolLocation::line("a.txt", 1)]),
        );
        report(ToolCallUpdate::text("replaced 1 line"));
        if self.hang {
            println!("REPORTED");
            tokio::time::sleep(BOUND).await;
        }
        Ok(json!("edited"))
    }
}

async fn open_store() -> Arc<dyn SessionStore> {
    let path = std::env::var(STORE_ENV).unwrap();
    Arc::new(SqliteStore::open(path).await.unwrap())
}

#[tokio::test]
#[ignore = "run by updates_are_replayed_after_a_sigkill_and_a_resume as a child process"]
async fn tool_events_child() {
    assert!(
        std::env::var(STORE_ENV).is_ok(),
        "run by updates_are_replayed_after_a_sigkill_and_a_resume, with {STORE_ENV}"
    );
    let store = open_store().await;
    let _lease = store.lock("edits", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "edits").await.unwrap();
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(HangingEdit { hang: true }))
        .unwrap();
    let model = ScriptedModel::new().reply_tool_calls(vec![ToolCall::new("e1", "edit", "{}")]);
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let outcome = cycle
        .run_with(
            RunRequest::prompt("edit a.txt")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await;
    panic!("the child's run ended: {outcome:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_are_replayed_after_a_sigkill_and_a_resume() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sessions.db");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::tool_events::tool_events_child",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(STORE_ENV, &db)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let reported = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.trim_end().ends_with("REPORTED"))
    });
    assert!(
        tokio::time::timeout(BOUND, reported)
            .await
            .unwrap()
            .unwrap(),
        "the child never reported"
    );
    // SAFETY of the test: wait until the store holds the three updates (the run journals
    // each as it delivers it), then kill -9: no destructor runs in the child.
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&db).await.unwrap());
    tokio::time::timeout(BOUND, async {
        loop {
            let session = store.load("edits").await.unwrap().unwrap();
            if call_updates(&session).len() == 3 {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .unwrap();
    child.kill().unwrap();
    child.wait().unwrap();

    // Another process (this one): resume the run from the store.
    let _lease = store
        .lock(
            "edits",
            LockMode::Wait {
                timeout: Duration::from_secs(10),
            },
        )
        .await
        .unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "edits").await.unwrap();
    let state = restored.run.expect("the killed run is in progress");
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(HangingEdit { hang: false }))
        .unwrap();
    let mut cycle = LlmCycle::new(
        ScriptedModel::new().reply_text("done"),
        CycleConfig::new("m"),
    );
    let outcome = tokio::time::timeout(
        BOUND,
        cycle.run_with(
            RunRequest::from_state(state)
                .with_tools(&registry)
                .with_journal(&journal),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");

    // Reopen: the call's card is drawn again from the journal.
    let session = store.load("edits").await.unwrap().unwrap();
    let (_, reopened) = SessionJournal::open(store.clone(), "edits").await.unwrap();
    let events = replay_with_updates(&reopened.history, &call_updates(&session));
    let mut card = ToolCallCard::new("e1", "edit");
    for update in updates_of(&events, "e1") {
        card.apply(update);
    }
    assert_eq!(card.title, "Edit a.txt");
    assert_eq!(
        card.content,
        vec![
            ToolContent::Diff {
                path: "a.txt".into(),
                old_text: Some("one\n".into()),
                new_text: "two\n".into()
            },
            ToolContent::Text {
                text: "replaced 1 line".into()
            }
        ]
    );
    assert_eq!(card.locations[0].line, Some(1));
    // Its final status: the killed call was not run again (it is not idempotent), so it ended
    // as interrupted — a failure.
    let end = position(&events, completed("e1"));
    assert!(matches!(
        &events[end],
        StreamEvent::ToolExecutionCompleted { is_error: true, .. }
    ));
    assert!(
        events
            .iter()
            .position(|e| matches!(e, StreamEvent::ToolCallUpdate { .. }))
            .unwrap()
            < end
    );
}

// ---------------------------------------------------------------------------------------------
// The built-ins report.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_builtins_report_their_diffs_locations_and_command_output() {
    let root = tempfile::tempdir().unwrap();
    std::fs::write(root.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
    let workspace = agcore::tools::builtin::Workspace::new(root.path()).unwrap();
    let mut registry = ToolRegistry::new();
    registry
        .register_all(agcore::tools::builtin::builtin_tools(&workspace))
        .unwrap();
    let model = Arc::new(
        ScriptedModel::new()
            .reply_tool_calls(vec![
                ToolCall::new(
                    "edit",
                    "edit_file",
                    r#"{"path": "a.txt", "old_string": "two", "new_string": "2"}"#,
                ),
                ToolCall::new(
                    "write",
                    "write_file",
                    r#"{"path": "b.txt", "content": "new\n"}"#,
                ),
                ToolCall::new(
                    "cmd",
                    "run_command",
                    r#"{"command": "echo first; echo second"}"#,
                ),
            ])
            .reply_text("ok"),
    );
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let events = events_of(&mut cycle, &registry).await;
    let card = |id: &str, tool: &str| {
        let mut card = ToolCallCard::new(id, tool);
        for update in updates_of(&events, id) {
            card.apply(update);
        }
        card
    };
    let edit = card("edit", "edit_file");
    assert!(
        edit.content.contains(&ToolContent::Diff {
            path: "a.txt".into(),
            old_text: Some("one\ntwo\nthree\n".into()),
            new_text: "one\n2\nthree\n".into()
        }),
        "{edit:?}"
    );
    assert_eq!(
        edit.locations,
        [agcore::tools::ToolLocation::line("a.txt", 2)]
    );
    let write = card("write", "write_file");
    assert_eq!(
        write.content,
        [ToolContent::Diff {
            path: "b.txt".into(),
            old_text: None,
            new_text: "new\n".into()
        }]
    );
    let command = card("cmd", "run_command");
    assert_eq!(
        command.content,
        [ToolContent::Text {
            text: "first\nsecond\n".into()
        }],
        "{command:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A deferred mid-run question suspends a run that can wait.

async fn suspended_on_authorize(deploy: &Arc<Deploy>) -> agcore::run::RunState {
    let mut registry = ToolRegistry::new().with_approver(Arc::new(agcore::tools::DeferAll));
    registry.register(deploy.clone()).unwrap();
    let model = ScriptedModel::new().reply_tool_calls(vec![ToolCall::new(
        "d",
        "deploy",
        r#"{"site": "prod"}"#,
    )]);
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let outcome = tokio::time::timeout(
        BOUND,
        cycle.run_with(RunRequest::prompt("ship").with_tools(&registry)),
    )
    .await
    .unwrap()
    .unwrap();
    let RunOutcome::Suspended(suspension) = outcome else {
        panic!("expected a suspension: {outcome:?}")
    };
    let request = &suspension.requests()[0];
    assert_eq!(request.call_id, "d");
    assert!(
        request
            .reason
            .ends_with("asks while it runs: overwrite prod"),
        "{request:?}"
    );
    assert_eq!(deploy.deployed.load(Ordering::SeqCst), 0);
    // Stored and loaded, as another process would.
    serde_json::from_str(&serde_json::to_string(suspension.state()).unwrap()).unwrap()
}

async fn resume(
    deploy: &Arc<Deploy>,
    state: agcore::run::RunState,
    decision: agcore::run::Decision,
) -> Arc<ScriptedModel> {
    // No approver now: only the caller's decision can let the question pass.
    let mut registry = ToolRegistry::new();
    registry.register(deploy.clone()).unwrap();
    let model = Arc::new(ScriptedModel::new().reply_text("ok"));
    let mut cycle = LlmCycle::new(model.clone(), CycleConfig::new("m"));
    let outcome = tokio::time::timeout(
        BOUND,
        cycle.run_with(
            RunRequest::from_state(state)
                .with_decisions(vec![decision])
                .with_tools(&registry),
        ),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
    model
}

#[tokio::test]
async fn a_deferred_mid_run_question_suspends_and_an_approval_lets_the_call_go_on() {
    let deploy = Arc::new(Deploy {
        deployed: AtomicUsize::new(0),
    });
    let state = suspended_on_authorize(&deploy).await;
    let model = resume(&deploy, state, agcore::run::Decision::allow("d")).await;
    assert_eq!(deploy.deployed.load(Ordering::SeqCst), 1);
    assert_eq!(
        tool_answer(&model.requests()[0].messages, "d"),
        "deployed prod"
    );
}

#[tokio::test]
async fn a_deferred_mid_run_question_denied_on_resume_never_acts() {
    let deploy = Arc::new(Deploy {
        deployed: AtomicUsize::new(0),
    });
    let state = suspended_on_authorize(&deploy).await;
    let model = resume(
        &deploy,
        state,
        agcore::run::Decision::deny("d", Some("freeze week".into())),
    )
    .await;
    assert_eq!(deploy.deployed.load(Ordering::SeqCst), 0);
    let answer = tool_answer(&model.requests()[0].messages, "d");
    assert!(answer.contains("freeze week"), "{answer}");
}
