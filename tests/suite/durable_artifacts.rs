//! Continuation artifacts across processes, stores and compaction. A local fake of Gemini's
//! OpenAI-compatible endpoint signs the first call of each reply
//! (`tool_calls[0].extra_content.google.thought_signature`) and, like Gemini, answers 400 when
//! a later request brings that call back without its signature, with another one, or with a
//! signature the model never issued, and when a call is not answered right after it. Runs
//! with such a history are suspended on an approval in one process, resumed in another (a child
//! process of this test binary) on SQLite and PostgreSQL, compacted, and continued; a session
//! written by a version-1 build is migrated the same way; a history moved to another model
//! sends no foreign `extra_content`. The same cross-process run with a reasoning model on the
//! Responses API: its encrypted reasoning items go back byte for byte and in place after the
//! resume and the compaction (the checking fake of `support::responses_fake`); and natively on
//! Gemini, a thought part and a signed call suspended here and resumed in another process
//! (`support::gemini_fake`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::context::SUMMARY_SYSTEM_PROMPT;
use agcore::llm::{
    CycleConfig, LlmCycle, LlmError, OpenAiClient, OpenAiConfig, OpenaiChatMessage, ReplyLimits,
};
use agcore::run::{Decision, RunItem, RunOutcome, RunRequest};
use agcore::session::{SESSION_FORMAT_VERSION, SessionJournal, SessionStore};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, DeferAll};
use agcore::vocab::ArtifactProvider;
use agcore::vocab::ChatResponse;
use futures::StreamExt;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// The model the fake plays.
const MODEL: &str = "gemini-3-pro-preview";

/// Gemini's answer to a call without its signature (the OpenAI-compatible endpoint's shape).
const MISSING_SIGNATURE: &str = "Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call `default_api:{name}` , position {position}. Please refer to https://ai.google.dev/gemini-api/docs/thought-signatures for more details.";

// ---------------------------------------------------------------------------------------------
// The checking fake.

/// One scripted reply: tool calls (the first one signed) or a text.
#[derive(Clone, Debug)]
enum Reply {
    Calls(Vec<(&'static str, &'static str)>),
    Text(&'static str),
}

#[derive(Default)]
struct FakeState {
    replies: Vec<Reply>,
    /// Every request body, in order (summary requests included).
    requests: Vec<Value>,
    /// The `extra_content` issued with each signed call, by call id, with the model that made it.
    issued: HashMap<String, (String, Value)>,
    /// Why requests were refused.
    refusals: Vec<String>,
    signatures: usize,
}

#[derive(Clone, Default)]
struct GeminiCompat(Arc<Mutex<FakeState>>);

impl GeminiCompat {
    async fn start(replies: Vec<Reply>) -> (MockServer, GeminiCompat) {
        let fake = GeminiCompat::default();
        fake.0.lock().unwrap().replies = replies;
        let server = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(fake.clone())
            .mount(&server)
            .await;
        (server, fake)
    }

    fn requests(&self) -> Vec<Value> {
        self.0.lock().unwrap().requests.clone()
    }

    fn refusals(&self) -> Vec<String> {
        self.0.lock().unwrap().refusals.clone()
    }

    fn issued(&self, call_id: &str) -> Value {
        self.0.lock().unwrap().issued[call_id].1.clone()
    }
}

/// Gemini's error body on the OpenAI-compatible endpoint.
fn gemini_error(message: &str) -> ResponseTemplate {
    ResponseTemplate::new(400).set_body_json(json!([{
        "error": {"code": 400, "message": message, "status": "INVALID_ARGUMENT"}
    }]))
}

/// What Gemini would refuse in `body`, if anything.
fn violation(body: &Value, issued: &HashMap<String, (String, Value)>) -> Option<String> {
    let model = body["model"].as_str().unwrap_or_default();
    let messages = body["messages"].as_array()?;
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        index += 1;
        if message.get("artifacts").is_some() {
            return Some("Invalid JSON payload received. Unknown name \"artifacts\"".to_owned());
        }
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (position, call) in calls.iter().enumerate() {
            let id = call["id"].as_str().unwrap_or_default();
            let sent = call.get("extra_content");
            match (issued.get(id), sent) {
                // Byte for byte: every value as it was sent out (object keys in JSON order, which
                // carries no meaning).
                (Some((made_by, extra)), Some(sent)) if made_by == model => {
                    let (sent, extra) = (sent.to_string(), extra.to_string());
                    if sent != extra {
                        return Some(format!(
                            "Corrupted thought signature for call {id}: {sent} != {extra}"
                        ));
                    }
                }
                (Some((made_by, _)), None) if made_by == model => {
                    let name = call["function"]["name"].as_str().unwrap_or_default();
                    return Some(
                        MISSING_SIGNATURE
                            .replace("{name}", name)
                            .replace("{position}", &(position + 1).to_string()),
                    );
                }
                // A signature this model never issued (another model's, or made up).
                (_, Some(sent)) => {
                    return Some(format!(
                        "Thought signature is not valid for call {id} ({sent})"
                    ));
                }
                _ => {}
            }
        }
        // Each call answered by one tool message right after its assistant message.
        let mut pending: Vec<&str> = calls.iter().filter_map(|c| c["id"].as_str()).collect();
        while let Some(tool) = messages.get(index).filter(|m| m["role"] == "tool") {
            let id = tool["tool_call_id"].as_str().unwrap_or_default();
            let Some(at) = pending.iter().position(|p| *p == id) else {
                return Some(format!(
                    "function response for {id} answers no function call"
                ));
            };
            pending.remove(at);
            index += 1;
        }
        if !pending.is_empty() {
            return Some("Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.".to_owned());
        }
    }
    None
}

/// A reply in the wire shape of Gemini's OpenAI-compatible endpoint (one chunk when streamed).
fn reply_body(reply: &Reply, state: &mut FakeState, model: &str, stream: bool) -> Value {
    let message = match reply {
        Reply::Text(text) => json!({"role": "assistant", "content": text}),
        Reply::Calls(calls) => {
            let calls: Vec<Value> = calls
                .iter()
                .enumerate()
                .map(|(position, (id, name))| {
                    let mut call = serde_json::Map::new();
                    // Gemini signs the first call of a step only.
                    if position == 0 {
                        state.signatures += 1;
                        let signature = format!(
                            "CsUDAdHtim{}+/{:04}==",
                            "Q2hhaW4gb2YgdGhvdWdodA".repeat(40),
                            state.signatures
                        );
                        let extra = json!({"google": {"thought_signature": signature}});
                        call.insert("extra_content".to_owned(), extra.clone());
                        state
                            .issued
                            .insert((*id).to_owned(), (model.to_owned(), extra));
                    }
                    call.insert(
                        "function".to_owned(),
                        json!({"arguments": "{}", "name": name}),
                    );
                    call.insert("id".to_owned(), json!(id));
                    if stream {
                        call.insert("index".to_owned(), position.into());
                    }
                    call.insert("type".to_owned(), json!("function"));
                    Value::Object(call)
                })
                .collect();
            json!({"role": "assistant", "tool_calls": calls})
        }
    };
    let finish = match reply {
        Reply::Text(_) => "stop",
        Reply::Calls(_) => "tool_calls",
    };
    let usage = json!({"completion_tokens": 12, "prompt_tokens": 240, "total_tokens": 252});
    if stream {
        json!({
            "choices": [{"delta": message, "finish_reason": finish, "index": 0}],
            "created": 1_767_225_600, "id": "zwPUaP-aBsa", "model": model,
            "object": "chat.completion.chunk", "usage": usage
        })
    } else {
        json!({
            "choices": [{"finish_reason": finish, "index": 0, "message": message}],
            "created": 1_767_225_600, "id": "zwPUaP-aBsa", "model": model,
            "object": "chat.completion", "usage": usage
        })
    }
}

impl Respond for GeminiCompat {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let Ok(body) = serde_json::from_slice::<Value>(&request.body) else {
            return gemini_error("Invalid JSON payload received.");
        };
        let mut state = self.0.lock().unwrap();
        state.requests.push(body.clone());
        if let Some(why) = violation(&body, &state.issued) {
            state.refusals.push(why.clone());
            return gemini_error(&why);
        }
        let summary = body["messages"][0]["content"] == SUMMARY_SYSTEM_PROMPT;
        let reply = if summary {
            Reply::Text("The user asked to ship; lookup and deploy ran.")
        } else if state.replies.is_empty() {
            state
                .refusals
                .push("more requests than scripted replies".to_owned());
            return gemini_error("no more scripted replies");
        } else {
            state.replies.remove(0)
        };
        let model = body["model"].as_str().unwrap_or_default().to_owned();
        let stream = body["stream"] == true;
        let out = reply_body(&reply, &mut state, &model, stream);
        if stream {
            ResponseTemplate::new(200)
                .insert_header("content-type", "text/event-stream")
                .set_body_string(format!("data: {out}\r\n\r\ndata: [DONE]\r\n\r\n"))
        } else {
            ResponseTemplate::new(200).set_body_json(out)
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Tools, cycles, stores.

/// A tool that counts its runs; `lookup`'s output is long enough to be stubbed by compaction.
struct Counting {
    name: &'static str,
    permission: Permission,
    runs: AtomicUsize,
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
        vec![self.permission.clone()]
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!(format!("{} done: {}", self.name, "ok ".repeat(200))))
    }
}

/// `read` tools run; `write` tools are asked, and the approver defers (the run suspends).
fn registry(tools: &[(&'static str, Permission)]) -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
        .with_approver(Arc::new(DeferAll));
    for (name, permission) in tools {
        registry
            .register(Arc::new(Counting {
                name,
                permission: permission.clone(),
                runs: AtomicUsize::new(0),
            }))
            .unwrap();
    }
    registry
}

fn cycle(base: &str, model: &str) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{base}/v1"))).unwrap();
    LlmCycle::new(client, CycleConfig::new(model))
}

/// Run `request` streaming (as the CLI does by default): the final answer, or the error.
async fn run_streaming(
    cycle: &mut LlmCycle,
    request: RunRequest<'_>,
) -> Result<ChatResponse, LlmError> {
    let mut items = cycle.run_with_stream(request);
    while let Some(item) = items.next().await {
        match item {
            RunItem::Finished(reply) => return Ok(reply),
            RunItem::Suspended(suspension) => panic!("suspended: {:?}", suspension.requests()),
            RunItem::Failed(error) => return Err(error),
            // Events (and kinds of items added later) are not what this waits for.
            _ => {}
        }
    }
    panic!("the run stream ended without an outcome")
}

/// A store for the test, by URL: a SQLite file in `dir`, or a fresh PostgreSQL database
/// (`None`: skipped, see `support::session`).
async fn store_url(postgres: bool, dir: &std::path::Path, tag: &str) -> Option<String> {
    if postgres {
        support::session::fresh_db(tag).await
    } else {
        Some(format!("sqlite://{}", dir.join("sessions.db").display()))
    }
}

/// The assistant message with the call `id` in `history`.
fn with_call<'a>(history: &'a [OpenaiChatMessage], id: &str) -> Option<&'a OpenaiChatMessage> {
    history
        .iter()
        .find(|m| m.tool_calls().iter().any(|c| c.id == id))
}

/// The `extra_content` a history keeps for the call `id` (its artifact's field), as JSON text.
fn kept_extra(history: &[OpenaiChatMessage], id: &str) -> Option<String> {
    let message = with_call(history, id)?;
    let index = message.tool_calls().iter().position(|c| c.id == id)?;
    message
        .artifacts()
        .iter()
        .find(|a| a.place == agcore::vocab::ArtifactPlace::On(index as u32 + 1))
        .map(|a| a.data["extra_content"].to_string())
}

/// The calls sent in `body`, each with its `extra_content` as JSON text (`None`: not sent).
fn sent_calls(body: &Value) -> Vec<(String, Option<String>)> {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            (
                c["id"].as_str().unwrap().to_owned(),
                c.get("extra_content").map(Value::to_string),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Suspend here, resume in another process, compact, continue.

/// The environment a child process gets: the store, the fake, the session.
const CHILD_STORE: &str = "AGCORE_TEST_DURABLE_STORE";
const CHILD_BASE: &str = "AGCORE_TEST_DURABLE_BASE";

/// Run the ignored test `child` of this file in a child process of this test binary.
async fn in_another_process(child: &str, store: &str, base: &str) {
    let name = format!("suite::durable_artifacts::{child}");
    let store = store.to_owned();
    let base = base.to_owned();
    // Waiting on a blocking thread: the fake keeps serving on this runtime meanwhile.
    let output = tokio::task::spawn_blocking(move || {
        std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &name,
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_STORE, store)
            .env(CHILD_BASE, base)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "{stdout}\n{stderr}");
}

/// The tools of the suspended run.
const TOOLS: [(&str, Permission); 2] =
    [("lookup", Permission::Read), ("deploy", Permission::Write)];

/// The second process: the run restored from the store, the deferred call approved; when it
/// has finished, the history compacted and a new prompt sent — each request checked by the
/// fake. Runs only as the child of `suspended_here_resumed_elsewhere` (its environment).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of the cross-process tests, run by them"]
async fn resume_compact_and_continue_in_this_process() {
    let (Ok(url), Ok(base)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_BASE)) else {
        panic!("run by the cross-process tests, with {CHILD_STORE} and {CHILD_BASE}")
    };
    let store = agcore::session::open(&url).await.unwrap();
    let _lease = store
        .lock("gemini", agcore::session::LockMode::FailFast)
        .await
        .unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "gemini").await.unwrap();
    let state = restored.run.expect("the suspended run");
    assert_eq!(state.pending_approvals()[0].call_id, "fc_deploy");
    // The signature came through the store, in the suspended turn.
    let agcore::run::Phase::AwaitingApproval { turn, .. } = &state.phase else {
        panic!("{:?}", state.phase)
    };
    let assistant = turn.assistant.as_ref().expect("the turn's reply");
    assert!(kept_extra(std::slice::from_ref(assistant), "fc_lookup").is_some());
    let registry = registry(&TOOLS);
    let mut cycle = cycle(&base, MODEL);
    // Streamed here (the first process's requests were not): both of the chat-completions
    // decoders keep the signatures.
    let reply = run_streaming(
        &mut cycle,
        RunRequest::from_state(state)
            .with_decisions(vec![Decision::allow("fc_deploy")])
            .with_tools(&registry)
            .with_journal(&journal),
    )
    .await
    .unwrap();
    assert_eq!(reply.text(), "Deployed.");
    // Compacted: the oldest tool turn summarised, the newest kept whole.
    cycle.config_mut().context.keep_last_turns = 2;
    let events = cycle.compact().await;
    assert!(!events.is_empty(), "nothing was compacted");
    assert!(with_call(cycle.messages(), "fc_lookup").is_none());
    assert!(kept_extra(cycle.messages(), "fc_check").is_some());
    let outcome = cycle
        .run_with(
            RunRequest::prompt("Anything else?")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "Nothing else."));
}

/// The first process: suspended on `deploy`; then the child; then what the fake and the
/// store saw.
async fn suspended_here_resumed_elsewhere(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = store_url(postgres, dir.path(), "artifacts").await else {
        return;
    };
    let (server, fake) = GeminiCompat::start(vec![
        Reply::Calls(vec![("fc_lookup", "lookup"), ("fc_deploy", "deploy")]),
        Reply::Calls(vec![("fc_check", "lookup")]),
        Reply::Text("Deployed."),
        Reply::Text("Nothing else."),
    ])
    .await;
    {
        let store = agcore::session::open(&url).await.unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), "gemini").await.unwrap();
        let registry = registry(&TOOLS);
        let mut first = cycle(&server.uri(), MODEL);
        let outcome = first
            .run_with(
                RunRequest::prompt("Ship it.")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, RunOutcome::Suspended(_)), "{outcome:?}");
    }
    in_another_process(
        "resume_compact_and_continue_in_this_process",
        &url,
        &server.uri(),
    )
    .await;

    assert_eq!(fake.refusals(), Vec::<String>::new());
    let requests = fake.requests();
    // The suspending request, two after the approval, the summary, the new prompt.
    assert_eq!(requests.len(), 5, "{requests:#?}");
    // Not streamed here, streamed in the child (see there).
    assert_ne!(requests[0]["stream"], true);
    assert_eq!(requests[1]["stream"], true);
    assert_eq!(requests[2]["stream"], true);
    let lookup = fake.issued("fc_lookup").to_string();
    let check = fake.issued("fc_check").to_string();
    // After the resume: the first turn's signed call came back byte-exact, the unsigned call
    // without one, each answered.
    assert_eq!(
        sent_calls(&requests[1]),
        [
            ("fc_lookup".to_owned(), Some(lookup.clone())),
            ("fc_deploy".to_owned(), None)
        ]
    );
    assert_eq!(
        sent_calls(&requests[2]),
        [
            ("fc_lookup".to_owned(), Some(lookup.clone())),
            ("fc_deploy".to_owned(), None),
            ("fc_check".to_owned(), Some(check.clone()))
        ]
    );
    // The summary request carries no call at all; after it, the summarised turn is gone and
    // the kept one still has its signature.
    assert!(sent_calls(&requests[3]).is_empty());
    assert_eq!(
        sent_calls(&requests[4]),
        [("fc_check".to_owned(), Some(check.clone()))]
    );
    let texts = requests[4]["messages"].to_string();
    assert!(texts.contains("[agcore summary of "), "{texts}");

    // The store: this build's format, the history with the kept signature.
    let store = agcore::session::open(&url).await.unwrap();
    let session = store.load("gemini").await.unwrap().unwrap();
    assert_eq!((session.format_version, SESSION_FORMAT_VERSION), (2, 2));
    let restored = agcore::session::replay(&session).unwrap();
    assert!(restored.run.is_none());
    assert_eq!(kept_extra(&restored.history, "fc_check"), Some(check));
    assert!(with_call(&restored.history, "fc_lookup").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_signatures_survive_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        suspended_here_resumed_elsewhere(false),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_signatures_survive_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        suspended_here_resumed_elsewhere(true),
    )
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The same with reasoning on the Responses API: encrypted reasoning items across processes.

/// A Responses client on `base` (the checking fake of `support::responses_fake`).
fn responses_cycle(base: &str) -> LlmCycle {
    let client = agcore::llm::OpenAiResponsesClient::new(
        agcore::llm::OpenAiResponsesConfig::new(base).with_api_key("sk-test"),
    )
    .unwrap();
    LlmCycle::new(client, CycleConfig::new("gpt-5"))
}

/// The call of the Responses fixtures, asked (so the run suspends on both of its calls).
const WEATHER: [(&str, Permission); 1] = [("get_weather", Permission::Write)];

/// The OpenAiResponses artifacts of `history`'s assistant messages, by the reasoning item id.
fn reasoning_ids(history: &[OpenaiChatMessage]) -> Vec<String> {
    history
        .iter()
        .flat_map(OpenaiChatMessage::artifacts)
        .filter(|a| {
            a.provider == ArtifactProvider::OpenaiResponses && a.data["type"] == "reasoning"
        })
        .map(|a| a.data["id"].as_str().unwrap().to_owned())
        .collect()
}

/// The second process of the Responses test: both suspended calls approved (streamed), the
/// tool turn compacted away, a new prompt sent with the kept turn's reasoning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of the cross-process tests, run by them"]
async fn resume_responses_compact_and_continue_in_this_process() {
    let (Ok(url), Ok(base)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_BASE)) else {
        panic!("run by the cross-process tests, with {CHILD_STORE} and {CHILD_BASE}")
    };
    let store = agcore::session::open(&url).await.unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "reasoning")
        .await
        .unwrap();
    let state = restored.run.expect("the suspended run");
    let pending: Vec<Decision> = state
        .pending_approvals()
        .iter()
        .map(|request| Decision::allow(request.call_id.clone()))
        .collect();
    assert_eq!(pending.len(), 2);
    let registry = registry(&WEATHER);
    let mut cycle = responses_cycle(&base);
    let reply = run_streaming(
        &mut cycle,
        RunRequest::from_state(state)
            .with_decisions(pending)
            .with_tools(&registry)
            .with_journal(&journal),
    )
    .await
    .unwrap();
    assert!(!reply.text().is_empty());
    assert_eq!(reasoning_ids(cycle.messages()).len(), 2);
    cycle.config_mut().context.keep_last_turns = 1;
    assert!(!cycle.compact().await.is_empty(), "nothing was compacted");
    assert_eq!(reasoning_ids(cycle.messages()).len(), 1);
    let outcome = cycle
        .run_with(
            RunRequest::prompt("Anything else?")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
}

/// The Responses run of the cross-process tests: asked for the weather in two cities, it
/// suspends here on both calls (session "reasoning" of the store at `url`, the fake at
/// `base`); then the child process resumes it, compacts and continues.
async fn suspend_here_resume_elsewhere(url: &str, base: &str) {
    {
        let store = agcore::session::open(url).await.unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), "reasoning")
            .await
            .unwrap();
        let registry = registry(&WEATHER);
        let mut first = responses_cycle(base);
        let outcome = first
            .run_with(
                RunRequest::prompt("Weather in Zürich and Tokyo?")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        let RunOutcome::Suspended(suspension) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(suspension.requests().len(), 2);
    }
    in_another_process(
        "resume_responses_compact_and_continue_in_this_process",
        url,
        base,
    )
    .await;
}

/// A reasoning model on the Responses API (`store: false`): its tool turn suspends here, is
/// resumed in another process, compacted and continued; the fake answers 400 like the API for
/// a reasoning item it did not issue (byte for byte) or out of place.
async fn reasoning_suspended_here_resumed_elsewhere(postgres: bool) {
    use support::responses_fake::{Answer, ResponsesFake};
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = store_url(postgres, dir.path(), "reasoning").await else {
        return;
    };
    let fake = ResponsesFake::start(|_, n| match n {
        0 => Answer::Reply {
            stream: "stream_reasoning_parallel_calls.sse",
            whole: "response_reasoning_calls.json",
        },
        _ => Answer::Reply {
            stream: "stream_reasoning_text.sse",
            whole: "response_reasoning_text.json",
        },
    })
    .await;
    suspend_here_resume_elsewhere(&url, &fake.base_url()).await;
    assert_eq!(fake.rejected(), Vec::<String>::new());
    let requests = fake.requests();
    // The suspending request, the one after the approvals, the summary, the new prompt.
    assert_eq!(requests.len(), 4, "{requests:#?}");
    let reasoning = |request: &Value| -> Vec<String> {
        request["input"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|item| item["type"] == "reasoning")
            .map(|item| item["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let tool_turn = "rs_0a1b2c3d4e5f6071rs8293a4b5c6d7e8f90a1b2c3d4e5f6071";
    let text_turn = "rs_1b2c3d4e5f607182rs93a4b5c6d7e8f90a1b2c3d4e5f607182";
    assert_eq!(reasoning(&requests[1]), [tool_turn]);
    assert_eq!(requests[1]["stream"], true);
    assert_eq!(reasoning(&requests[3]), [text_turn]);
    let store = agcore::session::open(&url).await.unwrap();
    let session = store.load("reasoning").await.unwrap().unwrap();
    assert_eq!(session.format_version, 2);
    let restored = agcore::session::replay(&session).unwrap();
    // The kept turn's reasoning, and the new reply's (the fake serves the same text turn).
    assert_eq!(reasoning_ids(&restored.history), [text_turn, text_turn]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_encrypted_reasoning_survives_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        reasoning_suspended_here_resumed_elsewhere(false),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_encrypted_reasoning_survives_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        reasoning_suspended_here_resumed_elsewhere(true),
    )
    .await
    .unwrap();
}

/// Hosted tool blocks (issue 36): a Responses reply's `web_search_call` items go back byte for
/// byte and in place after a suspension here, a resume in another process, and a compaction
/// that keeps the turn holding one. The fake answers 400 for a hosted item it did not issue
/// exactly as it issued it. The suspended tool turn searched between its reasoning and its
/// calls (a whole reply); the resumed turn's streamed reply searched before its text.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hosted_search_items_survive_suspend_resume_elsewhere_and_compaction() {
    use support::responses_fake::{Answer, ResponsesFake, fixture};
    let run = async {
        let dir = tempfile::tempdir().unwrap();
        let Some(url) = store_url(false, dir.path(), "reasoning").await else {
            return;
        };
        let fake = ResponsesFake::start(|_, n| match n {
            0 => Answer::Reply {
                stream: "stream_reasoning_parallel_calls.sse",
                whole: "response_reasoning_search_calls.json",
            },
            _ => Answer::Reply {
                stream: "stream_reasoning_search_text.sse",
                whole: "response_reasoning_text.json",
            },
        })
        .await;
        suspend_here_resume_elsewhere(&url, &fake.base_url()).await;
        assert_eq!(fake.rejected(), Vec::<String>::new());
        let requests = fake.requests();
        assert_eq!(requests.len(), 4, "{requests:#?}");
        let issued_whole: Value =
            serde_json::from_str(&fixture("response_reasoning_search_calls.json")).unwrap();
        let tool_turn_search = issued_whole["output"][1].clone();
        assert_eq!(tool_turn_search["type"], "web_search_call");
        let types = |request: &Value| -> Vec<String> {
            request["input"]
                .as_array()
                .unwrap()
                .iter()
                .map(|item| item["type"].as_str().unwrap_or("message").to_owned())
                .collect()
        };
        let item = |request: &Value, id: &str| -> Option<Value> {
            request["input"]
                .as_array()
                .unwrap()
                .iter()
                .find(|item| item["id"] == id)
                .cloned()
        };
        // After the resume elsewhere: the tool turn's search, as issued, between its
        // reasoning and its calls.
        let search_id = tool_turn_search["id"].as_str().unwrap();
        assert_eq!(
            item(&requests[1], search_id),
            Some(tool_turn_search.clone())
        );
        let kinds = types(&requests[1]);
        let at = kinds
            .iter()
            .position(|kind| kind == "web_search_call")
            .unwrap();
        assert_eq!(kinds[at - 1], "reasoning", "{kinds:?}");
        assert_eq!(kinds[at + 1], "function_call", "{kinds:?}");
        // After the compaction: the tool turn is summarised away with its search; the kept
        // turn's streamed search goes back as the stream's finished item said it.
        let streamed = fixture("stream_reasoning_search_text.sse");
        let done: Value = streamed
            .split("\n\n")
            .filter_map(|block| block.split_once("\ndata: "))
            .filter(|(event, _)| *event == "event: response.output_item.done")
            .map(|(_, data)| serde_json::from_str::<Value>(data).unwrap())
            .find(|data| data["item"]["type"] == "web_search_call")
            .unwrap()["item"]
            .clone();
        let kept_id = done["id"].as_str().unwrap();
        assert_eq!(item(&requests[3], kept_id), Some(done));
        assert_eq!(item(&requests[3], search_id), None);
    };
    tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Natively on Gemini: thought parts and signatures in their parts across processes.

/// A Gemini client on `base` (the checking fake of `support::gemini_fake`).
fn gemini_cycle(base: &str) -> LlmCycle {
    let client = agcore::llm::GeminiClient::new(
        agcore::llm::GeminiConfig::new(base).with_api_key(support::gemini_fake::API_KEY),
    )
    .unwrap();
    LlmCycle::new(client, CycleConfig::new(MODEL))
}

/// The call of the Gemini fixture, asked (so the run suspends on it).
const LIST: [(&str, Permission); 1] = [("list_directory", Permission::Write)];

/// The Gemini artifacts (thought parts and signatures) of `history`.
fn gemini_artifacts(history: &[OpenaiChatMessage]) -> usize {
    history
        .iter()
        .flat_map(OpenaiChatMessage::artifacts)
        .filter(|a| a.provider == ArtifactProvider::Gemini)
        .count()
}

/// The second process of the Gemini test: the suspended call approved (streamed), then a new
/// prompt with the whole history. Not compacted: `support::gemini_fake` wants every signature
/// it issued back in every later request to the model, stricter than Gemini (which validates
/// the current turn), so it refuses any history that dropped a signed turn — compaction with
/// artifacts is covered above on chat completions and Responses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of the cross-process tests, run by them"]
async fn resume_gemini_and_continue_in_this_process() {
    let (Ok(url), Ok(base)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_BASE)) else {
        panic!("run by the cross-process tests, with {CHILD_STORE} and {CHILD_BASE}")
    };
    let store = agcore::session::open(&url).await.unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "thoughts")
        .await
        .unwrap();
    let state = restored.run.expect("the suspended run");
    let call = state.pending_approvals()[0].call_id.clone();
    let registry = registry(&LIST);
    let mut cycle = gemini_cycle(&base);
    let reply = run_streaming(
        &mut cycle,
        RunRequest::from_state(state)
            .with_decisions(vec![Decision::allow(call)])
            .with_tools(&registry)
            .with_journal(&journal),
    )
    .await
    .unwrap();
    assert!(!reply.text().is_empty());
    assert!(gemini_artifacts(cycle.messages()) >= 2);
    let outcome = cycle
        .run_with(
            RunRequest::prompt("Anything else?")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
}

/// A Gemini 3 model natively: its signed call (after a thought part) suspends here, is resumed
/// in another process and continued; the fake answers 400 like Gemini for a signature
/// missing, changed or out of its part, and for turns that do not alternate.
async fn thoughts_suspended_here_resumed_elsewhere(postgres: bool) {
    use support::gemini_fake::{GeminiFake, Reply as GeminiReply};
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = store_url(postgres, dir.path(), "thoughts").await else {
        return;
    };
    let fake = GeminiFake::start(vec![
        GeminiReply::json(200, "generate_content_signed_call.json"),
        GeminiReply::stream("stream_gemini3_answer_signature_last.sse"),
        GeminiReply::json(200, "generate_content_answer_signed_text.json"),
    ])
    .await;
    {
        let store = agcore::session::open(&url).await.unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), "thoughts")
            .await
            .unwrap();
        let registry = registry(&LIST);
        let mut first = gemini_cycle(&fake.base_url);
        let outcome = first
            .run_with(
                RunRequest::prompt("What is in this directory?")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        assert!(matches!(outcome, RunOutcome::Suspended(_)), "{outcome:?}");
    }
    in_another_process(
        "resume_gemini_and_continue_in_this_process",
        &url,
        &fake.base_url,
    )
    .await;
    let received = fake.received();
    let violations: Vec<&String> = received
        .iter()
        .filter_map(|r| r.violation.as_ref())
        .collect();
    assert!(violations.is_empty(), "{violations:?}");
    assert_eq!(received.len(), 3);
    assert!(received[1].target.contains(":streamGenerateContent"));
    // After the resume, and on the next prompt: the thought part and the signed call back in
    // their model turn, byte for byte (the fake checks each).
    for request in &received[1..] {
        let model_turn = request.body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["role"] == "model")
            .unwrap()
            .to_string();
        assert!(model_turn.contains("lnQm3ESOBgPk/PXaRCU7"), "{model_turn}");
        assert!(model_turn.contains("\"thought\":true"), "{model_turn}");
    }
    let store = agcore::session::open(&url).await.unwrap();
    let session = store.load("thoughts").await.unwrap().unwrap();
    assert_eq!(session.format_version, 2);
    let restored = agcore::session::replay(&session).unwrap();
    assert!(gemini_artifacts(&restored.history) > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thought_signatures_survive_suspend_and_resume_elsewhere_natively() {
    tokio::time::timeout(
        Duration::from_secs(120),
        thoughts_suspended_here_resumed_elsewhere(false),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_thought_signatures_survive_suspend_and_resume_elsewhere_natively() {
    tokio::time::timeout(
        Duration::from_secs(120),
        thoughts_suspended_here_resumed_elsewhere(true),
    )
    .await
    .unwrap();
}

// ---------------------------------------------------------------------------------------------
// The fake fails when it should; another model gets no foreign signature.

/// A history whose signature was lost (or edited) is refused by the fake as Gemini refuses it:
/// the checks above can fail.
#[tokio::test]
async fn the_fake_refuses_a_history_without_its_signature_or_with_an_edited_one() {
    let (server, fake) = GeminiCompat::start(vec![
        Reply::Calls(vec![("fc_1", "lookup")]),
        Reply::Text("Done."),
    ])
    .await;
    let registry = registry(&TOOLS);
    let mut cycle = cycle(&server.uri(), MODEL);
    cycle
        .run_with(RunRequest::prompt("Look.").with_tools(&registry))
        .await
        .unwrap();
    let history = cycle.messages().to_vec();
    assert!(kept_extra(&history, "fc_1").is_some());
    for edit in ["drop", "change"] {
        let edited: Vec<OpenaiChatMessage> = history
            .iter()
            .cloned()
            .map(|message| {
                let mut artifacts = message.artifacts().to_vec();
                if artifacts.is_empty() {
                    return message;
                }
                if edit == "drop" {
                    artifacts.clear();
                } else {
                    artifacts[0].data["extra_content"]["google"]["thought_signature"] =
                        json!("CsUDAdHtim-edited");
                }
                message.with_artifacts(artifacts)
            })
            .collect();
        let mut again = LlmCycle::from_history(
            OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap(),
            CycleConfig::new(MODEL),
            edited,
        );
        let error = again
            .run_with(RunRequest::prompt("And?").with_tools(&registry))
            .await
            .unwrap_err();
        assert!(
            matches!(error, LlmError::BadRequest { status: 400, .. }),
            "{error:?}"
        );
        let refusal = fake.refusals().pop().unwrap();
        let expected = if edit == "drop" {
            "Function call is missing a thought_signature"
        } else {
            "Corrupted thought signature"
        };
        assert!(refusal.starts_with(expected), "{refusal}");
    }
}

/// A history moved to another model keeps its artifacts but sends none of them there: the
/// other model would refuse a signature it did not make. Back on the first model they are
/// sent again.
#[tokio::test]
async fn a_history_moved_to_another_model_sends_no_foreign_extra_content() {
    let (server, fake) = GeminiCompat::start(vec![
        Reply::Calls(vec![("fc_1", "lookup")]),
        Reply::Text("Done."),
        Reply::Text("Other model here."),
        Reply::Text("Back."),
    ])
    .await;
    let registry = registry(&TOOLS);
    let mut cycle = cycle(&server.uri(), MODEL);
    cycle
        .run_with(RunRequest::prompt("Look.").with_tools(&registry))
        .await
        .unwrap();
    let signed = fake.issued("fc_1").to_string();
    for (model, expected) in [("gemini-2.5-flash", None), (MODEL, Some(signed.clone()))] {
        cycle.config_mut().model = model.to_owned();
        let outcome = cycle
            .run_with(RunRequest::prompt("Again.").with_tools(&registry))
            .await
            .unwrap();
        assert!(matches!(outcome, RunOutcome::Finished(_)));
        let request = fake.requests().pop().unwrap();
        assert_eq!(request["model"], model);
        assert_eq!(sent_calls(&request), [("fc_1".to_owned(), expected)]);
        // Kept in the history all along.
        assert_eq!(kept_extra(cycle.messages(), "fc_1"), Some(signed.clone()));
    }
    assert_eq!(fake.refusals(), Vec::<String>::new());
    assert!(cycle.messages().iter().all(|m| {
        m.artifacts()
            .iter()
            .all(|a| a.provider == ArtifactProvider::OpenaiChat)
    }));
}

/// A history from the native APIs (an Anthropic thinking block, a Responses reasoning item and
/// item id, a Gemini thought signature) sent through chat completions carries none of it: not
/// as fields, not as items; it stays in the history for its own API.
#[tokio::test]
async fn a_history_from_other_apis_sends_none_of_their_artifacts_on_chat_completions() {
    use agcore::vocab::{Artifact, ArtifactPlace};
    let (server, fake) = GeminiCompat::start(vec![Reply::Text("Fine.")]).await;
    let foreign = vec![
        Artifact::new(
            ArtifactProvider::Anthropic,
            "claude-sonnet-4-5",
            ArtifactPlace::Before(0),
            json!({"type": "thinking", "thinking": "secret plan", "signature": "EqQBsig"}),
        ),
        Artifact::new(
            ArtifactProvider::OpenaiResponses,
            MODEL,
            ArtifactPlace::Before(1),
            json!({"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAAB"}),
        ),
        Artifact::new(
            ArtifactProvider::OpenaiResponses,
            MODEL,
            ArtifactPlace::On(1),
            json!({"id": "fc_item_1"}),
        ),
        Artifact::new(
            ArtifactProvider::Gemini,
            MODEL,
            ArtifactPlace::On(1),
            json!({"thoughtSignature": "CiQBgemini"}),
        ),
    ];
    let history = vec![
        OpenaiChatMessage::user_text("Look."),
        OpenaiChatMessage::assistant_tool_calls(
            Some("Looking.".into()),
            vec![agcore::llm::ToolCall::new("toolu_1", "lookup", "{}")],
        )
        .with_artifacts(foreign.clone()),
        OpenaiChatMessage::tool_result("toolu_1", "lookup done"),
        OpenaiChatMessage::assistant_text("Done."),
    ];
    let registry = registry(&TOOLS);
    let mut cycle = LlmCycle::from_history(
        OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap(),
        CycleConfig::new(MODEL),
        history,
    );
    let outcome = cycle
        .run_with(RunRequest::prompt("And?").with_tools(&registry))
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)));
    assert_eq!(fake.refusals(), Vec::<String>::new());
    let request = fake.requests().pop().unwrap();
    let text = request["messages"].to_string();
    for leaked in [
        "secret plan",
        "EqQBsig",
        "rs_1",
        "gAAAAB",
        "fc_item_1",
        "CiQBgemini",
        "thoughtSignature",
        "artifacts",
    ] {
        assert!(!text.contains(leaked), "{leaked} sent: {text}");
    }
    assert_eq!(sent_calls(&request), [("toolu_1".to_owned(), None)]);
    assert_eq!(request["messages"][1]["content"], "Looking.");
    assert_eq!(cycle.messages()[1].artifacts(), foreign.as_slice());
}

/// A session step holds one reply, and a streamed reply's artifacts count against its byte
/// limit: a signature past `max_message_bytes` fails the run with a typed error before anything
/// of the reply is stored, so steps stay as bounded as the replies.
#[tokio::test]
async fn artifacts_count_against_the_reply_limit_so_steps_stay_bounded() {
    let (server, fake) = GeminiCompat::start(vec![Reply::Calls(vec![("fc_big", "lookup")])]).await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        agcore::session::open(&format!("sqlite://{}", dir.path().join("s.db").display()))
            .await
            .unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "bounded")
        .await
        .unwrap();
    let mut config = CycleConfig::new(MODEL);
    // The call itself is a few bytes; its signature (about 900) is not.
    config.reply_limits = ReplyLimits::default().with_max_message_bytes(600);
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut cycle = LlmCycle::new(client, config);
    let registry = registry(&TOOLS);
    // Streamed: the reply limits bound an assembled reply (a whole body is bounded by the
    // transport's body limit instead).
    let error = run_streaming(
        &mut cycle,
        RunRequest::prompt("Look.")
            .with_tools(&registry)
            .with_journal(&journal),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(error, LlmError::ResponseLimitExceeded { .. }),
        "{error:?}"
    );
    assert!(fake.issued("fc_big").to_string().len() > 600);
    let session = store.load("bounded").await.unwrap().unwrap();
    for step in &session.steps {
        let text = step.payload.to_string();
        assert!(!text.contains("fc_big"), "{text}");
        assert!(text.len() < 600, "{text}");
    }
}

// ---------------------------------------------------------------------------------------------
// A session written by a version-1 build, migrated.

const V1_SESSION: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/sessions-v1-suspended.json"
);

/// The fixture's rows, inserted as a version-1 build left them (the store's schema is made
/// by opening it first).
async fn insert_v1_fixture(url: &str, fixture: &Value) {
    let session = (
        fixture["name"].as_str().unwrap(),
        fixture["format_version"].as_i64().unwrap(),
        fixture["created_ms"].as_i64().unwrap(),
        fixture["updated_ms"].as_i64().unwrap(),
        fixture["next_seq"].as_i64().unwrap(),
    );
    let steps: Vec<(i64, &str, &str)> = fixture["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["seq"].as_i64().unwrap(),
                s["kind"].as_str().unwrap(),
                s["payload"].as_str().unwrap(),
            )
        })
        .collect();
    if let Some(path) = url.strip_prefix("sqlite://") {
        let db = rusqlite::Connection::open(path).unwrap();
        db.execute(
            "INSERT INTO agcore_sessions VALUES (?1, ?2, ?3, ?4, ?5)",
            rusqlite::params![session.0, session.1, session.2, session.3, session.4],
        )
        .unwrap();
        for (seq, kind, payload) in steps {
            db.execute(
                "INSERT INTO agcore_steps VALUES (?1, ?2, ?3, ?4)",
                rusqlite::params![session.0, seq, kind, payload],
            )
            .unwrap();
        }
    } else {
        let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        let version = i32::try_from(session.1).unwrap();
        client
            .execute(
                "INSERT INTO agcore_sessions VALUES ($1, $2, $3, $4, $5)",
                &[&session.0, &version, &session.2, &session.3, &session.4],
            )
            .await
            .unwrap();
        for (seq, kind, payload) in steps {
            client
                .execute(
                    "INSERT INTO agcore_steps VALUES ($1, $2, $3, $4)",
                    &[&session.0, &seq, &kind, &payload],
                )
                .await
                .unwrap();
        }
    }
}

/// The version-1 session loads and resumes as it is; the resumed run's new turn (signed) is
/// appended, which marks the session with this build's version; the old steps are unchanged
/// and the new artifact is stored byte-exact.
async fn version_1_session_migrates(postgres: bool) {
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = store_url(postgres, dir.path(), "migrate").await else {
        return;
    };
    let fixture: Value =
        serde_json::from_str(&std::fs::read_to_string(V1_SESSION).unwrap()).unwrap();
    let store: Arc<dyn SessionStore> = agcore::session::open(&url).await.unwrap();
    insert_v1_fixture(&url, &fixture).await;
    let name = fixture["name"].as_str().unwrap();
    let before = store.load(name).await.unwrap().unwrap();
    assert_eq!(before.format_version, 1);
    // Reading does not mark it.
    let (journal, restored) = SessionJournal::open(store.clone(), name).await.unwrap();
    assert_eq!(store.load(name).await.unwrap().unwrap().format_version, 1);
    let state = restored.run.expect("the suspended run of the fixture");
    assert_eq!(state.pending_approvals()[0].call_id, "call_write");

    let (server, fake) = GeminiCompat::start(vec![
        Reply::Calls(vec![("fc_more", "read_file")]),
        Reply::Text("Done."),
    ])
    .await;
    let registry = registry(&[
        ("read_file", Permission::Read),
        ("write_file", Permission::Write),
    ]);
    let mut cycle = cycle(&server.uri(), MODEL);
    let outcome = cycle
        .run_with(
            RunRequest::from_state(state)
                .with_decisions(vec![Decision::deny("call_write", None)])
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(
        matches!(outcome, RunOutcome::Finished(ref r) if r.text() == "Done."),
        "{outcome:?}"
    );
    assert_eq!(fake.refusals(), Vec::<String>::new());
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    // The fixture's finished call kept its answer; the denied one was answered, not run.
    let tools: Vec<(&str, &str)> = requests[0]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| {
            (
                m["tool_call_id"].as_str().unwrap(),
                m["content"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(tools[0], ("call_read", "     1→hello\n"));
    assert_eq!(tools[1].0, "call_write");
    let signed = fake.issued("fc_more").to_string();
    assert_eq!(
        sent_calls(&requests[1]).last().unwrap(),
        &("fc_more".to_owned(), Some(signed.clone()))
    );

    let after = store.load(name).await.unwrap().unwrap();
    // Version 2: a version-1 build now refuses it rather than drop the artifact unseen.
    assert_eq!((after.format_version, SESSION_FORMAT_VERSION), (2, 2));
    let old: Vec<Value> = fixture["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| serde_json::from_str(s["payload"].as_str().unwrap()).unwrap())
        .collect();
    let kept: Vec<Value> = after.steps[..old.len()]
        .iter()
        .map(|s| s.payload.clone())
        .collect();
    assert_eq!(kept, old, "the version-1 steps are left as they were");
    let history = agcore::session::replay(&after).unwrap().history;
    assert_eq!(kept_extra(&history, "fc_more"), Some(signed));
    // A later process resumes it as a version-2 session, artifacts included.
    drop(journal);
    let (_, again) = SessionJournal::open(store.clone(), name).await.unwrap();
    assert_eq!(again.history, cycle.messages());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_version_1_session_migrates() {
    tokio::time::timeout(Duration::from_secs(60), version_1_session_migrates(false))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_version_1_session_migrates() {
    tokio::time::timeout(Duration::from_secs(60), version_1_session_migrates(true))
        .await
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Natively on Anthropic: thinking blocks and their signatures across processes.

/// The model of the Anthropic fixtures.
const CLAUDE: &str = "claude-sonnet-4-5";

/// An Anthropic client on `base` (the checking fake of `support::anthropic_fake`), thinking on.
fn anthropic_cycle(base: &str) -> LlmCycle {
    let client = agcore::llm::AnthropicClient::new(
        agcore::llm::AnthropicConfig::new(base).with_api_key("test-key"),
    )
    .unwrap();
    let mut config = CycleConfig::new(CLAUDE);
    config.options.reasoning_effort = Some(agcore::vocab::ReasoningEffort::Medium);
    LlmCycle::new(client, config)
}

/// The signed thinking blocks (`thinking`, `redacted_thinking`) of `history`.
fn thinking_blocks(history: &[OpenaiChatMessage]) -> Vec<Value> {
    history
        .iter()
        .flat_map(OpenaiChatMessage::artifacts)
        .filter(|a| a.provider == ArtifactProvider::Anthropic)
        .map(|a| a.data.clone())
        .collect()
}

/// The second process of the Anthropic test: both suspended calls approved (streamed), the
/// tool turn compacted away, a new prompt sent — each request checked by the fake.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "the second process of the cross-process tests, run by them"]
async fn resume_anthropic_compact_and_continue_in_this_process() {
    let (Ok(url), Ok(base)) = (std::env::var(CHILD_STORE), std::env::var(CHILD_BASE)) else {
        panic!("run by the cross-process tests, with {CHILD_STORE} and {CHILD_BASE}")
    };
    let store = agcore::session::open(&url).await.unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "thinking")
        .await
        .unwrap();
    let state = restored.run.expect("the suspended run");
    let pending: Vec<Decision> = state
        .pending_approvals()
        .iter()
        .map(|request| Decision::allow(request.call_id.clone()))
        .collect();
    assert_eq!(pending.len(), 2);
    let registry = registry(&WEATHER);
    let mut cycle = anthropic_cycle(&base);
    let reply = run_streaming(
        &mut cycle,
        RunRequest::from_state(state)
            .with_decisions(pending)
            .with_tools(&registry)
            .with_journal(&journal),
    )
    .await
    .unwrap();
    assert!(reply.text().starts_with("Paris"), "{}", reply.text());
    // The tool turn's thinking and redacted thinking, and the answer's thinking.
    assert_eq!(thinking_blocks(cycle.messages()).len(), 3);
    cycle.config_mut().context.keep_last_turns = 1;
    assert!(!cycle.compact().await.is_empty(), "nothing was compacted");
    let outcome = cycle
        .run_with(
            RunRequest::prompt("Anything else?")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
}

/// Claude with extended thinking: its tool turn (thinking, redacted thinking, two parallel
/// calls) suspends here on two approvals, is resumed in another process, compacted and
/// continued; the fake answers 400 like the API when a thinking block comes back changed,
/// out of place, or to another model, or when a tool result is not first and tied to its call.
async fn thinking_suspended_here_resumed_elsewhere(postgres: bool) {
    use support::anthropic_fake::{AnthropicFake, Reply as AnthropicReply};
    let dir = tempfile::tempdir().unwrap();
    let Some(url) = store_url(postgres, dir.path(), "thinking").await else {
        return;
    };
    let fake = AnthropicFake::start(vec![
        AnthropicReply::Fixture("thinking_parallel_tools"),
        AnthropicReply::Fixture("thinking_answer"),
        AnthropicReply::Fixture("thinking_answer"),
        AnthropicReply::Fixture("thinking_answer"),
    ])
    .await;
    {
        let store = agcore::session::open(&url).await.unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), "thinking")
            .await
            .unwrap();
        let registry = registry(&WEATHER);
        let mut first = anthropic_cycle(&fake.base_url());
        let outcome = first
            .run_with(
                RunRequest::prompt("Weather in Paris and Tokyo?")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        let RunOutcome::Suspended(suspension) = outcome else {
            panic!("{outcome:?}")
        };
        assert_eq!(suspension.requests().len(), 2);
    }
    in_another_process(
        "resume_anthropic_compact_and_continue_in_this_process",
        &url,
        &fake.base_url(),
    )
    .await;
    fake.assert_no_rejections();
    let received = fake.received();
    // The suspending request, the one after the approvals, the summary, the new prompt.
    assert_eq!(received.len(), 4, "{received:#?}");
    // After the approvals: the tool turn's blocks back first, byte for byte, then the results.
    let resumed = &received[1].body;
    assert_eq!(resumed["stream"], true);
    let assistant = &resumed["messages"][1]["content"];
    assert_eq!(assistant[0]["type"], "thinking");
    assert_eq!(assistant[1]["type"], "redacted_thinking");
    let served: Value = serde_json::from_str(&support::anthropic_fake::fixture(
        "thinking_parallel_tools.json",
    ))
    .unwrap();
    assert_eq!(assistant[0], served["content"][0]);
    assert_eq!(assistant[1], served["content"][1]);
    let results = &resumed["messages"][2]["content"];
    assert_eq!(results[0]["type"], "tool_result");
    assert_eq!(results[0]["tool_use_id"], served["content"][3]["id"]);
    assert_eq!(results[1]["tool_use_id"], served["content"][4]["id"]);
    let store = agcore::session::open(&url).await.unwrap();
    let session = store.load("thinking").await.unwrap().unwrap();
    assert_eq!(session.format_version, SESSION_FORMAT_VERSION);
    let restored = agcore::session::replay(&session).unwrap();
    // After compaction: the kept turn (the answer) goes back with its thinking byte for byte —
    // asserted on the request itself, which the new reply's thinking cannot satisfy.
    let answer: Value =
        serde_json::from_str(&support::anthropic_fake::fixture("thinking_answer.json")).unwrap();
    let compacted = &received[3].body;
    let kept: Vec<&Value> = compacted["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "assistant")
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter(|block| block["type"] == "thinking")
        .collect();
    assert_eq!(kept, [&answer["content"][0]], "{compacted:#}");
    // In the store: the kept turn's thinking and the new reply's.
    assert_eq!(thinking_blocks(&restored.history).len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_thinking_survives_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        thinking_suspended_here_resumed_elsewhere(false),
    )
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_thinking_survives_suspend_resume_elsewhere_and_compaction() {
    tokio::time::timeout(
        Duration::from_secs(120),
        thinking_suspended_here_resumed_elsewhere(true),
    )
    .await
    .unwrap();
}
