//! Multi-round-trip `tools/call` (SEP-2322, protocol 2026-07-28): a server may answer a call
//! with "input required" — elicitation, sampling or roots requests and an opaque
//! `requestState` — instead of a result. agcore answers the requests through the same
//! answerers as a server's own requests (the application's elicitor and sampler: the same
//! gates), then retries the call with `inputResponses` and the `requestState` echoed.
//!
//! - At most [`MAX_INPUT_ROUNDS`] rounds; past them the call fails with
//!   [`ToolError::McpInputRounds`], which the model reads.
//! - The `requestState` is the server's, untrusted: at most [`MAX_REQUEST_STATE_BYTES`], sent
//!   back verbatim, never interpreted.
//! - Each round's state is recorded as the call's continuation before it is answered
//!   ([`crate::tools::continuation`]): a run that stops while a human is asked goes on from
//!   that `requestState` when resumed, instead of calling the tool from scratch.
//! - A call the server turns into a task is followed by [`crate::tools::mcp::tasks`].

// Roots and sampling are deprecated by SEP-2577 for the 2026 protocol; servers still ask for them.
#![allow(deprecated)]

use std::time::Duration;

use rmcp::model::{CallToolRequestParams, CallToolResponse, CallToolResult, InputRequests};
use serde::{Deserialize, Serialize};

use crate::tools::continuation;
use crate::tools::error::ToolError;
use crate::tools::mcp::connection::Connection;
use crate::tools::mcp::tasks;

/// The most "input required" answers one `tools/call` is given (so at most one more request).
pub const MAX_INPUT_ROUNDS: usize = 10;

/// The largest `requestState` agcore keeps and sends back (bytes).
pub const MAX_REQUEST_STATE_BYTES: usize = 64 * 1024;

/// The most input requests one round may carry.
const MAX_INPUT_REQUESTS: usize = 16;

/// The largest continuation (as JSON) a call records for its run's journal (bytes).
const MAX_CONTINUATION_BYTES: usize = 256 * 1024;

/// How a call of this server's tool goes on in another attempt (journaled as the call's
/// continuation; its fields come from the server and are bounded).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "mcp", rename_all = "snake_case")]
pub(crate) enum McpContinuation {
    /// The server asked for input: answer `input_requests`, retry with `request_state`.
    Input {
        server: String,
        tool: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        request_state: Option<String>,
        input_requests: InputRequests,
        /// Rounds answered before this one.
        rounds: usize,
    },
    /// The call became a task: poll it.
    Task {
        server: String,
        tool: String,
        task_id: String,
    },
}

impl McpContinuation {
    fn is_for(&self, server: &str, name: &str) -> bool {
        match self {
            McpContinuation::Input {
                server: s, tool, ..
            }
            | McpContinuation::Task {
                server: s, tool, ..
            } => s == server && tool == name,
        }
    }

    /// The continuation of the running call, when an earlier attempt of it (this server's
    /// tool `name`) recorded one.
    fn resumed(server: &str, name: &str) -> Option<Self> {
        let value = continuation::resumed()?;
        serde_json::from_value::<McpContinuation>(value)
            .ok()
            .filter(|resumed| resumed.is_for(server, name))
    }

    /// Record this as the running call's continuation (journaled before the call goes on).
    pub(crate) async fn record(&self, tool: &str) -> Result<(), ToolError> {
        let value = serde_json::to_value(self)
            .map_err(|error| ToolError::ExecutionFailed(tool.to_owned(), error.to_string()))?;
        // What the server sent is kept in the journal: bounded.
        let size = value.to_string().len();
        if size > MAX_CONTINUATION_BYTES {
            return Err(ToolError::McpError(format!(
                "tool '{tool}': what the MCP server asks is {size} bytes, more than the \
                 {MAX_CONTINUATION_BYTES} agcore keeps to continue the call; the call was given up"
            )));
        }
        continuation::record(value).await.map_err(|reason| {
            ToolError::ExecutionFailed(
                tool.to_owned(),
                format!(
                    "the run's journal could not record how to continue the call ({reason}); \
                         it was given up"
                ),
            )
        })
    }
}

/// Call `params.name` on `conn`: every "input required" answered and the call retried, a task
/// followed to its end; a run's earlier attempt continued when it recorded how.
pub(crate) async fn call_tool(
    conn: &Connection,
    span: tracing::Span,
    mut params: CallToolRequestParams,
) -> Result<CallToolResult, ToolError> {
    let name = params.name.to_string();
    let server = conn.server.to_string();
    let mut rounds = 0;
    if continuation::abandoning() {
        // The call was given up (its approval denied) while it waited: end the task it left
        // running on the server; a multi-round-trip request left nothing there.
        if let Some(McpContinuation::Task { task_id, .. }) =
            McpContinuation::resumed(&server, &name)
        {
            tasks::cancel(conn, &task_id).await;
        }
        return Err(ToolError::McpError(format!(
            "tool '{name}' was given up; nothing of it is left running on MCP server '{server}'"
        )));
    }
    match McpContinuation::resumed(&server, &name) {
        Some(McpContinuation::Task { task_id, .. }) => {
            tracing::info!(target: "agcore::mcp", server, tool = name, task_id, "resuming the call's task");
            return tasks::follow(conn, &name, task_id, None).await;
        }
        Some(McpContinuation::Input {
            request_state,
            input_requests,
            rounds: before,
            ..
        }) => {
            tracing::info!(target: "agcore::mcp", server, tool = name, "resuming the call from its request state");
            rounds = before + 1;
            params.input_responses = conn.answers.answer_all(&name, input_requests, true).await?;
            params.request_state = request_state;
        }
        None => {}
    }
    let mut state_only = 0u32;
    loop {
        let response = conn
            .request_in(
                span.clone(),
                "tools/call",
                &name,
                conn.peer.call_tool_once(params.clone()),
            )
            .await?;
        let required = match response {
            CallToolResponse::Complete(result) => return Ok(result),
            CallToolResponse::Task(created) => {
                let task = created.task;
                McpContinuation::Task {
                    server: server.clone(),
                    tool: name.clone(),
                    task_id: task.task_id.clone(),
                }
                .record(&name)
                .await?;
                return tasks::follow(conn, &name, task.task_id, task.poll_interval_ms).await;
            }
            CallToolResponse::InputRequired(required) => required,
            _ => {
                return Err(ToolError::McpError(format!(
                    "MCP server '{server}' answered tools/call '{name}' with a result agcore does not know"
                )));
            }
        };
        if rounds >= MAX_INPUT_ROUNDS {
            // Nobody is asked a question whose answer would not be sent.
            return Err(ToolError::McpInputRounds {
                tool: name,
                server,
                rounds,
            });
        }
        if required
            .request_state
            .as_ref()
            .is_some_and(|state| state.len() > MAX_REQUEST_STATE_BYTES)
        {
            return Err(ToolError::McpError(format!(
                "MCP server '{server}' asked for input on tools/call '{name}' with a requestState \
                 larger than {MAX_REQUEST_STATE_BYTES} bytes; the call was given up"
            )));
        }
        let requests = required.input_requests.unwrap_or_default();
        if requests.len() > MAX_INPUT_REQUESTS {
            return Err(ToolError::McpError(format!(
                "MCP server '{server}' asked for {} inputs at once on tools/call '{name}', more \
                 than {MAX_INPUT_REQUESTS}; the call was given up",
                requests.len()
            )));
        }
        if requests.is_empty() {
            if required.request_state.is_none() {
                return Err(ToolError::McpError(format!(
                    "MCP server '{server}' asked for input on tools/call '{name}' without saying \
                     what (no inputRequests, no requestState)"
                )));
            }
            // Only state: the server sheds load; back off a little before retrying.
            tokio::time::sleep(Duration::from_millis(50u64 << state_only.min(4))).await;
            state_only += 1;
        } else {
            state_only = 0;
        }
        McpContinuation::Input {
            server: server.clone(),
            tool: name.clone(),
            request_state: required.request_state.clone(),
            input_requests: requests.clone(),
            rounds,
        }
        .record(&name)
        .await?;
        params.input_responses = conn.answers.answer_all(&name, requests, true).await?;
        params.request_state = required.request_state;
        rounds += 1;
    }
}
