//! Deferred and hosted tools through the external-engine API (`agcore::run::external`, what the Restate
//! endpoint drives): a durable engine offers `tool_search` in place of the deferred tools,
//! answers the search itself, offers what it loaded from the next request on, and runs a
//! loaded tool — as the local driver does. Before, an engine offered every deferred schema
//! on every request and answered a `tool_search` call as an unknown tool.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agcore::llm::CycleConfig;
use agcore::llm::testing::ScriptedModel;
use agcore::run::external::{self, CallEnd};
use agcore::run::{Conversation, Effect, Input, RunRules, RunState, step};
use agcore::tools::prelude::*;
use agcore::tools::profile::ProfileEntry;
use agcore::tools::tool_search::TOOL_SEARCH;
use agcore::vocab::ToolCall;
use serde_json::{Value, json};

/// A tool that counts its runs.
struct Counted {
    name: &'static str,
    description: &'static str,
    runs: Arc<AtomicUsize>,
}

#[async_trait::async_trait]
impl BaseTool for Counted {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        self.description
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"id": {"type": "string"}}})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!(format!("{} ran", self.name)))
    }
}

fn registry(runs: &Arc<AtomicUsize>) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_deferred_tools([
        ProfileEntry::Tool("refund_invoice".to_owned()),
        ProfileEntry::Tool("archive_ticket".to_owned()),
    ]);
    for (name, description) in [
        ("lookup_order", "Look up an order by its id."),
        ("refund_invoice", "Refund a customer's invoice in full."),
        ("archive_ticket", "Archive a support ticket."),
    ] {
        registry
            .register(Arc::new(Counted {
                name,
                description,
                runs: Arc::clone(runs),
            }))
            .unwrap();
    }
    registry
}

/// Drive one run with the external API as an engine would: each model request with the
/// tools `offered_tools_for` gives, each tool turn with `answer_deferred` then `run_call`.
async fn drive(model: ScriptedModel, registry: &ToolRegistry) -> RunState {
    let conversation = Conversation::new(model, CycleConfig::new("m"));
    let rules = RunRules::of(&CycleConfig::new("m"));
    let mut state = RunState::new(Vec::new(), rules, true);
    let mut input = Input::Start {
        prompt: Some("Refund invoice 7".to_owned()),
    };
    for _ in 0..20 {
        let (next, effect) = step(state, input);
        state = next;
        input = match effect {
            Effect::RequestModel(request) => {
                let mut fork = external::fork(&conversation);
                let tools = external::offered_tools_for(&fork, registry, &state);
                let reply = external::request_model(&mut fork, &mut state, request, &tools)
                    .await
                    .unwrap();
                Input::ModelReplied(Box::new(reply))
            }
            Effect::RunTools(mut batch) => {
                external::answer_deferred(&conversation, registry, &mut state, &mut batch);
                external::assign_keys(&mut state, None);
                for &position in &batch.run.clone() {
                    let call = batch.calls[position].clone();
                    match external::run_call(&conversation, &state, registry, &call, None).await {
                        CallEnd::Answered { answer, .. } => {
                            state.mark_started(position);
                            state.record_answer(position, answer);
                        }
                        CallEnd::Deferred(_) => panic!("nothing asks in this run"),
                    }
                }
                Input::ToolsDone
            }
            Effect::Done(_) => return state,
            other => panic!("unexpected effect {other:?}"),
        };
    }
    panic!("the run did not end");
}

#[tokio::test]
async fn an_engine_offers_tool_search_then_the_tools_it_loaded() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry(&runs);
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![ToolCall::new(
            "s1",
            TOOL_SEARCH,
            r#"{"query":"refund an invoice","limit":1}"#,
        )])
        .reply_tool_calls(vec![ToolCall::new("c1", "refund_invoice", r#"{"id":"7"}"#)])
        .reply_text("Refunded.");
    let state = drive(model.clone(), &registry).await;

    let requests = model.requests();
    assert_eq!(requests.len(), 3);
    // First request: the plain tool and the search, no deferred schema.
    assert_eq!(requests[0].tool_names(), ["lookup_order", TOOL_SEARCH]);
    // After the search: the tool it loaded joins; the one it did not find stays deferred.
    assert_eq!(
        requests[1].tool_names(),
        ["lookup_order", TOOL_SEARCH, "refund_invoice"]
    );
    assert_eq!(state.loaded_tools, ["refund_invoice"]);
    // The search was answered by the run (never as an unknown tool), the loaded tool ran.
    let search_answer = requests[1]
        .messages
        .iter()
        .find_map(|m| match m {
            agcore::vocab::OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == "s1" => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    let search_answer = serde_json::to_string(&search_answer).unwrap();
    assert!(search_answer.contains("refund_invoice"), "{search_answer}");
    assert!(!search_answer.contains("not found"), "{search_answer}");
    assert_eq!(runs.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_engine_does_not_run_a_deferred_tool_before_a_search_loads_it() {
    let runs = Arc::new(AtomicUsize::new(0));
    let registry = registry(&runs);
    let model = ScriptedModel::new()
        .reply_tool_calls(vec![ToolCall::new("c1", "archive_ticket", r#"{"id":"9"}"#)])
        .reply_text("Could not.");
    let state = drive(model.clone(), &registry).await;
    assert_eq!(
        runs.load(Ordering::SeqCst),
        0,
        "the deferred tool never ran"
    );
    assert!(state.loaded_tools.is_empty());
    let requests = model.requests();
    let answer = requests[1]
        .messages
        .iter()
        .find_map(|m| match m {
            agcore::vocab::OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } if tool_call_id == "c1" => Some(serde_json::to_string(content).unwrap()),
            _ => None,
        })
        .unwrap();
    assert!(
        answer.contains(TOOL_SEARCH),
        "the answer points to the search: {answer}"
    );
}

/// Hosted tools through an engine pass the registry's gates as in a local run: restricted
/// mode keeps web search off the request (file search, which needs only Read, stays). Before,
/// an engine sent every configured hosted tool ungated.
#[tokio::test]
async fn an_engine_gates_hosted_tools_like_a_local_run() {
    use agcore::llm::HostedTool;
    use agcore::tools::exposure::ExposurePolicy;
    use agcore::tools::permission::{PermissionChecker, PermissionConfig};

    let model = ScriptedModel::new().reply_text("Done.");
    let mut config = CycleConfig::new("m");
    config.options.hosted_tools = vec![
        HostedTool::from_name("web_search").unwrap(),
        HostedTool::from_name("file_search").unwrap(),
    ];
    let conversation = Conversation::new(model.clone(), config);
    let restricted =
        ToolRegistry::new().with_exposure(ExposurePolicy::default().with_restricted_mode(true));
    let mut fork = external::fork(&conversation);
    external::gate_hosted_tools(&mut fork, &restricted);
    let rules = RunRules::of(&CycleConfig::new("m"));
    let state = RunState::new(Vec::new(), rules, false);
    let (mut state, effect) = step(
        state,
        Input::Start {
            prompt: Some("Search the web".to_owned()),
        },
    );
    let Effect::RequestModel(request) = effect else {
        panic!("{effect:?}")
    };
    external::request_model(&mut fork, &mut state, request, &[])
        .await
        .unwrap();
    let sent = &model.requests()[0].options.hosted_tools;
    assert_eq!(sent, &[HostedTool::from_name("file_search").unwrap()]);
    // Not restricted, with Network allowed: both go out; the same registry restricted keeps
    // web search off.
    let permissions = || {
        PermissionChecker::new(PermissionConfig {
            allowed: vec![Permission::Read, Permission::Network],
            ..PermissionConfig::default()
        })
    };
    let mut open = external::fork(&conversation);
    external::gate_hosted_tools(
        &mut open,
        &ToolRegistry::new().with_permission_checker(permissions()),
    );
    assert_eq!(open_hosted(&open), 2);
    let mut closed = external::fork(&conversation);
    external::gate_hosted_tools(
        &mut closed,
        &ToolRegistry::new()
            .with_permission_checker(permissions())
            .with_exposure(ExposurePolicy::default().with_restricted_mode(true)),
    );
    assert_eq!(open_hosted(&closed), 1);
}

/// How many hosted tools `conversation` would turn on.
fn open_hosted(conversation: &Conversation) -> usize {
    conversation.config().options.hosted_tools.len()
}
