//! A history from the OpenAI Agents SDK: its session items (the Responses API's input items,
//! as `Session.get_items()` returns and `SQLiteSession` stores them) converted to chat
//! messages, for [`crate::run::Conversation::from_history`]. The conversion keeps what the items
//! say, faults included; the context engine's [`crate::context::repair`] then fixes those
//! before the first request (an output whose call was trimmed, a call whose output was never
//! saved — the SDK's "No tool output found" — and call ids used twice).
//!
//! | item | chat message |
//! |---|---|
//! | `{"type": "message", "role": "user" \| "system" \| "developer", "content": ...}` (also without `type`) | that role's message |
//! | `{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": ...}]}` | an assistant message |
//! | `{"type": "function_call", "call_id", "name", "arguments"}` | a tool call, on the assistant message just before (text or other calls of the same turn), else on a new one |
//! | `{"type": "function_call_output", "call_id", "output"}` | a tool message (`output` a string, or content items whose texts are joined) |
//! | `{"type": "reasoning", "summary": [{"text": ...}]}` | the next assistant message's `reasoning_content` |
//! | anything else (`web_search_call`, `computer_call`, …) or an item missing a field | skipped, and listed in [`Converted::skipped`] |
//!
//! Content may be a string or a list of parts (`input_text`, `output_text`, `refusal`; images
//! are not carried over and are listed as skipped).
//!
//! ```
//! use agcore::context::{from_agents_sdk_items, repair};
//! let items: Vec<serde_json::Value> = serde_json::from_str(r#"[
//!   {"role": "user", "content": "Weather in Paris?"},
//!   {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
//!   {"type": "function_call_output", "call_id": "call_1", "output": "18°C"},
//!   {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "18°C in Paris."}]}
//! ]"#).unwrap();
//! let converted = from_agents_sdk_items(&items);
//! assert_eq!(converted.messages.len(), 4);
//! let (_, repairs) = repair(converted.messages);
//! assert!(repairs.is_empty());
//! ```

use serde_json::Value;

use crate::vocab::{OpenaiChatMessage, ToolCall};

/// Agents SDK items as chat messages.
#[derive(Debug, Clone, PartialEq)]
pub struct Converted {
    /// The messages, in order (not yet repaired).
    pub messages: Vec<OpenaiChatMessage>,
    /// The items not carried over: their position and why.
    pub skipped: Vec<(usize, String)>,
}

/// Convert Agents SDK session items (see the module docs).
pub fn from_agents_sdk_items(items: &[Value]) -> Converted {
    let mut messages: Vec<OpenaiChatMessage> = Vec::new();
    let mut skipped = Vec::new();
    let mut reasoning: Option<String> = None;
    // Whether the last message is an assistant message this turn's calls may join.
    let mut open_assistant = false;
    for (position, item) in items.iter().enumerate() {
        let kind = item
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or("message");
        let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
        match kind {
            "message" => {
                let Some(role) = text("role") else {
                    skipped.push((position, "a message without a role".to_owned()));
                    continue;
                };
                let (content, refusal, images) = content_text(item.get("content"));
                if images > 0 {
                    skipped.push((position, format!("{images} image or file part(s)")));
                }
                let message = match role.as_str() {
                    "user" => OpenaiChatMessage::user_text(content),
                    "system" => OpenaiChatMessage::system(content),
                    "developer" => OpenaiChatMessage::Developer {
                        content: content.into(),
                        name: None,
                    },
                    "assistant" => OpenaiChatMessage::Assistant {
                        content: Some(content).filter(|c| !c.is_empty()),
                        refusal,
                        reasoning_content: reasoning.take(),
                        reasoning: None,
                        tool_calls: Vec::new(),
                        name: None,
                        artifacts: Vec::new(),
                    },
                    other => {
                        skipped.push((position, format!("a message of role {other:?}")));
                        continue;
                    }
                };
                open_assistant = role == "assistant";
                messages.push(message);
            }
            "function_call" => {
                let (Some(call_id), Some(name)) = (text("call_id"), text("name")) else {
                    skipped.push((
                        position,
                        "a function_call without call_id or name".to_owned(),
                    ));
                    continue;
                };
                let arguments = text("arguments").unwrap_or_else(|| "{}".to_owned());
                let call = ToolCall::new(call_id, name, arguments);
                match messages.last_mut() {
                    Some(OpenaiChatMessage::Assistant { tool_calls, .. }) if open_assistant => {
                        tool_calls.push(call);
                    }
                    _ => {
                        let mut message = OpenaiChatMessage::assistant_tool_calls(None, vec![call]);
                        if let OpenaiChatMessage::Assistant {
                            reasoning_content, ..
                        } = &mut message
                        {
                            *reasoning_content = reasoning.take();
                        }
                        messages.push(message);
                        open_assistant = true;
                    }
                }
            }
            "function_call_output" => {
                let Some(call_id) = text("call_id") else {
                    skipped.push((
                        position,
                        "a function_call_output without call_id".to_owned(),
                    ));
                    continue;
                };
                let output = match item.get("output") {
                    Some(Value::String(output)) => output.clone(),
                    Some(parts @ Value::Array(_)) => content_text(Some(parts)).0,
                    Some(other) => other.to_string(),
                    None => String::new(),
                };
                messages.push(OpenaiChatMessage::tool_result(call_id, output));
                open_assistant = false;
            }
            "reasoning" => {
                let summary: Vec<&str> = item
                    .get("summary")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .filter_map(|part| part.get("text").and_then(Value::as_str))
                    .collect();
                if !summary.is_empty() {
                    reasoning = Some(summary.join("\n"));
                }
            }
            other => skipped.push((position, format!("an item of type {other:?}"))),
        }
    }
    Converted { messages, skipped }
}

/// The text of a content value (a string, or parts), its refusal, and how many parts were
/// not text.
fn content_text(content: Option<&Value>) -> (String, Option<String>, usize) {
    match content {
        Some(Value::String(text)) => (text.clone(), None, 0),
        Some(Value::Array(parts)) => {
            let mut texts = Vec::new();
            let mut refusal = None;
            let mut other = 0;
            for part in parts {
                let kind = part.get("type").and_then(Value::as_str).unwrap_or("");
                match (kind, part.get("text").and_then(Value::as_str)) {
                    ("refusal", _) => {
                        refusal = part
                            .get("refusal")
                            .and_then(Value::as_str)
                            .map(str::to_owned);
                    }
                    (_, Some(text)) => texts.push(text),
                    _ => other += 1,
                }
            }
            (texts.join(""), refusal, other)
        }
        _ => (String::new(), None, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_turn_with_text_and_parallel_calls_is_one_assistant_message() {
        let items = vec![
            json!({"role": "user", "content": [{"type": "input_text", "text": "both"}]}),
            json!({"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "two calls"}]}),
            json!({"type": "message", "role": "assistant", "id": "msg_1", "status": "completed",
                   "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]}),
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "a", "arguments": "{}"}),
            json!({"type": "function_call", "id": "fc_2", "call_id": "call_b", "name": "b", "arguments": "{}"}),
            json!({"type": "function_call_output", "call_id": "call_a", "output": "A"}),
            json!({"type": "function_call_output", "call_id": "call_b",
                   "output": [{"type": "input_text", "text": "B"}]}),
            json!({"type": "web_search_call", "id": "ws_1"}),
        ];
        let converted = from_agents_sdk_items(&items);
        assert_eq!(converted.messages.len(), 4);
        match &converted.messages[1] {
            OpenaiChatMessage::Assistant {
                content,
                reasoning_content,
                tool_calls,
                ..
            } => {
                assert_eq!(content.as_deref(), Some("Checking."));
                assert_eq!(reasoning_content.as_deref(), Some("two calls"));
                assert_eq!(tool_calls.len(), 2);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(converted.messages[3].text().as_deref(), Some("B"));
        assert_eq!(converted.skipped.len(), 1);
    }
}
