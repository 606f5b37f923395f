//! [`ToolAnswer`]: what a tool message tells the model, and whether it reports a failure.

use serde::{Deserialize, Serialize};

use crate::vocab::text;

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

/// `answer` with its text cut for the model (see [`truncate_for_model`]).
pub(crate) fn truncate_answer(answer: ToolAnswer, limit: usize) -> ToolAnswer {
    ToolAnswer {
        content: truncate_for_model(answer.content, limit),
        is_error: answer.is_error,
    }
}

/// Cut `content` to about `limit` bytes for the model: its beginning (half the limit) and its
/// end (a quarter), cut at line boundaries when lines are short
/// ([`text::cut_middle_lines`]), with a marker in between saying exactly what was removed —
/// the byte and line range — and how to see it.
pub(crate) fn truncate_for_model(content: String, limit: usize) -> String {
    if content.len() <= limit {
        return content;
    }
    let cut = text::cut_middle_lines(&content, limit / 2, limit / 4);
    let (head, removed) = (cut.head(), cut.removed());
    let first_line = head.matches('\n').count() + 1;
    let last_line =
        first_line + removed.matches('\n').count() - usize::from(removed.ends_with('\n'));
    let lines = if first_line == last_line {
        format!("line {first_line}")
    } else {
        format!("lines {first_line}-{last_line}")
    };
    let newline = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!(
        "{head}{newline}[... {} bytes cut here: bytes {}-{} of {} ({lines} of this output); the \
         output was longer than the tool output limit of {limit} bytes; re-run with narrower \
         arguments (e.g. an offset, a limit or a filter) to see them ...]\n{}",
        cut.cut_bytes(),
        cut.head_end() + 1,
        cut.tail_start(),
        content.len(),
        cut.tail(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn long_output_is_cut_with_a_marker_and_keeps_head_and_tail() {
        let content = format!("HEAD{}TAIL", "é".repeat(10_000));
        let cut = truncate_for_model(content, 1_000);
        assert!(cut.starts_with("HEAD") && cut.ends_with("TAIL"));
        assert!(cut.contains("bytes cut here"));
        assert!(cut.len() < 1_200);
        assert_eq!(truncate_for_model("short".into(), 1_000), "short");
    }

    #[test]
    fn the_cut_marker_says_exactly_which_bytes_and_lines_were_removed() {
        let content: String = (1..=1000).map(|i| format!("line {i:04}\n")).collect();
        // Each line is 10 bytes: line N spans bytes (N-1)*10 .. N*10.
        let cut = truncate_for_model(content.clone(), 1_000);
        let (head, rest) = cut.split_once("[... ").unwrap();
        let (marker, tail) = rest.split_once(" ...]\n").unwrap();
        assert!(
            content.starts_with(head) && content.ends_with(tail),
            "{cut}"
        );
        let removed_from = head.len() + 1;
        let removed_to = content.len() - tail.len();
        let first_line = head.matches('\n').count() + 1;
        let last_line = content[..removed_to].matches('\n').count();
        assert!(
            marker.contains(&format!(
                "bytes {removed_from}-{removed_to} of {}",
                content.len()
            )),
            "{marker}"
        );
        assert!(
            marker.contains(&format!("lines {first_line}-{last_line}")),
            "{marker}"
        );
        assert!(marker.contains("narrower arguments"), "{marker}");
        // The head ends and the tail starts on whole lines when lines are short.
        assert!(head.ends_with("line 0050\n"), "{head}");
        assert!(tail.starts_with("line "), "{tail}");
        assert!(cut.len() <= 1_000 + 200, "{}", cut.len());
    }
}
