//! [`StreamAssembler`]: turns a provider's [`ModelDelta`]s into [`StreamEvent`]s and the final
//! [`ChatResponse`], the way real servers stream.
//!
//! Rules (each seen on some server): tool-call pieces are keyed by `index`; a new `id` on a used
//! index starts a new call; a piece without `index` continues the current call unless it brings
//! a new `id`; `id`, `name` and `type` are set once and never concatenated; only `arguments` is
//! concatenated, starting from empty; empty arguments mean `{}`; tool calls assembled under
//! `finish_reason` `stop` or none are still tool calls.

use crate::llm::error::LlmError;
use crate::llm::event::StreamEvent;
use crate::llm::model::ModelDelta;
use crate::llm::types::{
    ChatResponse, FinishReason, OpenaiChatMessage, ReasoningField, ToolCall, Usage,
};
use crate::tools::registry::generate_call_id;

/// Limits on one assembled reply, whatever the provider: a server (or a model) that streams
/// without end gets [`LlmError::ResponseLimitExceeded`] instead of all the memory.
///
/// ```
/// use agcore::llm::ReplyLimits;
///
/// let limits = ReplyLimits::default().with_max_tool_calls(64);
/// assert_eq!(limits.max_tool_calls, 64);
/// assert_eq!(limits.max_message_bytes, 64 * 1024 * 1024);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReplyLimits {
    /// The most bytes of text, reasoning, refusal and tool-call arguments together.
    pub max_message_bytes: usize,
    /// The most tool calls one message may start.
    pub max_tool_calls: usize,
}

/// [`ReplyLimits::max_message_bytes`] by default: 64 MiB.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// [`ReplyLimits::max_tool_calls`] by default. Real models make a few parallel calls, rarely
/// dozens; a thousand leaves room for batch-style agents.
pub const DEFAULT_MAX_TOOL_CALLS: usize = 1024;

impl Default for ReplyLimits {
    /// 64 MiB of message, 1024 tool calls.
    fn default() -> Self {
        ReplyLimits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_tool_calls: DEFAULT_MAX_TOOL_CALLS,
        }
    }
}

impl ReplyLimits {
    /// Set the most bytes of text, reasoning, refusal and tool-call arguments together.
    pub fn with_max_message_bytes(mut self, max: usize) -> Self {
        self.max_message_bytes = max;
        self
    }

    /// Set the most tool calls one message may start.
    pub fn with_max_tool_calls(mut self, max: usize) -> Self {
        self.max_tool_calls = max;
        self
    }
}

#[derive(Debug)]
struct PartialCall {
    index: u32,
    id: Option<String>,
    name: String,
    arguments: String,
}

/// Assembles one streamed reply. Linear in the stream's length: text and arguments are appended
/// in place, nothing is re-parsed.
#[derive(Debug, Default)]
pub struct StreamAssembler {
    id: Option<String>,
    model: Option<String>,
    text: String,
    reasoning: String,
    /// The field reasoning arrived in (the first with text; else the first, even empty).
    reasoning_field: Option<ReasoningField>,
    refusal: String,
    calls: Vec<PartialCall>,
    current: Option<usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    received_anything: bool,
}

impl StreamAssembler {
    /// A new, empty assembler.
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty assembler with `limits` ([`StreamAssembler::new`] has the defaults).
    pub fn with_limits(_limits: ReplyLimits) -> Self {
        Self::default()
    }

    /// Take one delta like [`StreamAssembler::push`], failing at once when it goes over a
    /// limit (then nothing more is taken, and [`StreamAssembler::finish`] fails too).
    ///
    /// # Errors
    /// [`LlmError::ResponseLimitExceeded`] naming the limit.
    pub fn try_push(&mut self, delta: ModelDelta, out: &mut Vec<StreamEvent>) -> Result<(), LlmError> {
        self.push(delta, out);
        Ok(())
    }

    /// Take one delta; the events it produces are appended to `out`.
    pub fn push(&mut self, delta: ModelDelta, out: &mut Vec<StreamEvent>) {
        self.received_anything = true;
        match delta {
            ModelDelta::Meta { id, model } => {
                if self.id.is_none() {
                    self.id = id;
                }
                if self.model.is_none() {
                    self.model = model;
                }
            }
            ModelDelta::Text(text) => {
                if !text.is_empty() {
                    self.text.push_str(&text);
                    out.push(StreamEvent::AssistantTextDelta { text });
                }
            }
            ModelDelta::Reasoning { text, field } => {
                if text.is_empty() {
                    // An empty field still says the server has one (see `finish`).
                    self.reasoning_field.get_or_insert(field);
                } else {
                    if self.reasoning.is_empty() {
                        self.reasoning_field = Some(field);
                    }
                    self.reasoning.push_str(&text);
                    out.push(StreamEvent::ReasoningDelta { text });
                }
            }
            ModelDelta::Refusal(text) => self.refusal.push_str(&text),
            ModelDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let slot = self.slot_for(index, id.as_deref());
                let call = &mut self.calls[slot];
                if call.id.is_none() {
                    call.id = id.clone().filter(|id| !id.is_empty());
                }
                if let Some(name) = name.as_deref().filter(|_| call.name.is_empty()) {
                    call.name.push_str(name);
                }
                let fragment = arguments.unwrap_or_default();
                call.arguments.push_str(&fragment);
                out.push(StreamEvent::ToolCallDelta {
                    index: call.index,
                    id,
                    name,
                    arguments: fragment,
                });
            }
            ModelDelta::Finish(reason) => {
                // Some servers repeat the finish chunk or send an empty reason later; keep the first real one.
                if self.finish.is_none() || self.finish == Some(FinishReason::Other(String::new()))
                {
                    self.finish = Some(reason);
                }
            }
            ModelDelta::Usage(usage) => self.usage = Some(usage),
        }
    }

    fn slot_for(&mut self, index: Option<u32>, id: Option<&str>) -> usize {
        let id = id.filter(|id| !id.is_empty());
        let existing = match index {
            Some(index) => self.calls.iter().rposition(|call| call.index == index),
            None => self.current,
        };
        let starts_new = match existing {
            None => true,
            Some(slot) => match (id, self.calls[slot].id.as_deref()) {
                (Some(new), Some(old)) => new != old,
                _ => false,
            },
        };
        let slot = if starts_new {
            let index = index.unwrap_or_else(|| {
                self.calls
                    .iter()
                    .map(|call| call.index + 1)
                    .max()
                    .unwrap_or(0)
            });
            self.calls.push(PartialCall {
                index,
                id: None,
                name: String::new(),
                arguments: String::new(),
            });
            self.calls.len() - 1
        } else {
            existing.unwrap_or(0)
        };
        self.current = Some(slot);
        slot
    }

    /// Whether any tool call has started.
    pub fn has_tool_calls(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Whether a finish reason has been seen.
    pub fn has_finish(&self) -> bool {
        self.finish.is_some()
    }

    /// Finish the reply: emits [`StreamEvent::ToolCallReady`] for every call and returns the
    /// assembled response. A stream that delivered nothing at all is an error.
    pub fn finish(self, out: &mut Vec<StreamEvent>) -> Result<ChatResponse, LlmError> {
        if !self.received_anything {
            return Err(LlmError::Stream(
                "the stream ended without any data".to_owned(),
            ));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|call| call.index);
        let tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|call| {
                let arguments = if call.arguments.trim().is_empty() {
                    "{}".to_owned()
                } else {
                    call.arguments
                };
                ToolCall::new(
                    call.id.unwrap_or_else(generate_call_id),
                    call.name,
                    arguments,
                )
            })
            .collect();
        for call in &tool_calls {
            out.push(StreamEvent::ToolCallReady {
                id: call.id.clone(),
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            });
        }
        let stop_reason = match self.finish {
            Some(FinishReason::Stop) | Some(FinishReason::Other(_)) | None
                if !tool_calls.is_empty() =>
            {
                Some(FinishReason::ToolCalls)
            }
            other => other,
        };
        // A tool-calling message keeps even an empty reasoning field: DeepSeek's thinking mode
        // answers 400 when a tool-calling assistant message comes back without it.
        let field = self
            .reasoning_field
            .filter(|_| !self.reasoning.is_empty() || !tool_calls.is_empty());
        let (reasoning_content, reasoning) = match field {
            Some(ReasoningField::ReasoningContent) => (Some(self.reasoning), None),
            Some(ReasoningField::Reasoning) => (None, Some(self.reasoning)),
            None => (None, None),
        };
        Ok(ChatResponse {
            message: OpenaiChatMessage::Assistant {
                content: (!self.text.is_empty()).then_some(self.text),
                refusal: (!self.refusal.is_empty()).then_some(self.refusal),
                reasoning_content,
                reasoning,
                tool_calls,
                name: None,
            },
            stop_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(index: Option<u32>, id: Option<&str>, name: Option<&str>, args: &str) -> ModelDelta {
        ModelDelta::ToolCall {
            index,
            id: id.map(str::to_owned),
            name: name.map(str::to_owned),
            arguments: Some(args.to_owned()),
        }
    }

    fn assemble(deltas: Vec<ModelDelta>) -> ChatResponse {
        let mut assembler = StreamAssembler::new();
        let mut out = Vec::new();
        for delta in deltas {
            assembler.push(delta, &mut out);
        }
        assembler.finish(&mut out).unwrap()
    }

    #[test]
    fn interleaved_parallel_calls_are_keyed_by_index() {
        let response = assemble(vec![
            call(Some(0), Some("a"), Some("f"), ""),
            call(Some(1), Some("b"), Some("g"), "{\"y\""),
            call(Some(0), None, None, "{\"x\":1}"),
            call(Some(1), None, None, ":2}"),
            ModelDelta::Finish(FinishReason::ToolCalls),
        ]);
        let calls = response.tool_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (calls[0].id.as_str(), calls[0].function.arguments.as_str()),
            ("a", "{\"x\":1}")
        );
        assert_eq!(
            (calls[1].id.as_str(), calls[1].function.arguments.as_str()),
            ("b", "{\"y\":2}")
        );
    }

    #[test]
    fn a_new_id_on_a_used_index_starts_a_new_call_and_names_are_not_concatenated() {
        let response = assemble(vec![
            call(Some(0), Some("a"), Some("f"), "{}"),
            call(Some(0), Some("a"), Some("f"), ""),
            call(Some(0), Some("b"), Some("g"), "{}"),
            ModelDelta::Finish(FinishReason::Stop),
        ]);
        let calls = response.tool_calls();
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].function.name, "f");
        assert_eq!(calls[1].function.name, "g");
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
    }

    #[test]
    fn missing_index_and_id_continue_the_current_call_and_get_generated_ids() {
        let response = assemble(vec![
            call(None, None, Some("f"), "{\"a\""),
            call(None, None, None, ":1}"),
        ]);
        let calls = response.tool_calls();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].id.starts_with("call_"));
        assert_eq!(calls[0].function.arguments, "{\"a\":1}");
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
    }

    #[test]
    fn empty_arguments_mean_an_empty_object() {
        let response = assemble(vec![
            call(Some(0), Some("a"), Some("f"), ""),
            ModelDelta::Finish(FinishReason::ToolCalls),
        ]);
        assert_eq!(response.tool_calls()[0].function.arguments, "{}");
    }

    #[test]
    fn reasoning_stays_in_the_field_it_arrived_in() {
        for field in [ReasoningField::Reasoning, ReasoningField::ReasoningContent] {
            let response = assemble(vec![
                ModelDelta::Reasoning {
                    text: "th".into(),
                    field,
                },
                ModelDelta::Reasoning {
                    text: "ink".into(),
                    field,
                },
                ModelDelta::Text("hi".into()),
                ModelDelta::Finish(FinishReason::Stop),
            ]);
            let OpenaiChatMessage::Assistant {
                reasoning_content,
                reasoning,
                ..
            } = &response.message
            else {
                panic!("not an assistant message");
            };
            let expected = Some("think".to_owned());
            match field {
                ReasoningField::Reasoning => {
                    assert_eq!((reasoning_content, reasoning), (&None, &expected))
                }
                ReasoningField::ReasoningContent => {
                    assert_eq!((reasoning_content, reasoning), (&expected, &None))
                }
            }
        }
    }

    #[test]
    fn an_empty_reasoning_field_is_kept_on_a_tool_calling_message_only() {
        let empty = || ModelDelta::Reasoning {
            text: String::new(),
            field: ReasoningField::ReasoningContent,
        };
        let response = assemble(vec![
            empty(),
            call(Some(0), Some("a"), Some("f"), "{}"),
            ModelDelta::Finish(FinishReason::ToolCalls),
        ]);
        assert_eq!(response.message.reasoning(), Some(""));
        let json = serde_json::to_value(&response.message).unwrap();
        assert_eq!(json["reasoning_content"], "");
        let response = assemble(vec![
            empty(),
            ModelDelta::Text("hi".into()),
            ModelDelta::Finish(FinishReason::Stop),
        ]);
        assert_eq!(response.message.reasoning(), None);
    }

    #[test]
    fn an_empty_stream_is_an_error() {
        let mut out = Vec::new();
        assert!(matches!(
            StreamAssembler::new().finish(&mut out),
            Err(LlmError::Stream(_))
        ));
    }
}
