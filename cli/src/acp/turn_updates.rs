//! One prompt turn's events as `session/update`s: text and reasoning chunks, each tool call as
//! `tool_call` then `tool_call_update`s (input, running, final status, content, diff), and the
//! stop reason the turn ended with.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use agcore::llm::{ErrorKind, FinishReason, StreamEvent};
use agcore::run::RunItem;
use agcore::tools::{ToolCallCard, ToolCallUpdate, ToolRegistry};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

use super::kinds;

/// The largest file whose old and new text a diff shows.
const MAX_DIFF_BYTES: u64 = 1024 * 1024;

/// Tools whose finished call shows as a diff of the file at their `path` argument.
const DIFF_TOOLS: [&str; 2] = ["write_file", "edit_file"];

/// How a turn ended, for the prompt's answer.
#[derive(Debug)]
pub enum TurnEnd {
    /// One of ACP's stop reasons.
    Stopped(acp::StopReason),
    /// A failure the editor is told as a JSON-RPC error.
    Failed(String),
}

/// What one call showed so far.
struct ShownCall {
    tool: String,
    /// What the tool and the run reported about it, folded.
    card: ToolCallCard,
    /// The file's text before the call ran (for a diff), when it had one.
    before: Option<(PathBuf, Option<String>)>,
    finished: bool,
}

/// Sends one turn's updates.
pub struct TurnUpdates<'a> {
    connection: &'a ConnectionTo<Client>,
    session: acp::SessionId,
    registry: &'a ToolRegistry,
    workspace: &'a Path,
    calls: HashMap<String, ShownCall>,
    last_finish: Option<FinishReason>,
    failure: Option<(ErrorKind, String)>,
    /// Replaying a stored conversation: the files are not read (they may have changed since).
    replaying: bool,
}

impl<'a> TurnUpdates<'a> {
    /// Updates for `session`, titles and kinds from `registry`, paths under `workspace`.
    pub fn new(
        connection: &'a ConnectionTo<Client>,
        session: acp::SessionId,
        registry: &'a ToolRegistry,
        workspace: &'a Path,
    ) -> Self {
        Self {
            connection,
            session,
            registry,
            workspace,
            calls: HashMap::new(),
            last_finish: None,
            failure: None,
            replaying: false,
        }
    }

    /// Updates that replay a stored conversation (no diffs read from the files now).
    pub fn replaying(mut self) -> Self {
        self.replaying = true;
        self
    }

    /// The user's message, replayed.
    pub fn user_message(&self, text: String) {
        self.send(acp::SessionUpdate::UserMessageChunk(
            acp::ContentChunk::new(text.into()),
        ));
    }

    fn send(&self, update: acp::SessionUpdate) {
        let notification = acp::SessionNotification::new(self.session.clone(), update);
        if let Err(error) = self.connection.send_notification(notification) {
            tracing::warn!(%error, "could not send a session update");
        }
    }

    /// One item of the run.
    pub fn item(&mut self, item: RunItem) {
        match item {
            RunItem::Event(event) => self.event(event, None),
            RunItem::Failed(error) => {
                if let StreamEvent::Error { kind, message } = StreamEvent::from_error(&error) {
                    self.failure = Some((kind, message));
                }
            }
            _ => {}
        }
    }

    /// One event of the run (or of a replay).
    pub fn event(&mut self, event: StreamEvent, agent: Option<&str>) {
        match event {
            StreamEvent::AssistantTextDelta { text } if agent.is_none() => {
                self.send(acp::SessionUpdate::AgentMessageChunk(
                    acp::ContentChunk::new(text.into()),
                ));
            }
            StreamEvent::ReasoningDelta { text } if agent.is_none() => {
                self.send(acp::SessionUpdate::AgentThoughtChunk(
                    acp::ContentChunk::new(text.into()),
                ));
            }
            StreamEvent::ToolCallDelta {
                id: Some(id),
                name: Some(name),
                ..
            } => self.announce(&id, &name, None, agent),
            StreamEvent::ToolCallReady {
                id,
                name,
                arguments,
            } => {
                let input: Value =
                    serde_json::from_str(&arguments).unwrap_or(Value::String(arguments));
                self.announce(&id, &name, Some(&input), agent);
            }
            StreamEvent::ToolExecutionStarted {
                id,
                tool_name,
                input,
            } => {
                self.announce(&id, &tool_name, Some(&input), agent);
                self.snapshot(&id, &tool_name, &input);
                let mut fields =
                    acp::ToolCallUpdateFields::new().status(acp::ToolCallStatus::InProgress);
                if let Some(path) = self.path_of(&input) {
                    fields = fields.locations(vec![acp::ToolCallLocation::new(path)]);
                }
                self.update(&id, fields);
            }
            StreamEvent::ToolExecutionCompleted {
                id,
                output,
                is_error,
                ..
            } => self.finish(&id, &output, is_error),
            StreamEvent::ToolCallUpdate { id, update } => self.reported(&id, &update),
            StreamEvent::FromAgent { agent, event } => self.event(*event, Some(&agent)),
            StreamEvent::Handoff { from, to } => {
                self.send(acp::SessionUpdate::AgentThoughtChunk(
                    acp::ContentChunk::new(format!("\n(handoff: {from} → {to})\n").into()),
                ));
            }
            StreamEvent::TurnComplete { reason, .. } if agent.is_none() => {
                self.last_finish = Some(reason);
            }
            StreamEvent::Error { kind, message } if agent.is_none() => {
                self.failure = Some((kind, message));
            }
            _ => {}
        }
    }

    /// `tool_call` the first time a call is seen, a `tool_call_update` with its title and
    /// input once they are known.
    fn announce(&mut self, id: &str, tool: &str, input: Option<&Value>, agent: Option<&str>) {
        let found = self.registry.get(tool);
        let title = match (&found, input) {
            (Some(found), Some(input)) => found.title(input),
            _ => tool.to_owned(),
        };
        let title = match agent {
            Some(agent) => format!("{agent}: {title}"),
            None => title,
        };
        let kind = kinds::kind(found.map(|tool| tool.kind()).unwrap_or_default());
        if let Some(shown) = self.calls.get(id) {
            if let Some(input) = input
                && !shown.finished
            {
                self.update(
                    id,
                    acp::ToolCallUpdateFields::new()
                        .title(title)
                        .raw_input(input.clone()),
                );
            }
            return;
        }
        self.calls.insert(
            id.to_owned(),
            ShownCall {
                tool: tool.to_owned(),
                card: ToolCallCard::new(id, tool),
                before: None,
                finished: false,
            },
        );
        let mut call = acp::ToolCall::new(id.to_owned(), title)
            .kind(kind)
            .status(acp::ToolCallStatus::Pending);
        if let Some(input) = input {
            call = call.raw_input(input.clone());
        }
        self.send(acp::SessionUpdate::ToolCall(call));
    }

    fn update(&self, id: &str, fields: acp::ToolCallUpdateFields) {
        self.send(acp::SessionUpdate::ToolCallUpdate(
            acp::ToolCallUpdate::new(id.to_owned(), fields),
        ));
    }

    /// The absolute path a call's `path` argument names inside the workspace, if any.
    fn path_of(&self, input: &Value) -> Option<PathBuf> {
        let path = Path::new(input.get("path")?.as_str()?);
        let joined = if path.is_absolute() {
            path.to_owned()
        } else {
            self.workspace.join(path)
        };
        joined.starts_with(self.workspace).then_some(joined)
    }

    /// What a tool (or the run, as the input streams) reported: the card's fields that
    /// changed. ACP replaces a call's content and locations with each update, so the whole
    /// folded content goes out each time.
    fn reported(&mut self, id: &str, update: &ToolCallUpdate) {
        let Some(shown) = self.calls.get_mut(id) else {
            return;
        };
        shown.card.apply(update);
        let mut fields = acp::ToolCallUpdateFields::new();
        if let Some(title) = &update.title {
            fields = fields.title(title.clone());
        }
        if let Some(status) = update.status {
            fields = fields.status(status_of(status));
        }
        if !update.content.is_empty() || update.progress.is_some() {
            fields = fields.content(card_content(&shown.card, self.workspace));
        }
        if !update.locations.is_empty() {
            fields = fields.locations(
                shown
                    .card
                    .locations
                    .iter()
                    .map(|location| {
                        acp::ToolCallLocation::new(absolute(self.workspace, &location.path))
                            .line(location.line)
                    })
                    .collect::<Vec<_>>(),
            );
        }
        if let Some(input) = &update.partial_input {
            fields = fields.raw_input(input.clone());
        }
        self.update(id, fields);
    }

    /// Keep the file's text before a write or edit runs, for the diff.
    fn snapshot(&mut self, id: &str, tool: &str, input: &Value) {
        if self.replaying || !DIFF_TOOLS.contains(&tool) {
            return;
        }
        let Some(path) = self.path_of(input) else {
            return;
        };
        let before = read_bounded(&path, self.workspace);
        if let Some(shown) = self.calls.get_mut(id) {
            shown.before = Some((path, before));
        }
    }

    fn finish(&mut self, id: &str, output: &Value, is_error: bool) {
        let Some(shown) = self.calls.get_mut(id) else {
            return;
        };
        shown.finished = true;
        // What the tool showed stays; a write or edit without a diff of its own gets one.
        let mut content = card_content(&shown.card, self.workspace);
        let has_diff = content
            .iter()
            .any(|part| matches!(part, acp::ToolCallContent::Diff(_)));
        if !is_error
            && !has_diff
            && !self.replaying
            && DIFF_TOOLS.contains(&shown.tool.as_str())
            && let Some((path, before)) = shown.before.take()
            && let Some(after) = read_bounded(&path, self.workspace)
        {
            content.push(acp::ToolCallContent::Diff(
                acp::Diff::new(path, after).old_text(before),
            ));
        }
        content.push(kinds::text_content(kinds::output_text(output)));
        let status = if is_error {
            acp::ToolCallStatus::Failed
        } else {
            acp::ToolCallStatus::Completed
        };
        self.update(
            id,
            acp::ToolCallUpdateFields::new()
                .status(status)
                .content(content)
                .raw_output(output.clone()),
        );
    }

    /// Calls that were shown but never finished (the turn was cancelled): marked failed, so
    /// the editor does not keep showing them as running.
    pub fn close_unfinished(&mut self, why: &str) {
        let open: Vec<String> = self
            .calls
            .iter()
            .filter(|(_, shown)| !shown.finished)
            .map(|(id, _)| id.clone())
            .collect();
        for id in open {
            if let Some(shown) = self.calls.get_mut(&id) {
                shown.finished = true;
            }
            self.update(
                &id,
                acp::ToolCallUpdateFields::new()
                    .status(acp::ToolCallStatus::Failed)
                    .content(vec![kinds::text_content(why.to_owned())]),
            );
        }
    }

    /// How the turn ended.
    pub fn end(&self) -> TurnEnd {
        if let Some((kind, message)) = &self.failure {
            return match kind {
                ErrorKind::MaxTurnsExceeded | ErrorKind::UsageLimitExceeded => {
                    TurnEnd::Stopped(acp::StopReason::MaxTurnRequests)
                }
                ErrorKind::Cancelled => TurnEnd::Stopped(acp::StopReason::Cancelled),
                _ => TurnEnd::Failed(message.clone()),
            };
        }
        TurnEnd::Stopped(match self.last_finish {
            Some(FinishReason::Length) => acp::StopReason::MaxTokens,
            Some(FinishReason::ContentFilter) => acp::StopReason::Refusal,
            _ => acp::StopReason::EndTurn,
        })
    }
}

/// ACP's status of an agcore status.
fn status_of(status: agcore::tools::ToolCallStatus) -> acp::ToolCallStatus {
    match status {
        agcore::tools::ToolCallStatus::Pending => acp::ToolCallStatus::Pending,
        agcore::tools::ToolCallStatus::InProgress => acp::ToolCallStatus::InProgress,
        agcore::tools::ToolCallStatus::Completed => acp::ToolCallStatus::Completed,
        _ => acp::ToolCallStatus::Failed,
    }
}

/// `path` as the editor needs it: absolute (a tool names files relative to the workspace).
fn absolute(workspace: &Path, path: &str) -> PathBuf {
    let path = Path::new(path);
    if path.is_absolute() {
        path.to_owned()
    } else {
        workspace.join(path)
    }
}

/// A card's content parts in ACP's terms, and its progress as a last line of text.
fn card_content(card: &ToolCallCard, workspace: &Path) -> Vec<acp::ToolCallContent> {
    let mut content: Vec<acp::ToolCallContent> = card
        .content
        .iter()
        .filter_map(|part| match part {
            agcore::tools::ToolContent::Text { text } => Some(kinds::text_content(text.clone())),
            agcore::tools::ToolContent::Diff {
                path,
                old_text,
                new_text,
            } => Some(acp::ToolCallContent::Diff(
                acp::Diff::new(absolute(workspace, path), new_text.clone())
                    .old_text(old_text.clone()),
            )),
            agcore::tools::ToolContent::Terminal { terminal_id } => Some(
                acp::ToolCallContent::Terminal(acp::Terminal::new(terminal_id.clone())),
            ),
            _ => None,
        })
        .collect();
    if let Some(progress) = &card.progress {
        let total = progress
            .total
            .map(|total| format!("/{total}"))
            .unwrap_or_default();
        let message = progress
            .message
            .as_ref()
            .map(|message| format!(" {message}"))
            .unwrap_or_default();
        content.push(kinds::text_content(format!(
            "progress: {}{total}{message}",
            progress.done
        )));
    }
    content
}

/// A file's text when it is a file inside `workspace` of at most [`MAX_DIFF_BYTES`];
/// `None` otherwise (missing, too large, not UTF-8, or outside through a link).
fn read_bounded(path: &Path, workspace: &Path) -> Option<String> {
    let real = std::fs::canonicalize(path).ok()?;
    let root = std::fs::canonicalize(workspace).ok()?;
    if !real.starts_with(root) || std::fs::metadata(&real).ok()?.len() > MAX_DIFF_BYTES {
        return None;
    }
    std::fs::read_to_string(real).ok()
}
