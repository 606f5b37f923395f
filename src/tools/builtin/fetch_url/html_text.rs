//! HTML → text for `fetch_url`: a streaming converter over html5ever's tokenizer, linear in the
//! input and bounded in its output.
//!
//! No DOM is built, on purpose. html5ever's tree builder (under html2text, which agcore used
//! before) checks element scopes by walking the stack of open elements at every tag, so nested
//! `<div>`s cost O(depth²): 20,000 levels took 12 s, 200,000 minutes. Here every token costs
//! O(1) plus the text it writes: the converter keeps counters (list, quote and `<pre>` depth,
//! open emphasis), never a stack that grows with the document, and every per-line prefix is
//! capped at [`MAX_INDENT`] levels. The output is Markdown-like: `#` headings, `*` and `1.`
//! lists, `[text](url)` links, fenced `<pre>` blocks, `> ` quotes, `|`-separated table cells.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, Ordering};

use html5ever::LocalName;
use html5ever::tendril::StrTendril;
use html5ever::tokenizer::states::RawKind;
use html5ever::tokenizer::{
    BufferQueue, Tag, TagKind, Token, TokenSink, TokenSinkResult, Tokenizer, TokenizerOpts,
};

/// Input is fed to the tokenizer in pieces of this size, and `cancel` is checked between them,
/// so a cancelled conversion stops within one piece.
const CHUNK: usize = 1024;
/// The most list or quote levels shown as indentation; deeper levels are shown at this depth
/// (so 100,000 nested lists cannot make every line 200 KB of spaces).
pub(crate) const MAX_INDENT: usize = 8;
/// The most nested lists whose numbering is tracked; deeper ones are counted only.
const MAX_LISTS: usize = 64;
/// Link targets longer than this are left out (the link text stays).
const MAX_HREF: usize = 2048;

/// The text of an HTML document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HtmlText {
    /// The text, at most the requested number of bytes.
    pub text: String,
    /// Whether the conversion stopped at the byte limit.
    pub cut: bool,
}

/// Convert `html` to text of at most `max_bytes` bytes, with link targets passed through
/// `resolve` (e.g. to make them absolute). `None` when `cancel` was set before the end.
pub(crate) fn html_to_text(
    html: &str,
    max_bytes: usize,
    resolve: &dyn Fn(&str) -> Option<String>,
    cancel: &AtomicBool,
) -> Option<HtmlText> {
    let tokenizer = Tokenizer::new(
        Converter {
            state: RefCell::new(State::new(max_bytes)),
            resolve,
        },
        TokenizerOpts::default(),
    );
    let queue = BufferQueue::default();
    let mut start = 0;
    while start < html.len() {
        if cancel.load(Ordering::Relaxed) {
            return None;
        }
        if tokenizer.sink.state.borrow().full {
            break;
        }
        let end = html.floor_char_boundary((start + CHUNK).min(html.len()));
        let end = if end > start {
            end
        } else {
            html.ceil_char_boundary(start + 1)
        };
        queue.push_back(StrTendril::from_slice(&html[start..end]));
        // The sink never asks to pause for a script, so this consumes everything it can.
        let _ = tokenizer.feed(&queue);
        start = end;
    }
    tokenizer.end();
    let mut state = tokenizer.sink.state.into_inner();
    state.close_link();
    let cut = state.full;
    let mut text = state.out;
    text.truncate(text.trim_end().len());
    Some(HtmlText { text, cut })
}

/// The token sink: the state behind a `RefCell` (the tokenizer hands out `&self`).
struct Converter<'a> {
    state: RefCell<State>,
    resolve: &'a dyn Fn(&str) -> Option<String>,
}

/// An open list: ordered lists count their items.
#[derive(Debug, Clone, Copy)]
struct List {
    next: Option<u64>,
}

/// An open emphasis run (`**`, `*`, `` ` ``): how many tags are open and where the text began,
/// so an empty run leaves no markers.
#[derive(Debug, Default, Clone, Copy)]
struct Emphasis {
    open: u32,
    before: Mark,
    text_start: usize,
}

/// A point in the output to go back to: its length and trailing newlines.
#[derive(Debug, Default, Clone, Copy)]
struct Mark {
    len: usize,
    trailing_newlines: usize,
}

#[derive(Debug)]
struct State {
    out: String,
    max_bytes: usize,
    full: bool,
    /// How many newlines `out` ends with (kept, not recounted: counting could be quadratic).
    trailing_newlines: usize,
    /// Line breaks owed before the next text: 1 ends the line, 2 leaves a blank line.
    breaks: u8,
    /// A collapsed space owed before the next word.
    space: bool,
    at_line_start: bool,
    /// What starts the next line after the indentation: a list marker or heading hashes.
    marker: Option<String>,
    quote_depth: usize,
    lists: Vec<List>,
    /// Lists nested deeper than [`MAX_LISTS`].
    lists_beyond: usize,
    pre_depth: usize,
    /// A `<pre>` just opened: its first newline is dropped, as browsers do.
    pre_fresh: bool,
    /// Skipping the content of `<script>`, `<svg>` and the like: the element and its nesting.
    skip: Option<(LocalName, usize)>,
    /// The open link's target, the output before its `[` and where its text began.
    link: Option<(String, Mark, usize)>,
    cells_in_row: usize,
    strong: Emphasis,
    em: Emphasis,
    code: Emphasis,
}

/// Elements whose content is not text for the reader, with the tokenizer state their content
/// needs (`None`: ordinary markup, skipped with its nesting counted).
fn skipped(name: &str) -> Option<Option<RawKind>> {
    Some(match name {
        "script" => Some(RawKind::ScriptData),
        "style" | "noscript" | "iframe" | "noembed" | "noframes" | "xmp" => Some(RawKind::Rawtext),
        "title" => Some(RawKind::Rcdata),
        "template" | "svg" | "math" | "datalist" => None,
        _ => return None,
    })
}

/// Block elements and the breaks around them (2: a blank line).
fn block_breaks(name: &str) -> Option<u8> {
    Some(match name {
        "p" | "pre" | "blockquote" | "table" | "hr" | "dl" | "figure" | "h1" | "h2" | "h3"
        | "h4" | "h5" | "h6" | "details" | "fieldset" => 2,
        "address" | "article" | "aside" | "body" | "center" | "dd" | "dialog" | "dir" | "div"
        | "dt" | "figcaption" | "footer" | "form" | "header" | "hgroup" | "li" | "main"
        | "menu" | "nav" | "ol" | "ul" | "section" | "summary" | "tr" | "caption" | "legend"
        | "option" | "tbody" | "thead" | "tfoot" | "html" => 1,
        _ => return None,
    })
}

fn attr<'t>(tag: &'t Tag, name: &str) -> Option<&'t str> {
    tag.attrs
        .iter()
        .find(|attr| &*attr.name.local == name)
        .map(|attr| &*attr.value)
}

impl State {
    fn new(max_bytes: usize) -> Self {
        State {
            out: String::new(),
            max_bytes,
            full: false,
            trailing_newlines: 0,
            breaks: 0,
            space: false,
            at_line_start: true,
            marker: None,
            quote_depth: 0,
            lists: Vec::new(),
            lists_beyond: 0,
            pre_depth: 0,
            pre_fresh: false,
            skip: None,
            link: None,
            cells_in_row: 0,
            strong: Emphasis::default(),
            em: Emphasis::default(),
            code: Emphasis::default(),
        }
    }

    /// Append `text` raw, up to the byte limit.
    fn push(&mut self, text: &str) {
        if self.full {
            return;
        }
        let room = self.max_bytes.saturating_sub(self.out.len());
        let text = if text.len() > room {
            self.full = true;
            &text[..text.floor_char_boundary(room)]
        } else {
            text
        };
        self.out.push_str(text);
        let newlines = text.len() - text.trim_end_matches('\n').len();
        if newlines == text.len() {
            self.trailing_newlines += newlines;
        } else {
            self.trailing_newlines = newlines;
        }
    }

    fn mark(&self) -> Mark {
        Mark {
            len: self.out.len(),
            trailing_newlines: self.trailing_newlines,
        }
    }

    /// Take back what was written after `mark` (an opening marker that got no text).
    fn rewind(&mut self, mark: Mark) {
        self.out.truncate(mark.len);
        self.trailing_newlines = mark.trailing_newlines;
    }

    fn push_char(&mut self, c: char) {
        let mut buf = [0; 4];
        self.push(c.encode_utf8(&mut buf));
    }

    /// Ask for `n` line breaks before the next text.
    fn block(&mut self, n: u8) {
        self.breaks = self.breaks.max(n);
        self.space = false;
    }

    fn list_depth(&self) -> usize {
        self.lists.len() + self.lists_beyond
    }

    /// Write what is owed before inline content: line breaks, then at a line start the quote
    /// markers, indentation and a pending marker, else a collapsed space.
    fn flush(&mut self) {
        if self.breaks > 0 {
            if !self.out.is_empty() {
                let have = self.trailing_newlines;
                let want = usize::from(self.breaks);
                if have < want {
                    self.push(&"\n\n"[..want - have]);
                }
                self.at_line_start = true;
            }
            self.breaks = 0;
            self.space = false;
        }
        if self.at_line_start {
            self.at_line_start = false;
            self.space = false;
            let quotes = self.quote_depth.min(MAX_INDENT);
            for _ in 0..quotes {
                self.push("> ");
            }
            let depth = self.list_depth().min(MAX_INDENT);
            let marker = self.marker.take();
            let indent = depth.saturating_sub(usize::from(marker.is_some() && depth > 0));
            for _ in 0..indent {
                self.push("  ");
            }
            if let Some(marker) = marker {
                self.push(&marker);
            }
        } else if self.space {
            self.space = false;
            self.push(" ");
        }
    }

    /// A hard line break (`<br>`, a newline in `<pre>`).
    fn newline(&mut self) {
        if self.breaks > 0 {
            self.flush();
        }
        self.push("\n");
        self.at_line_start = true;
        self.space = false;
    }

    fn text(&mut self, text: &str) {
        if self.pre_depth > 0 {
            let text = match text.strip_prefix('\n') {
                Some(rest) if self.pre_fresh => rest,
                _ => text,
            };
            for (i, line) in text.split('\n').enumerate() {
                if i > 0 {
                    self.newline();
                }
                if !line.is_empty() {
                    self.flush();
                    self.push(line.trim_end_matches('\r'));
                }
            }
            self.pre_fresh = self.pre_fresh && text.is_empty();
            return;
        }
        for c in text.chars() {
            if matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0C') {
                self.space |= !self.at_line_start;
            } else {
                self.flush();
                self.push_char(c);
            }
            if self.full {
                return;
            }
        }
    }

    /// Open an emphasis run: the marker now, unless one is already open.
    fn open_emphasis(&mut self, which: fn(&mut State) -> &mut Emphasis, marker: &str) {
        if which(self).open == 0 {
            self.flush();
            let before = self.mark();
            self.push(marker);
            let text_start = self.out.len();
            let run = which(self);
            run.before = before;
            run.text_start = text_start;
        }
        let run = which(self);
        run.open = run.open.saturating_add(1);
    }

    /// Close an emphasis run; a run with no text takes its opening marker back.
    fn close_emphasis(&mut self, which: fn(&mut State) -> &mut Emphasis, marker: &str) {
        let run = which(self);
        if run.open == 0 {
            return;
        }
        run.open -= 1;
        if run.open > 0 {
            return;
        }
        let (before, start) = (run.before, run.text_start);
        if self.out.len() == start && !self.full {
            self.rewind(before);
        } else {
            self.push(marker);
        }
    }

    fn open_link(&mut self, href: String) {
        self.close_link();
        self.flush();
        let before = self.mark();
        self.push("[");
        self.link = Some((href, before, self.out.len()));
    }

    fn close_link(&mut self) {
        let Some((href, before, start)) = self.link.take() else {
            return;
        };
        if self.out.len() == start && !self.full {
            self.rewind(before);
        } else {
            self.push("](");
            self.push(&href);
            self.push(")");
        }
    }

    fn start_tag(&mut self, tag: &Tag, resolve: &dyn Fn(&str) -> Option<String>) {
        let name = &*tag.name;
        if let Some(breaks) = block_breaks(name) {
            self.block(breaks);
        }
        match name {
            "br" => self.newline(),
            "hr" => {
                self.flush();
                self.push("---");
                self.block(2);
            }
            "h1" | "h2" | "h3" | "h4" | "h5" | "h6" => {
                let level = usize::from(name.as_bytes()[1] - b'0');
                self.marker = Some(format!("{} ", "#".repeat(level)));
            }
            "ul" | "ol" | "menu" | "dir" => {
                if self.list_depth() == 0 {
                    self.block(2);
                }
                if self.lists.len() < MAX_LISTS {
                    let start = attr(tag, "start").and_then(|s| s.trim().parse().ok());
                    self.lists.push(List {
                        next: (name == "ol").then_some(start.unwrap_or(1)),
                    });
                } else {
                    self.lists_beyond += 1;
                }
            }
            "li" => {
                let marker = match self.lists.last_mut() {
                    Some(List { next: Some(n) }) if self.lists_beyond == 0 => {
                        let marker = format!("{n}. ");
                        *n = n.saturating_add(1);
                        marker
                    }
                    _ => "* ".to_owned(),
                };
                self.marker = Some(marker);
            }
            "blockquote" => self.quote_depth = self.quote_depth.saturating_add(1),
            "pre" | "listing" => {
                self.block(2);
                if self.pre_depth == 0 {
                    self.flush();
                    self.push("```");
                    self.newline();
                }
                self.pre_depth = self.pre_depth.saturating_add(1);
                self.pre_fresh = true;
            }
            "a" => match attr(tag, "href").map(str::trim) {
                Some(href)
                    if !href.is_empty()
                        && !href.starts_with('#')
                        && !href.starts_with("javascript:")
                        && href.len() <= MAX_HREF =>
                {
                    self.open_link(resolve(href).unwrap_or_else(|| href.to_owned()));
                }
                _ => self.close_link(),
            },
            "img" => {
                if let Some(alt) = attr(tag, "alt").map(str::trim).filter(|a| !a.is_empty()) {
                    self.flush();
                    self.push("[");
                    self.text(alt);
                    self.push("]");
                }
            }
            "b" | "strong" => self.open_emphasis(|s| &mut s.strong, "**"),
            "i" | "em" => self.open_emphasis(|s| &mut s.em, "*"),
            "code" | "kbd" | "samp" | "tt" if self.pre_depth == 0 => {
                self.open_emphasis(|s| &mut s.code, "`")
            }
            "tr" => self.cells_in_row = 0,
            "td" | "th" => {
                if self.cells_in_row > 0 {
                    self.flush();
                    self.push(" | ");
                }
                self.cells_in_row += 1;
            }
            _ => {}
        }
    }

    fn end_tag(&mut self, tag: &Tag) {
        let name = &*tag.name;
        match name {
            "br" => self.newline(),
            "ul" | "ol" | "menu" | "dir" => {
                if self.lists_beyond > 0 {
                    self.lists_beyond -= 1;
                } else {
                    self.lists.pop();
                }
                if self.list_depth() == 0 {
                    self.block(2);
                }
            }
            "blockquote" => self.quote_depth = self.quote_depth.saturating_sub(1),
            "pre" | "listing" => {
                if self.pre_depth == 1 {
                    self.newline();
                    self.push("```");
                }
                self.pre_depth = self.pre_depth.saturating_sub(1);
            }
            "a" => self.close_link(),
            "b" | "strong" => self.close_emphasis(|s| &mut s.strong, "**"),
            "i" | "em" => self.close_emphasis(|s| &mut s.em, "*"),
            "code" | "kbd" | "samp" | "tt" if self.pre_depth == 0 => {
                self.close_emphasis(|s| &mut s.code, "`")
            }
            _ => {}
        }
        if let Some(breaks) = block_breaks(name) {
            self.block(breaks);
        }
    }
}

impl TokenSink for Converter<'_> {
    type Handle = ();

    fn process_token(&self, token: Token, _line: u64) -> TokenSinkResult<()> {
        let mut state = self.state.borrow_mut();
        if state.full {
            return TokenSinkResult::Continue;
        }
        match token {
            Token::TagToken(tag) => {
                if let Some((skipping, depth)) = &mut state.skip {
                    if tag.name == *skipping && !tag.self_closing {
                        match tag.kind {
                            TagKind::StartTag => *depth += 1,
                            TagKind::EndTag => *depth -= 1,
                        }
                        if *depth == 0 {
                            state.skip = None;
                        }
                    } else if tag.kind == TagKind::StartTag
                        && !matches!(&**skipping, "svg" | "math")
                        && let Some(Some(kind)) = skipped(&tag.name)
                    {
                        // A `<script>` inside a `<template>`: its content is still raw text
                        // for the tokenizer; its end tag is the next tag, ignored here.
                        return TokenSinkResult::RawData(kind);
                    }
                    return TokenSinkResult::Continue;
                }
                match tag.kind {
                    TagKind::StartTag => {
                        if let Some(raw) = skipped(&tag.name) {
                            if !tag.self_closing || raw.is_some() {
                                state.skip = Some((tag.name.clone(), 1));
                            }
                            return match raw {
                                Some(kind) => TokenSinkResult::RawData(kind),
                                None => TokenSinkResult::Continue,
                            };
                        }
                        match &*tag.name {
                            "plaintext" => {
                                state.block(1);
                                state.pre_depth = state.pre_depth.saturating_add(1);
                                return TokenSinkResult::Plaintext;
                            }
                            "textarea" => {
                                state.start_tag(&tag, self.resolve);
                                return TokenSinkResult::RawData(RawKind::Rcdata);
                            }
                            _ => state.start_tag(&tag, self.resolve),
                        }
                    }
                    TagKind::EndTag => state.end_tag(&tag),
                }
            }
            Token::CharacterTokens(text) if state.skip.is_none() => state.text(&text),
            _ => {}
        }
        TokenSinkResult::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(html: &str) -> String {
        let never = AtomicBool::new(false);
        html_to_text(html, 1 << 20, &|_| None, &never).unwrap().text
    }

    #[test]
    fn headings_paragraphs_and_emphasis() {
        assert_eq!(
            text(
                "<html><head><title>T</title><style>p{}</style></head><body>\
                 <h1>Hello</h1><p>A <b>bold</b>  and\n<em>quiet</em> claim.</p>\
                 <script>var x = '<p>';</script><h2>Next</h2>text</body></html>"
            ),
            "# Hello\n\nA **bold** and *quiet* claim.\n\n## Next\n\ntext"
        );
    }

    #[test]
    fn lists_nest_and_number() {
        assert_eq!(
            text("<ul><li>one</li><li>two<ol start=3><li>a<li>b</ol></li></ul><p>after"),
            "* one\n* two\n  3. a\n  4. b\n\nafter"
        );
    }

    #[test]
    fn links_are_resolved_and_empty_ones_dropped() {
        let never = AtomicBool::new(false);
        let resolve = |href: &str| Some(format!("https://example.com/{href}"));
        let out = html_to_text(
            "See <a href='docs'>the docs</a>, <a href='#top'>top</a> and <a href='x'><img src=i></a>.",
            1 << 20,
            &resolve,
            &never,
        )
        .unwrap();
        assert_eq!(
            out.text,
            "See [the docs](https://example.com/docs), top and ."
        );
    }

    #[test]
    fn pre_keeps_whitespace_and_quotes_are_marked() {
        assert_eq!(
            text("<pre>\nfn main() {\n    x();\n}</pre><blockquote><p>said</p></blockquote>"),
            "```\nfn main() {\n    x();\n}\n```\n\n> said"
        );
    }

    #[test]
    fn tables_rows_and_cells() {
        assert_eq!(
            text("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>"),
            "a | b\n1 | 2"
        );
    }

    #[test]
    fn entities_and_line_breaks() {
        assert_eq!(text("a &amp; b<br>c&nbsp;d<br/>e"), "a & b\nc\u{a0}d\ne");
    }

    #[test]
    fn deep_nesting_is_linear_and_indentation_capped() {
        let depth = 100_000;
        let html = format!("{}deep{}", "<div>".repeat(depth), "</div>".repeat(depth));
        assert_eq!(text(&html), "deep");
        let lists = format!("{}x", "<ul><li>".repeat(depth));
        let out = text(&lists);
        assert!(out.ends_with("x"));
        assert!(
            out.lines().all(|line| line.len() <= 2 * MAX_INDENT + 2),
            "{}",
            &out[..200]
        );
    }

    #[test]
    fn output_stops_at_the_byte_limit() {
        let never = AtomicBool::new(false);
        let html = "<p>word</p>".repeat(10_000);
        let out = html_to_text(&html, 100, &|_| None, &never).unwrap();
        assert!(out.cut);
        assert!(out.text.len() <= 100);
    }

    #[test]
    fn a_set_cancel_flag_stops_the_conversion() {
        let cancelled = AtomicBool::new(true);
        assert_eq!(html_to_text("<p>x</p>", 100, &|_| None, &cancelled), None);
    }
}
