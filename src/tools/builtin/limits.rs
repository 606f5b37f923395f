//! [`OutputLimits`]: line and byte caps for what built-in tools hand back, and the cutting that
//! enforces them with an explicit marker (`[... 1234 more lines (56789 bytes) cut ...]`).

use crate::vocab::text;

/// How many bytes a built-in tool's answer for the model may take: below the tool loop's
/// default cut ([`crate::vocab::DEFAULT_TOOL_OUTPUT_LIMIT`]), so the loop never cuts one.
pub const MODEL_OUTPUT_BUDGET: usize = crate::vocab::DEFAULT_TOOL_OUTPUT_LIMIT - 2 * 1024;

/// Caps on one output: at most `max_lines` lines and `max_bytes` bytes (UTF-8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutputLimits {
    /// The most lines kept.
    pub max_lines: usize,
    /// The most bytes kept (markers not counted).
    pub max_bytes: usize,
}

impl OutputLimits {
    /// Limits of `max_lines` lines and `max_bytes` bytes (each at least 1).
    pub const fn new(max_lines: usize, max_bytes: usize) -> Self {
        OutputLimits {
            max_lines: if max_lines == 0 { 1 } else { max_lines },
            max_bytes: if max_bytes == 0 { 1 } else { max_bytes },
        }
    }
}

/// Text cut to fit [`OutputLimits`]: what was kept at the start and the end, and how much was
/// cut in between.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Truncated {
    /// The kept beginning.
    pub head: String,
    /// The kept end (empty when only the beginning is kept).
    pub tail: String,
    /// How many lines were cut, fully or partly.
    pub cut_lines: usize,
    /// How many bytes were cut.
    pub cut_bytes: usize,
}

impl Truncated {
    /// Whether anything was cut.
    pub fn is_cut(&self) -> bool {
        self.cut_bytes > 0
    }

    /// The marker for the cut, if any: `[... 12 more lines (345 bytes) cut ...]` after a kept
    /// beginning, `[... 12 lines (345 bytes) cut ...]` between a kept beginning and end.
    pub fn marker(&self) -> Option<String> {
        if !self.is_cut() {
            return None;
        }
        let more = if self.tail.is_empty() { "more " } else { "" };
        let lines = if self.cut_lines == 1 { "line" } else { "lines" };
        Some(format!(
            "[... {} {more}{lines} ({} bytes) cut ...]",
            self.cut_lines, self.cut_bytes
        ))
    }

    /// The kept text with the marker on its own line where the cut is.
    pub fn render(&self) -> String {
        let Some(marker) = self.marker() else {
            return format!("{}{}", self.head, self.tail);
        };
        let mut out = String::with_capacity(self.head.len() + marker.len() + self.tail.len() + 2);
        out.push_str(&self.head);
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&marker);
        if !self.tail.is_empty() {
            out.push('\n');
            out.push_str(&self.tail);
        }
        out
    }
}

/// Keep the beginning of `text` within `limits` (whole lines; a single first line longer than
/// the byte cap is cut at a character boundary).
pub fn truncate_head(text: &str, limits: OutputLimits) -> Truncated {
    let end = head_end(text, limits.max_lines, limits.max_bytes);
    let cut = &text[end..];
    Truncated {
        head: text[..end].to_owned(),
        tail: String::new(),
        cut_lines: count_lines(cut),
        cut_bytes: cut.len(),
    }
}

/// Keep the beginning and the end of `text` within `limits` (half the budget each), cutting
/// the middle — for command output, where the end (errors, summaries) matters most.
pub fn truncate_middle(text: &str, limits: OutputLimits) -> Truncated {
    truncate_parts(text, 0, 0, "", limits)
}

/// Like [`truncate_middle`] for text whose middle is already gone: `head`, then
/// `gone_bytes` bytes in `gone_lines` lines that were never kept, then `tail`.
pub fn truncate_parts(
    head: &str,
    gone_bytes: usize,
    gone_lines: usize,
    tail: &str,
    limits: OutputLimits,
) -> Truncated {
    let total_lines = count_lines(head) + count_lines(tail) + gone_lines;
    let total_bytes = head.len() + tail.len() + gone_bytes;
    if gone_bytes == 0 && total_lines <= limits.max_lines && total_bytes <= limits.max_bytes {
        return Truncated {
            head: format!("{head}{tail}"),
            ..Truncated::default()
        };
    }
    let head_lines = limits.max_lines.div_ceil(2);
    let head_bytes = limits.max_bytes.div_ceil(2);
    let tail_lines = limits.max_lines - head_lines;
    let tail_bytes = limits.max_bytes - head_bytes;
    let end = head_end(head, head_lines, head_bytes);
    // (kept beginning, cut text, kept end); with no separate tail, the end comes from the
    // rest of `head`, so the two never overlap.
    let (kept_head, cut, kept_tail) = if tail.is_empty() {
        let rest = &head[end..];
        let start = tail_start(rest, tail_lines, tail_bytes);
        (&head[..end], [&rest[..start], ""], &rest[start..])
    } else {
        let start = tail_start(tail, tail_lines, tail_bytes);
        (&head[..end], [&head[end..], &tail[..start]], &tail[start..])
    };
    Truncated {
        head: kept_head.to_owned(),
        tail: kept_tail.to_owned(),
        cut_lines: count_lines(cut[0]) + gone_lines + count_lines(cut[1]),
        cut_bytes: cut[0].len() + gone_bytes + cut[1].len(),
    }
}

/// Cut one line to at most `max_bytes` bytes, marking the cut: `abc[... 123 more bytes cut ...]`.
pub fn truncate_line(line: &str, max_bytes: usize) -> String {
    let cut = text::head(line, max_bytes);
    if cut.is_whole() {
        return line.to_owned();
    }
    format!("{}[... {} more bytes cut ...]", cut.head(), cut.cut_bytes())
}

/// How many lines `text` has (a last line without `\n` counts; empty text has none).
pub use crate::vocab::text::count_lines;

/// The end of the longest run of whole lines from the start within the caps
/// ([`text::head_lines`]).
fn head_end(text: &str, max_lines: usize, max_bytes: usize) -> usize {
    text::head_lines(text, max_lines, max_bytes).head_end()
}

/// The start of the longest run of whole lines at the end within the caps
/// ([`text::tail_lines`]).
fn tail_start(text: &str, max_lines: usize, max_bytes: usize) -> usize {
    text::tail_lines(text, max_lines, max_bytes).tail_start()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(n: usize) -> String {
        (1..=n).map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn text_within_limits_is_untouched() {
        let text = numbered(3);
        let cut = truncate_head(&text, OutputLimits::new(3, 1000));
        assert!(!cut.is_cut());
        assert_eq!(cut.render(), text);
        assert_eq!(
            truncate_middle(&text, OutputLimits::new(3, 1000)).render(),
            text
        );
    }

    #[test]
    fn head_cut_by_lines_says_how_many_lines_and_bytes() {
        let text = numbered(10);
        let cut = truncate_head(&text, OutputLimits::new(4, 1000));
        assert_eq!(cut.head, numbered(4));
        assert_eq!(cut.cut_lines, 6);
        assert_eq!(cut.cut_bytes, text.len() - numbered(4).len());
        assert!(
            cut.render().ends_with(&format!(
                "line 4\n[... 6 more lines ({} bytes) cut ...]",
                cut.cut_bytes
            )),
            "{}",
            cut.render()
        );
    }

    #[test]
    fn head_cut_by_bytes_keeps_whole_lines() {
        let text = numbered(10);
        let cut = truncate_head(&text, OutputLimits::new(100, 15));
        assert_eq!(cut.head, "line 1\nline 2\n");
        assert_eq!(cut.cut_lines, 8);
    }

    #[test]
    fn one_huge_line_is_cut_at_a_char_boundary() {
        let text = "é".repeat(100);
        let cut = truncate_head(&text, OutputLimits::new(10, 11));
        assert_eq!(cut.head, "é".repeat(5));
        assert_eq!(cut.cut_bytes, 190);
        assert_eq!(cut.cut_lines, 1);
        let tail = truncate_middle(&text, OutputLimits::new(10, 11));
        assert_eq!(tail.head.len() + tail.tail.len() + tail.cut_bytes, 200);
    }

    #[test]
    fn middle_cut_keeps_both_ends() {
        let text = numbered(100);
        let cut = truncate_middle(&text, OutputLimits::new(4, 10_000));
        assert_eq!(cut.head, "line 1\nline 2\n");
        assert_eq!(cut.tail, "line 99\nline 100\n");
        assert_eq!(cut.cut_lines, 96);
        assert!(
            cut.render().contains("line 2\n[... 96 lines ("),
            "{}",
            cut.render()
        );
    }

    #[test]
    fn parts_count_what_was_never_kept() {
        let cut = truncate_parts("a\nb\n", 1000, 50, "y\nz\n", OutputLimits::new(100, 10_000));
        assert_eq!(cut.head, "a\nb\n");
        assert_eq!(cut.tail, "y\nz\n");
        assert_eq!((cut.cut_lines, cut.cut_bytes), (50, 1000));
    }

    #[test]
    fn long_lines_are_marked() {
        assert_eq!(truncate_line("abcdef", 10), "abcdef");
        assert_eq!(truncate_line("abcdef", 2), "ab[... 4 more bytes cut ...]");
    }
}
