//! `session/load`: the stored conversation as the updates that first showed it — the user's
//! messages, the agent's text and reasoning, each tool call with its final state.

use agcore::llm::OpenaiChatMessage;
use agcore::tools::ToolRegistry;
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

use super::kinds;

/// The updates that replay `history` (system messages are not shown).
pub fn updates(history: &[OpenaiChatMessage], registry: &ToolRegistry) -> Vec<acp::SessionUpdate> {
    let mut updates = Vec::new();
    for message in history {
        match message {
            OpenaiChatMessage::User { content, .. } => {
                updates.push(acp::SessionUpdate::UserMessageChunk(acp::ContentChunk::new(
                    content.text().into(),
                )));
            }
            OpenaiChatMessage::Assistant {
                content,
                reasoning_content,
                reasoning,
                tool_calls,
                ..
            } => {
                if let Some(thought) = reasoning_content.as_ref().or(reasoning.as_ref())
                    && !thought.is_empty()
                {
                    updates.push(acp::SessionUpdate::AgentThoughtChunk(
                        acp::ContentChunk::new(thought.clone().into()),
                    ));
                }
                if let Some(text) = content.as_ref().filter(|text| !text.is_empty()) {
                    updates.push(acp::SessionUpdate::AgentMessageChunk(
                        acp::ContentChunk::new(text.clone().into()),
                    ));
                }
                for call in tool_calls {
                    let name = &call.function.name;
                    let input: Value = serde_json::from_str(&call.function.arguments)
                        .unwrap_or_else(|_| Value::String(call.function.arguments.clone()));
                    let tool = registry.get(name);
                    let title = tool
                        .as_ref()
                        .map_or_else(|| name.clone(), |tool| tool.title(&input));
                    let kind = kinds::kind(tool.map(|tool| tool.kind()).unwrap_or_default());
                    updates.push(acp::SessionUpdate::ToolCall(
                        acp::ToolCall::new(call.id.clone(), title)
                            .kind(kind)
                            .status(acp::ToolCallStatus::InProgress)
                            .raw_input(input),
                    ));
                }
            }
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let status = if *is_error {
                    acp::ToolCallStatus::Failed
                } else {
                    acp::ToolCallStatus::Completed
                };
                updates.push(acp::SessionUpdate::ToolCallUpdate(acp::ToolCallUpdate::new(
                    tool_call_id.clone(),
                    acp::ToolCallUpdateFields::new().status(status).content(vec![
                        kinds::text_content(kinds::bounded(
                            content.text(),
                            kinds::MAX_SHOWN_OUTPUT_BYTES,
                        )),
                    ]),
                )));
            }
            _ => {}
        }
    }
    updates
}
