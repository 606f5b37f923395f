//! A whole (non-streamed) Messages reply into a [`ChatResponse`]: its content blocks go through
//! the stream decoder as if each had arrived whole, so both paths keep the same text, calls,
//! artifacts (byte-exact, in place), finish reason and usage.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::Value;

use crate::llm::anthropic::errors::event_error;
use crate::llm::anthropic::stream::EventDecoder;
use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::stream::StreamAssembler;
use crate::vocab::ChatResponse;

#[derive(Deserialize)]
struct Message {
    #[serde(rename = "type", default)]
    kind: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

/// The deltas a whole `body` (a `message` object) stands for.
pub(crate) fn message_deltas(
    body: &[u8],
    request_model: Option<String>,
    answer_tool: Option<String>,
) -> Result<Vec<ModelDelta>, ProviderError> {
    let message: Message = serde_json::from_slice(body).map_err(|error| {
        ProviderError::Decode(format!("the Messages reply is malformed: {error}"))
    })?;
    if message.kind.as_deref() == Some("error") {
        return Err(event_error(&String::from_utf8_lossy(body)));
    }
    let mut decoder = EventDecoder::new(request_model, answer_tool);
    let mut out = VecDeque::new();
    let start = serde_json::json!({
        "type": "message_start",
        "message": {"id": message.id, "model": message.model, "usage": message.usage},
    });
    decoder.decode(&start.to_string(), &mut out)?;
    for (index, block) in message.content.into_iter().enumerate() {
        let index = index as u64;
        decoder.decode(
            &serde_json::json!({"type": "content_block_start", "index": index, "content_block": block})
                .to_string(),
            &mut out,
        )?;
        decoder.decode(
            &serde_json::json!({"type": "content_block_stop", "index": index}).to_string(),
            &mut out,
        )?;
    }
    let delta = serde_json::json!({
        "type": "message_delta",
        "delta": {"stop_reason": message.stop_reason},
    });
    decoder.decode(&delta.to_string(), &mut out)?;
    Ok(out.into())
}

/// A whole `body` as a [`ChatResponse`] (tool calls normalised by the assembler).
pub(crate) fn parse_message(
    body: &[u8],
    request_model: Option<String>,
    answer_tool: Option<String>,
) -> Result<ChatResponse, ProviderError> {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    for delta in message_deltas(body, request_model, answer_tool)? {
        assembler.push(delta, &mut events);
    }
    assembler.finish(&mut events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{ArtifactPlace, FinishReason};

    #[test]
    fn a_whole_message_keeps_blocks_in_place() {
        let body = br#"{"id":"msg_01","type":"message","role":"assistant","model":"claude-x","content":[
            {"type":"thinking","thinking":"Two cities.","signature":"sig=="},
            {"type":"text","text":"Checking both."},
            {"type":"tool_use","id":"toolu_a","name":"get_weather","input":{"city":"Paris"}},
            {"type":"redacted_thinking","data":"EmwKAhgB"},
            {"type":"tool_use","id":"toolu_b","name":"get_weather","input":{}}
        ],"stop_reason":"tool_use","stop_sequence":null,
        "usage":{"input_tokens":10,"cache_creation_input_tokens":20,"cache_read_input_tokens":30,"output_tokens":40}}"#;
        let response = parse_message(body, Some("alias".into()), None).unwrap();
        assert_eq!(response.text(), "Checking both.");
        let calls = response.tool_calls();
        assert_eq!(calls[0].id, "toolu_a");
        assert_eq!(calls[0].function.arguments, r#"{"city":"Paris"}"#);
        assert_eq!(calls[1].id, "toolu_b");
        let artifacts = response.message.artifacts();
        assert_eq!(artifacts.len(), 2);
        assert_eq!(artifacts[0].place, ArtifactPlace::Before(0));
        assert_eq!(artifacts[1].place, ArtifactPlace::Before(2));
        assert_eq!(artifacts[1].model.as_deref(), Some("alias"));
        assert_eq!(
            artifacts[1].data,
            serde_json::json!({"type": "redacted_thinking", "data": "EmwKAhgB"})
        );
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        let usage = response.usage.unwrap();
        assert_eq!(usage.prompt_tokens, 60);
        assert_eq!(usage.cached_tokens, Some(30));
        assert_eq!(usage.cache_write_tokens, Some(20));
        assert_eq!(response.id.as_deref(), Some("msg_01"));
    }
}
