//! Cutting text to a budget without splitting a character: keep the head, or the head and the
//! tail, by bytes, characters or whole lines. Every function returns a [`Cut`], which says
//! exactly what was kept and what was cut (bytes, characters, lines); the markers that tell a
//! reader about the cut are the callers' own, since each says something different.
//!
//! ```
//! use agcore::vocab::text;
//!
//! let cut = text::head_tail("héllo, wörld", 4, 3);
//! assert_eq!((cut.head(), cut.removed(), cut.tail()), ("hél", "lo, wö", "rld"));
//! assert_eq!((cut.cut_bytes(), cut.cut_chars()), (7, 6));
//! assert!(text::head("short", 10).is_whole());
//! ```

/// Where a text was cut: `text[..head_end]` is kept, `text[head_end..tail_start]` is cut,
/// `text[tail_start..]` is kept. Both points are character boundaries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut<'a> {
    text: &'a str,
    head_end: usize,
    tail_start: usize,
}

impl<'a> Cut<'a> {
    /// Nothing cut: all of `text` is the head.
    pub fn whole(text: &'a str) -> Self {
        Cut {
            text,
            head_end: text.len(),
            tail_start: text.len(),
        }
    }

    /// A cut at `head_end`..`tail_start`, both moved onto character boundaries (the head's
    /// end down, the tail's start up) and kept in order.
    fn at(text: &'a str, head_end: usize, tail_start: usize) -> Self {
        let head_end = text.floor_char_boundary(head_end.min(text.len()));
        let tail_start = text
            .ceil_char_boundary(tail_start.min(text.len()))
            .max(head_end);
        Cut {
            text,
            head_end,
            tail_start,
        }
    }

    /// The text that was cut.
    pub fn text(&self) -> &'a str {
        self.text
    }

    /// The kept beginning.
    pub fn head(&self) -> &'a str {
        &self.text[..self.head_end]
    }

    /// The part cut out.
    pub fn removed(&self) -> &'a str {
        &self.text[self.head_end..self.tail_start]
    }

    /// The kept end (empty when only the beginning is kept).
    pub fn tail(&self) -> &'a str {
        &self.text[self.tail_start..]
    }

    /// The byte where the head ends (and the cut starts).
    pub fn head_end(&self) -> usize {
        self.head_end
    }

    /// The byte where the tail starts (and the cut ends).
    pub fn tail_start(&self) -> usize {
        self.tail_start
    }

    /// Whether nothing was cut.
    pub fn is_whole(&self) -> bool {
        self.head_end == self.tail_start
    }

    /// Bytes cut.
    pub fn cut_bytes(&self) -> usize {
        self.tail_start - self.head_end
    }

    /// Characters cut.
    pub fn cut_chars(&self) -> usize {
        self.removed().chars().count()
    }

    /// Lines the cut touches, fully or partly (a last line without `\n` counts).
    pub fn cut_lines(&self) -> usize {
        count_lines(self.removed())
    }

    /// Bytes kept (head and tail).
    pub fn kept_bytes(&self) -> usize {
        self.text.len() - self.cut_bytes()
    }
}

/// How many lines `text` has (a last line without `\n` counts; empty text has none).
pub fn count_lines(text: &str) -> usize {
    text.split_inclusive('\n').count()
}

/// The first at most `max_bytes` bytes of `text`, cut at a character boundary.
pub fn head(text: &str, max_bytes: usize) -> Cut<'_> {
    if text.len() <= max_bytes {
        return Cut::whole(text);
    }
    Cut::at(text, max_bytes, text.len())
}

/// The first at most `head_bytes` and the last at most `tail_bytes` bytes of `text` (what the
/// head leaves of its budget at a character boundary goes to the tail): whole when it fits in
/// `head_bytes + tail_bytes`.
pub fn head_tail(text: &str, head_bytes: usize, tail_bytes: usize) -> Cut<'_> {
    let budget = head_bytes.saturating_add(tail_bytes);
    if text.len() <= budget {
        return Cut::whole(text);
    }
    let head_end = text.floor_char_boundary(head_bytes);
    Cut::at(text, head_end, text.len() - (budget - head_end))
}

/// The first `head_chars` and the last `tail_chars` characters of `text`: whole when it has at
/// most `head_chars + tail_chars`.
pub fn head_tail_chars(text: &str, head_chars: usize, tail_chars: usize) -> Cut<'_> {
    let count = text.chars().count();
    if count <= head_chars.saturating_add(tail_chars) {
        return Cut::whole(text);
    }
    let at = |nth: usize| {
        text.char_indices()
            .nth(nth)
            .map_or(text.len(), |(at, _)| at)
    };
    Cut::at(text, at(head_chars), at(count - tail_chars))
}

/// The first about `head_bytes` and the last about `tail_bytes` bytes of `text`, cut in the
/// middle at line starts when lines are short: the head ends at the start of its last line
/// unless that loses more than half of it, the tail starts at the next line start unless that
/// loses more than half of it (then each is cut at a character boundary). Never more than
/// `head_bytes + tail_bytes` kept; whole when the text fits in that.
pub fn cut_middle_lines(text: &str, head_bytes: usize, tail_bytes: usize) -> Cut<'_> {
    if text.len() <= head_bytes.saturating_add(tail_bytes) {
        return Cut::whole(text);
    }
    let head_end = line_start_at_or_before(text, head_bytes);
    let tail_start = line_start_at_or_after(text, text.len() - tail_bytes);
    Cut::at(text, head_end, tail_start)
}

/// The longest run of whole lines from the start of `text` within `max_lines` and
/// `max_bytes`; a first line longer than `max_bytes` is cut at a character boundary.
pub fn head_lines(text: &str, max_lines: usize, max_bytes: usize) -> Cut<'_> {
    let mut end = 0;
    for (taken, line) in text.split_inclusive('\n').enumerate() {
        if taken == max_lines {
            break;
        }
        if end + line.len() > max_bytes {
            if taken == 0 {
                end = text.floor_char_boundary(max_bytes);
            }
            break;
        }
        end += line.len();
    }
    Cut::at(text, end, text.len())
}

/// The longest run of whole lines at the end of `text` within `max_lines` and `max_bytes`; a
/// last line longer than `max_bytes` is cut at a character boundary.
pub fn tail_lines(text: &str, max_lines: usize, max_bytes: usize) -> Cut<'_> {
    let mut start = text.len();
    for (taken, line) in text.split_inclusive('\n').rev().enumerate() {
        if taken == max_lines {
            break;
        }
        if text.len() - start + line.len() > max_bytes {
            if taken == 0 {
                start = text.ceil_char_boundary(text.len() - max_bytes);
            }
            break;
        }
        start -= line.len();
    }
    Cut::at(text, 0, start)
}

/// `index` (clamped, moved down to a character boundary) moved back to the start of its line,
/// unless that loses more than half the text before it.
fn line_start_at_or_before(text: &str, index: usize) -> usize {
    let index = text.floor_char_boundary(index.min(text.len()));
    match text[..index].rfind('\n') {
        Some(newline) if newline + 1 >= index / 2 => newline + 1,
        _ => index,
    }
}

/// `index` (clamped, moved up to a character boundary) moved forward to the start of the next
/// line, unless it is one already or that loses more than half the text after it.
fn line_start_at_or_after(text: &str, index: usize) -> usize {
    let index = text.ceil_char_boundary(index.min(text.len()));
    if index == 0 || text.as_bytes()[index - 1] == b'\n' {
        return index;
    }
    match text[index..].find('\n') {
        Some(newline) if newline < (text.len() - index) / 2 => index + newline + 1,
        _ => index,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    /// The invariants every cut keeps: boundaries on characters, in order, exact counts, and
    /// the pieces put back together are the text.
    fn check(cut: &Cut<'_>, text: &str) {
        assert!(text.is_char_boundary(cut.head_end()));
        assert!(text.is_char_boundary(cut.tail_start()));
        assert!(cut.head_end() <= cut.tail_start() && cut.tail_start() <= text.len());
        assert_eq!(
            format!("{}{}{}", cut.head(), cut.removed(), cut.tail()),
            text
        );
        assert_eq!(cut.cut_bytes(), cut.removed().len());
        assert_eq!(cut.kept_bytes(), cut.head().len() + cut.tail().len());
        assert_eq!(
            cut.cut_chars(),
            text.chars().count() - cut.head().chars().count() - cut.tail().chars().count()
        );
        assert_eq!(cut.is_whole(), cut.cut_bytes() == 0);
    }

    /// Text with 1- to 4-byte characters and short and long lines.
    fn texts() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("a".to_owned()),
                Just("é".to_owned()),
                Just("€".to_owned()),
                Just("🦀".to_owned()),
                Just("\n".to_owned()),
                "[a-z]{0,30}\n",
            ],
            0..80,
        )
        .prop_map(|parts| parts.concat())
    }

    proptest! {
        #[test]
        fn head_is_a_prefix_within_the_limit(text in texts(), max in 0usize..200) {
            let cut = head(&text, max);
            check(&cut, &text);
            prop_assert!(cut.kept_bytes() <= max || cut.is_whole());
            prop_assert!(cut.tail().is_empty());
            // As long as possible: the next character would not fit.
            if !cut.is_whole() {
                let next = cut.removed().chars().next().unwrap();
                prop_assert!(cut.head_end() + next.len_utf8() > max);
            }
        }

        #[test]
        fn head_tail_keeps_at_most_its_budget(text in texts(), h in 0usize..100, t in 0usize..100) {
            let cut = head_tail(&text, h, t);
            check(&cut, &text);
            prop_assert!(cut.is_whole() == (text.len() <= h + t));
            if !cut.is_whole() {
                prop_assert!(cut.head().len() <= h);
                prop_assert!(cut.kept_bytes() <= h + t);
            }
        }

        #[test]
        fn head_tail_chars_counts_characters(text in texts(), h in 0usize..60, t in 0usize..60) {
            let cut = head_tail_chars(&text, h, t);
            check(&cut, &text);
            let count = text.chars().count();
            if count > h + t {
                prop_assert_eq!(cut.head().chars().count(), h);
                prop_assert_eq!(cut.tail().chars().count(), t);
                prop_assert_eq!(cut.cut_chars(), count - h - t);
            } else {
                prop_assert!(cut.is_whole());
            }
        }

        #[test]
        fn cut_middle_lines_stays_within_the_limit(text in texts(), h in 0usize..200, t in 0usize..200) {
            let cut = cut_middle_lines(&text, h, t);
            check(&cut, &text);
            if text.len() > h + t {
                prop_assert!(cut.head().len() <= h);
                prop_assert!(cut.tail().len() <= t);
            } else {
                prop_assert!(cut.is_whole());
            }
        }

        #[test]
        fn line_cuts_keep_whole_lines_within_the_caps(text in texts(), lines in 1usize..10, max in 1usize..200) {
            let cut = head_lines(&text, lines, max);
            check(&cut, &text);
            prop_assert!(cut.head().len() <= max);
            prop_assert!(count_lines(cut.head()) <= lines);
            let cut = tail_lines(&text, lines, max);
            check(&cut, &text);
            prop_assert!(cut.tail().len() <= max);
            prop_assert!(count_lines(cut.tail()) <= lines);
            prop_assert!(cut.head().is_empty());
        }
    }

    #[test]
    fn middle_cuts_fall_on_line_starts_when_lines_are_short() {
        let text: String = (1..=100).map(|i| format!("line {i:03}\n")).collect();
        let cut = cut_middle_lines(&text, 95, 45);
        // Lines are 9 bytes: the head's budget ends inside line 11, the tail's at line 96.
        assert!(cut.head().ends_with("line 010\n"), "{}", cut.head());
        assert!(cut.tail().starts_with("line 096\n"), "{}", cut.tail());
        assert_eq!(cut.cut_lines(), 85);
    }

    #[test]
    fn a_long_line_is_cut_at_a_character_boundary() {
        let text = "é".repeat(100);
        let cut = cut_middle_lines(&text, 11, 11);
        assert_eq!(
            (cut.head(), cut.tail()),
            ("é".repeat(5).as_str(), "é".repeat(5).as_str())
        );
        assert_eq!(
            (cut.cut_bytes(), cut.cut_chars(), cut.cut_lines()),
            (180, 90, 1)
        );
    }
}
