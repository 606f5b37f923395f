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
