//! Tool calls as cards in `agcore chat`: the title line that improves while a call streams in
//! and runs, a diff under an edit when it finishes, and the calls of a reopened session drawn
//! again from what the session stored (`agcore::run::replay::replay_with_updates`).
//!
//! Everything shown came from a model or a tool: escaped for the terminal
//! (`agcore::display`), and cut ([`MAX_DIFF_LINES`]).

use std::collections::HashMap;

use agcore::display::escape_for_terminal;
use agcore::llm::{OpenaiChatMessage, StreamEvent};
use agcore::session::StoredCallUpdate;
use agcore::tools::{ToolCallCard, ToolContent};
use similar::{ChangeTag, TextDiff};

/// The most changed lines shown of one diff.
pub const MAX_DIFF_LINES: usize = 40;

/// The lines showing `path`'s change from `old` to `new` (`old` `None`: a new file): the
/// changed lines only, `-`/`+` marked (red/green when `color`), at most [`MAX_DIFF_LINES`].
pub fn diff_lines(path: &str, old: Option<&str>, new: &str, color: bool) -> Vec<String> {
    let old = old.unwrap_or_default();
    let diff = TextDiff::from_lines(old, new);
    let (mut added, mut removed) = (0usize, 0usize);
    let mut lines = Vec::new();
    for change in diff.iter_all_changes() {
        let (sign, paint) = match change.tag() {
            ChangeTag::Equal => continue,
            ChangeTag::Delete => {
                removed += 1;
                ('-', "\x1b[31m")
            }
            ChangeTag::Insert => {
                added += 1;
                ('+', "\x1b[32m")
            }
        };
        if lines.len() < MAX_DIFF_LINES {
            let text = escape_for_terminal(change.value().trim_end_matches('\n'));
            lines.push(if color {
                format!("  {paint}{sign} {text}\x1b[0m")
            } else {
                format!("  {sign} {text}")
            });
        }
    }
    let shown = lines.len();
    if added + removed > shown {
        lines.push(format!(
            "  … {} more changed lines",
            added + removed - shown
        ));
    }
    lines.insert(
        0,
        format!("  {} (+{added} −{removed})", escape_for_terminal(path)),
    );
    lines
}

/// The diffs on `card`, as lines.
pub fn card_diffs(card: &ToolCallCard, color: bool) -> Vec<String> {
    card.content
        .iter()
        .filter_map(|part| match part {
            ToolContent::Diff {
                path,
                old_text,
                new_text,
            } => Some(diff_lines(path, old_text.as_deref(), new_text, color)),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Draw the calls of a reopened session: each call's final title and status, and its diffs.
/// Returns how many calls were drawn.
pub fn replay(history: &[OpenaiChatMessage], stored: &[StoredCallUpdate], color: bool) -> usize {
    let lines = replay_lines(history, stored, color);
    for line in &lines.1 {
        eprintln!("{line}");
    }
    lines.0
}

/// What [`replay`] prints: the number of calls and the lines.
pub fn replay_lines(
    history: &[OpenaiChatMessage],
    stored: &[StoredCallUpdate],
    color: bool,
) -> (usize, Vec<String>) {
    let mut cards: HashMap<String, ToolCallCard> = HashMap::new();
    let mut lines = Vec::new();
    let mut calls = 0;
    for event in agcore::run::replay::replay_with_updates(history, stored) {
        match event {
            StreamEvent::ToolExecutionStarted { id, tool_name, .. } => {
                cards.insert(id.clone(), ToolCallCard::new(id, tool_name));
            }
            StreamEvent::ToolCallUpdate { id, update } => {
                if let Some(card) = cards.get_mut(&id) {
                    card.apply(&update);
                }
            }
            StreamEvent::ToolExecutionCompleted { id, is_error, .. } => {
                let Some(card) = cards.remove(&id) else {
                    continue;
                };
                calls += 1;
                let mark = if is_error { '✗' } else { '✓' };
                lines.push(format!("{mark} {}", escape_for_terminal(&card.title)));
                lines.extend(card_diffs(&card, color));
            }
            _ => {}
        }
    }
    (calls, lines)
}

#[cfg(test)]
mod tests {
    use super::*;
    use agcore::tools::ToolCallUpdate;
    use agcore::vocab::ToolCall;

    #[test]
    fn a_diff_shows_the_changed_lines_escaped_and_bounded() {
        let lines = diff_lines("a.txt", Some("one\ntwo\n"), "one\n2\x1b[2J\n", false);
        assert_eq!(lines[0], "  a.txt (+1 −1)");
        assert_eq!(lines[1], "  - two");
        assert!(!lines[2].contains('\x1b'), "{lines:?}");
        let many: String = (0..100).map(|i| format!("{i}\n")).collect();
        let lines = diff_lines("b", None, &many, false);
        assert_eq!(lines.len(), 1 + MAX_DIFF_LINES + 1);
        assert!(lines.last().unwrap().contains("60 more"));
    }

    #[test]
    fn a_reopened_sessions_call_is_drawn_with_its_title_status_and_diff() {
        let history = [
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c1", "edit_file", "{}")],
            ),
            OpenaiChatMessage::tool_result("c1", "Edited a.txt"),
        ];
        let stored = [StoredCallUpdate {
            call_id: "c1".into(),
            update: ToolCallUpdate::diff("a.txt", Some("x\n".into()), "y\n")
                .with_title("Edit a.txt"),
        }];
        let (calls, lines) = replay_lines(&history, &stored, false);
        assert_eq!(calls, 1);
        assert_eq!(lines, ["✓ Edit a.txt", "  a.txt (+1 −1)", "  - x", "  + y"]);
    }
}
