//! [`ToolError`]: why a tool could not be found, allowed, validated or run.
//!
//! In the tool loop every `ToolError` becomes the tool message the model reads, so messages say
//! what went wrong and what would work instead.

use std::time::Duration;

use crate::tools::approver::ApprovalRequest;
use crate::tools::reasons::{HiddenBecause, describe_reasons};

/// A tool-system error. The tuple variants are the design's (`docs/5-tool-system.md`); the
/// named-field variants were added for registration, timeouts, cancellation and the exposure gates.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// No tool with this name is registered.
    #[error("tool '{0}' is not registered")]
    NotFound(String),

    /// The tool ran and failed: `(tool, reason)`.
    #[error("tool '{0}' failed: {1}")]
    ExecutionFailed(String, String),

    /// The tool ran and failed, and says more than a message: `output` is its structured
    /// output of the failure (Zed's `Result<Output, Output>`: a failed test run with its
    /// report, a build with its diagnostics). The model reads the message and the output; the
    /// caller gets `output` in [`crate::llm::StreamEvent::ToolExecutionCompleted`] (with
    /// `is_error`). Build it with [`ToolError::failed_with_output`].
    #[error("tool '{tool}' failed: {message}")]
    FailedWithOutput {
        /// The tool.
        tool: String,
        /// What went wrong, for the model.
        message: String,
        /// The structured output of the failure.
        output: serde_json::Value,
    },

    /// The arguments were not valid JSON or did not match the schema: `(tool, what is wrong)`.
    #[error("invalid arguments for tool '{0}': {1}")]
    InvalidArguments(String, String),

    /// The permission checker refused the call: `(tool, the permission(s) that failed)`.
    #[error("permission denied: tool '{0}' requires {1}")]
    PermissionDenied(String, String),

    /// The MCP server or protocol reported an error.
    #[error("MCP error: {0}")]
    McpError(String),

    /// An MCP server kept answering a `tools/call` with "input required" (a multi-round-trip
    /// request): the call was given up after `rounds` rounds instead of going on forever.
    #[error(
        "tool '{tool}' did not finish: MCP server '{server}' still asked for input after {rounds} \
         rounds, the most agcore answers; the call was given up. Do not retry it the same way"
    )]
    McpInputRounds {
        /// The tool (its name on the server).
        tool: String,
        /// The server's name.
        server: String,
        /// The rounds answered.
        rounds: usize,
    },

    /// An MCP server needs a person's answer to go on with the call, and nobody can be asked
    /// now ([`DeferElicitation`](crate::tools::mcp::DeferElicitation)): a run that can wait
    /// suspends on it (the call's `requestState` kept), else the model reads this.
    #[error(
        "tool '{tool}' waits for input nobody can give now: MCP server '{server}' asks: {}",
        questions.join(" / ")
    )]
    InputDeferred {
        /// The tool (its name on the server).
        tool: String,
        /// The server's name.
        server: String,
        /// What the server asks (its text, cut and escaped).
        questions: Vec<String>,
    },

    /// The MCP client is not connected (call `connect()` first).
    #[error("MCP client not initialized: {0}")]
    McpNotInitialized(String),

    /// An MCP request took longer than its timeout (the message names server, method and limit).
    #[error("MCP timeout: {0}")]
    McpTimeout(String),

    /// A request to an MCP server larger than the message limit
    /// ([`MAX_MESSAGE_BYTES`](crate::tools::mcp::MAX_MESSAGE_BYTES)): not sent (a server would
    /// drop it unanswered), failed at once; the connection goes on.
    #[error(
        "MCP server '{server}': {method} was not sent: the request is {bytes} bytes, more than the \
         {} MiB an MCP message may be; send less (e.g. smaller arguments)",
        limit / (1024 * 1024)
    )]
    McpMessageTooLarge {
        /// The server's name.
        server: String,
        /// The request's method (`tools/call`, ...).
        method: String,
        /// The size of the serialized request.
        bytes: usize,
        /// The limit it is over.
        limit: usize,
    },
    /// An MCP server's OAuth authorization failed (a redirect with the wrong `state`, a token
    /// endpoint that refused the code, ...): final, not retried; `reason` holds no secrets.
    #[error("MCP server '{server}': authorization failed: {reason}")]
    McpAuthorization {
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },

    /// An I/O error.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),

    /// Anything else.
    #[error("other error: {0}")]
    Other(String),

    /// A tool with this name is already registered.
    #[error("a tool named '{0}' is already registered")]
    DuplicateName(String),

    /// The name is not accepted by the OpenAI wire format (`^[a-zA-Z0-9_-]{{1,64}}$`).
    #[error("invalid tool name '{name}': {reason}")]
    InvalidName {
        /// The rejected name.
        name: String,
        /// Why it was rejected.
        reason: String,
    },

    /// A tool's parameters are not a valid JSON Schema (found at registration).
    #[error("tool '{tool}' has an invalid parameters schema: {reason}")]
    InvalidSchema {
        /// The tool.
        tool: String,
        /// What the schema compiler reported.
        reason: String,
    },

    /// A local tool ran longer than its timeout.
    #[error("tool '{tool}' timed out after {limit:?}")]
    Timeout {
        /// The tool.
        tool: String,
        /// The limit.
        limit: Duration,
    },

    /// The call was cancelled before it finished.
    #[error("tool '{0}' was cancelled")]
    Cancelled(String),

    /// An exposure gate hides this tool (profile, restricted mode, feature flag), so it may not
    /// run. `reasons` lists every gate that hid it.
    #[error("tool '{tool}' is not available: {}", describe_reasons(reasons))]
    NotExposed {
        /// The tool.
        tool: String,
        /// Every gate that hid it.
        reasons: Vec<HiddenBecause>,
    },

    /// A rule on the call's arguments denied it ([`crate::tools::rules`]).
    #[error("tool '{tool}' was denied by a rule on its arguments: {because}")]
    DeniedByRule {
        /// The tool.
        tool: String,
        /// The matching deny rules, explained.
        because: String,
    },

    /// A human (or an [`crate::tools::Approver`]) declined the call, or no approver was configured.
    #[error("tool '{tool}' was not approved: {message}")]
    ApprovalDenied {
        /// The tool.
        tool: String,
        /// Why, or the approver's message for the model.
        message: String,
    },

    /// The approver deferred the decision ([`crate::tools::ApprovalDecision::Defer`]) and the
    /// caller cannot wait for it: only a run started with [`crate::run::RunRequest`] suspends.
    #[error(
        "tool '{}' was not run: its approval was deferred and this caller cannot wait for a decision",
        request.tool
    )]
    ApprovalDeferred {
        /// What the approver was asked.
        request: Box<ApprovalRequest>,
    },

    /// A decision given for a deferred call does not apply: the call to run is not the one
    /// the approver was shown (its tool or arguments changed since, e.g. in a stored run
    /// state), so it was not run.
    #[error(
        "tool '{tool}' was not run: call {call_id} is not the call that was approved (its tool or arguments changed after approval was requested)"
    )]
    ApprovalMismatch {
        /// The tool of the call to run.
        tool: String,
        /// The call id.
        call_id: String,
    },

    /// The call passed every check but was not started: what had to happen first (e.g.
    /// recording in the session store that it starts) failed.
    #[error("tool '{tool}' was not started: {reason}")]
    NotStarted {
        /// The tool.
        tool: String,
        /// What failed.
        reason: String,
    },
}

impl ToolError {
    /// A failure of `tool` that carries structured output ([`ToolError::FailedWithOutput`]).
    ///
    /// ```
    /// use agcore::tools::ToolError;
    /// use serde_json::json;
    ///
    /// let error = ToolError::failed_with_output("test", "2 tests failed", json!({"failed": ["a", "b"]}));
    /// assert_eq!(error.failure_output(), Some(&json!({"failed": ["a", "b"]})));
    /// ```
    pub fn failed_with_output(
        tool: impl Into<String>,
        message: impl Into<String>,
        output: serde_json::Value,
    ) -> Self {
        ToolError::FailedWithOutput {
            tool: tool.into(),
            message: message.into(),
            output,
        }
    }

    /// The structured output a failed call carries, if any ([`ToolError::FailedWithOutput`]).
    pub fn failure_output(&self) -> Option<&serde_json::Value> {
        match self {
            ToolError::FailedWithOutput { output, .. } => Some(output),
            _ => None,
        }
    }

    /// The tool this error is about, when it names one.
    pub fn tool_name(&self) -> Option<&str> {
        match self {
            ToolError::NotFound(tool)
            | ToolError::ExecutionFailed(tool, _)
            | ToolError::InvalidArguments(tool, _)
            | ToolError::PermissionDenied(tool, _)
            | ToolError::DuplicateName(tool)
            | ToolError::Cancelled(tool) => Some(tool),
            ToolError::InvalidName { name, .. } => Some(name),
            ToolError::InvalidSchema { tool, .. } => Some(tool),
            ToolError::Timeout { tool, .. }
            | ToolError::NotExposed { tool, .. }
            | ToolError::ApprovalDenied { tool, .. }
            | ToolError::NotStarted { tool, .. }
            | ToolError::DeniedByRule { tool, .. }
            | ToolError::ApprovalMismatch { tool, .. }
            | ToolError::McpInputRounds { tool, .. }
            | ToolError::InputDeferred { tool, .. }
            | ToolError::FailedWithOutput { tool, .. } => Some(tool),
            ToolError::ApprovalDeferred { request } => Some(&request.tool),
            _ => None,
        }
    }
}
