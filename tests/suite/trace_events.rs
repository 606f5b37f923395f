//! Issue 14: approvals and compactions as span events, and `Hooks::on_compaction`, checked
//! with a recording `tracing` layer (`tests/trace_support`). In a binary of their own: a
//! callsite first seen by a thread without a subscriber can keep a cached "never" interest,
//! which would make these tests flaky next to tests that install none.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;

use agcore::context::CompactionTier;
use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, StreamEvent, ToolCall};
use agcore::run::hooks::{HookChain, Hooks, ToolCallDecision};
use async_trait::async_trait;
use futures::StreamExt;
use support::context::{Shape, WindowedServer};
use support::control::{FakeModel, Reply, registry};

const SYSTEM: &str = "You are a log analyst. Read what you are asked to read, then answer.";

fn windowed_cycle(server: &WindowedServer, configure: impl FnOnce(&mut CycleConfig)) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(server.base_url())).unwrap();
    let mut config = CycleConfig::new("local-model");
    config.max_turns = Some(1_000);
    config.options.max_tokens = Some(512);
    configure(&mut config);
    LlmCycle::new(client, config).with_system_prompt(SYSTEM)
}

/// Run `prompt` streaming with the windowed server's tools; the events and the reply text.
async fn windowed_run(
    cycle: &mut LlmCycle,
    prompt: &str,
) -> (Vec<StreamEvent>, Result<String, String>) {
    let registry = support::context::registry();
    let mut events = Vec::new();
    let mut text = String::new();
    let mut error = None;
    let mut stream = cycle
        .run_stream(Some(prompt.to_owned()), Some(&registry))
        .await
        .map_err(|e| e.to_string())
        .unwrap();
    while let Some(event) = stream.next().await {
        match &event {
            StreamEvent::AssistantTextDelta { text: piece } => text.push_str(piece),
            StreamEvent::Error { message, .. } => error = Some(message.clone()),
            _ => {}
        }
        events.push(event);
    }
    (events, error.map_or(Ok(text), Err))
}

/// A hook that decides with a closure.
struct Guard(Box<dyn Fn(&ToolCall) -> ToolCallDecision + Send + Sync>);

#[async_trait]
impl Hooks for Guard {
    fn name(&self) -> &str {
        "guard"
    }
    async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
        (self.0)(call)
    }
}

/// Records each compaction a hook is told about; the second hook panics on every one.
struct CompactionLog(std::sync::Mutex<Vec<agcore::run::hooks::Compaction>>);

#[async_trait::async_trait]
impl agcore::run::hooks::Hooks for CompactionLog {
    async fn on_compaction(&self, compaction: &agcore::run::hooks::Compaction) {
        self.0.lock().unwrap().push(compaction.clone());
    }
}

struct PanicsOnCompaction;

#[async_trait::async_trait]
impl agcore::run::hooks::Hooks for PanicsOnCompaction {
    fn name(&self) -> &str {
        "panics"
    }
    async fn on_compaction(&self, _compaction: &agcore::run::hooks::Compaction) {
        panic!("on_compaction failed");
    }
}

/// Issue 14: each compaction reaches `Hooks::on_compaction` (after it happened, in order, a
/// panicking hook isolated) and is an `agcore.compaction` event of the run's `invoke_agent`
/// span with its tier and token estimates.
#[tokio::test]
async fn compactions_reach_the_hooks_and_the_run_span() {
    use std::sync::Arc;
    let (subscriber, recorded) = support::trace::recording();
    let _guard = crate::support::trace::scoped(subscriber);
    let log = Arc::new(CompactionLog(std::sync::Mutex::new(Vec::new())));
    let server = WindowedServer::start(8_192, Shape::OpenAi, SYSTEM).await;
    let mut cycle = windowed_cycle(&server, |config| {
        config.context_window = Some(32_768);
        config.hooks = agcore::run::hooks::HookChain::new()
            .with(Arc::new(PanicsOnCompaction))
            .with(log.clone());
    });
    let (events, reply) = windowed_run(
        &mut cycle,
        "TASK: read chunks 0 to 40 with read_chunk, then say DONE.",
    )
    .await;
    assert_eq!(reply.as_deref(), Ok("DONE 0-40"));
    let seen: Vec<(CompactionTier, u64, u64)> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ContextCompacted {
                tier,
                tokens_before,
                tokens_after,
                ..
            } => Some((*tier, *tokens_before, *tokens_after)),
            _ => None,
        })
        .collect();
    assert!(!seen.is_empty());
    let told: Vec<(CompactionTier, u64, u64)> = log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|c| (c.tier, c.tokens_before, c.tokens_after))
        .collect();
    assert_eq!(
        told, seen,
        "the hook after the panicking one saw every compaction"
    );
    let recorded = recorded.lock().unwrap();
    let spans: Vec<(u64, u64, Option<&str>)> = recorded
        .events("compaction")
        .iter()
        .map(|event| {
            (
                event.fields["agcore.compaction.tokens_before"]
                    .parse()
                    .unwrap(),
                event.fields["agcore.compaction.tokens_after"]
                    .parse()
                    .unwrap(),
                recorded.span_name(event.span),
            )
        })
        .collect();
    assert_eq!(
        spans,
        seen.iter()
            .map(|&(_, before, after)| (before, after, Some("invoke_agent")))
            .collect::<Vec<_>>()
    );
    let tiers: Vec<String> = recorded
        .events("compaction")
        .iter()
        .map(|e| e.fields["agcore.compaction.tier"].clone())
        .collect();
    assert_eq!(
        tiers,
        seen.iter()
            .map(|(tier, ..)| tier.number().to_string())
            .collect::<Vec<_>>()
    );
}

/// Allows every call it is asked about.
struct AllowAll;

#[async_trait]
impl agcore::tools::Approver for AllowAll {
    async fn approve(
        &self,
        _request: &agcore::tools::ApprovalRequest,
    ) -> agcore::tools::ApprovalDecision {
        agcore::tools::ApprovalDecision::AllowOnce
    }
}

/// Issue 14: approval decisions are `approval` events — on the call's `execute_tool` span
/// when it got one (the approver's allow, a rule's deny), on `invoke_agent` for a call a hook
/// denied before it got a span — saying what was decided and by whom.
#[tokio::test]
async fn approval_decisions_are_events_of_their_spans() {
    let (subscriber, recorded) = support::trace::recording();
    let _guard = crate::support::trace::scoped(subscriber);
    let config: agcore::tools::ToolsConfig = toml::from_str(
        r#"
        [[rules]]
        tool = "echo"
        argument = "text"
        contains = "ask"
        action = "ask"
        [[rules]]
        tool = "echo"
        argument = "text"
        contains = "rm -rf"
        action = "deny"
        "#,
    )
    .unwrap();
    let (registry, _) = registry();
    let registry = config
        .apply(registry)
        .unwrap()
        .with_approver(Arc::new(AllowAll));
    let guard = Guard(Box::new(|call| {
        if call.function.arguments.contains("hook") {
            ToolCallDecision::deny("no")
        } else {
            ToolCallDecision::Allow
        }
    }));
    let model = FakeModel::start(vec![
        Reply::calls(&[
            ("call_ask", "echo", r#"{"text":"please ask"}"#),
            ("call_rule", "echo", r#"{"text":"rm -rf /"}"#),
            ("call_hook", "echo", r#"{"text":"hook me"}"#),
            ("call_free", "echo", r#"{"text":"free"}"#),
        ]),
        Reply::text("done"),
    ])
    .await;
    let mut config = CycleConfig::new("fake-model");
    config.hooks = HookChain::new().with(Arc::new(guard));
    let mut cycle = model.cycle(config);
    let reply = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "done");
    let recorded = recorded.lock().unwrap();
    let mut decisions: Vec<(String, String, String, String)> = recorded
        .events("approval")
        .iter()
        .map(|event| {
            (
                event.fields["gen_ai.tool.call.id"].clone(),
                event.fields["agcore.approval.decision"].clone(),
                event.fields["agcore.approval.by"].clone(),
                recorded.span_name(event.span).unwrap_or("").to_owned(),
            )
        })
        .collect();
    decisions.sort();
    let expected = [
        ("call_ask", "allowed", "approver", "execute_tool echo"),
        ("call_hook", "denied", "hook", "invoke_agent"),
        ("call_rule", "denied", "rule", "execute_tool echo"),
    ]
    .map(|(a, b, c, d)| (a.to_owned(), b.to_owned(), c.to_owned(), d.to_owned()));
    assert_eq!(
        decisions, expected,
        "a call that needs no approval has no event"
    );
    // The events on execute_tool spans are on their own call's span.
    for event in recorded.events("approval") {
        if let Some(index) = event.span
            && recorded.spans[index].name == "execute_tool echo"
        {
            assert_eq!(
                recorded.spans[index].fields["gen_ai.tool.call.id"],
                event.fields["gen_ai.tool.call.id"]
            );
        }
    }
}

/// Issue 33 item 14: a span whose callsite another thread reached first, without a subscriber,
/// is still recorded by the test's own subscriber (with the plain `set_default` and no other
/// capture alive, `tracing` cached that callsite as "never" and the span was lost).
#[test]
fn a_span_first_reached_on_another_thread_is_still_recorded() {
    fn probe() -> tracing::Span {
        tracing::info_span!("issue33_probe", probe = true)
    }
    let (subscriber, recorded) = support::trace::recording();
    let _guard = crate::support::trace::scoped(subscriber);
    std::thread::spawn(|| drop(probe())).join().unwrap();
    drop(probe());
    let names: Vec<String> = recorded
        .lock()
        .unwrap()
        .spans
        .iter()
        .map(|span| span.name.clone())
        .collect();
    assert_eq!(names, ["issue33_probe"]);
}
