//! [`StreamEvent`]: what a run yields, turn by turn. The run makes it: the model's own events
//! ([`ModelEvent`]) and the context engine's ([`ContextEvent`]) come in here, and the run adds
//! its tool, team, retry and error events.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::context::{CompactionTier, ContextEvent, RepairKind};
use crate::llm::error::ErrorKind;
use crate::llm::{Citation, ModelEvent};
use crate::tools::kind::ToolKind;
use crate::vocab::{FinishReason, Usage};

/// One event of a streaming call. Serialises as `{"type": "assistant_text_delta", ...}`.
///
/// Per turn the order is: text and reasoning deltas as they arrive; tool-call deltas and, once a
/// call is fully received, [`StreamEvent::ToolCallReady`]; in the tool loop
/// [`StreamEvent::ToolExecutionStarted`] for each call; [`StreamEvent::TurnComplete`];
/// [`StreamEvent::ToolExecutionCompleted`] for each call as it finishes. A
/// [`StreamEvent::Retry`] inside a turn starts the turn's reply over (what it streamed so far
/// is void); a [`StreamEvent::ModelSwitch`] comes before the reply of the model that answers
/// instead. An error ends the stream with one [`StreamEvent::Error`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum StreamEvent {
    /// A piece of the assistant's text.
    AssistantTextDelta {
        /// The new text.
        text: String,
    },
    /// A piece of the model's reasoning text (DeepSeek, vLLM, Ollama thinking models).
    ReasoningDelta {
        /// The new text.
        text: String,
    },
    /// A piece of a tool call as it streams in.
    ToolCallDelta {
        /// The call's position in the turn.
        index: u32,
        /// The call id, on the first delta of the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name, on the first delta of the call.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// The new piece of the arguments' JSON text.
        arguments: String,
    },
    /// A tool call has been fully received.
    ToolCallReady {
        /// The call id (generated when the server sent none).
        id: String,
        /// The tool name.
        name: String,
        /// The complete arguments' JSON text.
        arguments: String,
    },
    /// The tool loop is about to run a tool.
    ToolExecutionStarted {
        /// The call id.
        id: String,
        /// The tool name.
        tool_name: String,
        /// The parsed arguments (the raw text as a JSON string when it was not valid JSON).
        input: Value,
    },
    /// What a call says while it streams in or runs, tied to its id, in the order it was
    /// said: the run's best title and the partial input while the model streams the
    /// arguments (when the registry asks for it: [`crate::tools::ToolRegistry::with_input_updates`]),
    /// then the tool's own reports ([`crate::tools::ToolContext::report`]: title, text,
    /// diffs, terminal, locations, progress). Between the call's first delta and its
    /// [`StreamEvent::ToolExecutionCompleted`]; journaled, and replayed when a session is
    /// reopened. Fold them into a [`crate::tools::ToolCallCard`].
    ToolCallUpdate {
        /// The call id.
        id: String,
        /// What changed.
        update: crate::tools::event::ToolCallUpdate,
    },
    /// A model request finished.
    TurnComplete {
        /// Why the model stopped.
        reason: FinishReason,
        /// Usage of this turn; on the final `TurnComplete` of a tool loop, the sum over all turns.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The tool loop finished running a tool.
    ToolExecutionCompleted {
        /// The call id.
        id: String,
        /// The tool name.
        tool_name: String,
        /// The tool's full output, or the error text when `is_error` is true.
        output: Value,
        /// Whether the call failed (denied, unknown tool, invalid arguments, error, timeout, panic).
        is_error: bool,
        /// How long the call took, in milliseconds.
        #[serde(default)]
        duration_ms: u64,
    },
    /// The context engine compacted the history before a request (see `docs/9-context.md`);
    /// the history itself records it (stubs, or a marker message).
    ContextCompacted {
        /// How.
        tier: CompactionTier,
        /// The estimated prompt tokens before.
        tokens_before: u64,
        /// The estimated prompt tokens after.
        tokens_after: u64,
        /// Messages stubbed, summarised or dropped.
        messages: u64,
        /// The model's context window the budget was computed from.
        window: u64,
    },
    /// The context engine repaired the history before its first request (one event per repair).
    HistoryRepaired {
        /// What was wrong.
        kind: RepairKind,
        /// The call id (or message position) concerned, as text.
        detail: String,
    },
    /// A streamed reply broke after it began (the connection dropped, an `error` event with a
    /// 5xx or overloaded code, the stream went idle) before any tool ran: what this request
    /// streamed so far is discarded and the request is sent again after `delay_ms`. A consumer
    /// drops the text, reasoning and tool-call deltas it has shown since the turn began. Within
    /// [`crate::llm::RetryPolicy`]'s budget, shared with the retries before a reply begins
    /// (those are not announced: nothing was shown).
    Retry {
        /// The attempt about to be made (2 for the first retry).
        attempt: u32,
        /// The most attempts the retry budget allows (the first one included).
        max_attempts: u32,
        /// The wait before the new attempt, in milliseconds.
        delay_ms: u64,
        /// The kind of the error that broke the stream.
        kind: ErrorKind,
        /// The error's message.
        error: String,
    },
    /// The provider ran one of its hosted tools (web search, code execution, ...; see
    /// [`crate::tools::hosted`]): the call, as the reply reports it.
    HostedToolCall {
        /// The call id.
        id: String,
        /// The tool (`web_search`, `code_execution`, ...).
        tool_name: String,
        /// What it does: search, fetch, execute.
        kind: ToolKind,
        /// Its input as the provider reports it.
        input: Value,
    },
    /// A hosted tool's result.
    HostedToolResult {
        /// The id of the call.
        id: String,
        /// The tool.
        tool_name: String,
        /// What it does.
        kind: ToolKind,
        /// Whether the provider reports a failure.
        is_error: bool,
        /// The result block or item, verbatim (untrusted: never print it raw).
        output: Value,
    },
    /// A source the reply's text cites.
    Citation {
        /// The source and the part of the text it supports.
        citation: Citation,
    },
    /// A [`crate::llm::FallbackModel`] moved to its next model: the previous one failed
    /// (retryably) before any output. Sent before the new model's first delta.
    ModelSwitch {
        /// The model that failed (its name).
        from: String,
        /// The model tried now.
        to: String,
        /// Why: the failure's message, or that the model's circuit breaker is open.
        reason: String,
    },
    /// An event of a sub-agent (a team's agent called as a tool), inside its parent's call.
    FromAgent {
        /// The sub-agent's path in the team, e.g. `main/researcher`.
        agent: String,
        /// The child's event, as its own run streams it.
        event: Box<StreamEvent>,
    },
    /// The conversation went to another agent of the team (a `transfer_to_<agent>` call):
    /// from the next request on, that agent's instructions, tools and model answer.
    Handoff {
        /// The agent the conversation was with.
        from: String,
        /// The agent it is with now.
        to: String,
    },
    /// The call failed; this is the last event of the stream.
    Error {
        /// The kind of [`crate::llm::ProviderError`].
        kind: ErrorKind,
        /// The error's message.
        message: String,
    },
}

impl From<ModelEvent> for StreamEvent {
    fn from(event: ModelEvent) -> Self {
        match event {
            ModelEvent::AssistantTextDelta { text } => StreamEvent::AssistantTextDelta { text },
            ModelEvent::ReasoningDelta { text } => StreamEvent::ReasoningDelta { text },
            ModelEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            },
            ModelEvent::ToolCallReady {
                id,
                name,
                arguments,
            } => StreamEvent::ToolCallReady {
                id,
                name,
                arguments,
            },
            ModelEvent::HostedToolCall { id, name, input } => StreamEvent::HostedToolCall {
                id,
                kind: hosted_kind(&name),
                tool_name: name,
                input,
            },
            ModelEvent::HostedToolResult {
                id,
                name,
                is_error,
                output,
            } => StreamEvent::HostedToolResult {
                id,
                kind: hosted_kind(&name),
                tool_name: name,
                is_error,
                output,
            },
            ModelEvent::Citation { citation } => StreamEvent::Citation { citation },
            ModelEvent::ModelSwitch { from, to, reason } => {
                StreamEvent::ModelSwitch { from, to, reason }
            }
        }
    }
}

/// The kind of the hosted tool called `name` (`Other` for a name agcore does not know).
fn hosted_kind(name: &str) -> ToolKind {
    crate::vocab::HostedTool::from_name(name)
        .map_or(ToolKind::Other, |tool| crate::tools::hosted::kind_of(&tool))
}

impl From<ContextEvent> for StreamEvent {
    fn from(event: ContextEvent) -> Self {
        match event {
            ContextEvent::ContextCompacted {
                tier,
                tokens_before,
                tokens_after,
                messages,
                window,
            } => StreamEvent::ContextCompacted {
                tier,
                tokens_before,
                tokens_after,
                messages,
                window,
            },
            ContextEvent::HistoryRepaired { kind, detail } => {
                StreamEvent::HistoryRepaired { kind, detail }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The run streams the model's and the context engine's events under the same JSON as
    /// before the move: a consumer of the serialised stream sees no difference.
    #[test]
    fn made_elsewhere_events_serialise_as_the_run_events_they_become() {
        let model = [
            ModelEvent::AssistantTextDelta { text: "hi".into() },
            ModelEvent::ToolCallDelta {
                index: 0,
                id: Some("c1".into()),
                name: None,
                arguments: "{".into(),
            },
            ModelEvent::ModelSwitch {
                from: "a".into(),
                to: "b".into(),
                reason: "down".into(),
            },
        ];
        for event in model {
            let made = serde_json::to_value(&event).unwrap();
            let run = serde_json::to_value(StreamEvent::from(event)).unwrap();
            assert_eq!(made, run);
        }
        let context = ContextEvent::HistoryRepaired {
            kind: RepairKind::UnansweredCall,
            detail: "c1".into(),
        };
        let made = serde_json::to_value(&context).unwrap();
        let run = serde_json::to_value(StreamEvent::from(context)).unwrap();
        assert_eq!(made, run);
        assert_eq!(run["type"], "history_repaired");
    }
}
