//! A decision on a deferred call is bound to the call the approver was shown (its tool and
//! arguments), not to its id alone: a stored run state edited while it waited does not run a
//! different call with that approval.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::run::{Decision, RunOutcome, RunRequest, RunState};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalDecision, ApprovalPolicy, DeferAll};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Scripted replies in the OpenAI wire format; every request recorded.
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

/// The model writes `a.txt`, then (after the answer) says it is done.
async fn server() -> (MockServer, Script) {
    let call = json!({"id": "call_w", "type": "function",
        "function": {"name": "write_note", "arguments": "{\"path\":\"a.txt\"}"}});
    let script = Script::default();
    *script.replies.lock().unwrap() = vec![
        reply(
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
        ),
        reply(json!({"role": "assistant", "content": "done"}), "stop"),
    ];
    let server = MockServer::start().await;
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

/// Records the paths it "wrote".
#[derive(Default)]
struct WriteNote(Mutex<Vec<String>>);

#[async_trait]
impl BaseTool for WriteNote {
    fn name(&self) -> &str {
        "write_note"
    }
    fn description(&self) -> &str {
        "Write a note"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Write]
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let path = args["path"].as_str().unwrap_or_default().to_owned();
        self.0.lock().unwrap().push(path);
        Ok(json!("written"))
    }
}

/// `Write` needs approval; the approver defers every call.
fn registry(tool: &Arc<WriteNote>) -> ToolRegistry {
    let mut registry = ToolRegistry::new()
        .with_approval_policy(ApprovalPolicy::ask(vec![Permission::Write]))
        .with_approver(Arc::new(DeferAll));
    registry.register(tool.clone()).unwrap();
    registry
}

/// Run until the call to `write_note` waits for a decision; the stored state as JSON.
async fn suspended(server: &MockServer, tool: &Arc<WriteNote>) -> Value {
    let registry = registry(tool);
    let mut first = cycle(server);
    let outcome = first
        .run_with(RunRequest::prompt("write the note").with_tools(&registry))
        .await
        .unwrap();
    let RunOutcome::Suspended(suspension) = outcome else {
        panic!("{outcome:?}")
    };
    assert_eq!(suspension.requests()[0].arguments["path"], "a.txt");
    serde_json::to_value(suspension.state()).unwrap()
}

/// Continue the stored `state` with `decisions` in a new cycle; the tool answer the model
/// was sent.
async fn resume(
    server: &MockServer,
    script: &Script,
    tool: &Arc<WriteNote>,
    state: Value,
    decisions: Vec<Decision>,
) -> String {
    let registry = registry(tool);
    let state: RunState = serde_json::from_value(state).unwrap();
    let outcome = cycle(server)
        .run_with(
            RunRequest::from_state(state)
                .with_decisions(decisions)
                .with_tools(&registry),
        )
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(_)), "{outcome:?}");
    let requests = script.requests.lock().unwrap();
    let messages = requests.last().unwrap()["messages"].as_array().unwrap();
    let answer = messages
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == "call_w")
        .unwrap();
    answer["content"].as_str().unwrap().to_owned()
}

/// The stored call's arguments, edited (the pending request still shows `a.txt`).
fn edit_call(state: &mut Value, arguments: &str) {
    state["phase"]["turn"]["calls"][0]["call"]["function"]["arguments"] = json!(arguments);
}

#[tokio::test]
async fn an_approval_does_not_run_a_call_edited_after_the_run_suspended() {
    let (server, script) = server().await;
    let tool = Arc::new(WriteNote::default());
    let mut state = suspended(&server, &tool).await;
    edit_call(&mut state, r#"{"path":"secret.txt"}"#);
    let answer = resume(
        &server,
        &script,
        &tool,
        state,
        vec![Decision::allow("call_w")],
    )
    .await;
    assert_eq!(
        *tool.0.lock().unwrap(),
        Vec::<String>::new(),
        "a call that was never shown ran"
    );
    assert!(
        answer.contains("is not the call that was approved"),
        "{answer}"
    );
}

#[tokio::test]
async fn an_unchanged_call_runs_with_its_approval() {
    let (server, script) = server().await;
    let tool = Arc::new(WriteNote::default());
    let state = suspended(&server, &tool).await;
    let answer = resume(
        &server,
        &script,
        &tool,
        state,
        vec![Decision::allow("call_w")],
    )
    .await;
    assert_eq!(*tool.0.lock().unwrap(), ["a.txt"]);
    assert_eq!(answer, "written");
}

#[tokio::test]
async fn a_decision_for_the_request_shown_does_not_apply_once_the_stored_request_changed() {
    let (server, script) = server().await;
    let tool = Arc::new(WriteNote::default());
    let mut state = suspended(&server, &tool).await;
    // What the user was shown and decided on.
    let shown: RunState = serde_json::from_value(state.clone()).unwrap();
    let decision =
        Decision::for_request(&shown.pending_approvals()[0], ApprovalDecision::AllowOnce);
    // Then the store is edited consistently: call, request and its digest.
    edit_call(&mut state, r#"{"path":"secret.txt"}"#);
    let request = &mut state["phase"]["requests"][0];
    request["arguments"] = json!({"path": "secret.txt"});
    request.as_object_mut().unwrap().remove("digest");
    let answer = resume(&server, &script, &tool, state, vec![decision]).await;
    assert_eq!(*tool.0.lock().unwrap(), Vec::<String>::new());
    assert!(
        answer.contains("is not the call that was approved"),
        "{answer}"
    );
}

#[tokio::test]
async fn a_request_edited_to_show_another_call_than_it_was_asked_with_is_not_approved() {
    let (server, script) = server().await;
    let tool = Arc::new(WriteNote::default());
    let mut state = suspended(&server, &tool).await;
    assert!(state["phase"]["requests"][0]["digest"].is_string());
    // The request now shows a harmless call, the call itself unchanged: its stored digest
    // (taken when it was asked) no longer matches what it shows.
    state["phase"]["requests"][0]["arguments"] = json!({"path": "harmless.txt"});
    let answer = resume(
        &server,
        &script,
        &tool,
        state,
        vec![Decision::allow("call_w")],
    )
    .await;
    assert_eq!(*tool.0.lock().unwrap(), Vec::<String>::new());
    assert!(
        answer.contains("is not the call that was approved"),
        "{answer}"
    );
}
