//! [`StreamAssembler`]: turns a provider's [`ModelDelta`]s into [`ModelEvent`]s and the final
//! [`ChatResponse`], the way real servers stream.
//!
//! Rules (each seen on some server): tool-call pieces are keyed by `index`; a new `id` on a used
//! index starts a new call; a piece without `index` continues the current call unless it brings
//! a new `id`; `id`, `name` and `type` are set once and never concatenated; only `arguments` is
//! concatenated, starting from empty; empty arguments mean `{}`; tool calls assembled under
//! `finish_reason` `stop` or none are still tool calls. Artifacts are kept in the order they
//! arrive; thoughts are shown, not kept.

use std::collections::{HashMap, HashSet};

use crate::llm::error::{ProviderError, ResponseLimit};
use crate::llm::event::ModelEvent;
use crate::llm::model::ModelDelta;
use crate::vocab::{
    Artifact, ChatResponse, FinishReason, OpenaiChatMessage, ReasoningField, ToolCall, Usage,
};
use crate::vocab::{generate_call_id, normalise_arguments};

/// Limits on one assembled reply, whatever the provider: a server (or a model) that streams
/// without end gets [`ProviderError::ResponseLimitExceeded`] instead of all the memory.
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
/// in place, nothing is re-parsed, and a tool call's slot is found by its index in O(1).
#[derive(Debug, Default)]
pub struct StreamAssembler {
    id: Option<String>,
    model: Option<String>,
    text: String,
    reasoning: String,
    /// The field reasoning arrived in (the first with text; else the first, even empty).
    reasoning_field: Option<ReasoningField>,
    refusal: String,
    artifacts: Vec<Artifact>,
    calls: Vec<PartialCall>,
    /// The latest slot in `calls` of each index.
    slots: HashMap<u32, usize>,
    /// The index a call without one gets: one past the highest so far (saturating).
    next_index: u32,
    current: Option<usize>,
    finish: Option<FinishReason>,
    usage: Option<Usage>,
    received_anything: bool,
    limits: ReplyLimits,
    /// Bytes of text, reasoning, refusal and tool calls taken so far.
    message_bytes: usize,
    /// The limit the reply went over; nothing more is taken after it.
    exceeded: Option<ResponseLimit>,
}

impl StreamAssembler {
    /// A new, empty assembler with the default [`ReplyLimits`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A new, empty assembler with `limits` ([`StreamAssembler::new`] has the defaults).
    pub fn with_limits(limits: ReplyLimits) -> Self {
        StreamAssembler {
            limits,
            ..Self::default()
        }
    }

    /// Take one delta like [`StreamAssembler::push`], failing at once when it goes over a
    /// limit (then nothing more is taken, and [`StreamAssembler::finish`] fails too).
    ///
    /// # Errors
    /// [`ProviderError::ResponseLimitExceeded`] naming the limit.
    pub fn try_push(
        &mut self,
        delta: ModelDelta,
        out: &mut Vec<ModelEvent>,
    ) -> Result<(), ProviderError> {
        self.push(delta, out);
        match self.exceeded {
            Some(limit) => Err(ProviderError::ResponseLimitExceeded { limit }),
            None => Ok(()),
        }
    }

    /// Take one delta; the events it produces are appended to `out`. A delta that goes over a
    /// [`ReplyLimits`] limit is dropped, as is everything after it, and
    /// [`StreamAssembler::finish`] reports the limit (see [`StreamAssembler::try_push`] to
    /// stop at once).
    pub fn push(&mut self, delta: ModelDelta, out: &mut Vec<ModelEvent>) {
        if self.exceeded.is_some() {
            return;
        }
        // Not part of the reply: a fallback model's note that another model answers it.
        if let ModelDelta::ModelSwitch { from, to, reason } = delta {
            out.push(ModelEvent::ModelSwitch { from, to, reason });
            return;
        }
        self.received_anything = true;
        if !self.take_bytes(delta_bytes(&delta)) {
            return;
        }
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
                    out.push(ModelEvent::AssistantTextDelta { text });
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
                    out.push(ModelEvent::ReasoningDelta { text });
                }
            }
            ModelDelta::Thought(text) => {
                if !text.is_empty() {
                    out.push(ModelEvent::ReasoningDelta { text });
                }
            }
            ModelDelta::Artifact(artifact) => self.artifacts.push(artifact),
            ModelDelta::Refusal(text) => self.refusal.push_str(&text),
            ModelDelta::ToolCall {
                index,
                id,
                name,
                arguments,
            } => {
                let Some(slot) = self.slot_for(index, id.as_deref()) else {
                    return;
                };
                let call = &mut self.calls[slot];
                if call.id.is_none() {
                    call.id = id.clone().filter(|id| !id.is_empty());
                }
                if let Some(name) = name.as_deref().filter(|_| call.name.is_empty()) {
                    call.name.push_str(name);
                }
                let fragment = arguments.unwrap_or_default();
                call.arguments.push_str(&fragment);
                out.push(ModelEvent::ToolCallDelta {
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
            ModelDelta::HostedToolCall { id, name, input } => {
                out.push(ModelEvent::HostedToolCall { id, name, input });
            }
            ModelDelta::HostedToolResult {
                id,
                name,
                is_error,
                output,
            } => out.push(ModelEvent::HostedToolResult {
                id,
                name,
                is_error,
                output,
            }),
            ModelDelta::Citation(citation) => out.push(ModelEvent::Citation { citation }),
            ModelDelta::ModelSwitch { .. } => {}
        }
    }

    /// Count `bytes` against the message limit; `false` (and the limit noted) when over it.
    fn take_bytes(&mut self, bytes: usize) -> bool {
        let total = self.message_bytes.saturating_add(bytes);
        if total > self.limits.max_message_bytes {
            self.exceeded = Some(ResponseLimit::MessageBytes(self.limits.max_message_bytes));
            return false;
        }
        self.message_bytes = total;
        true
    }

    /// The slot of the call this piece belongs to, starting a new call when it must; `None`
    /// (and the limit noted) when a new call would be one too many.
    fn slot_for(&mut self, index: Option<u32>, id: Option<&str>) -> Option<usize> {
        let id = id.filter(|id| !id.is_empty());
        let existing = match index {
            Some(index) => self.slots.get(&index).copied(),
            None => self.current,
        };
        let starts_new = match existing {
            None => true,
            Some(slot) => match (id, self.calls[slot].id.as_deref()) {
                (Some(new), Some(old)) => new != old,
                _ => false,
            },
        };
        let slot = match existing {
            Some(slot) if !starts_new => slot,
            _ => {
                if self.calls.len() >= self.limits.max_tool_calls {
                    self.exceeded = Some(ResponseLimit::ToolCalls(self.limits.max_tool_calls));
                    return None;
                }
                let index = index.unwrap_or(self.next_index);
                self.next_index = self.next_index.max(index.saturating_add(1));
                self.calls.push(PartialCall {
                    index,
                    id: None,
                    name: String::new(),
                    arguments: String::new(),
                });
                let slot = self.calls.len() - 1;
                self.slots.insert(index, slot);
                slot
            }
        };
        self.current = Some(slot);
        Some(slot)
    }

    /// Whether any tool call has started.
    pub fn has_tool_calls(&self) -> bool {
        !self.calls.is_empty()
    }

    /// Whether a finish reason has been seen.
    pub fn has_finish(&self) -> bool {
        self.finish.is_some()
    }

    /// Finish the reply: emits [`ModelEvent::ToolCallReady`] for every call and returns the
    /// assembled response. A stream that delivered nothing at all is an error.
    ///
    /// # Errors
    /// [`ProviderError::Stream`] for an empty stream; [`ProviderError::ResponseLimitExceeded`] when a
    /// pushed delta went over a [`ReplyLimits`] limit.
    pub fn finish(self, out: &mut Vec<ModelEvent>) -> Result<ChatResponse, ProviderError> {
        if let Some(limit) = self.exceeded {
            return Err(ProviderError::ResponseLimitExceeded { limit });
        }
        if !self.received_anything {
            return Err(ProviderError::Stream(
                "the stream ended without any data".to_owned(),
            ));
        }
        let mut calls = self.calls;
        calls.sort_by_key(|call| call.index);
        let mut tool_calls: Vec<ToolCall> = calls
            .into_iter()
            .map(|call| ToolCall::new(call.id.unwrap_or_default(), call.name, call.arguments))
            .collect();
        normalise_tool_calls(&mut tool_calls);
        for call in &tool_calls {
            out.push(ModelEvent::ToolCallReady {
                id: call.id.clone(),
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            });
        }
        let stop_reason = FinishReason::for_reply(self.finish, !tool_calls.is_empty());
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
                artifacts: self.artifacts,
            },
            stop_reason,
            usage: self.usage,
            model: self.model,
            id: self.id,
        })
    }
}

/// The bytes a delta adds to the message (text, reasoning, refusal, tool-call id, name and
/// arguments); metadata and usage count nothing.
fn delta_bytes(delta: &ModelDelta) -> usize {
    let len = |text: &Option<String>| text.as_ref().map_or(0, String::len);
    match delta {
        ModelDelta::Text(text) | ModelDelta::Refusal(text) => text.len(),
        ModelDelta::Reasoning { text, .. } => text.len(),
        ModelDelta::Thought(text) => text.len(),
        ModelDelta::Artifact(artifact) => artifact.data_bytes(),
        ModelDelta::ToolCall {
            id,
            name,
            arguments,
            ..
        } => len(id)
            .saturating_add(len(name))
            .saturating_add(len(arguments)),
        ModelDelta::Citation(citation) => {
            citation.url.len()
                + citation.title.as_ref().map_or(0, String::len)
                + citation.cited_text.as_ref().map_or(0, String::len)
        }
        // Copies of blocks the reply keeps as artifacts, which count them.
        ModelDelta::HostedToolCall { .. }
        | ModelDelta::HostedToolResult { .. }
        | ModelDelta::Meta { .. }
        | ModelDelta::Finish(_)
        | ModelDelta::Usage(_)
        | ModelDelta::ModelSwitch { .. } => 0,
    }
}

/// The tool calls of one reply as the run may use them — the one place this is done, for
/// every provider (see [`ChatModel`](crate::llm::ChatModel)): the [`StreamAssembler`] applies
/// it to a stream, a provider's decoder to a whole reply. Every call gets an id unique within
/// the reply (generated when the server sent none, an empty one, or one an earlier call of the
/// reply has: its answer would be ambiguous), and blank arguments become `{}` (what servers
/// that send nothing for a parameterless call mean).
///
/// ```
/// use agcore::llm::stream::normalise_tool_calls;
/// use agcore::vocab::ToolCall;
///
/// let mut calls = vec![ToolCall::new("", "now", ""), ToolCall::new("a", "f", "{}"), ToolCall::new("a", "g", " ")];
/// normalise_tool_calls(&mut calls);
/// assert!(calls[0].id.starts_with("call_") && calls[2].id.starts_with("call_"));
/// assert_eq!(calls[1].id, "a");
/// assert_eq!((calls[0].function.arguments.as_str(), calls[2].function.arguments.as_str()), ("{}", "{}"));
/// ```
pub fn normalise_tool_calls(calls: &mut [ToolCall]) {
    // Most replies have one call: no set for them.
    let mut seen: HashSet<String> = HashSet::new();
    let several = calls.len() > 1;
    for call in calls.iter_mut() {
        if call.id.is_empty() || (several && seen.contains(&call.id)) {
            call.id = generate_call_id();
        }
        if several {
            seen.insert(call.id.clone());
        }
        call.function.arguments = normalise_arguments(std::mem::take(&mut call.function.arguments));
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
            Err(ProviderError::Stream(_))
        ));
    }

    #[test]
    fn an_index_of_u32_max_then_a_call_without_index_does_not_overflow() {
        let response = assemble(vec![
            call(Some(u32::MAX), Some("a"), Some("f"), "{}"),
            call(None, Some("b"), Some("g"), "{}"),
            call(Some(0), Some("c"), Some("h"), "{}"),
            ModelDelta::Finish(FinishReason::ToolCalls),
        ]);
        let names: Vec<&str> = response
            .tool_calls()
            .iter()
            .map(|call| call.function.name.as_str())
            .collect();
        assert_eq!(names, ["h", "f", "g"]);
    }

    #[test]
    fn a_hundred_thousand_small_calls_assemble_in_order() {
        const CALLS: u32 = 100_000;
        let limits = ReplyLimits::default().with_max_tool_calls(CALLS as usize);
        let mut assembler = StreamAssembler::with_limits(limits);
        let mut out = Vec::new();
        for index in 0..CALLS {
            assembler.push(
                call(Some(index), Some(&format!("c{index}")), Some("f"), "{"),
                &mut out,
            );
            assembler.push(call(Some(index), None, None, "}"), &mut out);
            out.clear();
        }
        let response = assembler.finish(&mut out).unwrap();
        let calls = response.tool_calls();
        assert_eq!(calls.len(), CALLS as usize);
        assert_eq!(calls[77_777].id, "c77777");
        assert!(calls.iter().all(|call| call.function.arguments == "{}"));
    }

    #[test]
    fn one_call_too_many_is_a_limit_error() {
        let mut assembler = StreamAssembler::new();
        let mut out = Vec::new();
        for index in 0..DEFAULT_MAX_TOOL_CALLS as u32 {
            assembler
                .try_push(call(Some(index), Some("id"), Some("f"), "{}"), &mut out)
                .unwrap();
        }
        // More pieces of the last call are fine; a new call is not.
        let last = DEFAULT_MAX_TOOL_CALLS as u32 - 1;
        assembler
            .try_push(call(Some(last), None, None, ""), &mut out)
            .unwrap();
        let error = assembler
            .try_push(call(None, Some("new"), Some("f"), "{}"), &mut out)
            .unwrap_err();
        assert!(matches!(
            error,
            ProviderError::ResponseLimitExceeded {
                limit: ResponseLimit::ToolCalls(DEFAULT_MAX_TOOL_CALLS)
            }
        ));
        assert!(matches!(
            assembler.finish(&mut out),
            Err(ProviderError::ResponseLimitExceeded { .. })
        ));
    }

    #[test]
    fn text_and_arguments_over_the_message_limit_stop_the_assembly() {
        let limits = ReplyLimits::default().with_max_message_bytes(10);
        let mut assembler = StreamAssembler::with_limits(limits);
        let mut out = Vec::new();
        assembler.push(ModelDelta::Text("12345".into()), &mut out);
        assembler.push(call(Some(0), None, None, "{\"a\":1}"), &mut out);
        assembler.push(ModelDelta::Text("more".into()), &mut out);
        assert_eq!(
            out.len(),
            1,
            "nothing past the limit becomes an event: {out:?}"
        );
        let error = assembler.finish(&mut out).unwrap_err();
        assert!(
            error.to_string().contains("10 bytes (max_message_bytes)"),
            "{error}"
        );
    }
}
