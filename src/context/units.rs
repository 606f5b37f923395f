//! The history as units a compaction may touch: an assistant message with its tool results
//! is one unit (a call is never separated from its result); every other message is one. And
//! the wire rules a history keeps through every compaction.

use std::collections::HashSet;

use crate::context::compact::is_marker;
use crate::vocab::OpenaiChatMessage;

/// One unit: `messages[start..end]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unit {
    /// Its first message.
    pub start: usize,
    /// One past its last message.
    pub end: usize,
}

/// The units of `messages[from..to]`: an assistant message and the tool messages right after
/// it form one.
pub fn units(messages: &[OpenaiChatMessage], from: usize, to: usize) -> Vec<Unit> {
    let to = to.min(messages.len());
    let mut units = Vec::new();
    let mut index = from;
    while index < to {
        let start = index;
        index += 1;
        if matches!(messages[start], OpenaiChatMessage::Assistant { .. }) {
            while index < to && matches!(messages[index], OpenaiChatMessage::Tool { .. }) {
                index += 1;
            }
        }
        units.push(Unit { start, end: index });
    }
    units
}

/// The part of the history a compaction may touch, and the units in it. Outside it: the
/// leading system (developer) messages, the newest user message (not counting the engine's
/// own markers), the last `keep_last_turns`
/// assistant turns, and everything not yet committed (`committed` onwards).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Compactable {
    /// The units that may be stubbed, summarised or dropped, oldest first.
    pub units: Vec<Unit>,
}

impl Compactable {
    /// What may be compacted in `messages` (of which the first `committed` are committed).
    pub fn of(messages: &[OpenaiChatMessage], committed: usize, keep_last_turns: usize) -> Self {
        let end = committed.min(messages.len());
        let first = leading_system(messages);
        let newest_user = messages
            .iter()
            .rposition(|m| matches!(m, OpenaiChatMessage::User { .. }) && !is_marker(m));
        // The start of the `keep_last_turns`-th assistant message from the end.
        let kept_from = if keep_last_turns == 0 {
            messages.len()
        } else {
            messages
                .iter()
                .enumerate()
                .rev()
                .filter(|(_, m)| matches!(m, OpenaiChatMessage::Assistant { .. }))
                .nth(keep_last_turns - 1)
                .map_or(0, |(index, _)| index)
        };
        let limit = end.min(kept_from);
        let units = units(messages, first, limit)
            .into_iter()
            // A unit cut by the limit (its tool results not all inside) is not whole: kept.
            .filter(|unit| unit.end <= limit && unit_is_whole(messages, *unit))
            .filter(|unit| Some(unit.start) != newest_user)
            .collect();
        Compactable { units }
    }
}

/// The count of leading system and developer messages.
pub fn leading_system(messages: &[OpenaiChatMessage]) -> usize {
    messages
        .iter()
        .take_while(|m| {
            matches!(
                m,
                OpenaiChatMessage::System { .. } | OpenaiChatMessage::Developer { .. }
            )
        })
        .count()
}

/// A unit ends where the next message is no tool result (so none of its results lies past it).
fn unit_is_whole(messages: &[OpenaiChatMessage], unit: Unit) -> bool {
    !matches!(messages.get(unit.end), Some(OpenaiChatMessage::Tool { .. }))
}

/// Why a history is not valid on the wire.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireViolation {
    /// A tool message that answers no call of the assistant message before it.
    #[error("message {index}: a tool result for '{call_id}' answers no call just before it")]
    OrphanResult {
        /// The message's position.
        index: usize,
        /// Its `tool_call_id`.
        call_id: String,
    },
    /// A call not answered right after its assistant message.
    #[error("message {index}: call '{call_id}' has no result right after it")]
    Unanswered {
        /// The assistant message's position.
        index: usize,
        /// The call id.
        call_id: String,
    },
    /// The same call id twice.
    #[error("message {index}: call id '{call_id}' is used twice")]
    DuplicateId {
        /// The position of the second use.
        index: usize,
        /// The call id.
        call_id: String,
    },
    /// An assistant message with no text, refusal or calls.
    #[error("message {index}: an empty assistant message")]
    EmptyAssistant {
        /// Its position.
        index: usize,
    },
    /// A system message after the conversation started.
    #[error("message {index}: a system message after the conversation started")]
    LateSystem {
        /// Its position.
        index: usize,
    },
}

/// Check the wire rules: every call answered by exactly one tool message right after its
/// assistant message, no result without its call, unique call ids, no empty assistant
/// message, system messages only at the start.
pub fn check_wire(messages: &[OpenaiChatMessage]) -> Result<(), WireViolation> {
    let first = leading_system(messages);
    let mut ids = HashSet::new();
    let mut index = 0;
    while index < messages.len() {
        let message = &messages[index];
        match message {
            OpenaiChatMessage::System { .. } | OpenaiChatMessage::Developer { .. }
                if index >= first =>
            {
                return Err(WireViolation::LateSystem { index });
            }
            OpenaiChatMessage::Tool { tool_call_id, .. } => {
                return Err(WireViolation::OrphanResult {
                    index,
                    call_id: tool_call_id.clone(),
                });
            }
            OpenaiChatMessage::Assistant {
                content,
                refusal,
                tool_calls,
                ..
            } => {
                if tool_calls.is_empty()
                    && content.as_deref().is_none_or(str::is_empty)
                    && refusal.as_deref().is_none_or(str::is_empty)
                {
                    return Err(WireViolation::EmptyAssistant { index });
                }
                let mut pending: Vec<&str> = Vec::new();
                for call in tool_calls {
                    if !ids.insert(call.id.as_str()) {
                        return Err(WireViolation::DuplicateId {
                            index,
                            call_id: call.id.clone(),
                        });
                    }
                    pending.push(&call.id);
                }
                let mut next = index + 1;
                while let Some(OpenaiChatMessage::Tool { tool_call_id, .. }) = messages.get(next) {
                    match pending.iter().position(|id| id == tool_call_id) {
                        Some(position) => {
                            pending.remove(position);
                        }
                        None => {
                            return Err(WireViolation::OrphanResult {
                                index: next,
                                call_id: tool_call_id.clone(),
                            });
                        }
                    }
                    next += 1;
                }
                if let Some(id) = pending.first() {
                    return Err(WireViolation::Unanswered {
                        index,
                        call_id: (*id).to_owned(),
                    });
                }
                index = next;
                continue;
            }
            _ => {}
        }
        index += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::ToolCall;

    fn history() -> Vec<OpenaiChatMessage> {
        vec![
            OpenaiChatMessage::system("s"),
            OpenaiChatMessage::user_text("u1"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("a", "t", "{}")]),
            OpenaiChatMessage::tool_result("a", "out"),
            OpenaiChatMessage::assistant_text("done"),
            OpenaiChatMessage::user_text("u2"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("b", "t", "{}")]),
            OpenaiChatMessage::tool_result("b", "out"),
            OpenaiChatMessage::assistant_text("done"),
        ]
    }

    #[test]
    fn a_call_and_its_results_are_one_unit() {
        let messages = history();
        let all = units(&messages, 1, messages.len());
        assert_eq!(all[1], Unit { start: 2, end: 4 });
        assert_eq!(all.len(), 6);
        assert!(check_wire(&messages).is_ok());
    }

    #[test]
    fn the_newest_user_message_and_last_turns_are_kept() {
        let messages = history();
        let compactable = Compactable::of(&messages, messages.len(), 2);
        let starts: Vec<usize> = compactable.units.iter().map(|u| u.start).collect();
        assert_eq!(starts, vec![1, 2, 4]);
        let nothing_kept = Compactable::of(&messages, messages.len(), 0);
        assert!(
            !nothing_kept
                .units
                .iter()
                .any(|u| u.start == 5 || u.start == 0)
        );
        // Uncommitted messages are never touched.
        let early = Compactable::of(&messages, 3, 0);
        assert_eq!(
            early.units.iter().map(|u| u.start).collect::<Vec<_>>(),
            vec![1]
        );
    }

    #[test]
    fn violations_are_named() {
        let mut messages = history();
        messages.remove(3);
        assert!(matches!(
            check_wire(&messages),
            Err(WireViolation::Unanswered { index: 2, .. })
        ));
        let mut orphan = history();
        orphan.remove(2);
        assert!(matches!(
            check_wire(&orphan),
            Err(WireViolation::OrphanResult { index: 2, .. })
        ));
    }
}
