//! [`ToolAnswer`]: what a tool message tells the model, and whether it reports a failure.

use serde::{Deserialize, Serialize};

/// The answer to one tool call as the model reads it: the text, and whether it reports a
/// failure (kept as data in the history, see [`crate::vocab::OpenaiChatMessage::Tool`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolAnswer {
    /// The text of the `tool` message.
    pub content: String,
    /// Whether the call failed or was refused.
    pub is_error: bool,
}

impl ToolAnswer {
    /// A successful result.
    pub fn ok(content: impl Into<String>) -> Self {
        ToolAnswer {
            content: content.into(),
            is_error: false,
        }
    }

    /// A failure, told to the model as `Error: <reason>` — the one place that prefix is
    /// written.
    pub fn error(reason: impl std::fmt::Display) -> Self {
        ToolAnswer {
            content: format!("Error: {reason}"),
            is_error: true,
        }
    }
}

/// The default cap on tool output sent to the model, in bytes (the run cuts longer answers;
/// the built-in tools size their own output below it). Also `agcore::run::config::DEFAULT_TOOL_OUTPUT_LIMIT`.
pub const DEFAULT_TOOL_OUTPUT_LIMIT: usize = 32 * 1024;
