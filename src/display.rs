//! Text from a model, an MCP server or a tool, made safe to print on a terminal.
//!
//! A terminal obeys escape sequences (`ESC [ 2K` erases the line, `ESC [ 8m` hides text) and
//! renders bidi overrides and invisible characters, so raw text can rewrite or hide what the
//! user is shown — an approval question included. Everything here makes such characters
//! visible as escapes (`\x1b`, `\u{202e}`) instead.
//!
//! - [`escape_for_terminal`]: one line, unambiguous — newlines and tabs become `\n` and `\t`,
//!   a backslash becomes `\\`, so the escapes can never be forged by literal text. For
//!   approval questions, tool names and arguments.
//! - [`escape_keeping_lines`]: multi-line text (answers, descriptions, error texts) — newlines
//!   and tabs stay, every other control, bidi or invisible character is escaped.
//! - [`head_and_tail`]: a huge text as its head and tail around a marker naming what was left
//!   out, so what follows the cut is never hidden.

use std::borrow::Cow;
use std::fmt::Write as _;

/// Whether `c` could change or hide what a terminal shows: C0 and C1 controls and DEL, bidi
/// embeddings/overrides/isolates and marks, zero-width and other invisible format characters,
/// line/paragraph separators, tag characters and variation selectors.
pub fn is_unsafe_for_terminal(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        // Soft hyphen, combining grapheme joiner, Arabic letter mark, Mongolian vowel separator.
        | '\u{ad}' | '\u{34f}' | '\u{61c}' | '\u{180e}'
        // Hangul fillers: render as blank space.
        | '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}'
        // Zero-width space/joiners, LRM/RLM, line/paragraph separators, bidi embeddings and
        // overrides (U+202A–202E), word joiner and invisible operators, bidi isolates
        // (U+2066–2069), deprecated format characters.
        | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{206f}'
        // Variation selectors, BOM / zero-width no-break space, interlinear annotations.
        | '\u{fe00}'..='\u{fe0f}' | '\u{feff}' | '\u{fff9}'..='\u{fffb}'
        // Tag characters, variation selectors supplement.
        | '\u{e0000}'..='\u{e007f}' | '\u{e0100}'..='\u{e01ef}'
        // The remaining format (Cf) characters: Arabic and Syriac number/abbreviation marks,
        // Khmer inherent vowels, Kaithi, Egyptian, shorthand and musical format controls.
        | '\u{600}'..='\u{605}' | '\u{6dd}' | '\u{70f}' | '\u{890}'..='\u{891}' | '\u{8e2}'
        | '\u{17b4}'..='\u{17b5}' | '\u{110bd}' | '\u{110cd}' | '\u{13430}'..='\u{1343f}'
        | '\u{1bca0}'..='\u{1bca3}' | '\u{1d173}'..='\u{1d17a}'
    )
}

/// `text` on one line with every unsafe character (see [`is_unsafe_for_terminal`]) escaped:
/// `\n`, `\r`, `\t`, `\x1b` for ASCII controls, `\u{202e}` for the others, and `\\` for a
/// backslash so that literal text cannot imitate an escape. Borrowed when nothing changed.
pub fn escape_for_terminal(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` with newlines and tabs kept and every other unsafe character escaped as in
/// [`escape_for_terminal`] (backslashes stay as they are). For multi-line text.
pub fn escape_keeping_lines(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

fn escape(text: &str, keep_lines: bool) -> Cow<'_, str> {
    let needs = |c: char| {
        if keep_lines {
            c != '\n' && c != '\t' && is_unsafe_for_terminal(c)
        } else {
            c == '\\' || is_unsafe_for_terminal(c)
        }
    };
    let Some(first) = text.find(needs) else {
        return Cow::Borrowed(text);
    };
    let mut out = String::with_capacity(text.len() + 16);
    out.push_str(&text[..first]);
    for c in text[first..].chars() {
        if !needs(c) {
            out.push(c);
            continue;
        }
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x80 => {
                let _ = write!(out, "\\x{:02x}", u32::from(c));
            }
            c => {
                let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
            }
        }
    }
    Cow::Owned(out)
}

/// `text` whole when it has at most `head + tail` characters; else its first `head` and last
/// `tail` characters around a marker `… N more chars …`, so the end is always shown.
pub fn head_and_tail(text: &str, head: usize, tail: usize) -> Cow<'_, str> {
    let cut = crate::vocab::text::head_tail_chars(text, head, tail);
    if cut.is_whole() {
        return Cow::Borrowed(text);
    }
    Cow::Owned(format!(
        "{} … {} more chars … {}",
        cut.head(),
        cut.cut_chars(),
        cut.tail()
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_issues_attacks_are_made_visible() {
        assert_eq!(
            escape_for_terminal("a\x1b[2K\x1b[1Gb"),
            "a\\x1b[2K\\x1b[1Gb"
        );
        assert_eq!(escape_for_terminal("\x1b[8mhidden"), "\\x1b[8mhidden");
        assert_eq!(escape_for_terminal("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(escape_for_terminal("a\nb\tc\rd"), "a\\nb\\tc\\rd");
        assert_eq!(escape_for_terminal("\u{9b}31m"), "\\u{9b}31m");
        assert_eq!(escape_for_terminal("x\u{7f}"), "x\\x7f");
    }

    #[test]
    fn literal_escapes_cannot_be_forged() {
        assert_eq!(escape_for_terminal(r"a\x1b"), r"a\\x1b");
        assert_eq!(escape_keeping_lines(r"a\x1b"), r"a\x1b");
    }

    #[test]
    fn invisible_characters_are_shown() {
        for c in [
            '\u{200b}',
            '\u{200d}',
            '\u{2066}',
            '\u{2069}',
            '\u{feff}',
            '\u{e0041}',
            '\u{2028}',
            '\u{fe0f}',
            '\u{ad}',
        ] {
            let shown = escape_for_terminal(&c.to_string()).into_owned();
            assert_eq!(shown, format!("\\u{{{:x}}}", u32::from(c)));
        }
    }

    #[test]
    fn plain_text_is_borrowed_and_lines_can_be_kept() {
        assert!(matches!(
            escape_for_terminal("ls -la ü 日本"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escape_keeping_lines("a\nb\tc\x1b[0m"), "a\nb\tc\\x1b[0m");
    }

    #[test]
    fn head_and_tail_keeps_the_end_and_counts_what_it_left_out() {
        assert_eq!(head_and_tail("abcdef", 3, 3), "abcdef");
        assert_eq!(head_and_tail("abcdefgh", 2, 3), "ab … 3 more chars … fgh");
        assert_eq!(head_and_tail("ééééé", 1, 1), "é … 3 more chars … é");
    }

    proptest! {
        #[test]
        fn escaped_text_holds_no_unsafe_character(text in any::<String>()) {
            let line = escape_for_terminal(&text);
            prop_assert!(!line.chars().any(is_unsafe_for_terminal));
            let lines = escape_keeping_lines(&text);
            prop_assert!(!lines.chars().any(|c| c != '\n' && c != '\t' && is_unsafe_for_terminal(c)));
        }

        #[test]
        fn escaping_is_reversible_in_one_line_mode(text in "[a-z\\\\\n\t\u{1b}\u{202e} ]{0,40}") {
            let line = escape_for_terminal(&text);
            let back = line
                .replace("\\\\", "\u{0}")
                .replace("\\n", "\n")
                .replace("\\t", "\t")
                .replace("\\x1b", "\u{1b}")
                .replace("\\u{202e}", "\u{202e}")
                .replace('\u{0}', "\\");
            prop_assert_eq!(back, text);
        }
    }
}
