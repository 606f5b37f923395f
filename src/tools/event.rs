//! [`ToolCallUpdate`]: what a running tool (or the run, while the model streams a call's
//! arguments) says about one call — its title, content parts (text, a file diff, a terminal),
//! the files it touches, its progress — and [`ToolCallCard`], the state those updates build up.
//!
//! A tool reports updates through its [`crate::tools::ToolContext`]; the run delivers each one to
//! the caller as [`crate::llm::StreamEvent::ToolCallUpdate`] tied to the call id, in the order
//! the tool sent them, and journals it so that a reopened session replays it
//! ([`crate::session::call_updates`]). A UI folds the updates of a call into a [`ToolCallCard`]
//! (the card of an editor, the title line of a terminal); an ACP server sends the card's fields
//! as `tool_call_update`s.
//!
//! Everything here may come from untrusted input (a model's partial arguments, an MCP server's
//! text): bounded by [`MAX_PART_BYTES`] and [`MAX_CARD_BYTES`], and never printed raw on a
//! terminal (see [`crate::display`]).

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most bytes one text or diff side of an update keeps; longer ones are cut on a character
/// boundary, with a marker.
pub const MAX_PART_BYTES: usize = 64 * 1024;

/// The most bytes of text a [`ToolCallCard`] keeps over all its content parts; text appended
/// beyond it is dropped (the card says so once).
pub const MAX_CARD_BYTES: usize = 1024 * 1024;

/// The most updates one call may report; later ones are dropped (a tool stuck in a loop must
/// not fill the journal).
pub const MAX_UPDATES_PER_CALL: usize = 10_000;

/// Where a call is. The run reports `Pending` while the model streams a call's arguments or
/// its approval waits, `InProgress` once the tool runs, and `Completed` / `Failed` at the end
/// (with [`crate::llm::StreamEvent::ToolExecutionCompleted`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolCallStatus {
    /// Not started: its arguments are still streaming, or it waits for approval.
    Pending,
    /// Its tool is running.
    InProgress,
    /// It finished with an output.
    Completed,
    /// It was refused or failed.
    Failed,
}

/// One content part of a call's card.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ToolContent {
    /// Text (markdown is fine); appended to the card's last text part when that is the card's
    /// last part (so a command's output streams into one block).
    Text {
        /// The text.
        text: String,
    },
    /// A change of one file: replaces an earlier diff of the same path on the card (a diff that
    /// grows as the input streams stays one diff).
    Diff {
        /// The file's path, as the tool names it (relative to the workspace for the built-ins).
        path: String,
        /// The text before; `None` for a new file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        old_text: Option<String>,
        /// The text after.
        new_text: String,
    },
    /// A terminal the client created (ACP `terminal/create`) whose output the card embeds.
    Terminal {
        /// The client's terminal id.
        terminal_id: String,
    },
}

/// A file (and line) a call reads or changes, so a UI can follow along.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ToolLocation {
    /// The file's path.
    pub path: String,
    /// The line (1-based), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<u32>,
}

impl ToolLocation {
    /// The file `path`, no line.
    pub fn file(path: impl Into<String>) -> Self {
        ToolLocation {
            path: path.into(),
            line: None,
        }
    }

    /// Line `line` (1-based) of `path`.
    pub fn line(path: impl Into<String>, line: u32) -> Self {
        ToolLocation {
            path: path.into(),
            line: Some(line),
        }
    }
}

/// How far a call has got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolProgress {
    /// Units done.
    pub done: u64,
    /// Units in all, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// What it is doing now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// One update of a call: every field is optional, and only what is set changes the card (see
/// [`ToolCallCard::apply`]). Build one with the constructors and `with_*` methods:
///
/// ```
/// use agcore::tools::event::{ToolCallUpdate, ToolLocation};
///
/// let update = ToolCallUpdate::diff("src/main.rs", Some("old".into()), "new")
///     .with_locations(vec![ToolLocation::line("src/main.rs", 3)]);
/// assert_eq!(update.locations.len(), 1);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCallUpdate {
    /// A better title for the call (e.g. `Edit src/main.rs` once the path streamed in).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Where the call is now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ToolCallStatus>,
    /// Content parts added to the card (see [`ToolContent`] for how each merges).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub content: Vec<ToolContent>,
    /// The files the call is at now (replaces the card's locations when not empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub locations: Vec<ToolLocation>,
    /// How far it has got.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<ToolProgress>,
    /// The call's arguments as far as the model has streamed them (a partial JSON value,
    /// read-only): sent by the run, never by a tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial_input: Option<Value>,
}

impl ToolCallUpdate {
    /// An update setting the title.
    pub fn title(title: impl Into<String>) -> Self {
        ToolCallUpdate::default().with_title(title)
    }

    /// An update adding `text`.
    pub fn text(text: impl Into<String>) -> Self {
        ToolCallUpdate::default().with_content(ToolContent::Text { text: text.into() })
    }

    /// An update showing the diff of `path` (`old_text` `None`: a new file).
    pub fn diff(
        path: impl Into<String>,
        old_text: Option<String>,
        new_text: impl Into<String>,
    ) -> Self {
        ToolCallUpdate::default().with_content(ToolContent::Diff {
            path: path.into(),
            old_text,
            new_text: new_text.into(),
        })
    }

    /// An update embedding the client's terminal `terminal_id`.
    pub fn terminal(terminal_id: impl Into<String>) -> Self {
        ToolCallUpdate::default().with_content(ToolContent::Terminal {
            terminal_id: terminal_id.into(),
        })
    }

    /// An update naming the files the call is at.
    pub fn locations(locations: Vec<ToolLocation>) -> Self {
        ToolCallUpdate::default().with_locations(locations)
    }

    /// An update saying how far the call has got.
    pub fn progress(done: u64, total: Option<u64>, message: Option<String>) -> Self {
        ToolCallUpdate {
            progress: Some(ToolProgress {
                done,
                total,
                message,
            }),
            ..ToolCallUpdate::default()
        }
    }

    /// An update setting the status.
    pub fn status(status: ToolCallStatus) -> Self {
        ToolCallUpdate {
            status: Some(status),
            ..ToolCallUpdate::default()
        }
    }

    /// The run's update while a call's arguments stream: the best title so far and the partial
    /// input.
    pub fn streamed_input(title: impl Into<String>, partial_input: Value) -> Self {
        ToolCallUpdate {
            title: Some(title.into()),
            status: Some(ToolCallStatus::Pending),
            partial_input: Some(partial_input),
            ..ToolCallUpdate::default()
        }
    }

    /// This update with `title`.
    pub fn with_title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// This update with one more content part.
    pub fn with_content(mut self, part: ToolContent) -> Self {
        self.content.push(part);
        self
    }

    /// This update with `locations`.
    pub fn with_locations(mut self, locations: Vec<ToolLocation>) -> Self {
        self.locations = locations;
        self
    }

    /// Whether the update says nothing.
    pub fn is_empty(&self) -> bool {
        self.title.is_none()
            && self.status.is_none()
            && self.content.is_empty()
            && self.locations.is_empty()
            && self.progress.is_none()
            && self.partial_input.is_none()
    }

    /// This update with every text cut to [`MAX_PART_BYTES`] (the run bounds what a tool
    /// reports before it is journaled or shown).
    pub fn bounded(mut self) -> Self {
        if let Some(title) = &mut self.title {
            cut(title, 1024);
        }
        for part in &mut self.content {
            match part {
                ToolContent::Text { text } => cut(text, MAX_PART_BYTES),
                ToolContent::Diff {
                    path,
                    old_text,
                    new_text,
                } => {
                    cut(path, 4096);
                    if let Some(old) = old_text {
                        cut(old, MAX_PART_BYTES);
                    }
                    cut(new_text, MAX_PART_BYTES);
                }
                ToolContent::Terminal { terminal_id } => cut(terminal_id, 256),
            }
        }
        self.locations.truncate(64);
        for location in &mut self.locations {
            cut(&mut location.path, 4096);
        }
        if let Some(ToolProgress {
            message: Some(message),
            ..
        }) = &mut self.progress
        {
            cut(message, 1024);
        }
        self
    }
}

/// Cut `text` to at most `limit` bytes on a character boundary, marking the cut.
fn cut(text: &mut String, limit: usize) {
    if text.len() <= limit {
        return;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(" […]");
}

/// A call as a UI shows it: the fold of its updates ([`ToolCallCard::apply`]) between its start
/// and its end. Live display and replay build the same card.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ToolCallCard {
    /// The call id.
    pub id: String,
    /// The tool's name.
    pub tool_name: String,
    /// The best title so far (the tool name until a better one arrives).
    pub title: String,
    /// Where the call is.
    pub status: Option<ToolCallStatus>,
    /// The content parts, merged (see [`ToolContent`]).
    pub content: Vec<ToolContent>,
    /// The files the call is at.
    pub locations: Vec<ToolLocation>,
    /// How far it has got.
    pub progress: Option<ToolProgress>,
    /// The arguments as far as they streamed (then the final ones).
    pub input: Option<Value>,
    /// Bytes of text the card holds (bounded by [`MAX_CARD_BYTES`]).
    bytes: usize,
    /// Whether text was dropped for the bound.
    clipped: bool,
}

impl ToolCallCard {
    /// The card of call `id` of `tool_name`, titled with the tool's name.
    pub fn new(id: impl Into<String>, tool_name: impl Into<String>) -> Self {
        let tool_name = tool_name.into();
        ToolCallCard {
            id: id.into(),
            title: tool_name.clone(),
            tool_name,
            ..ToolCallCard::default()
        }
    }

    /// Fold `update` into the card.
    pub fn apply(&mut self, update: &ToolCallUpdate) {
        if let Some(title) = update.title.as_ref().filter(|t| !t.is_empty()) {
            self.title.clone_from(title);
        }
        if let Some(status) = update.status {
            self.status = Some(status);
        }
        if let Some(input) = &update.partial_input {
            self.input = Some(input.clone());
        }
        if !update.locations.is_empty() {
            self.locations.clone_from(&update.locations);
        }
        if let Some(progress) = &update.progress {
            self.progress = Some(progress.clone());
        }
        for part in &update.content {
            self.add(part);
        }
    }

    /// Whether text was dropped because the card reached [`MAX_CARD_BYTES`].
    pub fn clipped(&self) -> bool {
        self.clipped
    }

    fn add(&mut self, part: &ToolContent) {
        match part {
            ToolContent::Text { text } => {
                let room = MAX_CARD_BYTES.saturating_sub(self.bytes);
                let mut text = text.clone();
                if text.len() > room {
                    self.clipped = true;
                    cut(&mut text, room);
                }
                self.bytes += text.len();
                match self.content.last_mut() {
                    Some(ToolContent::Text { text: last }) => last.push_str(&text),
                    _ => self.content.push(ToolContent::Text { text }),
                }
            }
            ToolContent::Diff { path, .. } => {
                let same = self
                    .content
                    .iter()
                    .position(|p| matches!(p, ToolContent::Diff { path: p, .. } if p == path));
                match same {
                    Some(index) => {
                        if let Some(slot) = self.content.get_mut(index) {
                            *slot = part.clone();
                        }
                    }
                    None => self.content.push(part.clone()),
                }
            }
            ToolContent::Terminal { .. } => {
                if !self.content.contains(part) {
                    self.content.push(part.clone());
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_appends_and_a_diff_of_the_same_path_replaces() {
        let mut card = ToolCallCard::new("c1", "edit_file");
        card.apply(&ToolCallUpdate::text("a"));
        card.apply(&ToolCallUpdate::text("b"));
        card.apply(&ToolCallUpdate::diff("x", None, "1"));
        card.apply(&ToolCallUpdate::diff("x", None, "12"));
        card.apply(&ToolCallUpdate::title("Edit x"));
        assert_eq!(card.title, "Edit x");
        assert_eq!(
            card.content,
            vec![
                ToolContent::Text { text: "ab".into() },
                ToolContent::Diff {
                    path: "x".into(),
                    old_text: None,
                    new_text: "12".into()
                }
            ]
        );
    }

    #[test]
    fn bounded_cuts_long_text_on_a_char_boundary() {
        let update = ToolCallUpdate::text("é".repeat(MAX_PART_BYTES)).bounded();
        let ToolContent::Text { text } = &update.content[0] else {
            unreachable!("a text update")
        };
        assert!(text.len() <= MAX_PART_BYTES + 8);
        assert!(text.ends_with("[…]"));
    }
}
