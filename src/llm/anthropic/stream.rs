//! The events of a streamed Messages reply into [`ModelDelta`]s.
//!
//! `message_start` (id, model, input usage), then content blocks each opened by
//! `content_block_start`, grown by `content_block_delta` and closed by `content_block_stop`,
//! then `message_delta` (stop reason, running-total usage) and `message_stop`. `ping`s and
//! event types this decoder does not know are skipped (forward compatible); an `error` event
//! ends the stream with its typed error. Thinking text streams as [`ModelDelta::Thought`]
//! for display; each `thinking` / `redacted_thinking` block becomes one
//! [`ModelDelta::Artifact`] at its end, rebuilt from the start block with the streamed text
//! and signature, so it goes back byte-exact before the element that followed it. So do the
//! blocks of tools the API runs itself (`server_tool_use`, with its streamed input, and every
//! `*_tool_result`: web search, web fetch, code execution, tool search): dropping them would
//! send a history back without them. The hosted tools' blocks also stream as
//! [`ModelDelta::HostedToolCall`] / [`ModelDelta::HostedToolResult`], and the `citations` of a
//! text block (whole, or as `citations_delta`s) as [`ModelDelta::Citation`]s at its end,
//! spanning the block's text.

use std::borrow::Cow;
use std::collections::{HashMap, VecDeque};

use serde::Deserialize;
use serde_json::Value;

use crate::llm::anthropic::errors::event_error;
use crate::llm::anthropic::usage::ReplyUsage;
use crate::llm::error::ProviderError;
use crate::llm::event::Citation;
use crate::llm::model::ModelDelta;
use crate::llm::transport::SseDecoder;
use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, FinishReason};

/// Per-stream state of the event decoder.
#[derive(Debug, Default)]
pub struct EventDecoder {
    /// The model the request named: artifacts are recorded for it (the reply's `model` may be
    /// a dated name the next request does not use). `None`: the reply's own model.
    request_model: Option<String>,
    /// The typed-output tool whose forced call is the answer text (see `request.rs`).
    answer_tool: Option<String>,
    reply_model: Option<String>,
    /// Open content blocks by their `index`.
    blocks: HashMap<u64, Block>,
    text_seen: bool,
    /// The bytes of text streamed so far (where a citation's text begins and ends).
    text_bytes: usize,
    calls_seen: usize,
    answered: bool,
    usage: ReplyUsage,
    stop_reason_seen: bool,
    stopped: bool,
}

/// An open content block.
#[derive(Debug)]
enum Block {
    /// A text block: where it starts in the reply's text and the sources it cites.
    Text { start: usize, citations: Vec<Value> },
    /// A `thinking` block: its start object, grown by the deltas.
    Thinking {
        block: Value,
        thinking: String,
        signature: String,
    },
    /// A block whole in its start: `redacted_thinking`.
    Redacted(Value),
    /// A server tool's result block (whole in its start).
    ServerResult(Value),
    /// A `server_tool_use` block (a tool the API runs): its start object and the streamed
    /// JSON of its input.
    Server { block: Value, input: String },
    /// A `tool_use` block: the call's ordinal in the reply and its start `input`.
    Call {
        ordinal: u32,
        input: Value,
        sent_arguments: bool,
    },
    /// The forced typed-output call, streamed as the answer text.
    Answer { input: Value, sent_text: bool },
    /// A block type this decoder does not use (server tools, citations, ...).
    Other,
}

#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(default)]
    index: Option<u64>,
    #[serde(default)]
    message: Option<StartMessage>,
    #[serde(default)]
    content_block: Option<Value>,
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct StartMessage {
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    usage: Option<Value>,
}

/// The `delta` of `content_block_delta` or of `message_delta`.
#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    text: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    thinking: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    signature: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    partial_json: Option<Cow<'a, str>>,
    #[serde(default)]
    citation: Option<Value>,
    #[serde(default, borrow)]
    stop_reason: Option<Cow<'a, str>>,
}

impl EventDecoder {
    /// A decoder for a reply to a request for `request_model` (`None`: record the reply's own
    /// model on its artifacts) whose typed-output tool, if any, is `answer_tool`.
    pub(crate) fn new(request_model: Option<String>, answer_tool: Option<String>) -> Self {
        EventDecoder {
            request_model,
            answer_tool,
            ..EventDecoder::default()
        }
    }

    /// Decode one event's JSON.
    pub(crate) fn decode(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        let event: Event<'_> = serde_json::from_str(data).map_err(|error| {
            ProviderError::Decode(format!("a Messages stream event is malformed: {error}"))
        })?;
        match &*event.kind {
            "message_start" => {
                if let Some(message) = event.message {
                    self.reply_model.clone_from(&message.model);
                    out.push_back(ModelDelta::Meta {
                        id: message.id,
                        model: message.model,
                    });
                    if let Some(usage) = &message.usage {
                        self.usage.update(usage);
                        out.push_back(ModelDelta::Usage(self.usage.usage()));
                    }
                }
            }
            "content_block_start" => {
                if let (Some(index), Some(block)) = (event.index, event.content_block) {
                    self.start_block(index, block, out);
                }
            }
            "content_block_delta" => {
                if let (Some(index), Some(delta)) = (event.index, event.delta) {
                    self.block_delta(index, delta, out);
                }
            }
            "content_block_stop" => {
                if let Some(index) = event.index {
                    self.stop_block(index, out);
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.as_ref().and_then(|d| d.stop_reason.as_deref()) {
                    self.stop_reason_seen = true;
                    out.push_back(ModelDelta::Finish(self.finish_reason(reason)));
                }
                if let Some(usage) = &event.usage {
                    self.usage.update(usage);
                    if self.usage.is_reported() {
                        out.push_back(ModelDelta::Usage(self.usage.usage()));
                    }
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => return Err(event_error(data)),
            // `ping` and whatever comes later.
            _ => {}
        }
        Ok(false)
    }

    fn start_block(&mut self, index: u64, block: Value, out: &mut VecDeque<ModelDelta>) {
        let text = |key: &str| block.get(key).and_then(Value::as_str).unwrap_or_default();
        let state = match text("type") {
            "text" => {
                self.text_seen = true;
                let begin = self.text_bytes;
                let start = text("text");
                if !start.is_empty() {
                    self.text_bytes = self.text_bytes.saturating_add(start.len());
                    out.push_back(ModelDelta::Text(start.to_owned()));
                }
                let citations = match block.get("citations") {
                    Some(Value::Array(list)) => list.clone(),
                    _ => Vec::new(),
                };
                Block::Text {
                    start: begin,
                    citations,
                }
            }
            "thinking" => {
                let thinking = text("thinking").to_owned();
                if !thinking.is_empty() {
                    out.push_back(ModelDelta::Thought(thinking.clone()));
                }
                let signature = text("signature").to_owned();
                Block::Thinking {
                    block,
                    thinking,
                    signature,
                }
            }
            "redacted_thinking" => Block::Redacted(block),
            "server_tool_use" => Block::Server {
                block,
                input: String::new(),
            },
            kind if kind.ends_with("_tool_result") => Block::ServerResult(block),
            "tool_use" if self.answer_tool.as_deref() == Some(text("name")) => {
                self.answered = true;
                Block::Answer {
                    input: block.get("input").cloned().unwrap_or(Value::Null),
                    sent_text: false,
                }
            }
            "tool_use" => {
                let ordinal = u32::try_from(self.calls_seen).unwrap_or(u32::MAX);
                self.calls_seen = self.calls_seen.saturating_add(1);
                out.push_back(ModelDelta::ToolCall {
                    index: Some(ordinal),
                    id: Some(text("id").to_owned()),
                    name: Some(text("name").to_owned()),
                    arguments: None,
                });
                Block::Call {
                    ordinal,
                    input: block.get("input").cloned().unwrap_or(Value::Null),
                    sent_arguments: false,
                }
            }
            _ => Block::Other,
        };
        self.blocks.insert(index, state);
    }

    fn block_delta(&mut self, index: u64, delta: Delta<'_>, out: &mut VecDeque<ModelDelta>) {
        let Some(block) = self.blocks.get_mut(&index) else {
            return;
        };
        match (block, delta.kind.as_deref()) {
            (Block::Text { .. }, Some("text_delta")) => {
                if let Some(text) = delta.text.filter(|text| !text.is_empty()) {
                    self.text_bytes = self.text_bytes.saturating_add(text.len());
                    out.push_back(ModelDelta::Text(text.into_owned()));
                }
            }
            (Block::Text { citations, .. }, Some("citations_delta")) => {
                citations.extend(delta.citation);
            }
            (Block::Thinking { thinking, .. }, Some("thinking_delta")) => {
                if let Some(text) = delta.thinking.filter(|text| !text.is_empty()) {
                    thinking.push_str(&text);
                    out.push_back(ModelDelta::Thought(text.into_owned()));
                }
            }
            (Block::Thinking { signature, .. }, Some("signature_delta")) => {
                if let Some(piece) = delta.signature {
                    signature.push_str(&piece);
                }
            }
            // The first fragment is empty; a call whose fragments are all empty has `{}`.
            (
                Block::Call {
                    ordinal,
                    sent_arguments,
                    ..
                },
                Some("input_json_delta"),
            ) => {
                if let Some(json) = delta.partial_json.filter(|json| !json.is_empty()) {
                    *sent_arguments = true;
                    out.push_back(ModelDelta::ToolCall {
                        index: Some(*ordinal),
                        id: None,
                        name: None,
                        arguments: Some(json.into_owned()),
                    });
                }
            }
            (Block::Server { input, .. }, Some("input_json_delta")) => {
                if let Some(json) = delta.partial_json {
                    input.push_str(&json);
                }
            }
            (Block::Answer { sent_text, .. }, Some("input_json_delta")) => {
                if let Some(json) = delta.partial_json.filter(|json| !json.is_empty()) {
                    *sent_text = true;
                    out.push_back(ModelDelta::Text(json.into_owned()));
                }
            }
            _ => {}
        }
    }

    fn stop_block(&mut self, index: u64, out: &mut VecDeque<ModelDelta>) {
        let Some(block) = self.blocks.remove(&index) else {
            return;
        };
        match block {
            Block::Thinking {
                mut block,
                thinking,
                signature,
            } => {
                if signature.is_empty() {
                    // Without its signature the API rejects the block; it is not kept.
                    tracing::debug!("a thinking block ended without a signature; not kept");
                    return;
                }
                if let Value::Object(fields) = &mut block {
                    fields.insert("thinking".into(), Value::String(thinking));
                    fields.insert("signature".into(), Value::String(signature));
                }
                out.push_back(ModelDelta::Artifact(self.artifact(block)));
            }
            Block::Redacted(block) => out.push_back(ModelDelta::Artifact(self.artifact(block))),
            Block::ServerResult(block) => {
                let text = |key: &str| block.get(key).and_then(Value::as_str);
                if let Some(name) = text("type").and_then(hosted_name) {
                    let is_error = block
                        .pointer("/content/type")
                        .and_then(Value::as_str)
                        .is_some_and(|kind| kind.ends_with("_error"));
                    out.push_back(ModelDelta::HostedToolResult {
                        id: text("tool_use_id").unwrap_or_default().to_owned(),
                        name: name.to_owned(),
                        is_error,
                        output: block.clone(),
                    });
                }
                out.push_back(ModelDelta::Artifact(self.artifact(block)));
            }
            Block::Text { start, citations } => {
                for cited in citations {
                    out.push_back(ModelDelta::Citation(citation(
                        &cited,
                        start,
                        self.text_bytes,
                    )));
                }
            }
            Block::Server { mut block, input } => {
                // The streamed input replaces the start's (`{}`); a whole reply has it there.
                if !input.is_empty() {
                    match serde_json::from_str::<Value>(&input) {
                        Ok(value) => {
                            if let Value::Object(fields) = &mut block {
                                fields.insert("input".into(), value);
                            }
                        }
                        Err(error) => {
                            tracing::debug!(%error, "a server tool's input is not JSON; not kept");
                            return;
                        }
                    }
                }
                let text = |key: &str| block.get(key).and_then(Value::as_str);
                if let Some(name) = text("name").and_then(hosted_name) {
                    out.push_back(ModelDelta::HostedToolCall {
                        id: text("id").unwrap_or_default().to_owned(),
                        name: name.to_owned(),
                        input: block.get("input").cloned().unwrap_or(Value::Null),
                    });
                }
                out.push_back(ModelDelta::Artifact(self.artifact(block)));
            }
            // A call streamed without fragments has its arguments in the start's `input`.
            Block::Call {
                ordinal,
                input,
                sent_arguments: false,
            } => {
                if let Some(arguments) = whole_input(&input) {
                    out.push_back(ModelDelta::ToolCall {
                        index: Some(ordinal),
                        id: None,
                        name: None,
                        arguments: Some(arguments),
                    });
                }
            }
            Block::Answer {
                input,
                sent_text: false,
            } => {
                out.push_back(ModelDelta::Text(
                    whole_input(&input).unwrap_or_else(|| "{}".to_owned()),
                ));
            }
            _ => {}
        }
    }

    /// A standalone block of this reply as an artifact placed before what comes next.
    fn artifact(&self, data: Value) -> Artifact {
        let model = self
            .request_model
            .as_deref()
            .or(self.reply_model.as_deref())
            .unwrap_or_default();
        Artifact::new(
            ArtifactProvider::Anthropic,
            model,
            ArtifactPlace::before_next(self.text_seen, self.calls_seen),
            data,
        )
    }

    fn finish_reason(&self, reason: &str) -> FinishReason {
        match reason {
            // The forced typed-output call is the answer, not a tool turn.
            "tool_use" if self.answered && self.calls_seen == 0 => FinishReason::Stop,
            other => finish_reason(other),
        }
    }
}

/// A `stop_reason` as a [`FinishReason`]: `end_turn`/`stop_sequence` stop, `tool_use` calls
/// tools, `max_tokens` and `model_context_window_exceeded` are `length` (a call cut there is
/// never run), `refusal` is a content filter, anything else (`pause_turn`) is kept as sent.
pub(crate) fn finish_reason(reason: &str) -> FinishReason {
    match reason {
        "end_turn" | "stop_sequence" => FinishReason::Stop,
        "tool_use" => FinishReason::ToolCalls,
        "max_tokens" | "model_context_window_exceeded" => FinishReason::Length,
        "refusal" => FinishReason::ContentFilter,
        other => FinishReason::Other(other.to_owned()),
    }
}

/// The hosted tool (`crate::llm::hosted`) a server tool name or result type belongs to:
/// `web_search`, `web_fetch`, and `code_execution` for the code tool's `bash_…` and
/// `text_editor_…` parts; `None` for the API's own tool search.
fn hosted_name(raw: &str) -> Option<&'static str> {
    let name = raw.strip_suffix("_tool_result").unwrap_or(raw);
    if name.ends_with("code_execution") {
        Some("code_execution")
    } else {
        match name {
            "web_search" => Some("web_search"),
            "web_fetch" => Some("web_fetch"),
            _ => None,
        }
    }
}

/// A `citations` entry of a text block spanning `start..end` of the reply's text.
fn citation(cited: &Value, start: usize, end: usize) -> Citation {
    let text = |key: &str| cited.get(key).and_then(Value::as_str).map(str::to_owned);
    Citation {
        url: text("url").or_else(|| text("file_id")).unwrap_or_default(),
        title: text("title").or_else(|| text("document_title")),
        cited_text: text("cited_text"),
        start: Some(start),
        end: Some(end),
    }
}

/// A `tool_use` start's `input` as arguments text, when it holds any.
fn whole_input(input: &Value) -> Option<String> {
    match input {
        Value::Object(fields) if !fields.is_empty() => Some(input.to_string()),
        _ => None,
    }
}

impl SseDecoder for EventDecoder {
    fn event(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        if event == Some("error") {
            return Err(event_error(data));
        }
        if data.is_empty() {
            return Ok(false);
        }
        self.decode(data, out)
    }

    fn finished(&self) -> bool {
        self.stopped || self.stop_reason_seen
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(decoder: &mut EventDecoder, events: &[Value]) -> Vec<ModelDelta> {
        let mut out = VecDeque::new();
        for event in events {
            let data = event.to_string();
            let name = event["type"].as_str();
            decoder.event(name, &data, &mut out).unwrap();
        }
        out.into_iter().collect()
    }

    #[test]
    fn server_tool_blocks_are_kept_verbatim_and_in_place() {
        let mut decoder = EventDecoder::new(Some("claude-x".into()), None);
        let result = json!({"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1",
            "content": [{"type": "web_search_result", "url": "https://example.com/", "title": "Example",
                "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5", "page_age": null}]});
        let deltas = decode(
            &mut decoder,
            &[
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-x-2025", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"query\": \"exa"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "mple\"}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_start", "index": 1, "content_block": result}),
                json!({"type": "content_block_stop", "index": 1}),
                json!({"type": "content_block_start", "index": 2, "content_block": {"type": "text", "text": ""}}),
                json!({"type": "content_block_delta", "index": 2, "delta": {"type": "text_delta", "text": "Found it."}}),
                json!({"type": "content_block_stop", "index": 2}),
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 30}}),
            ],
        );
        let artifacts: Vec<Artifact> = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Artifact(a) => Some(a.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(artifacts.len(), 2, "{deltas:?}");
        assert_eq!(
            artifacts[0].data,
            json!({"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "example"}})
        );
        assert_eq!(artifacts[1].data, result);
        assert!(
            artifacts
                .iter()
                .all(|a| a.place == ArtifactPlace::Before(0))
        );
        assert!(
            deltas
                .iter()
                .any(|d| matches!(d, ModelDelta::Text(t) if t == "Found it."))
        );
    }

    #[test]
    fn thinking_becomes_thoughts_and_one_artifact_before_the_call() {
        let mut decoder = EventDecoder::new(Some("claude-x".into()), None);
        let deltas = decode(
            &mut decoder,
            &[
                json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "content": [], "model": "claude-x-2025", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 5, "output_tokens": 1}}}),
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "Let me "}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "think."}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "f", "input": {}}}),
                json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
                json!({"type": "content_block_stop", "index": 1}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 30}}),
            ],
        );
        let artifact = deltas
            .iter()
            .find_map(|d| match d {
                ModelDelta::Artifact(a) => Some(a.clone()),
                _ => None,
            })
            .unwrap();
        assert_eq!(artifact.place, ArtifactPlace::Before(0));
        assert_eq!(artifact.model.as_deref(), Some("claude-x"));
        assert_eq!(
            artifact.data,
            json!({"type": "thinking", "thinking": "Let me think.", "signature": "EqQBCgIYAhIM"})
        );
        let thoughts: String = deltas
            .iter()
            .filter_map(|d| match d {
                ModelDelta::Thought(t) => Some(t.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(thoughts, "Let me think.");
        // The empty first fragment is not passed on: the arguments stay blank (`{}`).
        assert!(!deltas.iter().any(|d| matches!(
            d,
            ModelDelta::ToolCall {
                arguments: Some(_),
                ..
            }
        )));
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::ToolCalls)));
        assert!(decoder.finished());
    }

    #[test]
    fn a_forced_answer_call_is_text_and_a_stop() {
        let mut decoder = EventDecoder::new(None, Some("answer".into()));
        let deltas = decode(
            &mut decoder,
            &[
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "answer", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"a\":"}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "1}"}}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
            ],
        );
        assert_eq!(
            deltas[..3],
            [
                ModelDelta::Text("{\"a\":".into()),
                ModelDelta::Text("1}".into()),
                ModelDelta::Finish(FinishReason::Stop)
            ]
        );
    }

    #[test]
    fn unknown_events_and_blocks_are_skipped_and_malformed_ones_are_typed() {
        let mut decoder = EventDecoder::new(None, None);
        let deltas = decode(
            &mut decoder,
            &[
                json!({"type": "ping"}),
                json!({"type": "something_new", "index": 0, "delta": {"x": 1}}),
                // A block type nobody knows yet (server tools' blocks are kept: see above).
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "future_block", "id": "x_1", "input": {}}}),
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"q\":1}"}}),
                json!({"type": "content_block_delta", "index": 7, "delta": {"type": "text_delta", "text": "orphan"}}),
                json!({"type": "content_block_stop", "index": 0}),
            ],
        );
        assert!(deltas.is_empty(), "{deltas:?}");
        assert!(!decoder.finished());
        let mut out = VecDeque::new();
        assert!(matches!(
            decoder.event(None, "{not json", &mut out),
            Err(ProviderError::Decode(_))
        ));
    }
}
