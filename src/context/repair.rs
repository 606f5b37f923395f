//! History repair: a history loaded from anywhere (a file, a store, another library's JSON)
//! made wire-valid before its first request, each change reported.
//!
//! - a tool result that answers no call just before it is removed;
//! - a call without a result is answered "not run";
//! - a call id used twice is renamed, in the call and in its result;
//! - an assistant message with neither text, refusal nor calls is dropped (with any artifacts
//!   it carries: they are dropped whole, never split from it).
//!
//! Results are put in call order right after their assistant message. An assistant message
//! is otherwise left as it is; a renamed call clears its artifacts (the reply is no longer the
//! one its API signed).

use std::collections::HashSet;

use crate::context::event::RepairKind;
use crate::vocab::{OpenaiChatMessage, ToolAnswer, generate_call_id};

/// The answer given to a call found unanswered in a loaded history.
pub const NOT_RUN_ANSWER: &str =
    "this tool call was not run; the conversation continued without its result.";

/// One change [`repair`] made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repair {
    /// What was wrong.
    pub kind: RepairKind,
    /// The call id concerned (`old -> new` for a rename), or the message position.
    pub detail: String,
}

/// `messages` made wire-valid, and what was changed (empty: it already was).
pub fn repair(messages: Vec<OpenaiChatMessage>) -> (Vec<OpenaiChatMessage>, Vec<Repair>) {
    let mut repairs = Vec::new();
    let mut out = Vec::with_capacity(messages.len());
    let mut seen: HashSet<String> = HashSet::new();
    let mut input = messages.into_iter().enumerate().peekable();
    while let Some((position, message)) = input.next() {
        match message {
            OpenaiChatMessage::Tool { tool_call_id, .. } => repairs.push(Repair {
                kind: RepairKind::OrphanToolResult,
                detail: format!("message {position}: '{tool_call_id}'"),
            }),
            OpenaiChatMessage::Assistant {
                ref content,
                ref refusal,
                ref tool_calls,
                ..
            } if tool_calls.is_empty()
                && content.as_deref().is_none_or(str::is_empty)
                && refusal.as_deref().is_none_or(str::is_empty) =>
            {
                repairs.push(Repair {
                    kind: RepairKind::EmptyAssistant,
                    detail: format!("message {position}"),
                });
            }
            OpenaiChatMessage::Assistant {
                content,
                refusal,
                reasoning_content,
                reasoning,
                mut tool_calls,
                name,
                mut artifacts,
            } => {
                // The results right after it, each claimed by the first call with its id.
                let mut results: Vec<Option<OpenaiChatMessage>> = Vec::new();
                while let Some((_, OpenaiChatMessage::Tool { .. })) = input.peek() {
                    if let Some((_, result)) = input.next() {
                        results.push(Some(result));
                    }
                }
                let mut answers = Vec::with_capacity(tool_calls.len());
                for call in &mut tool_calls {
                    let claimed = results.iter_mut().find(|slot| {
                        matches!(slot, Some(OpenaiChatMessage::Tool { tool_call_id, .. }) if *tool_call_id == call.id)
                    });
                    let mut answer = claimed.and_then(Option::take);
                    if call.id.is_empty() || seen.contains(&call.id) {
                        let renamed = generate_call_id();
                        repairs.push(Repair {
                            kind: RepairKind::DuplicateCallId,
                            detail: format!("'{}' -> '{renamed}'", call.id),
                        });
                        call.id = renamed;
                        // Artifacts describe the reply as its API sent it; a reply with a
                        // changed call is no longer that reply, so its reasoning state goes
                        // (whole: a backend then sends the message as from another model).
                        artifacts.clear();
                    }
                    seen.insert(call.id.clone());
                    match &mut answer {
                        Some(OpenaiChatMessage::Tool { tool_call_id, .. }) => {
                            tool_call_id.clone_from(&call.id);
                        }
                        _ => {
                            repairs.push(Repair {
                                kind: RepairKind::UnansweredCall,
                                detail: format!("'{}'", call.id),
                            });
                            answer = Some(OpenaiChatMessage::tool_answer(
                                call.id.clone(),
                                ToolAnswer::error(NOT_RUN_ANSWER),
                            ));
                        }
                    }
                    answers.extend(answer);
                }
                for orphan in results.into_iter().flatten() {
                    if let OpenaiChatMessage::Tool { tool_call_id, .. } = orphan {
                        repairs.push(Repair {
                            kind: RepairKind::OrphanToolResult,
                            detail: format!("'{tool_call_id}' after message {position}"),
                        });
                    }
                }
                out.push(OpenaiChatMessage::Assistant {
                    content,
                    refusal,
                    reasoning_content,
                    reasoning,
                    tool_calls,
                    name,
                    artifacts,
                });
                out.extend(answers);
            }
            other => out.push(other),
        }
    }
    (out, repairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::units::check_wire;
    use crate::vocab::ToolCall;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "read_file", "{}")
    }

    #[test]
    fn a_valid_history_is_left_alone() {
        let messages = vec![
            OpenaiChatMessage::user_text("hi"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![call("a")]),
            OpenaiChatMessage::tool_result("a", "ok"),
            OpenaiChatMessage::assistant_text("done"),
        ];
        let (repaired, repairs) = repair(messages.clone());
        assert_eq!(repaired, messages);
        assert!(repairs.is_empty());
    }

    #[test]
    fn each_kind_is_repaired_and_reported() {
        let messages = vec![
            OpenaiChatMessage::user_text("hi"),
            OpenaiChatMessage::tool_result("ghost", "orphan"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![call("a"), call("b")]),
            OpenaiChatMessage::tool_result("b", "b's result"),
            OpenaiChatMessage::assistant_tool_calls(None, Vec::new()),
            OpenaiChatMessage::user_text("again"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![call("a")]),
            OpenaiChatMessage::tool_result("a", "second a"),
            OpenaiChatMessage::assistant_text("done"),
        ];
        let (repaired, repairs) = repair(messages);
        check_wire(&repaired).expect("wire-valid after repair");
        let kinds: Vec<RepairKind> = repairs.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            vec![
                RepairKind::OrphanToolResult,
                RepairKind::UnansweredCall,
                RepairKind::EmptyAssistant,
                RepairKind::DuplicateCallId,
            ]
        );
        // The renamed call keeps its own result.
        let renamed = repaired[5].tool_calls()[0].id.clone();
        assert_ne!(renamed, "a");
        assert!(
            matches!(&repaired[6], OpenaiChatMessage::Tool { tool_call_id, content, .. }
            if *tool_call_id == renamed && content.text() == "second a")
        );
        // Results in call order: "a" answered not run, then "b".
        assert!(repaired[2].is_tool_error());
        assert_eq!(repaired[3].text().as_deref(), Some("b's result"));
    }

    #[test]
    fn a_message_with_artifacts_is_kept_whole_dropped_whole_or_cleared_when_renamed() {
        use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider};
        let thinking = |signature: &str| {
            vec![Artifact::new(
                ArtifactProvider::Anthropic,
                "claude",
                ArtifactPlace::Before(0),
                serde_json::json!({"type": "thinking", "thinking": "t", "signature": signature}),
            )]
        };
        let signed = OpenaiChatMessage::assistant_tool_calls(
            Some("Both.".into()),
            vec![call("a"), call("b")],
        )
        .with_artifacts(thinking("s1"));
        let thinking_only = OpenaiChatMessage::assistant_tool_calls(None, Vec::new())
            .with_artifacts(thinking("s2"));
        let reused = OpenaiChatMessage::assistant_tool_calls(None, vec![call("a")])
            .with_artifacts(thinking("s3"));
        let messages = vec![
            OpenaiChatMessage::user_text("hi"),
            signed.clone(),
            // Out of order, one missing: answered and reordered, the message untouched.
            OpenaiChatMessage::tool_result("b", "B"),
            thinking_only,
            OpenaiChatMessage::user_text("again"),
            reused,
            OpenaiChatMessage::tool_result("a", "A2"),
        ];
        let (repaired, repairs) = repair(messages);
        check_wire(&repaired).expect("wire-valid after repair");
        assert_eq!(repaired[1], signed);
        assert!(repaired[2].is_tool_error());
        assert_eq!(repaired[3].text().as_deref(), Some("B"));
        // The message with nothing but a thinking block went, whole.
        assert!(repairs.iter().any(|r| r.kind == RepairKind::EmptyAssistant));
        assert!(
            repaired
                .iter()
                .all(|m| m.artifacts().iter().all(|a| a.data["signature"] != "s2"))
        );
        // The renamed call's message lost its artifacts, not its text or arguments.
        let renamed = &repaired[5];
        assert_ne!(renamed.tool_calls()[0].id, "a");
        assert_eq!(renamed.tool_calls()[0].function, call("a").function);
        assert!(renamed.artifacts().is_empty());
    }
}
