//! Calls that go on where an earlier attempt left off: a tool that records a continuation
//! while it runs ([`crate::run::JournalEntry::CallContinues`] — an MCP task's id, a
//! multi-round-trip request's state) is, in a restored run, run again *with* it, so it
//! continues (polls the same task, retries with the stored state) instead of starting over or
//! being answered as interrupted.
//!
//! A call that waits for a person's input nobody can give now
//! ([`ToolError::InputDeferred`]) suspends the run like a deferred approval: it waits in
//! `awaiting_approval` with a request whose reason names what the server asks; its
//! continuation (the server's `requestState`) is in the state. A decision to let it go on runs
//! it again, continued, with the elicitor the resumed run has.

use serde_json::Value;

use crate::run::state::{Phase, RunState};
use crate::run::step::Decision;
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::base::ToolSource;
use crate::tools::call_digest::CallDigest;
use crate::tools::continuation;
use crate::tools::error::ToolError;
use crate::tools::outcome::{CompletedCall, ToolOutcome};
use crate::tools::registry::ToolRegistry;

/// The reason of the request a call waiting for input suspends on starts with this.
const WAITS_FOR_INPUT: &str = "waits for input: ";

/// The requests of a suspended run that wait for a person's input rather than an approval
/// (their calls carry an MCP input continuation, or a task's whose question waits): allowing
/// them lets the calls go on, with the answers the resumed run's elicitor gives.
pub fn waiting_for_input(state: &RunState) -> Vec<&ApprovalRequest> {
    let crate::run::state::Phase::AwaitingApproval { turn, requests } = &state.phase else {
        return Vec::new();
    };
    requests
        .iter()
        .filter(|request| {
            turn.calls.iter().any(|call| {
                let kind = call
                    .continuation
                    .as_ref()
                    .and_then(|c| c.get("mcp").and_then(Value::as_str));
                call.call.id == request.call_id
                    && match kind {
                        Some("input") => true,
                        // A task asks while it runs; the call waits only when it said so.
                        Some("task") => request.reason.starts_with(WAITS_FOR_INPUT),
                        _ => false,
                    }
            })
        })
        .collect()
}

/// Whether `call` waits: for a decision (its approval was deferred) or for input.
pub(crate) fn waits(call: &CompletedCall) -> bool {
    matches!(
        &call.outcome,
        ToolOutcome::Refused {
            reason: ToolError::ApprovalDeferred { .. }
        } | ToolOutcome::Ran {
            result: Err(ToolError::InputDeferred { .. } | ToolError::ApprovalDeferred { .. })
        }
    )
}

/// What a suspended run asks about `call`, when it waits: the deferred approval's request, or
/// for a call waiting for input one that names what the server asks.
pub(crate) fn waiting_request(
    call: &CompletedCall,
    registry: &ToolRegistry,
) -> Option<ApprovalRequest> {
    match &call.outcome {
        // Deferred before the call, or mid-run (`ToolContext::authorize`).
        ToolOutcome::Refused {
            reason: ToolError::ApprovalDeferred { request },
        }
        | ToolOutcome::Ran {
            result: Err(ToolError::ApprovalDeferred { request }),
        } => Some((**request).clone()),
        ToolOutcome::Ran {
            result:
                Err(ToolError::InputDeferred {
                    server, questions, ..
                }),
        } => {
            let tool = registry.get(&call.tool_name);
            Some(ApprovalRequest {
                tool: call.tool_name.clone(),
                call_id: call.id.clone(),
                title: tool
                    .as_ref()
                    .map(|tool| tool.title(&call.input))
                    .unwrap_or_else(|| call.tool_name.clone()),
                kind: tool.as_ref().map(|tool| tool.kind()).unwrap_or_default(),
                arguments: call.input.clone(),
                permissions: Vec::new(),
                reason: format!(
                    "{WAITS_FOR_INPUT}MCP server '{server}' asks: {}",
                    questions.join(" / ")
                ),
                digest: Some(CallDigest::of(&call.tool_name, &call.input)),
            })
        }
        _ => None,
    }
}

/// Give up the calls `decisions` deny that left a task running on their MCP server while they
/// waited (a task whose question waits): each one's tool sends `tasks/cancel`
/// ([`continuation::abandon`]) — only an MCP tool of the server that holds the task, so no
/// other tool ever runs for a denied call. Bounded by the server's request timeout; a failure
/// is logged and the denial stands either way.
pub(crate) async fn give_up_denied(
    state: &RunState,
    decisions: &[Decision],
    registry: &ToolRegistry,
) {
    let Phase::AwaitingApproval { turn, .. } = &state.phase else {
        return;
    };
    let denied = decisions
        .iter()
        .filter(|decision| matches!(decision.answer, ApprovalDecision::Deny { .. }));
    for decision in denied {
        let Some(call) = turn
            .calls
            .iter()
            .find(|call| call.call.id == decision.call_id && call.answer.is_none())
        else {
            continue;
        };
        let Some(task) = call
            .continuation
            .as_ref()
            .filter(|c| c.get("mcp").and_then(Value::as_str) == Some("task"))
        else {
            continue;
        };
        let Some(tool) = registry.get(&call.call.function.name) else {
            continue;
        };
        let holder = task.get("server").and_then(Value::as_str);
        if !matches!(tool.source(), ToolSource::Mcp { server } if Some(server.as_str()) == holder) {
            continue;
        }
        let arguments = serde_json::from_str(&call.call.function.arguments).unwrap_or(Value::Null);
        // The tool answers that it was given up; the denial is the call's answer.
        let _ = continuation::abandon(task.clone(), tool.execute(arguments)).await;
    }
}

/// Clear `started` on the unfinished calls of a restored tool turn that recorded a
/// continuation: they run again, continued from it.
pub(crate) fn rerun_continued(state: &mut RunState) {
    if let Some(turn) = state.turn_mut() {
        for call in &mut turn.calls {
            if call.started && call.answer.is_none() && call.continuation.is_some() {
                call.started = false;
            }
        }
    }
}

/// The continuations of the calls at `positions` of the current tool turn.
pub(crate) fn of_batch(state: &RunState, positions: &[usize]) -> Vec<Option<Value>> {
    let calls = match &state.phase {
        crate::run::state::Phase::AwaitingTools { turn }
        | crate::run::state::Phase::AwaitingApproval { turn, .. } => &turn.calls[..],
        _ => &[],
    };
    positions
        .iter()
        .map(|&position| {
            calls
                .get(position)
                .and_then(|call| call.continuation.clone())
        })
        .collect()
}
