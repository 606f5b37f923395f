//! Each tool call passes the registry's gates (exposure, permissions, rules on arguments,
//! parsing, schema) once (issue 31, item 3): with a journal, the batch's starts-ahead decision
//! and the call's execution share one evaluation instead of two. Counted through a rule on
//! the tool's argument: the rules ask the tool its argument's kind once per evaluation.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agcore::llm::CycleConfig;
use agcore::run::{RunOutcome, RunRequest};
use agcore::session::{LockMode, SessionJournal, SessionStore, SqliteStore};
use agcore::tools::prelude::*;
use agcore::tools::{ArgumentKind, ArgumentRule, ArgumentRules, RuleAction};
use support::control::{FakeModel, Reply};

/// A tool that counts how often the gates looked at it (its `argument_kind`).
#[derive(Default)]
struct Counted {
    gate_evaluations: AtomicUsize,
    runs: AtomicUsize,
}

#[async_trait]
impl BaseTool for Counted {
    fn name(&self) -> &str {
        "counted"
    }
    fn description(&self) -> &str {
        "counts its gate evaluations"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"x": {"type": "string"}}, "required": ["x"]})
    }
    fn argument_kind(&self, _argument: &str) -> ArgumentKind {
        self.gate_evaluations.fetch_add(1, Ordering::SeqCst);
        ArgumentKind::Text
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(json!("done"))
    }
}

/// A rule on `counted`'s argument that matches nothing: evaluated, never deciding.
fn rules() -> ArgumentRules {
    ArgumentRules::new([ArgumentRule {
        tool: "counted".into(),
        argument: "x".into(),
        matches: None,
        contains: Some("never-present".into()),
        host_in: Vec::new(),
        action: RuleAction::Deny,
    }])
    .unwrap()
}

/// Two calls of `counted` in one turn, then an answer; the tool's counters.
async fn run_two_calls(journaled: bool) -> Arc<Counted> {
    let model = FakeModel::start(vec![
        Reply::calls(&[
            ("call_1", "counted", r#"{"x":"a"}"#),
            ("call_2", "counted", r#"{"x":"b"}"#),
        ]),
        Reply::text("done"),
    ])
    .await;
    let tool = Arc::new(Counted::default());
    let mut registry = ToolRegistry::new().with_argument_rules(rules());
    registry.register(tool.clone()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let _lease = store.lock("gates", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "gates").await.unwrap();
    let mut request = RunRequest::prompt("go").with_tools(&registry);
    if journaled {
        request = request.with_journal(&journal);
    }
    let outcome = model
        .cycle(CycleConfig::new("m"))
        .run_with(request)
        .await
        .unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "done"));
    assert_eq!(tool.runs.load(Ordering::SeqCst), 2);
    tool
}

#[tokio::test]
async fn a_journaled_call_passes_the_gates_once() {
    let tool = run_two_calls(true).await;
    assert_eq!(
        tool.gate_evaluations.load(Ordering::SeqCst),
        2,
        "two calls, one gate evaluation each"
    );
}

#[tokio::test]
async fn an_unjournaled_call_passes_the_gates_once() {
    let tool = run_two_calls(false).await;
    assert_eq!(tool.gate_evaluations.load(Ordering::SeqCst), 2);
}
