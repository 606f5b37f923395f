//! The events of a ConverseStream reply into [`ModelDelta`]s.
//!
//! `messageStart`, then content blocks by `contentBlockIndex`: a `toolUse` block opens with
//! `contentBlockStart` (id and name) and grows by `toolUse.input` fragments; text and reasoning
//! blocks open with their first `contentBlockDelta`; each ends with `contentBlockStop`. Then
//! `messageStop` (the `stopReason`) and `metadata` (usage by kind), which ends the reply.
//! Reasoning text streams as [`ModelDelta::Thought`] for display; each reasoning block becomes
//! one [`ModelDelta::Artifact`] at its end — `{"reasoningContent": {"reasoningText": {"text",
//! "signature"}}}` or `{"reasoningContent": {"redactedContent"}}`, the block as Converse takes
//! it back — placed before the element that followed it. An exception frame
//! (`throttlingException`, `validationException`, ...) ends the stream with its typed error.

use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::llm::bedrock::errors::exception_error;
use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::transport::SseDecoder;
use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, FinishReason, Usage};

/// Per-stream state of the ConverseStream decoder.
#[derive(Debug, Default)]
pub struct EventDecoder {
    /// The model the request named: its artifacts are recorded for it.
    model: String,
    /// The typed-output tool whose forced call is the answer text.
    answer_tool: Option<String>,
    blocks: HashMap<u64, Block>,
    text_seen: bool,
    calls_seen: usize,
    answered: bool,
    stopped: bool,
    metadata_seen: bool,
}

#[derive(Debug)]
enum Block {
    Text,
    Reasoning {
        text: String,
        signature: String,
        redacted: Option<String>,
    },
    Call {
        ordinal: u32,
    },
    Answer {
        sent: bool,
    },
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Event {
    #[serde(default)]
    content_block_index: Option<u64>,
    #[serde(default)]
    start: Option<Value>,
    #[serde(default)]
    delta: Option<Value>,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

impl EventDecoder {
    /// A decoder for a reply to a request for `model` whose typed-output tool is `answer_tool`.
    pub(crate) fn new(model: &str, answer_tool: Option<String>) -> Self {
        EventDecoder {
            model: model.to_owned(),
            answer_tool,
            ..EventDecoder::default()
        }
    }

    /// Decode one event (`name` is its `:event-type`) with its JSON payload.
    pub(crate) fn decode(
        &mut self,
        name: &str,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        let event: Event = serde_json::from_str(data).map_err(|error| {
            ProviderError::Decode(format!("a ConverseStream event is malformed: {error}"))
        })?;
        let index = event.content_block_index.unwrap_or(0);
        match name {
            "contentBlockStart" => {
                if let Some(call) = event.start.as_ref().and_then(|start| start.get("toolUse")) {
                    self.start_call(index, call, out);
                }
            }
            "contentBlockDelta" => {
                if let Some(delta) = &event.delta {
                    self.delta(index, delta, out);
                }
            }
            "contentBlockStop" => self.stop_block(index, out),
            "messageStop" => {
                self.stopped = true;
                let reason = event.stop_reason.as_deref().unwrap_or("end_turn");
                let reason = match reason {
                    "tool_use" if self.answered && self.calls_seen == 0 => FinishReason::Stop,
                    other => finish_reason(other),
                };
                out.push_back(ModelDelta::Finish(reason));
            }
            "metadata" => {
                self.metadata_seen = true;
                if let Some(usage) = &event.usage {
                    out.push_back(ModelDelta::Usage(usage_of(usage)));
                }
                return Ok(true);
            }
            // `messageStart` (the role) and events this decoder does not know.
            _ => {}
        }
        Ok(false)
    }

    fn start_call(&mut self, index: u64, call: &Value, out: &mut VecDeque<ModelDelta>) {
        let text = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
        let name = text("name");
        if name.is_some() && name == self.answer_tool {
            self.answered = true;
            self.blocks.insert(index, Block::Answer { sent: false });
            return;
        }
        let ordinal = u32::try_from(self.calls_seen).unwrap_or(u32::MAX);
        self.calls_seen += 1;
        self.blocks.insert(index, Block::Call { ordinal });
        out.push_back(ModelDelta::ToolCall {
            index: Some(ordinal),
            id: text("toolUseId"),
            name,
            arguments: None,
        });
    }

    fn delta(&mut self, index: u64, delta: &Value, out: &mut VecDeque<ModelDelta>) {
        if let Some(text) = delta.get("text").and_then(Value::as_str) {
            self.blocks.entry(index).or_insert(Block::Text);
            if !text.is_empty() {
                self.text_seen = true;
                out.push_back(ModelDelta::Text(text.to_owned()));
            }
        } else if let Some(reasoning) = delta.get("reasoningContent") {
            let block = self.blocks.entry(index).or_insert(Block::Reasoning {
                text: String::new(),
                signature: String::new(),
                redacted: None,
            });
            let Block::Reasoning {
                text,
                signature,
                redacted,
            } = block
            else {
                return;
            };
            if let Some(piece) = reasoning.get("text").and_then(Value::as_str) {
                text.push_str(piece);
                if !piece.is_empty() {
                    out.push_back(ModelDelta::Thought(piece.to_owned()));
                }
            }
            if let Some(piece) = reasoning.get("signature").and_then(Value::as_str) {
                signature.push_str(piece);
            }
            if let Some(piece) = reasoning.get("redactedContent").and_then(Value::as_str) {
                redacted.get_or_insert_with(String::new).push_str(piece);
            }
        } else if let Some(input) = delta.pointer("/toolUse/input").and_then(Value::as_str) {
            match self.blocks.get_mut(&index) {
                Some(Block::Call { ordinal }) if !input.is_empty() => {
                    out.push_back(ModelDelta::ToolCall {
                        index: Some(*ordinal),
                        id: None,
                        name: None,
                        arguments: Some(input.to_owned()),
                    });
                }
                Some(Block::Answer { sent }) if !input.is_empty() => {
                    *sent = true;
                    out.push_back(ModelDelta::Text(input.to_owned()));
                }
                _ => {}
            }
        }
    }

    fn stop_block(&mut self, index: u64, out: &mut VecDeque<ModelDelta>) {
        match self.blocks.remove(&index) {
            Some(Block::Reasoning {
                text,
                signature,
                redacted,
            }) => {
                let data = match redacted {
                    Some(redacted) => json!({"reasoningContent": {"redactedContent": redacted}}),
                    // Without its signature the API rejects the block; it is not kept.
                    None if signature.is_empty() => {
                        tracing::debug!("a reasoning block ended without a signature; not kept");
                        return;
                    }
                    None => json!({"reasoningContent": {"reasoningText": {
                        "text": text, "signature": signature
                    }}}),
                };
                out.push_back(ModelDelta::Artifact(Artifact::new(
                    ArtifactProvider::Bedrock,
                    &self.model,
                    ArtifactPlace::before_next(self.text_seen, self.calls_seen),
                    data,
                )));
            }
            Some(Block::Answer { sent: false }) => out.push_back(ModelDelta::Text("{}".into())),
            _ => {}
        }
    }
}

/// A `stopReason` as a [`FinishReason`]: `end_turn` / `stop_sequence` stop, `tool_use` calls
/// tools, `max_tokens` and `model_context_window_exceeded` are `length`, a guardrail's
/// intervention and `content_filtered` are a content filter; anything else is kept as sent.
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "guardrail_intervened" | "content_filtered" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// Converse `usage` by token kind: `inputTokens` counts what was neither read from nor written
/// to the cache, so the prompt is the sum of the three.
pub(crate) fn usage_of(usage: &Value) -> Usage {
    let count = |key: &str| usage.get(key).and_then(Value::as_u64);
    let cache_read = count("cacheReadInputTokens");
    let cache_write = count("cacheWriteInputTokens");
    let prompt_tokens = count("inputTokens")
        .unwrap_or(0)
        .saturating_add(cache_read.unwrap_or(0))
        .saturating_add(cache_write.unwrap_or(0));
    let completion_tokens = count("outputTokens").unwrap_or(0);
    Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: prompt_tokens.saturating_add(completion_tokens),
        cached_tokens: cache_read,
        reasoning_tokens: None,
        cache_write_tokens: cache_write,
        web_search_requests: None,
    }
}

impl SseDecoder for EventDecoder {
    fn event(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        let name = event.unwrap_or("");
        if name == "error" || name.ends_with("Exception") {
            return Err(exception_error(name, data));
        }
        if data.is_empty() {
            return Ok(false);
        }
        self.decode(name, data, out)
    }

    fn finished(&self) -> bool {
        self.stopped || self.metadata_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(decoder: &mut EventDecoder, events: &[(&str, Value)]) -> Vec<ModelDelta> {
        let mut out = VecDeque::new();
        for (name, data) in events {
            decoder
                .event(Some(name), &data.to_string(), &mut out)
                .unwrap();
        }
        out.into_iter().collect()
    }

    #[test]
    fn reasoning_text_and_a_call_become_thoughts_an_artifact_and_a_call() {
        let mut decoder = EventDecoder::new("anthropic.claude-x", None);
        let deltas = run(
            &mut decoder,
            &[
                ("messageStart", json!({"role": "assistant"})),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Let me "}}}),
                ),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "think."}}}),
                ),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "EqQB"}}}),
                ),
                ("contentBlockStop", json!({"contentBlockIndex": 0})),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 1, "delta": {"text": "Checking."}}),
                ),
                ("contentBlockStop", json!({"contentBlockIndex": 1})),
                (
                    "contentBlockStart",
                    json!({"contentBlockIndex": 2, "start": {"toolUse": {"toolUseId": "tooluse_1", "name": "f"}}}),
                ),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "{\"a\":"}}}),
                ),
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 2, "delta": {"toolUse": {"input": "1}"}}}),
                ),
                ("contentBlockStop", json!({"contentBlockIndex": 2})),
                ("messageStop", json!({"stopReason": "tool_use"})),
            ],
        );
        assert!(!decoder.finished() || decoder.stopped);
        let artifact = deltas
            .iter()
            .find_map(|d| match d {
                ModelDelta::Artifact(a) => Some(a.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(artifact.place, ArtifactPlace::Before(0));
        assert_eq!(
            artifact.data,
            json!({"reasoningContent": {"reasoningText": {"text": "Let me think.", "signature": "EqQB"}}})
        );
        assert!(deltas.contains(&ModelDelta::ToolCall {
            index: Some(0),
            id: Some("tooluse_1".into()),
            name: Some("f".into()),
            arguments: None
        }));
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::ToolCalls)));
        let mut out = VecDeque::new();
        let done = decoder
            .event(
                Some("metadata"),
                r#"{"usage":{"inputTokens":3,"outputTokens":4,"totalTokens":7,"cacheReadInputTokens":10},"metrics":{"latencyMs":5}}"#,
                &mut out,
            )
            .unwrap();
        assert!(done);
        let ModelDelta::Usage(usage) = &out[0] else {
            panic!("{out:?}")
        };
        assert_eq!((usage.prompt_tokens, usage.cached_tokens), (13, Some(10)));
    }

    #[test]
    fn redacted_reasoning_is_kept_and_exceptions_are_typed() {
        let mut decoder = EventDecoder::new("m", None);
        let deltas = run(
            &mut decoder,
            &[
                (
                    "contentBlockDelta",
                    json!({"contentBlockIndex": 0, "delta": {"reasoningContent": {"redactedContent": "EmwK"}}}),
                ),
                ("contentBlockStop", json!({"contentBlockIndex": 0})),
                ("messageStop", json!({"stopReason": "guardrail_intervened"})),
            ],
        );
        assert!(matches!(&deltas[0], ModelDelta::Artifact(a)
            if a.data == json!({"reasoningContent": {"redactedContent": "EmwK"}})));
        assert_eq!(deltas[1], ModelDelta::Finish(FinishReason::ContentFilter));
        let mut out = VecDeque::new();
        let error = decoder
            .event(
                Some("throttlingException"),
                r#"{"message":"Too many requests"}"#,
                &mut out,
            )
            .unwrap_err();
        assert!(
            matches!(error, ProviderError::RateLimited { .. }),
            "{error:?}"
        );
    }
}
