//! A whole Converse reply into a [`ChatResponse`]: its content blocks go through the stream
//! decoder as if each had streamed in one piece, so both paths keep the same text, calls,
//! reasoning artifacts (byte-exact, in place), finish reason and usage.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::bedrock::stream::EventDecoder;
use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::stream::StreamAssembler;
use crate::vocab::ChatResponse;

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Reply {
    output: Output,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Output {
    message: Message,
}

#[derive(Deserialize)]
struct Message {
    #[serde(default)]
    content: Vec<Value>,
}

/// The deltas a whole Converse `body` stands for.
pub(crate) fn reply_deltas(
    body: &[u8],
    model: &str,
    answer_tool: Option<String>,
) -> Result<Vec<ModelDelta>, ProviderError> {
    let reply: Reply = serde_json::from_slice(body).map_err(|error| {
        ProviderError::Decode(format!("the Converse reply is malformed: {error}"))
    })?;
    let mut decoder = EventDecoder::new(model, answer_tool);
    let mut out = VecDeque::new();
    let mut event = |name: &str, data: Value, out: &mut VecDeque<ModelDelta>| {
        decoder.decode(name, &data.to_string(), out)
    };
    for (index, block) in reply.output.message.content.into_iter().enumerate() {
        if let Some(text) = block.get("text") {
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"text": text}}),
                &mut out,
            )?;
        } else if let Some(call) = block.get("toolUse") {
            event(
                "contentBlockStart",
                json!({"contentBlockIndex": index, "start": {"toolUse": call}}),
                &mut out,
            )?;
            let input = call.get("input").map(Value::to_string).unwrap_or_default();
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"toolUse": {"input": input}}}),
                &mut out,
            )?;
        } else if let Some(reasoning) = block.get("reasoningContent") {
            let delta = match (
                reasoning.get("reasoningText"),
                reasoning.get("redactedContent"),
            ) {
                (Some(text), _) => text.clone(),
                (None, Some(redacted)) => json!({"redactedContent": redacted}),
                (None, None) => continue,
            };
            event(
                "contentBlockDelta",
                json!({"contentBlockIndex": index, "delta": {"reasoningContent": delta}}),
                &mut out,
            )?;
        }
        event(
            "contentBlockStop",
            json!({"contentBlockIndex": index}),
            &mut out,
        )?;
    }
    event(
        "messageStop",
        json!({"stopReason": reply.stop_reason}),
        &mut out,
    )?;
    event("metadata", json!({"usage": reply.usage}), &mut out)?;
    Ok(out.into())
}

/// A whole Converse `body` as a [`ChatResponse`].
pub(crate) fn parse_reply(
    body: &[u8],
    model: &str,
    answer_tool: Option<String>,
) -> Result<ChatResponse, ProviderError> {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    for delta in reply_deltas(body, model, answer_tool)? {
        assembler.push(delta, &mut events);
    }
    assembler.finish(&mut events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{ArtifactPlace, FinishReason};

    #[test]
    fn a_whole_reply_keeps_reasoning_byte_exact_and_in_place() {
        let body = br#"{"output":{"message":{"role":"assistant","content":[
            {"reasoningContent":{"reasoningText":{"text":"Two \u00e9 cities.","signature":"sig=="}}},
            {"text":"Checking."},
            {"toolUse":{"toolUseId":"tooluse_a","name":"get_weather","input":{"city":"Paris"}}},
            {"reasoningContent":{"redactedContent":"EmwKAhgB"}}
        ]}},"stopReason":"tool_use",
        "usage":{"inputTokens":10,"outputTokens":40,"totalTokens":80,"cacheReadInputTokens":30},
        "metrics":{"latencyMs":12}}"#;
        let response = parse_reply(body, "anthropic.claude-x", None).unwrap();
        assert_eq!(response.text(), "Checking.");
        let calls = response.tool_calls();
        assert_eq!(calls[0].id, "tooluse_a");
        assert_eq!(calls[0].function.arguments, r#"{"city":"Paris"}"#);
        let artifacts = response.message.artifacts();
        assert_eq!(artifacts.len(), 2);
        assert_eq!(artifacts[0].place, ArtifactPlace::Before(0));
        assert_eq!(
            artifacts[0].data,
            json!({"reasoningContent": {"reasoningText": {"text": "Two é cities.", "signature": "sig=="}}})
        );
        assert_eq!(artifacts[1].place, ArtifactPlace::Before(2));
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        let usage = response.usage.unwrap();
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (40, 40));
    }
}
