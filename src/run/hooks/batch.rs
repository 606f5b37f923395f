//! The tool-call hooks of a batch ([`crate::run::hooks`]), for the driver: each call asked
//! before it runs (denied calls are answered, rewritten ones run with the new arguments),
//! each answer offered for rewriting after.

use tracing::Span;

use crate::run::event::StreamEvent;
use crate::run::hooks::{Compaction, HookChain};
use crate::run::step::ToolBatch;
use crate::run::telemetry;
use crate::tools::approval::ApprovalDecision;
use crate::tools::approval_trace::{DENIED, DecidedBy, approval_event, approval_here};
use crate::vocab::{ToolAnswer, ToolCall};

/// A decision the caller of a resumed run gave, as an event of the run's span (the call has
/// no span yet).
pub(crate) fn caller_decision(run: &Span, call_id: &str, decision: &ApprovalDecision) {
    approval_event(run, None, call_id, decision, DecidedBy::Caller);
}

/// What the driver does with an event of the context engine besides passing it on: a
/// compaction becomes an event of the run's span and is told to the hooks (after it
/// happened; each hook isolated).
pub(crate) async fn on_event(hooks: &HookChain, run: &Span, event: &StreamEvent) {
    if let Some(compaction) = Compaction::of_event(event) {
        telemetry::compaction_event(run, &compaction);
        if !hooks.is_empty() {
            hooks.on_compaction(&compaction).await;
        }
    }
}

/// Ask the hooks about every call of `batch` that is to run: a rewritten call's arguments
/// change in `batch.calls` (so events show what runs); a denied call moves from `run` to
/// `answered`. Returns the denied calls' answers by position, to record.
pub(crate) async fn before_tools(
    hooks: &HookChain,
    batch: &mut ToolBatch,
) -> Vec<(usize, ToolAnswer)> {
    if hooks.is_empty() {
        return Vec::new();
    }
    let mut denied = Vec::new();
    let mut run = Vec::with_capacity(batch.run.len());
    for &position in &batch.run {
        let Some(call) = batch.calls.get_mut(position) else {
            continue;
        };
        match hooks.before_tool_call(call).await {
            Ok(allowed) => {
                *call = allowed;
                run.push(position);
            }
            Err(answer) => {
                approval_here(&call.function.name, &call.id, &DENIED, DecidedBy::Hook);
                denied.push((position, answer));
            }
        }
    }
    batch.run = run;
    batch.answered.extend(denied.iter().cloned());
    denied
}

/// The answer of `call` after the hooks' rewrites.
pub(crate) async fn after_tool(
    hooks: &HookChain,
    call: Option<&ToolCall>,
    answer: ToolAnswer,
) -> ToolAnswer {
    match call {
        Some(call) if !hooks.is_empty() => hooks.after_tool_call(call, answer).await,
        _ => answer,
    }
}
