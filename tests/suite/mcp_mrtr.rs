//! Multi-round-trip `tools/call` and tasks (MCP 2026-07-28) against a real rmcp 3.11 server
//! (`examples/mcp_mrtr_server.rs`, stdio), which keeps its counts and tasks in files so that a
//! server started again by another process sees them:
//!
//! - an "input required" answer is answered by the client's elicitor and the call retried with
//!   the echoed `requestState` (one original call, one retry); a server that keeps asking is
//!   given up after `MAX_INPUT_ROUNDS` answers with a typed error, and one whose `requestState`
//!   is too large at once;
//! - a call that becomes a task is polled to its result (status messages as progress), a
//!   task's own input request is answered with `tasks/update`, a dropped call cancels its task,
//!   and one that outlives the run's tool deadline is an answer the model reads (and cancelled);
//! - across processes, on SQLite and PostgreSQL: a run whose question nobody can answer now
//!   suspends, and resumes in another process from the stored `requestState` with the answer; a
//!   run killed (SIGKILL) while a human is asked resumes in another process from the stored
//!   `requestState`, and one killed while a task works resumes polling the same task — none
//!   calls the tool again.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use crate::support::control::{FakeModel, Reply};

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::{Decision, RunOutcome, RunRequest, waiting_for_input};
use agcore::session::{PostgresStore, SessionJournal, SessionStore, SqliteStore};
use agcore::tools::ToolRegistry;
use agcore::tools::error::ToolError;
use agcore::tools::mcp::{
    DeferElicitation, ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor,
    MAX_INPUT_ROUNDS, McpClient, McpProgress, McpTransport,
};
use async_trait::async_trait;
use serde_json::{Map, Value, json};

/// The child process's environment: the store, the fake model, the server's state directory,
/// what to run.
const CHILD_STORE: &str = "AGCORE_MRTR_CHILD_STORE";
const CHILD_MODEL: &str = "AGCORE_MRTR_CHILD_MODEL";
const CHILD_STATE: &str = "AGCORE_MRTR_CHILD_STATE";
const CHILD_TOOL: &str = "AGCORE_MRTR_CHILD_TOOL";
const CHILD_ANSWER: &str = "AGCORE_MRTR_CHILD_ANSWER";

/// The session all cross-process runs use.
const SESSION: &str = "mrtr";

/// Lines of the server's count file `name` (0 when absent).
fn count(state: &Path, name: &str) -> usize {
    std::fs::read_to_string(state.join(name))
        .map(|text| text.lines().count())
        .unwrap_or(0)
}

/// The test server over stdio, keeping its state in `state`.
fn client(state: &Path) -> McpClient {
    McpClient::new(
        "jobs",
        McpTransport::Stdio {
            command: support::mcp::mrtr_server().display().to_string(),
            args: vec!["--state".into(), state.display().to_string()],
        },
    )
    .with_protocol_version("2026-07-28")
    .with_timeout(30)
}

/// Answers every form with fixed values; remembers the questions.
#[derive(Default)]
struct Answering {
    values: Map<String, Value>,
    asked: Mutex<Vec<String>>,
}

impl Answering {
    fn with(field: &str, value: &str) -> Arc<Self> {
        let mut values = Map::new();
        values.insert(field.to_owned(), Value::from(value));
        Arc::new(Answering {
            values,
            asked: Mutex::default(),
        })
    }

    fn asked(&self) -> Vec<String> {
        self.asked.lock().unwrap().clone()
    }
}

#[async_trait]
impl Elicitor for Answering {
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse {
        self.asked.lock().unwrap().push(request.message.clone());
        match request.mode {
            ElicitationMode::Form { .. } => ElicitationResponse::Accept {
                content: self.values.clone(),
            },
            // The person opened the URL themselves: nothing to send but the action.
            ElicitationMode::Url { .. } => ElicitationResponse::Accept {
                content: Map::new(),
            },
        }
    }
}

/// A person who is asked and never answers (the process is killed meanwhile).
struct NeverAnswers;

#[async_trait]
impl Elicitor for NeverAnswers {
    async fn elicit(&self, _request: &ElicitationRequest) -> ElicitationResponse {
        std::future::pending().await
    }
}

// ---------------------------------------------------------------------------------------------
// In one process.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_input_required_call_is_answered_by_the_elicitor_and_retried_with_its_state() {
    let state = tempfile::tempdir().unwrap();
    let elicitor = Answering::with("name", "Ada");
    let mut client = client(state.path()).with_elicitor(elicitor.clone());
    support::mcp::before_10s(client.connect()).await.unwrap();
    let greeting = support::mcp::before_10s(client.call_tool("greet", json!({})))
        .await
        .unwrap();
    assert_eq!(greeting, json!("Hello, Ada!"));
    assert_eq!(elicitor.asked(), ["What is your name?"]);
    assert_eq!(count(state.path(), "greet.calls"), 1, "one original call");
    assert_eq!(count(state.path(), "greet.retries"), 1, "one retry");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_an_elicitor_the_question_is_declined_and_the_server_says_so() {
    let state = tempfile::tempdir().unwrap();
    let mut client = client(state.path());
    support::mcp::before_10s(client.connect()).await.unwrap();
    let answer = support::mcp::before_10s(client.call_tool("greet", json!({})))
        .await
        .unwrap();
    assert_eq!(answer, json!("nobody answered (Some(\"decline\"))"));
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_keeps_asking_is_given_up_after_the_round_bound() {
    let state = tempfile::tempdir().unwrap();
    let elicitor = Answering::with("again", "yes");
    let mut client = client(state.path()).with_elicitor(elicitor.clone());
    support::mcp::before_10s(client.connect()).await.unwrap();
    let error = support::mcp::before_10s(client.call_tool("loops", json!({})))
        .await
        .unwrap_err();
    match &error {
        ToolError::McpInputRounds {
            tool,
            server,
            rounds,
        } => {
            assert_eq!((tool.as_str(), server.as_str()), ("loops", "jobs"));
            assert_eq!(*rounds, MAX_INPUT_ROUNDS);
        }
        other => panic!("expected McpInputRounds, got {other:?}"),
    }
    // The model reads why, and that it should not try the same again.
    let text = error.to_string();
    assert!(
        text.contains("still asked for input after 10 rounds"),
        "{text}"
    );
    // Each round answered, then one more request whose question nobody was asked.
    assert_eq!(elicitor.asked().len(), MAX_INPUT_ROUNDS);
    assert_eq!(count(state.path(), "loops.calls"), MAX_INPUT_ROUNDS + 1);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_request_state_ends_the_call_without_asking() {
    let state = tempfile::tempdir().unwrap();
    let elicitor = Answering::with("name", "Ada");
    let mut client = client(state.path()).with_elicitor(elicitor.clone());
    support::mcp::before_10s(client.connect()).await.unwrap();
    let error = support::mcp::before_10s(client.call_tool("big_state", json!({})))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::McpError(text) if text.contains("requestState larger than 65536 bytes")),
        "{error:?}"
    );
    assert!(elicitor.asked().is_empty(), "nobody was asked");
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_polled_to_its_result_and_its_status_is_progress() {
    let state = tempfile::tempdir().unwrap();
    let messages = Arc::new(Mutex::new(Vec::new()));
    let seen = messages.clone();
    let release = state.path().join("release");
    let mut client = client(state.path()).with_progress_callback(move |progress: McpProgress| {
        let mut seen = seen.lock().unwrap();
        seen.push(progress.message.clone().unwrap_or_default());
        // The job ends once three polls were reported.
        if seen.len() == 3 {
            std::fs::write(&release, "").unwrap();
        }
    });
    support::mcp::before_10s(client.connect()).await.unwrap();
    let result = support::mcp::before_10s(client.call_tool("slow_job", json!({})))
        .await
        .unwrap();
    assert_eq!(result, json!("job done"));
    assert_eq!(count(state.path(), "slow_job.calls"), 1);
    let messages = messages.lock().unwrap().clone();
    assert_eq!(messages[..3], ["poll 1", "poll 2", "poll 3"]);
    // The poll that saw the release is the last.
    assert_eq!(count(state.path(), "slow_job-1.polls"), messages.len());
    assert_eq!(count(state.path(), "cancels"), 0);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tasks_input_request_is_answered_with_tasks_update() {
    let state = tempfile::tempdir().unwrap();
    let elicitor = Answering::with("colour", "blue");
    let mut client = client(state.path()).with_elicitor(elicitor.clone());
    support::mcp::before_10s(client.connect()).await.unwrap();
    let result = support::mcp::before_10s(client.call_tool("ask_job", json!({})))
        .await
        .unwrap();
    assert_eq!(result, json!("colour: blue"));
    assert_eq!(elicitor.asked(), ["Which colour?"]);
    assert_eq!(count(state.path(), "ask_job.calls"), 1);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_call_cancels_its_task() {
    let state = tempfile::tempdir().unwrap();
    let (polled, first_poll) = tokio::sync::oneshot::channel::<()>();
    let polled = Mutex::new(Some(polled));
    let mut client = client(state.path()).with_progress_callback(move |_| {
        if let Some(polled) = polled.lock().unwrap().take() {
            let _ = polled.send(());
        }
    });
    support::mcp::before_10s(client.connect()).await.unwrap();
    let handle = client.handle();
    // The call is dropped (the run cancelled) once the task was polled.
    tokio::select! {
        result = handle.call_tool("slow_job", json!({})) => panic!("the job ended: {result:?}"),
        _ = first_poll => {}
    }
    let cancelled = state.path().join("slow_job-1.cancelled");
    let reached = tokio::task::spawn_blocking(move || {
        support::session::wait_for(&cancelled, Duration::from_secs(10))
    });
    assert!(reached.await.unwrap(), "tasks/cancel reached the server");
    assert_eq!(count(state.path(), "cancels"), 1);
    assert_eq!(count(state.path(), "slow_job.calls"), 1);
    client.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_client_right_after_a_call_was_dropped_still_cancels_its_task() {
    let state = tempfile::tempdir().unwrap();
    let (polled, first_poll) = tokio::sync::oneshot::channel::<()>();
    let polled = Mutex::new(Some(polled));
    let mut client = client(state.path()).with_progress_callback(move |_| {
        if let Some(polled) = polled.lock().unwrap().take() {
            let _ = polled.send(());
        }
    });
    support::mcp::before_10s(client.connect()).await.unwrap();
    let handle = client.handle();
    tokio::select! {
        result = handle.call_tool("slow_job", json!({})) => panic!("the job ended: {result:?}"),
        _ = first_poll => {}
    }
    // As the CLI does after Ctrl-C: the servers are closed at once.
    support::mcp::before_10s(client.close()).await.unwrap();
    assert!(state.path().join("slow_job-1.cancelled").exists());
    assert_eq!(count(state.path(), "cancels"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_that_outlives_the_runs_deadline_is_an_answer_the_model_reads_and_is_cancelled() {
    let state = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "slow_job", "{}")]),
        Reply::text("thanks"),
    ])
    .await;
    let mut client = client(state.path());
    support::mcp::before_10s(client.connect()).await.unwrap();
    // The run's deadline for a tool: the job is never released.
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_millis(500));
    registry.register_all(client.into_tools()).unwrap();
    let mut cycle = model.cycle(CycleConfig::new("test-model"));
    let outcome = support::mcp::before_10s(
        cycle.run_with(RunRequest::prompt("run the job").with_tools(&registry)),
    )
    .await
    .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "thanks"));
    let requests = model.received();
    let answer = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .expect("the call's answer")["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer.contains("'slow_job' timed out"), "{answer}");
    // The dropped call cancelled its task on the server.
    let cancelled = state.path().join("slow_job-1.cancelled");
    let reached = tokio::task::spawn_blocking(move || {
        support::session::wait_for(&cancelled, Duration::from_secs(10))
    });
    assert!(reached.await.unwrap(), "tasks/cancel reached the server");
    assert_eq!(count(state.path(), "slow_job.calls"), 1);
}

// ---------------------------------------------------------------------------------------------
// Across processes.

/// The registry of the test server's tools, connected with `elicitor`.
async fn registry(state: &Path, elicitor: Arc<dyn Elicitor>) -> ToolRegistry {
    let mut client = client(state).with_elicitor(elicitor);
    support::mcp::before_10s(client.connect()).await.unwrap();
    let mut registry = ToolRegistry::new();
    registry.register_all(client.into_tools()).unwrap();
    registry
}

/// The store named by `spec`: `sqlite:<path>` or a PostgreSQL URL.
async fn store(spec: &str) -> Arc<dyn SessionStore> {
    match spec.strip_prefix("sqlite:") {
        Some(path) => Arc::new(SqliteStore::open(path).await.unwrap()),
        None => Arc::new(PostgresStore::connect(spec).await.unwrap()),
    }
}

/// A conversation with the fake model at `base`.
fn cycle(base: &str) -> LlmCycle {
    let client =
        OpenAiClient::new(OpenAiConfig::new(format!("{base}/v1")).with_api_key("test-key"))
            .unwrap();
    LlmCycle::new(client, CycleConfig::new("test-model"))
}

/// The first process: calls the tool of `CHILD_TOOL`; is killed while it waits — for a person
/// who never answers (`greet`), or for the task (`slow_job`). Runs only as the child of the
/// cross-process tests (their environment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the first process of the cross-process tests, killed by them"]
async fn run_until_killed_in_this_process() {
    let var = |name: &str| std::env::var(name).unwrap();
    let (store_spec, model, state, tool) = (
        var(CHILD_STORE),
        var(CHILD_MODEL),
        PathBuf::from(var(CHILD_STATE)),
        var(CHILD_TOOL),
    );
    let store = store(&store_spec).await;
    let _lease = store
        .lock(SESSION, agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), SESSION).await.unwrap();
    let registry = registry(&state, Arc::new(NeverAnswers)).await;
    let mut cycle = cycle(&model);
    let outcome = cycle
        .run_with(
            RunRequest::prompt(format!("run {tool}"))
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await;
    panic!("the run was to be killed, but it ended: {outcome:?}");
}

/// Start the first process; kill it (SIGKILL) once the store holds the call's continuation.
async fn run_and_kill(store_spec: &str, model: &FakeModel, state: &Path, tool: &str) {
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::mcp_mrtr::run_until_killed_in_this_process",
            "--ignored",
            "--nocapture",
            "--test-threads",
            "1",
        ])
        .env(CHILD_STORE, store_spec)
        .env(CHILD_MODEL, model.server.uri())
        .env(CHILD_STATE, state)
        .env(CHILD_TOOL, tool)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let store = store(store_spec).await;
    let journaled = async {
        loop {
            let session = store.load(SESSION).await.unwrap();
            let continues = session
                .iter()
                .flat_map(|session| &session.steps)
                .any(|step| step.kind == "call_continues");
            if continues {
                return;
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("the first process ended on its own: {status}");
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(60), journaled)
        .await
        .expect("the call's continuation was journaled");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// The second process's part (here): the run restored from the store, with `elicitor`.
async fn resume(
    store_spec: &str,
    model: &FakeModel,
    state: &Path,
    elicitor: Arc<dyn Elicitor>,
) -> String {
    let store = store(store_spec).await;
    let _lease = store
        .lock(SESSION, agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), SESSION).await.unwrap();
    let run = restored.run.expect("a run in progress");
    let registry = registry(state, elicitor).await;
    let mut cycle = cycle(&model.server.uri());
    let outcome = cycle
        .run_with(
            RunRequest::from_state(run)
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    let RunOutcome::Finished(reply) = outcome else {
        panic!("the resumed run did not finish: {outcome:?}");
    };
    assert_eq!(reply.text(), "thanks");
    // What the model read for the call, in the request after the resume.
    let requests = model.received();
    let last = requests.last().unwrap();
    let tool_message = last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .expect("the call's answer");
    tool_message["content"].as_str().unwrap().to_owned()
}

/// Killed while a person is asked; resumed elsewhere: answered from the stored `requestState`.
async fn input_resumes_from_the_stored_state(store_spec: &str) {
    let state = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "greet", "{}")]),
        Reply::text("thanks"),
    ])
    .await;
    run_and_kill(store_spec, &model, state.path(), "greet").await;
    assert_eq!(count(state.path(), "greet.calls"), 1);
    assert_eq!(count(state.path(), "greet.retries"), 0);

    let elicitor = Answering::with("name", "Ada");
    let answer = resume(store_spec, &model, state.path(), elicitor.clone()).await;
    assert_eq!(answer, "Hello, Ada!");
    assert_eq!(elicitor.asked(), ["What is your name?"]);
    assert_eq!(
        count(state.path(), "greet.calls"),
        1,
        "the tool was not called from scratch"
    );
    assert_eq!(count(state.path(), "greet.retries"), 1);
    assert_eq!(model.received().len(), 2);
}

/// Killed while the task works; resumed elsewhere: polls the same task.
async fn task_resumes_polling(store_spec: &str) {
    let state = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", "slow_job", "{}")]),
        Reply::text("thanks"),
    ])
    .await;
    run_and_kill(store_spec, &model, state.path(), "slow_job").await;
    assert_eq!(count(state.path(), "slow_job.calls"), 1);
    let polls_before = count(state.path(), "slow_job-1.polls");
    std::fs::write(state.path().join("release"), "").unwrap();

    let answer = resume(store_spec, &model, state.path(), Arc::new(NeverAnswers)).await;
    assert_eq!(answer, "job done");
    assert_eq!(
        count(state.path(), "slow_job.calls"),
        1,
        "no second tools/call"
    );
    assert!(count(state.path(), "slow_job-1.polls") > polls_before);
    assert_eq!(count(state.path(), "tasks"), 1, "no second task");
    assert_eq!(count(state.path(), "cancels"), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_run_killed_while_asking_resumes_from_the_request_state_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("s.db").display());
    input_resumes_from_the_stored_state(&spec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_run_killed_while_asking_resumes_from_the_request_state_elsewhere() {
    let Some(url) = support::session::fresh_db("mrtr_input").await else {
        return;
    };
    input_resumes_from_the_stored_state(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_run_killed_while_its_task_works_polls_the_same_task_elsewhere() {
    let dir = tempfile::tempdir().unwrap();
    let spec = format!("sqlite:{}", dir.path().join("s.db").display());
    task_resumes_polling(&spec).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_run_killed_while_its_task_works_polls_the_same_task_elsewhere() {
    let Some(url) = support::session::fresh_db("mrtr_task").await else {
        return;
    };
    task_resumes_polling(&url).await;
}

// ---------------------------------------------------------------------------------------------
// Suspended on a question, answered in another process.

/// A question a tool of the test server asks, and how the suspension tests answer it.
struct Asks {
    /// The tool.
    tool: &'static str,
    /// What the server asks, as the elicitor sees it.
    message: &'static str,
    /// What the suspended run's request says the server asks.
    reason: &'static str,
    /// The form field answered (a URL question has none).
    field: &'static str,
    /// The tool's answer once the question is answered.
    result: &'static str,
    /// Whether the call retries with a `requestState` (a task is polled instead).
    retries: bool,
}

/// A form inside the `tools/call` result (multi-round-trip).
const GREET: Asks = Asks {
    tool: "greet",
    message: "What is your name?",
    reason: "MCP server 'jobs' asks: What is your name?",
    field: "name",
    result: "Hello, Ada!",
    retries: true,
};

/// A URL to open, inside the `tools/call` result: shown, never opened; answered "accept".
const SIGN_IN: Asks = Asks {
    tool: "sign_in",
    message: "Sign in to the job board",
    reason: "MCP server 'jobs' asks: Sign in to the job board (URL to open: \
             https://jobs.example/sign-in?session=42)",
    field: "",
    result: "sign-in: accept",
    retries: true,
};

/// A task's own question (`input_required` while the task runs).
const ASK_JOB: Asks = Asks {
    tool: "ask_job",
    message: "Which colour?",
    reason: "MCP server 'jobs' asks: Which colour?",
    field: "colour",
    result: "colour: Ada",
    retries: false,
};

fn asks(tool: &str) -> &'static Asks {
    [&GREET, &SIGN_IN, &ASK_JOB]
        .into_iter()
        .find(|asks| asks.tool == tool)
        .unwrap()
}

/// The second process: the suspended run restored from the store, its waiting call allowed to
/// go on, the question of `CHILD_TOOL` answered with `CHILD_ANSWER`. Runs only as the child of
/// the suspension tests (their environment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of the suspension tests, run by them"]
async fn answer_and_resume_in_this_process() {
    let var = |name: &str| std::env::var(name).unwrap();
    let (store_spec, model, state, answer, asks) = (
        var(CHILD_STORE),
        var(CHILD_MODEL),
        PathBuf::from(var(CHILD_STATE)),
        var(CHILD_ANSWER),
        asks(&var(CHILD_TOOL)),
    );
    let store = store(&store_spec).await;
    let _lease = store
        .lock(SESSION, agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), SESSION).await.unwrap();
    let run = restored.run.expect("the suspended run");
    let decisions: Vec<Decision> = waiting_for_input(&run)
        .into_iter()
        .map(|request| Decision::allow(&request.call_id))
        .collect();
    assert_eq!(decisions.len(), 1);
    let elicitor = Answering::with(asks.field, &answer);
    let registry = registry(&state, elicitor.clone()).await;
    let mut cycle = cycle(&model);
    let outcome = cycle
        .run_with(
            RunRequest::from_state(run)
                .with_decisions(decisions)
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "thanks"));
    assert_eq!(elicitor.asked(), [asks.message]);
    println!("resumed and answered");
}

async fn suspend_here_answer_elsewhere(store_spec: &str, asks: &Asks) {
    let state = tempfile::tempdir().unwrap();
    let model = FakeModel::start(vec![
        Reply::calls(&[("call_1", asks.tool, "{}")]),
        Reply::text("thanks"),
    ])
    .await;
    {
        let store = store(store_spec).await;
        let _lease = store
            .lock(SESSION, agcore::session::LockMode::FailFast)
            .await
            .unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), SESSION).await.unwrap();
        let registry = registry(state.path(), Arc::new(DeferElicitation)).await;
        let mut cycle = model.cycle(CycleConfig::new("test-model"));
        let outcome = cycle
            .run_with(
                RunRequest::prompt("greet me")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        let RunOutcome::Suspended(suspension) = outcome else {
            panic!("expected a suspension, got {outcome:?}");
        };
        // What the server asks, for which call.
        let requests = suspension.requests();
        assert_eq!(requests.len(), 1);
        assert_eq!(
            (requests[0].call_id.as_str(), requests[0].tool.as_str()),
            ("call_1", asks.tool)
        );
        assert!(
            requests[0].reason.ends_with(asks.reason),
            "{}",
            requests[0].reason
        );
        assert_eq!(waiting_for_input(suspension.state()).len(), 1);
    }
    let calls = format!("{}.calls", asks.tool);
    let retries = format!("{}.retries", asks.tool);
    assert_eq!(count(state.path(), &calls), 1);
    assert_eq!(count(state.path(), &retries), 0);
    // A task that asks is left waiting on the server, not cancelled.
    assert_eq!(count(state.path(), "cancels"), 0);

    let (spec, base, dir, tool) = (
        store_spec.to_owned(),
        model.server.uri(),
        state.path().to_owned(),
        asks.tool,
    );
    // Waiting on a blocking thread: the fake model keeps serving on this runtime meanwhile.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "suite::mcp_mrtr::answer_and_resume_in_this_process",
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_STORE, spec)
            .env(CHILD_MODEL, base)
            .env(CHILD_STATE, dir)
            .env(CHILD_ANSWER, "Ada")
            .env(CHILD_TOOL, tool)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}\n{stderr}");

    assert_eq!(
        count(state.path(), &calls),
        1,
        "the tool was not called from scratch"
    );
    assert_eq!(count(state.path(), &retries), usize::from(asks.retries));
    assert_eq!(count(state.path(), "tasks"), usize::from(!asks.retries));
    assert_eq!(count(state.path(), "cancels"), 0);
    let requests = model.received();
    assert_eq!(requests.len(), 2);
    let answer = requests[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|message| message["role"] == "tool")
        .expect("the call's answer")["content"]
        .clone();
    assert_eq!(answer, json!(asks.result));
    // The run is over: nothing waits in the store.
    let (_, restored) = SessionJournal::open(store(store_spec).await, SESSION)
        .await
        .unwrap();
    assert!(restored.run.is_none());
}

fn sqlite_spec(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("s.db").display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_question_nobody_can_answer_suspends_and_is_answered_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    suspend_here_answer_elsewhere(&sqlite_spec(dir.path()), &GREET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_question_nobody_can_answer_suspends_and_is_answered_in_another_process() {
    let Some(url) = support::session::fresh_db("mrtr_suspend").await else {
        return;
    };
    suspend_here_answer_elsewhere(&url, &GREET).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_url_question_suspends_showing_the_url_and_is_accepted_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    suspend_here_answer_elsewhere(&sqlite_spec(dir.path()), &SIGN_IN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_url_question_suspends_showing_the_url_and_is_accepted_in_another_process() {
    let Some(url) = support::session::fresh_db("mrtr_url").await else {
        return;
    };
    suspend_here_answer_elsewhere(&url, &SIGN_IN).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_a_tasks_question_suspends_and_the_same_task_is_answered_in_another_process() {
    let dir = tempfile::tempdir().unwrap();
    suspend_here_answer_elsewhere(&sqlite_spec(dir.path()), &ASK_JOB).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_tasks_question_suspends_and_the_same_task_is_answered_in_another_process() {
    let Some(url) = support::session::fresh_db("mrtr_task_question").await else {
        return;
    };
    suspend_here_answer_elsewhere(&url, &ASK_JOB).await;
}
