//! [`ToolOutcome`]: what came of one call — refused before its tool started, or ran — and
//! [`CompletedCall`], the finished call with the model's text rendered once, where the
//! outcome was produced, and its media ([`ToolMedia`]) beside it, whatever the tool's source.

use std::time::Duration;

use serde_json::Value;

use crate::tools::call::ToolInvocation;
use crate::tools::error::ToolError;
use crate::tools::media::ToolMedia;
use crate::vocab::ToolAnswer;

/// What came of one call.
#[derive(Debug)]
pub enum ToolOutcome {
    /// The call never reached its tool (unknown, hidden, permission denied, invalid
    /// arguments, approval denied): it did not run and had no effect.
    Refused {
        /// Why it was refused.
        reason: ToolError,
    },
    /// The tool started: from then on it may have had effects.
    Ran {
        /// Its output, or how it failed (its own error, a timeout, a panic).
        result: Result<Value, ToolError>,
    },
}

impl ToolOutcome {
    /// Whether the tool started (and so may have had effects).
    pub fn ran(&self) -> bool {
        matches!(self, ToolOutcome::Ran { .. })
    }

    /// Whether the call was refused or its tool failed.
    pub fn is_error(&self) -> bool {
        !matches!(self, ToolOutcome::Ran { result: Ok(_) })
    }

    /// The output, or the refusal or failure.
    pub fn into_result(self) -> Result<Value, ToolError> {
        match self {
            ToolOutcome::Refused { reason } => Err(reason),
            ToolOutcome::Ran { result } => result,
        }
    }
}

/// A finished call: what was asked, what came of it, the model's text, and how long it took.
#[derive(Debug)]
pub struct CompletedCall {
    /// The call id.
    pub id: String,
    /// The tool name as requested.
    pub tool_name: String,
    /// The arguments (the raw text as a JSON string when it was not valid JSON).
    pub input: Value,
    /// Refused or ran, with the result.
    pub outcome: ToolOutcome,
    /// What the model reads for this call (the tool's rendering of its output, or the
    /// failure with a hint), rendered once when the outcome was produced.
    pub answer: ToolAnswer,
    /// The images and audio of the output ([`BaseTool::media`]), passed to the model beside
    /// `answer`; empty for a failed or refused call.
    ///
    /// [`BaseTool::media`]: crate::tools::BaseTool::media
    pub media: Vec<ToolMedia>,
    /// Wall time from the start of the call (lookup included) to its end.
    pub duration: Duration,
}

impl CompletedCall {
    /// The call as a plain [`ToolInvocation`] record.
    pub fn into_invocation(self) -> ToolInvocation {
        ToolInvocation {
            id: self.id,
            tool_name: self.tool_name,
            input: self.input,
            output: self.outcome.into_result(),
            duration: self.duration,
        }
    }
}
