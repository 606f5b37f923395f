//! The `child` step: a sub-agent's own records inside its parent's call (see
//! [`JournalEntry::Child`]), written and replayed.
//!
//! Payload: `{"call_id": PARENT_CALL, "agent": NAME, "step": {"kind": KIND, "payload": ...}}`,
//! where `KIND` is `history` (`{"messages": [...]}`, the child's whole history), `run`,
//! `call_started`, `call_continues`, `call_finished` (as the session's own steps) or `child` (a
//! child of the child). Replayed into [`crate::run::TurnCall::child`] of the parent's run in progress.

use serde_json::{Value, json};

use crate::run::journal::JournalEntry;
use crate::run::state::{ChildRun, RunState};
use crate::session::journal::{CALL_CONTINUES, CALL_FINISHED, CALL_STARTED, CALL_UPDATE, RUN};
use crate::vocab::{OpenaiChatMessage, ToolAnswer};

/// The step kind holding a sub-agent's record.
pub(crate) const CHILD: &str = "child";

/// The child's history, inside a `child` step.
const HISTORY: &str = "history";

/// `entry` as a `(kind, payload)` step.
pub(crate) fn encode(entry: &JournalEntry<'_>) -> Result<(&'static str, Value), serde_json::Error> {
    Ok(match entry {
        JournalEntry::History(messages) => (HISTORY, json!({ "messages": messages })),
        JournalEntry::Run(state) => (RUN, serde_json::to_value(state)?),
        JournalEntry::CallStarted {
            call_id,
            idempotency_key,
        } => match idempotency_key {
            Some(key) => (
                CALL_STARTED,
                json!({ "call_id": call_id, "idempotency_key": key }),
            ),
            None => (CALL_STARTED, json!({ "call_id": call_id })),
        },
        JournalEntry::CallContinues {
            call_id,
            continuation,
        } => (
            CALL_CONTINUES,
            json!({ "call_id": call_id, "continuation": continuation }),
        ),
        JournalEntry::CallFinished {
            call_id,
            answer,
            media,
        } => match media {
            Some(media) => (
                CALL_FINISHED,
                json!({ "call_id": call_id, "answer": answer, "media": media }),
            ),
            None => (
                CALL_FINISHED,
                json!({ "call_id": call_id, "answer": answer }),
            ),
        },
        JournalEntry::CallUpdate { call_id, update } => {
            (CALL_UPDATE, json!({ "call_id": call_id, "update": update }))
        }
        JournalEntry::Child {
            call_id,
            agent,
            entry,
        } => {
            let (kind, payload) = encode(entry)?;
            (
                CHILD,
                json!({
                    "call_id": call_id,
                    "agent": agent,
                    "step": { "kind": kind, "payload": payload },
                }),
            )
        }
    })
}

/// Apply a `child` step's payload to `parent`, the run in progress.
pub(crate) fn replay(parent: &mut RunState, payload: &Value) -> Result<(), String> {
    let text = |value: &Value, name: &str| -> Result<String, String> {
        value
            .get(name)
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| format!("a child step without a string \"{name}\""))
    };
    let call_id = text(payload, "call_id")?;
    let agent = text(payload, "agent")?;
    let step = payload
        .get("step")
        .ok_or_else(|| "a child step without \"step\"".to_owned())?;
    let kind = text(step, "kind")?;
    let inner = step.get("payload").cloned().unwrap_or(Value::Null);
    let Some(call) = parent.call_mut(&call_id) else {
        return Err(format!(
            "a child step for call {call_id:?}, which is not in the turn"
        ));
    };
    let child = call.child.get_or_insert_with(|| {
        Box::new(ChildRun {
            agent: agent.clone(),
            messages: Vec::new(),
            run: None,
            decisions: Vec::new(),
        })
    });
    match kind.as_str() {
        HISTORY => {
            let messages: Vec<OpenaiChatMessage> =
                serde_json::from_value(inner.get("messages").cloned().unwrap_or(Value::Null))
                    .map_err(|error| format!("invalid child history: {error}"))?;
            child.messages = messages;
            // As at the top level: the history closes the run in progress.
            child.run = None;
        }
        RUN => {
            let state: RunState = serde_json::from_value(inner)
                .map_err(|error| format!("invalid child run state: {error}"))?;
            child.run = Some(state);
        }
        CALL_STARTED | CALL_CONTINUES | CALL_FINISHED | CHILD => {
            let Some(run) = child.run.as_mut() else {
                return Err(format!("a child {kind} step outside a child run"));
            };
            match kind.as_str() {
                CALL_STARTED => run.mark_started_id(&text(&inner, "call_id")?),
                CALL_CONTINUES => {
                    let continuation = inner.get("continuation").cloned().ok_or_else(|| {
                        "a child call_continues step without \"continuation\"".to_owned()
                    })?;
                    run.record_continuation_id(&text(&inner, "call_id")?, continuation);
                }
                CALL_FINISHED => {
                    let answer: ToolAnswer =
                        serde_json::from_value(inner.get("answer").cloned().unwrap_or(Value::Null))
                            .map_err(|error| format!("invalid child answer: {error}"))?;
                    let id = text(&inner, "call_id")?;
                    run.record_answer_id(&id, answer);
                    if let Some(media) = inner.get("media") {
                        let media: OpenaiChatMessage = serde_json::from_value(media.clone())
                            .map_err(|error| format!("invalid child media: {error}"))?;
                        run.record_media_id(&id, media);
                    }
                }
                _ => replay(run, &inner)?,
            }
        }
        // A sub-agent's call updates are for UIs only.
        CALL_UPDATE => {}
        other => {
            return Err(format!(
                "child step kind {other:?} is unknown to this agcore"
            ));
        }
    }
    Ok(())
}
