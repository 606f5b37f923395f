//! Tasks (`io.modelcontextprotocol/tasks`, SEP-2663): a server may answer a `tools/call` with
//! a task instead of a result. agcore follows it to its end:
//!
//! - polls `tasks/get`, first after the server's `pollIntervalMs` (at least
//!   [`MIN_POLL`]), then backing off by half each time up to [`MAX_POLL`] — never faster than
//!   the server asks;
//! - reports each status message as progress ([`McpProgress`], the client's progress
//!   callback);
//! - answers a task's input requests (elicitation, sampling, roots: the same answerers as
//!   everywhere) with `tasks/update` — or, when nobody can answer now (a deferring elicitor),
//!   ends the call with `ToolError::InputDeferred`, leaving the task waiting on the server, so
//!   the run suspends and its resumed run polls the same task and answers;
//! - sends `tasks/cancel` when the call is dropped — the run was cancelled or its tool timeout
//!   passed — so the server can stop the work (closing the client waits for it, bounded);
//! - gives up (and cancels) after [`MAX_TASK_WAIT`], with an answer the model can read.
//!
//! The task id is the call's continuation, journaled before the first poll: a run resumed in
//! another process polls the same task instead of calling the tool again.

use std::time::{Duration, Instant};

use rmcp::model::{CallToolResult, CancelTaskParams, GetTaskParams, TaskPayload, UpdateTaskParams};
use rmcp::service::RoleClient;
use serde_json::Value;

use crate::tools::error::ToolError;
use crate::tools::mcp::call_progress;
use crate::tools::mcp::connection::Connection;
use crate::tools::mcp::pending_cancels::PendingCancels;
use crate::tools::mcp::progress::McpProgress;

/// The shortest wait between two polls.
pub const MIN_POLL: Duration = Duration::from_millis(20);

/// The longest wait between two polls.
pub const MAX_POLL: Duration = Duration::from_secs(5);

/// How long a task is followed before agcore gives up on it (and cancels it).
pub const MAX_TASK_WAIT: Duration = Duration::from_secs(3600);

/// The longest status message passed on as progress (characters).
const MAX_STATUS_CHARS: usize = 500;

/// Poll task `task_id` (of the call of `tool`) until it ends; its result as the call's.
pub(crate) async fn follow(
    conn: &Connection,
    tool: &str,
    task_id: String,
    poll_interval_ms: Option<u64>,
) -> Result<CallToolResult, ToolError> {
    let mut guard = CancelOnDrop {
        peer: Some(conn.peer.clone()),
        task_id: task_id.clone(),
        pending: conn.cancels.clone(),
    };
    let started = Instant::now();
    let mut wait = interval(poll_interval_ms);
    let mut polls = 0u32;
    let mut last_status: Option<String> = None;
    loop {
        if started.elapsed() >= MAX_TASK_WAIT {
            guard.cancel_now(conn).await;
            return Err(ToolError::ExecutionFailed(
                tool.to_owned(),
                format!(
                    "MCP server '{}' task {task_id} was still working after {} s; agcore stopped \
                     waiting and cancelled it. Continue without its result",
                    conn.server,
                    MAX_TASK_WAIT.as_secs()
                ),
            ));
        }
        tokio::time::sleep(wait).await;
        let got = conn
            .request(
                "tasks/get",
                &task_id,
                conn.peer.get_task(GetTaskParams::new(task_id.clone())),
            )
            .await?;
        polls += 1;
        let detailed = got.task;
        let status = detailed.task.status_message.clone();
        if status.is_some() && status != last_status {
            report(conn, polls, status.as_deref());
            last_status = status;
        }
        match detailed.payload {
            TaskPayload::Completed { result } => {
                guard.disarm();
                return serde_json::from_value::<CallToolResult>(Value::Object(result)).map_err(
                    |error| {
                        ToolError::McpError(format!(
                            "MCP server '{}' task {task_id} completed with a result that is not a \
                             tools/call result: {error}",
                            conn.server
                        ))
                    },
                );
            }
            TaskPayload::Failed { error } => {
                guard.disarm();
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .unwrap_or("no message");
                return Err(ToolError::ExecutionFailed(
                    tool.to_owned(),
                    format!("the task failed: {message}"),
                ));
            }
            TaskPayload::Cancelled => {
                guard.disarm();
                return Err(ToolError::ExecutionFailed(
                    tool.to_owned(),
                    format!("MCP server '{}' cancelled the task", conn.server),
                ));
            }
            TaskPayload::InputRequired { input_requests } => {
                // A question nobody can answer now suspends the run: the task waits on the
                // server (not cancelled), and the resumed run polls it again by its journaled id
                // and answers then.
                let responses = match conn.answers.answer_all(tool, input_requests, true).await {
                    Ok(responses) => responses.unwrap_or_default(),
                    Err(deferred @ ToolError::InputDeferred { .. }) => {
                        guard.disarm();
                        return Err(deferred);
                    }
                    Err(error) => return Err(error),
                };
                conn.request(
                    "tasks/update",
                    &task_id,
                    conn.peer
                        .update_task(UpdateTaskParams::new(task_id.clone(), responses)),
                )
                .await?;
                // The answer may unblock it at once: look again soon.
                wait = interval(detailed.task.poll_interval_ms);
                continue;
            }
            _ => {}
        }
        // Back off by half, never faster than the server asks.
        let asked = interval(detailed.task.poll_interval_ms);
        wait = (wait + wait / 2).clamp(asked, MAX_POLL.max(asked));
    }
}

/// The wait the server asks for (clamped), or the shortest.
fn interval(poll_interval_ms: Option<u64>) -> Duration {
    poll_interval_ms
        .map(Duration::from_millis)
        .unwrap_or(MIN_POLL)
        .clamp(MIN_POLL, MAX_POLL)
}

/// A task's status message as progress.
fn report(conn: &Connection, polls: u32, status: Option<&str>) {
    // The server's text: cut and stripped of control characters before anyone shows it.
    let message = status.map(|text| {
        let cut: String = text.chars().take(MAX_STATUS_CHARS).collect();
        crate::display::escape_for_terminal(&cut).into_owned()
    });
    tracing::debug!(target: "agcore::mcp", server = %conn.server, polls, message = ?message, "task status");
    // The polling runs inside the call, so the call's card gets it too.
    crate::tools::context::report(call_progress::progress_update(
        f64::from(polls),
        None,
        message.clone(),
    ));
    if let Some(callback) = &conn.answers.progress {
        callback(McpProgress {
            server: conn.server.to_string(),
            progress: f64::from(polls),
            total: None,
            message,
        });
    }
}

/// Send `tasks/cancel` for `task_id` and wait for the server's acknowledgement (bounded by the
/// request timeout): the task of a call given up while it waited. A failure is logged.
pub(crate) async fn cancel(conn: &Connection, task_id: &str) {
    let cancelled = conn
        .request(
            "tasks/cancel",
            task_id,
            conn.peer
                .cancel_task(CancelTaskParams::new(task_id.to_owned())),
        )
        .await;
    match cancelled {
        Ok(()) => {
            tracing::info!(target: "agcore::mcp", server = %conn.server, task_id, "cancelled the task of a call given up");
        }
        Err(error) => {
            tracing::warn!(target: "agcore::mcp", server = %conn.server, task_id, %error, "could not cancel the task");
        }
    }
}

/// How long a dropped call's `tasks/cancel` may take.
const CANCEL_WAIT: Duration = Duration::from_secs(10);

/// Sends `tasks/cancel` when the call is dropped before the task ended.
struct CancelOnDrop {
    peer: Option<rmcp::Peer<RoleClient>>,
    task_id: String,
    pending: PendingCancels,
}

impl CancelOnDrop {
    fn disarm(&mut self) {
        self.peer = None;
    }

    /// Cancel and wait for the server's acknowledgement (bounded by the request timeout).
    async fn cancel_now(&mut self, conn: &Connection) {
        if self.peer.take().is_some() {
            let cancelled = conn
                .request(
                    "tasks/cancel",
                    &self.task_id,
                    conn.peer
                        .cancel_task(CancelTaskParams::new(self.task_id.clone())),
                )
                .await;
            if let Err(error) = cancelled {
                tracing::warn!(target: "agcore::mcp", server = %conn.server, task_id = %self.task_id, %error, "could not cancel the task");
            }
        }
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(peer) = self.peer.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let task_id = std::mem::take(&mut self.task_id);
        let handle = runtime.spawn(async move {
            let cancel = peer.cancel_task(CancelTaskParams::new(task_id.clone()));
            match tokio::time::timeout(CANCEL_WAIT, cancel).await {
                Ok(Ok(())) => {
                    tracing::info!(target: "agcore::mcp", task_id, "cancelled the task of a dropped call");
                }
                Ok(Err(error)) => {
                    tracing::warn!(target: "agcore::mcp", task_id, %error, "could not cancel the task of a dropped call");
                }
                Err(_) => {
                    tracing::warn!(target: "agcore::mcp", task_id, "cancelling the task of a dropped call timed out");
                }
            }
        });
        self.pending.push(handle);
    }
}
