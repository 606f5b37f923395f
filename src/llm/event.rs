//! [`ModelEvent`]: what a model's reply streams, as the provider layer makes it. The run turns
//! each into its own [`crate::run::StreamEvent`] (the same name and fields) and adds its own.

use serde::{Deserialize, Serialize};

/// One event of a model's streamed reply, made by [`crate::llm::StreamAssembler`] (and a
/// [`crate::llm::FallbackModel`]'s switch). Serialises like the run's event of the same name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ModelEvent {
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
    /// The provider ran one of its hosted tools ([`crate::llm::hosted`]): the call, complete.
    HostedToolCall {
        /// The call's id (`srvtoolu_…`, `ws_…`, ...).
        id: String,
        /// The tool (`web_search`, `code_execution`, ...).
        name: String,
        /// Its input as the provider reports it (`{"query": ...}`, the code, ...).
        input: serde_json::Value,
    },
    /// A hosted tool's result, as the provider reports it.
    HostedToolResult {
        /// The id of the call it answers.
        id: String,
        /// The tool.
        name: String,
        /// Whether the provider reports a failure.
        is_error: bool,
        /// The result block or item, verbatim.
        output: serde_json::Value,
    },
    /// A source the reply's text cites (a web search result, a fetched page, ...).
    Citation {
        /// The citation.
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
}

/// A source cited by a reply's text, with the part of the text it supports.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Citation {
    /// The source's URL (or a file id for file search).
    pub url: String,
    /// Its title, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The quoted source text, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cited_text: Option<String>,
    /// Where the text it supports begins, as a byte offset into the reply's text, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<usize>,
    /// Where that text ends (exclusive), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<usize>,
}
