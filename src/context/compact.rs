//! The compaction tiers as plain functions over a history: stub old tool outputs (tier 1),
//! replace a run of old units by one message — a summary (tier 2) or a marker saying what
//! was dropped (tier 3). Each keeps the history wire-valid: units are whole (a call with all
//! its results), and the protected messages are never in a [`Compactable`].
//!
//! No tier edits an assistant message: one with continuation artifacts (reasoning its API
//! signed, see [`crate::vocab::artifact`]) is kept as it is or replaced together with its
//! results. Only tool results are stubbed — plain input no signature covers.

use std::fmt::Write as _;

use serde_json::Value;

use crate::context::estimate::message_bytes;
use crate::context::units::{Compactable, Unit};
use crate::vocab::{MessageContent, OpenaiChatMessage, ToolCall};

/// How a summary message starts (a resumed session recognises it).
pub const SUMMARY_PREFIX: &str = "[agcore summary of ";

/// How a drop marker starts.
pub const DROPPED_PREFIX: &str = "[agcore removed ";

/// How a tool-output stub starts.
pub const STUB_PREFIX: &str = "[output of ";

/// Tool outputs this short are not worth a stub.
const MIN_STUB_BYTES: usize = 240;

/// Whether `message` is a summary or drop marker the engine wrote.
pub fn is_marker(message: &OpenaiChatMessage) -> bool {
    match message {
        OpenaiChatMessage::User {
            content: MessageContent::Text(text),
            ..
        } => text.starts_with(SUMMARY_PREFIX) || text.starts_with(DROPPED_PREFIX),
        _ => false,
    }
}

/// What a tier did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Compacted {
    /// Messages stubbed, summarised or dropped.
    pub messages: usize,
    /// Bytes (as the estimator counts them) the history lost.
    pub bytes_saved: usize,
}

/// Tier 1: replace tool outputs of `compactable`'s units by a stub, oldest first, until
/// `need_bytes` are saved (`usize::MAX`: every one).
pub fn stub_tool_outputs(
    messages: &mut [OpenaiChatMessage],
    compactable: &Compactable,
    need_bytes: usize,
) -> Compacted {
    let mut done = Compacted::default();
    for unit in &compactable.units {
        let calls: Vec<ToolCall> = messages[unit.start].tool_calls().to_vec();
        for message in &mut messages[unit.start + 1..unit.end] {
            if done.bytes_saved >= need_bytes {
                return done;
            }
            let OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } = message
            else {
                continue;
            };
            let text = content.text();
            if text.len() < MIN_STUB_BYTES || text.starts_with(STUB_PREFIX) {
                continue;
            }
            let call = calls.iter().find(|call| call.id == *tool_call_id);
            let mut stub = stub_text(call, text.len());
            if let Some(id) = spilled_id(&text) {
                // The whole output is still on disk: say so, the model can page it again.
                stub.pop();
                stub.push_str(&format!(" or read it with read_output (id {id})]"));
            }
            if stub.len() >= text.len() {
                continue;
            }
            done.bytes_saved += text.len() - stub.len();
            done.messages += 1;
            *content = MessageContent::Text(stub);
        }
    }
    done
}

/// The id of a spilled output named by the cut marker in `text` (`kept as out_…:`).
fn spilled_id(text: &str) -> Option<&str> {
    let at = text.find("kept as out_")? + "kept as ".len();
    let id = text[at..].split(':').next()?;
    id.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_')
        .then_some(id)
}

/// `[output of read_file(path=src/main.rs) removed to save context: 12,345 bytes; call the
/// tool again if needed]`.
pub fn stub_text(call: Option<&ToolCall>, bytes: usize) -> String {
    let what = match call {
        Some(call) => format!(
            "{}({})",
            call.function.name,
            short_arguments(&call.function.arguments)
        ),
        None => "a tool call".to_owned(),
    };
    format!(
        "{STUB_PREFIX}{what} removed to save context: {} bytes; call the tool again if needed]",
        thousands(bytes)
    )
}

/// `path=src/main.rs, limit=10`, at most about 80 bytes.
fn short_arguments(arguments: &str) -> String {
    let mut text = String::new();
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(map)) => {
            // Keys sorted: the same stub whatever order serde_json's map keeps.
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            for (index, (key, value)) in entries.into_iter().enumerate() {
                if index > 0 {
                    text.push_str(", ");
                }
                match value {
                    Value::String(value) => {
                        let _ = write!(text, "{key}={value}");
                    }
                    other => {
                        let _ = write!(text, "{key}={other}");
                    }
                }
            }
        }
        _ => text.push_str(arguments),
    }
    cut(&text, 80)
}

fn cut(text: &str, max: usize) -> String {
    let cut = crate::vocab::text::head(text, max);
    if cut.is_whole() {
        return text.to_owned();
    }
    format!("{}…", cut.head())
}

/// `12345` → `12,345`.
pub fn thousands(value: usize) -> String {
    let digits = value.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// The oldest units of `compactable` whose bytes reach `need_bytes` (all of them if they do
/// not); with `contiguous`, only from the first run of adjacent units (one summary replaces
/// one run).
pub fn select(
    messages: &[OpenaiChatMessage],
    compactable: &Compactable,
    need_bytes: usize,
    contiguous: bool,
) -> Vec<Unit> {
    let mut selected: Vec<Unit> = Vec::new();
    let mut bytes = 0;
    for unit in &compactable.units {
        if bytes >= need_bytes {
            break;
        }
        if contiguous && selected.last().is_some_and(|last| last.end != unit.start) {
            break;
        }
        bytes += messages[unit.start..unit.end]
            .iter()
            .map(message_bytes)
            .sum::<usize>();
        selected.push(*unit);
    }
    selected
}

/// Replace each run of adjacent `selected` units by the one message `replace` makes of it;
/// `committed` follows. Returns what was removed.
pub fn replace_runs(
    messages: &mut Vec<OpenaiChatMessage>,
    committed: &mut usize,
    selected: &[Unit],
    mut replace: impl FnMut(&[OpenaiChatMessage]) -> OpenaiChatMessage,
) -> Compacted {
    let mut runs: Vec<(usize, usize)> = Vec::new();
    for unit in selected {
        match runs.last_mut() {
            Some((_, end)) if *end == unit.start => *end = unit.end,
            _ => runs.push((unit.start, unit.end)),
        }
    }
    let mut done = Compacted::default();
    // From the last run back, so earlier positions stay valid.
    for &(start, end) in runs.iter().rev() {
        let removed: Vec<OpenaiChatMessage> = messages.drain(start..end).collect();
        let message = replace(&removed);
        let before: usize = removed.iter().map(message_bytes).sum();
        done.bytes_saved += before.saturating_sub(message_bytes(&message));
        done.messages += removed.len();
        messages.insert(start, message);
        if start < *committed {
            *committed = committed.saturating_sub(removed.len()) + 1;
        }
    }
    done
}

/// The tier 3 marker for `removed`.
pub fn dropped_marker(removed: &[OpenaiChatMessage]) -> OpenaiChatMessage {
    let calls: usize = removed.iter().map(|m| m.tool_calls().len()).sum();
    let tools: Vec<&str> = {
        let mut names: Vec<&str> = removed
            .iter()
            .flat_map(|m| m.tool_calls().iter().map(|c| c.function.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names
    };
    let mut text = format!(
        "{DROPPED_PREFIX}{} earlier messages here to save context",
        removed.len()
    );
    if calls > 0 {
        let _ = write!(
            text,
            ", among them {calls} tool calls ({})",
            cut(&tools.join(", "), 120)
        );
    }
    text.push_str("; ask the user or call tools again if you need what they said]");
    OpenaiChatMessage::user_text(text)
}

/// The tier 2 message: `summary` of `count` messages.
pub fn summary_message(count: usize, summary: &str) -> OpenaiChatMessage {
    OpenaiChatMessage::user_text(format!(
        "{SUMMARY_PREFIX}{count} earlier messages, written to save context]\n{}",
        summary.trim()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::units::check_wire;

    fn session(turns: usize) -> Vec<OpenaiChatMessage> {
        let mut messages = vec![
            OpenaiChatMessage::system("system"),
            OpenaiChatMessage::user_text("task"),
        ];
        for turn in 0..turns {
            let id = format!("call_{turn}");
            messages.push(OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new(
                    &id,
                    "read_file",
                    format!(r#"{{"path":"src/{turn}.rs"}}"#),
                )],
            ));
            messages.push(OpenaiChatMessage::tool_result(&id, "x".repeat(1_000)));
        }
        messages.push(OpenaiChatMessage::assistant_text("done"));
        messages
    }

    #[test]
    fn stubs_name_the_call_and_the_size() {
        let mut messages = session(4);
        let compactable = Compactable::of(&messages, messages.len(), 2);
        let done = stub_tool_outputs(&mut messages, &compactable, 1);
        assert_eq!(done.messages, 1);
        assert_eq!(
            messages[3].text().as_deref(),
            Some(
                "[output of read_file(path=src/0.rs) removed to save context: 1,000 bytes; call the tool again if needed]"
            )
        );
        // The newest turns keep their outputs.
        assert_eq!(messages[9].text().map(|t| t.len()), Some(1_000));
        let all = stub_tool_outputs(&mut messages, &compactable, usize::MAX);
        assert_eq!(all.messages, 2);
        assert!(check_wire(&messages).is_ok());
    }

    #[test]
    fn dropped_runs_become_one_marker_and_committed_follows() {
        let mut messages = session(5);
        let mut committed = messages.len();
        let compactable = Compactable::of(&messages, committed, 2);
        let selected = select(&messages, &compactable, 2_000, false);
        assert_eq!(selected.len(), 2);
        let done = replace_runs(&mut messages, &mut committed, &selected, dropped_marker);
        assert_eq!(done.messages, 4);
        assert_eq!(committed, messages.len());
        assert!(is_marker(&messages[2]));
        assert!(
            messages[2]
                .text()
                .unwrap_or_default()
                .contains("2 tool calls (read_file)")
        );
        assert!(check_wire(&messages).is_ok());
        // The task survives: the marker is not the newest user message.
        let again = Compactable::of(&messages, committed, 2);
        assert!(again.units.iter().all(|u| u.start != 1));
    }

    #[test]
    fn thousands_separators() {
        assert_eq!(thousands(12_345), "12,345");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000_000), "1,000,000");
    }
}
