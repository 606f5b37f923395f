//! Deferred tools and `tool_search` (issue 36) with 300 tools served by a real MCP server (the
//! demo server's `--tools-file`, `tests/fixtures/tool_search/catalog.json`) and a scripted
//! model on 127.0.0.1 speaking the chat completions wire: the first request carries only the
//! search tool; a found tool is offered from the next request on and runs under the usual
//! checks; hidden tools are never found; the loaded set comes back after a crash and resume in
//! a new cycle. Also the issue's figures: input tokens with and without deferral, and the
//! search's top-3 hit rate on 50 natural-language queries (`queries.json`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::context::Tiktoken;
use agcore::context::TiktokenEncoding;
use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::{RunOutcome, RunRequest, RunState};
use agcore::session::{SessionJournal, SessionStore, SqliteStore};
use agcore::tools::ApprovalPolicy;
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
use agcore::tools::exposure::ExposurePolicy;
use agcore::tools::mcp::{McpClient, McpToolFilter, register_mcp_tools};
use agcore::tools::prelude::*;
use agcore::tools::profile::ProfileEntry;
use agcore::tools::tool_search::{self, TOOL_SEARCH, ToolIndex};
use agcore::vocab::ToolDefinition;
use serde_json::{Value, json};
use support::mcp::{demo, repo};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SERVER: &str = "saas";

fn fixture(name: &str) -> PathBuf {
    repo().join("tests/fixtures/tool_search").join(name)
}

/// The catalog's 300 tools, registered from the demo server over stdio.
async fn catalog_registry(registry: ToolRegistry) -> ToolRegistry {
    let catalog = fixture("catalog.json").display().to_string();
    // Only the catalog: the demo server's own three tools are left out.
    let mut client =
        McpClient::new(SERVER, demo(&["--tools-file", &catalog])).with_tool_filter(McpToolFilter {
            include: None,
            exclude: vec![
                "get_weather".to_owned(),
                "echo".to_owned(),
                "add".to_owned(),
            ],
        });
    client.connect().await.unwrap();
    let mut registry = registry;
    let registered = register_mcp_tools(&mut registry, [client]).unwrap();
    assert_eq!(registered.len(), 300, "the catalog's tools all register");
    registry
}

/// The usual checks: the default permissions (Delete and Shell denied), writes asked.
fn checked() -> ToolRegistry {
    ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
}

// ---------------------------------------------------------------------------------------------
// The scripted model: chat completions JSON replies, every request recorded.

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
        if replies.is_empty() {
            return ResponseTemplate::new(500).set_body_string("more requests than scripted");
        }
        ResponseTemplate::new(200).set_body_json(replies.remove(0))
    }
}

fn calls_reply(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, arguments)| {
            json!({"id": id, "type": "function",
                   "function": {"name": name, "arguments": arguments.to_string()}})
        })
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

async fn model_server(replies: Vec<Value>) -> (MockServer, Script) {
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

fn tool_names(request: &Value) -> Vec<String> {
    request["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// The `tool` messages of a request: (call id, content).
fn tool_answers(request: &Value) -> Vec<(String, String)> {
    request["messages"]
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

fn answer<'a>(answers: &'a [(String, String)], id: &str) -> &'a str {
    &answers.iter().find(|(call, _)| call == id).unwrap().1
}

/// Denies every call it is asked about, and remembers which tools it was asked for.
#[derive(Default)]
struct Refuser {
    asked: Mutex<Vec<String>>,
}

#[async_trait]
impl Approver for Refuser {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        self.asked.lock().unwrap().push(request.tool.clone());
        ApprovalDecision::Deny {
            message: Some("not today".to_owned()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The loop.

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_searches_then_calls_a_found_tool_under_the_usual_checks() {
    let refuser = Arc::new(Refuser::default());
    let registry = catalog_registry(
        checked()
            .with_approver(refuser.clone())
            .with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]),
    )
    .await;
    let (server, script) = model_server(vec![
        // A deferred tool named before any search loaded it, and the search.
        calls_reply(&[
            ("early", "postgres_query", json!({"sql": "select 1"})),
            (
                "s1",
                TOOL_SEARCH,
                json!({"query": "postgres sql statement", "limit": 5}),
            ),
        ]),
        // The found tools: one that reads, one that writes (asked, and refused).
        calls_reply(&[
            ("q1", "postgres_query", json!({"sql": "select 1"})),
            ("w1", "postgres_execute", json!({"sql": "delete from t"})),
        ]),
        text_reply("done"),
    ])
    .await;
    let mut cycle = cycle(&server);
    let outcome = cycle
        .run_with(RunRequest::prompt("how many users signed up today?").with_tools(&registry))
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "done"));
    let requests = script.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 3);

    // The first request: the search tool and no deferred schema.
    assert_eq!(tool_names(&requests[0]), vec![TOOL_SEARCH.to_owned()]);

    // The search's answer names what it loaded; the early call was refused with the way out.
    let answers = tool_answers(&requests[1]);
    assert!(
        answer(&answers, "early").contains("not loaded yet")
            && answer(&answers, "early").contains(TOOL_SEARCH),
        "{answers:?}"
    );
    let loaded = tool_search::loaded_in_answer(answer(&answers, "s1"));
    assert!(loaded.contains(&"postgres_query".to_owned()), "{loaded:?}");
    assert!(
        loaded.contains(&"postgres_execute".to_owned()),
        "{loaded:?}"
    );
    assert!(
        !loaded.contains(&"postgres_kill_backend".to_owned()),
        "a destructive tool (Delete is denied) is hidden, so never found: {loaded:?}"
    );

    // The next request offers the search tool, then the loaded tools, in the order found.
    let offered = tool_names(&requests[1]);
    assert_eq!(offered[0], TOOL_SEARCH);
    assert_eq!(offered[1..], loaded[..]);
    let schema = requests[1]["tools"][1]["function"]["parameters"].clone();
    assert!(
        schema["properties"].is_object(),
        "the found tool's schema is sent: {schema}"
    );

    // The found tools ran through the registry: the read ran on the server, the write was
    // asked about (ask = write) and refused.
    let answers = tool_answers(&requests[2]);
    let ran: Value = serde_json::from_str(answer(&answers, "q1")).unwrap();
    assert_eq!(
        ran,
        json!({"tool": "postgres_query", "arguments": {"sql": "select 1"}})
    );
    assert!(answer(&answers, "w1").contains("not today"), "{answers:?}");
    assert_eq!(
        *refuser.asked.lock().unwrap(),
        vec!["postgres_execute".to_owned()]
    );
}

#[tokio::test]
async fn a_hidden_tool_is_never_found() {
    // Restricted mode hides tools that reach the network; the default permissions hide
    // destructive ones.
    let registry = catalog_registry(
        checked()
            .with_exposure(ExposurePolicy::default().with_restricted_mode(true))
            .with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]),
    )
    .await;
    let names = |query: &str| -> Vec<String> {
        registry
            .search_deferred("openai", "m", query, tool_search::MAX_LIMIT)
            .into_iter()
            .map(|tool| tool.function.name)
            .collect()
    };
    let web = names("search the web for news");
    assert!(
        !web.is_empty() && !web.contains(&"web_search".to_owned()),
        "{web:?}"
    );
    let delete = names("delete a file from disk");
    assert!(
        !delete.is_empty() && !delete.contains(&"fs_delete_file".to_owned()),
        "{delete:?}"
    );
    // The same searches without the gates do find them: the search is not why they are absent.
    let open = catalog_registry(
        ToolRegistry::new().with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]),
    )
    .await;
    let found = |query: &str, tool: &str| {
        open.search_deferred("openai", "m", query, tool_search::MAX_LIMIT)
            .iter()
            .any(|found| found.function.name == tool)
    };
    assert!(found("search the web for news", "web_search"));
    assert!(found("delete a file from disk", "fs_delete_file"));
    // And a hidden tool is never offered, loaded or not.
    let offered = registry.offered_definitions("openai", "m", &["web_search".to_owned()]);
    assert!(
        offered
            .iter()
            .all(|tool| tool.function.name != "web_search")
    );
}

// ---------------------------------------------------------------------------------------------
// Anthropic: the API's own tool search (`defer_loading` + `tool_search_tool_bm25`).

/// An Anthropic Messages reply (whole, not streamed) with these content blocks.
fn anthropic_reply(content: Value, stop_reason: &str) -> crate::support::anthropic_fake::Reply {
    let body = json!({"id": "msg_2", "type": "message", "role": "assistant",
        "model": "claude-sonnet-4-5", "content": content, "stop_reason": stop_reason,
        "stop_sequence": null, "usage": {"input_tokens": 100, "output_tokens": 20}});
    crate::support::anthropic_fake::Reply::Status(200, Vec::new(), body.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn anthropic_searches_natively_and_its_blocks_come_back_byte_exact() {
    use crate::support::anthropic_fake::{AnthropicFake, Reply, fixture};
    use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig};

    let registry = catalog_registry(
        checked().with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]),
    )
    .await;
    // The served reply (`tests/fixtures/providers/anthropic/tool_search_then_call.json`, parsed
    // by the official SDK in `suite::provider_anthropic`): the API's search, its result
    // (a `tool_reference`), and a call of the tool it loaded.
    let fake = AnthropicFake::start(vec![
        Reply::Fixture("tool_search_then_call"),
        anthropic_reply(json!([{"type": "text", "text": "two pods"}]), "end_turn"),
    ])
    .await;
    let client =
        AnthropicClient::new(AnthropicConfig::new(fake.base_url()).with_api_key("test-key"))
            .unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("claude-sonnet-4-5"));
    let outcome = cycle
        .run_with(RunRequest::prompt("which pods run in prod?").with_tools(&registry))
        .await
        .unwrap();
    // The fake compares each assistant message it receives with the reply it served.
    fake.assert_no_rejections();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
    let received = fake.received();
    assert_eq!(received.len(), 2);

    // The first request: every exposed tool deferred, the API's search tool last, no local
    // `tool_search`, and no hidden tool (a destructive one: Delete is denied).
    let tools = received[0].body["tools"].as_array().unwrap().clone();
    let (search, deferred) = tools.split_last().unwrap();
    assert_eq!(search["type"], "tool_search_tool_bm25_20251119");
    assert_eq!(search["name"], "tool_search_tool_bm25");
    assert!(
        deferred.len() > 100 && deferred.len() < 300,
        "{}",
        deferred.len()
    );
    assert!(deferred.iter().all(|tool| tool["defer_loading"] == true));
    let names: Vec<&str> = deferred
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(!names.contains(&TOOL_SEARCH) && !names.contains(&"postgres_kill_backend"));
    assert!(names.contains(&"k8s_get_pods"));

    // The next request: the served blocks back as they came, and the loaded tool's result from
    // the MCP server (it ran through the registry, under its checks).
    let served: Value = serde_json::from_str(&fixture("tool_search_then_call.json")).unwrap();
    let messages = received[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], served["content"]);
    assert!(
        received[1].text.contains(r#"\"tool\":\"k8s_get_pods\""#),
        "{}",
        received[1].text
    );

    // What the API's search loaded reads back from the history (for `agcore tools --session`).
    assert_eq!(
        tool_search::loaded_in_history(cycle.messages()),
        vec!["k8s_get_pods".to_owned()]
    );

    // The request is one the official SDK accepts (`MessageCreateParams`).
    if let Some(python) = crate::support::mcp::python_script("python").filter(|python| {
        std::process::Command::new(python)
            .args(["-c", "import anthropic"])
            .output()
            .is_ok_and(|out| out.status.success())
    }) {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("native.request.json");
        std::fs::write(&file, &received[0].text).unwrap();
        let script = repo().join("tests/fixtures/providers/check_anthropic.py");
        let out = std::process::Command::new(python)
            .arg("-B")
            .arg(script)
            .arg(&file)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    } else {
        crate::support::require::require::<()>(
            "the anthropic Python SDK",
            "run `.ci/install-mcp-servers.sh` (a venv in .ci/venv with anthropic==2.10.0) or set AGCORE_TEST_VENV",
            None,
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Crash and resume.

/// A tool that never finishes (the process dies while it runs).
struct Hang {
    started: AtomicUsize,
}

#[async_trait]
impl BaseTool for Hang {
    fn name(&self) -> &str {
        "hang"
    }
    fn description(&self) -> &str {
        "Wait forever"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.started.fetch_add(1, Ordering::SeqCst);
        std::future::pending::<()>().await;
        Ok(Value::Null)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loaded_set_is_the_same_after_a_crash_and_resume() {
    let hang = Arc::new(Hang {
        started: AtomicUsize::new(0),
    });
    let mut registry = checked().with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]);
    registry.register(hang.clone()).unwrap();
    let registry = catalog_registry(registry).await;
    let (server, script) = model_server(vec![
        calls_reply(&[("s1", TOOL_SEARCH, json!({"query": "kubernetes pod logs"}))]),
        calls_reply(&[
            (
                "l1",
                "k8s_get_pod_logs",
                json!({"namespace": "prod", "pod": "api-0"}),
            ),
            ("h1", "hang", json!({})),
        ]),
        text_reply("recovered"),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let (journal, _) = SessionJournal::open(store.clone(), "search").await.unwrap();
    {
        let mut cycle = cycle(&server);
        let run = cycle.run_with(
            RunRequest::prompt("why does the api crash?")
                .with_tools(&registry)
                .with_journal(&journal),
        );
        let store = store.clone();
        let started = hang.clone();
        let cut_off = async move {
            // Until the found tool's answer is stored and the hanging call has started.
            loop {
                let session = store.load("search").await.unwrap();
                let finished = session
                    .iter()
                    .flat_map(|s| &s.steps)
                    .filter(|s| s.kind == "call_finished")
                    .count();
                if finished >= 1 && started.started.load(Ordering::SeqCst) == 1 {
                    return;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        tokio::select! {
            outcome = run => panic!("the run ended: {outcome:?}"),
            waited = tokio::time::timeout(Duration::from_secs(60), cut_off) => {
                waited.expect("the found tool's answer stored and the hanging call started within 60 s");
            }
        }
    }
    let before = tool_search::loaded_in_answer(answer(
        &tool_answers(&script.requests.lock().unwrap()[1]),
        "s1",
    ));
    assert!(
        before.contains(&"k8s_get_pod_logs".to_owned()),
        "{before:?}"
    );

    // A new process: the run restored from the store has the same loaded set.
    let (journal, restored) = SessionJournal::open(store.clone(), "search").await.unwrap();
    let state: RunState = restored.run.expect("a run in progress");
    assert_eq!(state.loaded_tools, before);
    // A run started afresh from the history gets the same set from the search's answer.
    assert_eq!(tool_search::loaded_in_history(&restored.history), before);

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
    let resumed = script.requests.lock().unwrap()[2].clone();
    let offered = tool_names(&resumed);
    assert_eq!(
        offered[offered.len() - before.len()..],
        before[..],
        "{offered:?}"
    );
    assert!(answer(&tool_answers(&resumed), "h1").contains("interrupted"));
}

// ---------------------------------------------------------------------------------------------
// Compaction.

/// A tool whose output is large: log lines, 16 KB.
struct BigLog;

#[async_trait]
impl BaseTool for BigLog {
    fn name(&self) -> &str {
        "big_log"
    }
    fn description(&self) -> &str {
        "Print the service log"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        let lines: Vec<String> = (0..400)
            .map(|i| format!("line {i}: GET /api/v1/items/{i} 200 {}ms", i * 7 % 997))
            .collect();
        Ok(Value::String(lines.join("\n")))
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compaction_removes_the_search_answer_but_not_the_loaded_tools() {
    let mut registry = checked().with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]);
    registry.register(Arc::new(BigLog)).unwrap();
    let registry = catalog_registry(registry).await;
    // No usage in the replies: the engine goes by its own estimate, not by a fake's counts.
    let unmetered = |mut reply: Value| {
        reply.as_object_mut().unwrap().remove("usage");
        reply
    };
    let (server, script) = model_server(vec![
        unmetered(calls_reply(&[(
            "s1",
            TOOL_SEARCH,
            json!({"query": "kubernetes pod logs", "limit": 2}),
        )])),
        unmetered(calls_reply(&[("b1", "big_log", json!({}))])),
        unmetered(text_reply("done")),
    ])
    .await;
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut config = CycleConfig::new("m");
    config.context_window = Some(4_096);
    config.options.max_tokens = Some(512);
    config.context.keep_last_turns = 0;
    config.context.summarise = false;
    let mut cycle = LlmCycle::new(client, config);
    let outcome = cycle
        .run_with(RunRequest::prompt("why is the api slow?").with_tools(&registry))
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "done"));
    let requests = script.requests.lock().unwrap().clone();
    let loaded = tool_search::loaded_in_answer(answer(&tool_answers(&requests[1]), "s1"));
    assert!(!loaded.is_empty());
    // The last request: the search's answer no longer says what it loaded (compacted), yet the
    // loaded tools are still offered — the run state keeps them, not the history.
    let last = &requests[2];
    let search_answer = answer(&tool_answers(last), "s1").to_owned();
    assert!(
        tool_search::loaded_in_answer(&search_answer).is_empty(),
        "the search answer was compacted: {search_answer}"
    );
    let offered = tool_names(last);
    assert_eq!(
        offered[offered.len() - loaded.len()..],
        loaded[..],
        "{offered:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// The figures.

/// Tokens of a chat completions request's tools and messages, as the context engine's
/// tiktoken counter counts them (o200k_base).
fn request_tokens(tools: &[ToolDefinition], prompt: &str) -> u64 {
    let counter = Tiktoken::new(TiktokenEncoding::O200kBase);
    counter.count_text(&serde_json::to_string(tools).unwrap()) + counter.count_text(prompt)
}

#[tokio::test]
async fn deferral_cuts_the_tokens_of_every_request() {
    let open = catalog_registry(ToolRegistry::new()).await;
    let deferred = catalog_registry(
        ToolRegistry::new().with_deferred_tools([ProfileEntry::McpServer(SERVER.to_owned())]),
    )
    .await;
    let prompt = "how many users signed up today?";
    let all = open.offered_definitions("openai", "m", &[]);
    assert_eq!(all.len(), 300);
    let first = deferred.offered_definitions("openai", "m", &[]);
    assert_eq!(first.len(), 1);
    let started = std::time::Instant::now();
    let loaded: Vec<String> = deferred
        .search_deferred("openai", "m", "postgres sql query", 5)
        .into_iter()
        .map(|tool| tool.function.name)
        .collect();
    // Reported, not asserted: the index is built per search, over the exposed deferred tools.
    println!(
        "FIGURE one search over 300 deferred tools (index built + queried, this build's profile): {:?}",
        started.elapsed()
    );
    let after = deferred.offered_definitions("openai", "m", &loaded);
    let (full, lean, searched) = (
        request_tokens(&all, prompt),
        request_tokens(&first, prompt),
        request_tokens(&after, prompt),
    );
    println!(
        "FIGURE tokens per request (o200k_base, tools + prompt): all 300 tools {full}; deferred {lean}; after loading 5 {searched}"
    );
    assert!(
        lean * 50 < full,
        "deferral must cut the request by >98%: {lean} vs {full}"
    );
    assert!(searched < full / 10, "{searched} vs {full}");
}

#[derive(serde::Deserialize)]
struct Query {
    query: String,
    tool: String,
}

/// The top-3 hits of `queries` (a fixture) against the catalog, and the misses explained.
fn top3(queries: &str) -> (usize, usize, Vec<String>) {
    let catalog: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(fixture("catalog.json")).unwrap()).unwrap();
    let tools: Vec<ToolDefinition> = catalog
        .iter()
        .map(|tool| {
            ToolDefinition::function(
                tool["name"].as_str().unwrap(),
                tool["description"].as_str().unwrap(),
                tool["inputSchema"].clone(),
            )
        })
        .collect();
    assert_eq!(tools.len(), 300);
    let queries: Vec<Query> =
        serde_json::from_str(&std::fs::read_to_string(fixture(queries)).unwrap()).unwrap();
    let index = ToolIndex::new(&tools);
    let mut misses = Vec::new();
    for query in &queries {
        let top: Vec<&str> = index
            .search(&query.query, 3)
            .into_iter()
            .map(|i| tools[i].function.name.as_str())
            .collect();
        if !top.contains(&query.tool.as_str()) {
            misses.push(format!(
                "{:?} wanted {} got {top:?}",
                query.query, query.tool
            ));
        }
    }
    (queries.len() - misses.len(), queries.len(), misses)
}

#[test]
fn the_right_tool_is_in_the_top_3_for_most_queries() {
    // The search has no table fitted to these queries (stems, split identifiers and the
    // name's weight only), so both sets measure wording it was not tuned for.
    let (hits, total, misses) = top3("queries.json");
    assert_eq!(total, 50);
    println!("FIGURE top-3 hit rate (50 queries): {hits}/{total}; misses: {misses:#?}");
    let (held_hits, held_total, held_misses) = top3("heldout.json");
    assert_eq!(held_total, 20);
    println!(
        "FIGURE top-3 hit rate (20 held-out queries): {held_hits}/{held_total}; misses: {held_misses:#?}"
    );
    // Floors at the measured rates: a change that makes the search worse fails here.
    assert!(hits * 100 >= total * 86, "top-3 below 86%: {misses:#?}");
    assert!(
        held_hits * 100 >= held_total * HELD_OUT_FLOOR,
        "held-out top-3 below {HELD_OUT_FLOOR}%: {held_misses:#?}"
    );
}

/// The held-out rate measured when the synonym table was removed (percent).
const HELD_OUT_FLOOR: usize = 85;
