//! MCP servers' progress during a call — `notifications/progress`, and the status messages of
//! a task being polled — shown while the run goes on: a line on stderr (`agcore chat`, `agcore
//! run`), or with `agcore run --json` an event on stdout:
//! `{"type":"mcp_progress","server":"...","progress":3.0,"total":null,"message":"..."}`. The
//! server's text is escaped before it is shown.

use std::sync::OnceLock;

use agcore::display::escape_for_terminal;
use agcore::tools::mcp::{McpClient, McpProgress};

use crate::render::{json_for_terminal, without_spinner};

/// Where progress goes (set once, before the servers start; unset: nowhere).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown {
    /// A line on stderr.
    Human,
    /// A JSON event on stdout.
    Json,
}

static SHOWN: OnceLock<Shown> = OnceLock::new();

/// Show progress as `shown` from now on (the first call wins).
pub fn show(shown: Shown) {
    let _ = SHOWN.set(shown);
}

/// `client` reporting its server's progress where [`show`] said.
pub fn attach(client: McpClient) -> McpClient {
    match SHOWN.get().copied() {
        Some(shown) => client.with_progress_callback(move |progress| print(shown, &progress)),
        None => client,
    }
}

fn print(shown: Shown, progress: &McpProgress) {
    match shown {
        Shown::Json => {
            let event = serde_json::json!({
                "type": "mcp_progress",
                "server": progress.server,
                "progress": progress.progress,
                "total": progress.total,
                "message": progress.message,
            });
            println!("{}", json_for_terminal(event.to_string()));
        }
        Shown::Human => {
            let total = progress
                .total
                .map(|total| format!("/{total}"))
                .unwrap_or_default();
            let message = progress.message.as_deref().unwrap_or("");
            let line = format!(
                "  … {} {}{total} {}",
                escape_for_terminal(&progress.server),
                progress.progress,
                escape_for_terminal(message)
            );
            without_spinner(|| eprintln!("{line}"));
        }
    }
}
