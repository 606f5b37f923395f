//! [`replay`]: turn a saved history back into the events a UI would have seen.

use std::collections::HashMap;

use serde_json::Value;

use crate::run::event::StreamEvent;
use crate::vocab::{FinishReason, OpenaiChatMessage};

/// The event sequence of a saved history — reasoning, text, tool calls and their results with
/// error flags — without calling the model or any tool. Use it to redraw a restored
/// conversation.
///
/// Tool outputs are what the model saw (the `tool` message content, parsed as JSON when it is
/// JSON); a result is flagged `is_error` when its message is (the history keeps the flag as
/// data). Durations are not recorded in the history and replay as 0.
pub fn replay(messages: &[OpenaiChatMessage]) -> Vec<StreamEvent> {
    replay_with_updates(messages, &[])
}

/// [`replay`] with each call's stored updates ([`crate::session::call_updates`]): a call's
/// [`StreamEvent::ToolCallUpdate`]s come after its `ToolExecutionStarted`, in the order they
/// were recorded, and before its result — what a UI needs to redraw the call's card (title,
/// content, diff, locations) and its final status. Updates of calls not in `messages` are
/// left out.
///
/// ```
/// use agcore::run::replay::replay_with_updates;
/// use agcore::session::StoredCallUpdate;
/// use agcore::tools::ToolCallUpdate;
/// use agcore::vocab::{OpenaiChatMessage, ToolCall};
///
/// let history = [
///     OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("c1", "edit_file", "{}")]),
///     OpenaiChatMessage::tool_result("c1", "ok"),
/// ];
/// let stored = [StoredCallUpdate { call_id: "c1".into(), update: ToolCallUpdate::title("Edit a.rs") }];
/// let events = replay_with_updates(&history, &stored);
/// assert!(events.iter().any(|e| matches!(e, agcore::llm::StreamEvent::ToolCallUpdate { id, .. } if id == "c1")));
/// ```
pub fn replay_with_updates(
    messages: &[OpenaiChatMessage],
    updates: &[crate::session::StoredCallUpdate],
) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    let mut names: HashMap<&str, &str> = HashMap::new();
    for message in messages {
        match message {
            OpenaiChatMessage::Assistant {
                content,
                tool_calls,
                ..
            } => {
                if let Some(text) = message.reasoning().filter(|t| !t.is_empty()) {
                    events.push(StreamEvent::ReasoningDelta {
                        text: text.to_owned(),
                    });
                }
                if let Some(text) = content.as_ref().filter(|t| !t.is_empty()) {
                    events.push(StreamEvent::AssistantTextDelta { text: text.clone() });
                }
                for call in tool_calls {
                    names.insert(&call.id, &call.function.name);
                    events.push(StreamEvent::ToolCallReady {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                    });
                    events.push(StreamEvent::ToolExecutionStarted {
                        id: call.id.clone(),
                        tool_name: call.function.name.clone(),
                        input: serde_json::from_str(&call.function.arguments)
                            .unwrap_or_else(|_| Value::String(call.function.arguments.clone())),
                    });
                    events.extend(
                        updates
                            .iter()
                            .filter(|stored| stored.call_id == call.id)
                            .map(|stored| StreamEvent::ToolCallUpdate {
                                id: call.id.clone(),
                                update: stored.update.clone(),
                            }),
                    );
                }
                events.push(StreamEvent::TurnComplete {
                    reason: if tool_calls.is_empty() {
                        FinishReason::Stop
                    } else {
                        FinishReason::ToolCalls
                    },
                    usage: None,
                });
            }
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let text = content.text();
                events.push(StreamEvent::ToolExecutionCompleted {
                    id: tool_call_id.clone(),
                    tool_name: names
                        .get(tool_call_id.as_str())
                        .map(|name| (*name).to_owned())
                        .unwrap_or_default(),
                    is_error: *is_error,
                    output: serde_json::from_str(&text).unwrap_or(Value::String(text)),
                    duration_ms: 0,
                });
            }
            _ => {}
        }
    }
    events
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{ToolAnswer, ToolCall};

    #[test]
    fn the_error_flag_comes_from_the_message_not_its_text() {
        let messages = [
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")],
            ),
            OpenaiChatMessage::tool_answer("a", ToolAnswer::error("boom")),
            // A successful output that happens to start like an error text.
            OpenaiChatMessage::tool_result("b", "Error: 404 is the page's title"),
        ];
        let flags: Vec<(String, bool)> = replay(&messages)
            .into_iter()
            .filter_map(|event| match event {
                StreamEvent::ToolExecutionCompleted { id, is_error, .. } => Some((id, is_error)),
                _ => None,
            })
            .collect();
        assert_eq!(flags, [("a".to_owned(), true), ("b".to_owned(), false)]);
    }
}
