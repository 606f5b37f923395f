//! [`ShellCommand`]: a shell command line as what it will run — the simple commands inside it
//! (their words with quotes removed), and the constructs that join, feed or redirect them
//! (operators, substitutions, redirections, control structures) with where they are.
//!
//! Rules on a shell-command argument ([`crate::tools::ArgumentKind::ShellCommand`]) judge this
//! instead of the raw text: an allow rule never matches a command with a construct it did not
//! name, and deny rules see every simple command inside, with flags normalised
//! ([`SimpleCommand::flags`]). The parser is tree-sitter's bash grammar (the one Codex uses):
//! error-tolerant, so a command it cannot fully parse is reported as such
//! ([`ShellSyntaxError`]) instead of being half-understood.
//!
//! ```
//! use agcore::tools::shell_syntax::ShellCommand;
//!
//! let command = ShellCommand::parse("cargo test ; rm -r -f target").unwrap();
//! assert_eq!(command.simple_commands().len(), 2);
//! assert_eq!(command.constructs()[0].token, ";");
//! let rm = &command.simple_commands()[1];
//! assert_eq!(rm.flags(0), ["-f", "-r"].map(String::from).into());
//! ```

use std::collections::BTreeSet;
use std::ops::Range;

use tree_sitter::{Node, Parser};

/// The longest command line parsed (longer ones are not judged: an allow rule does not match).
const MAX_COMMAND_BYTES: usize = 64 * 1024;
/// How deep `sh -c '…'` / `eval '…'` arguments are parsed as commands in their own right.
const MAX_NESTING: usize = 4;

/// A shell command line could not be parsed, so what it runs cannot be judged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ShellSyntaxError {
    /// The text is not valid shell syntax (an unclosed quote, a stray operator, ...).
    #[error("not valid shell syntax near byte {at}")]
    Invalid {
        /// Where the parser found the first error.
        at: usize,
    },
    /// The text is longer than the parser is asked to judge.
    #[error("the command is longer than {MAX_COMMAND_BYTES} bytes")]
    TooLong,
    /// The parser could not be set up (an incompatible grammar; should not happen).
    #[error("the shell parser is unavailable: {0}")]
    Parser(String),
}

/// A construct of a command line other than plain words: something an allow rule has to name
/// before it may match.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Construct {
    /// The token as written: `;`, `&&`, `||`, `|`, `|&`, `&`, `\n` (a line break between
    /// commands), `$(`, `` ` ``, `<(`, `>(`, a redirection operator (`>`, `>>`, `<`, `>&`,
    /// `<<`, `<<<`, ...), or for control structures the kind of structure (`subshell`,
    /// `if_statement`, `function_definition`, ...).
    pub token: String,
    /// Where it is in the command line (bytes).
    pub span: Range<usize>,
    /// Whether a rule can name it by writing its token: operators, substitutions and
    /// redirections can; control structures (subshells, groups, `if`, loops, functions,
    /// negation) cannot, so an allow rule never matches a command that has one.
    pub nameable: bool,
}

/// One simple command (a program and its arguments) somewhere in a command line — at top
/// level, in a pipeline, a substitution, a control structure, or an `sh -c` argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The words, quotes and escapes removed where their value is known before the command
    /// runs; a word with an expansion (`$HOME`, `$(…)`) is kept as written.
    pub words: Vec<String>,
    /// Variable assignments before the program (`FOO=1 cmd`), as written.
    pub assignments: Vec<String>,
}

/// A parsed command line (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShellCommand {
    simple: Vec<SimpleCommand>,
    constructs: Vec<Construct>,
}

impl ShellCommand {
    /// Parse `text` as a POSIX/bash command line.
    ///
    /// # Errors
    /// [`ShellSyntaxError::Invalid`] when it is not valid shell syntax (tree-sitter found an
    /// error or a missing token), [`ShellSyntaxError::TooLong`] past 64 KiB.
    pub fn parse(text: &str) -> Result<Self, ShellSyntaxError> {
        let mut command = ShellCommand {
            simple: Vec::new(),
            constructs: Vec::new(),
        };
        command.parse_into(text, 0, 0)?;
        Ok(command)
    }

    /// Every simple command inside, in source order (a command before those nested in it).
    pub fn simple_commands(&self) -> &[SimpleCommand] {
        &self.simple
    }

    /// Every construct other than plain words, in source order.
    pub fn constructs(&self) -> &[Construct] {
        &self.constructs
    }

    /// Whether the line is one simple command and nothing else.
    pub fn is_simple(&self) -> bool {
        self.constructs.is_empty() && self.simple.len() == 1
    }

    /// Parse `text` (found at `offset` of the outer line) and add what it holds. Constructs
    /// of nested text (an `sh -c` argument) are located at the argument's span.
    fn parse_into(
        &mut self,
        text: &str,
        offset: usize,
        depth: usize,
    ) -> Result<(), ShellSyntaxError> {
        if text.len() > MAX_COMMAND_BYTES {
            return Err(ShellSyntaxError::TooLong);
        }
        let mut parser = Parser::new();
        parser
            .set_language(&tree_sitter_bash::LANGUAGE.into())
            .map_err(|error| ShellSyntaxError::Parser(error.to_string()))?;
        let tree = parser
            .parse(text, None)
            .ok_or_else(|| ShellSyntaxError::Parser("the parse was cancelled".to_owned()))?;
        let root = tree.root_node();
        if root.has_error() {
            return Err(ShellSyntaxError::Invalid {
                at: offset + first_error(root).unwrap_or(0),
            });
        }
        let mut walk = Walk {
            source: text.as_bytes(),
            offset,
            depth,
            nested: Vec::new(),
            command: self,
        };
        walk.node(root);
        let nested = std::mem::take(&mut walk.nested);
        for (inner, span) in nested {
            let before = self.constructs.len();
            self.parse_into(&inner, span.start, depth + 1)?;
            // The nested text's positions are not the outer line's: point at the argument.
            for construct in &mut self.constructs[before..] {
                construct.span = span.clone();
            }
        }
        Ok(())
    }
}

impl SimpleCommand {
    /// The program's name without its directory (`/bin/rm` → `rm`), or `""` when empty.
    pub fn program(&self) -> &str {
        self.words
            .first()
            .map(|word| basename(word))
            .unwrap_or_default()
    }

    /// The options among the words after `start` (the program's index), normalised so that
    /// spellings of the same options compare equal: `-rf`, `-fr` and `-r -f` all give
    /// `{"-f", "-r"}`; for a few programs long names and aliases map to their short option
    /// (`rm --recursive --force`, `rm -R` → `-r`, `-f`; see [`canonical_option`]). Options end
    /// at `--`.
    pub fn flags(&self, start: usize) -> BTreeSet<String> {
        split_arguments(basename_at(&self.words, start), self.words.get(start + 1..)).0
    }

    /// The operands (non-option words) after `start`, in order.
    pub fn operands(&self, start: usize) -> Vec<String> {
        split_arguments(basename_at(&self.words, start), self.words.get(start + 1..)).1
    }

    /// The words joined by single spaces (what a text rule reads).
    pub fn text(&self) -> String {
        self.words.join(" ")
    }

    /// The words with every option group split into one option per word and long names
    /// mapped as in [`SimpleCommand::flags`], in the original order: `rm -rf x` →
    /// `rm -r -f x`.
    pub fn normalised_text(&self) -> String {
        let program = self.program().to_owned();
        let mut out: Vec<String> = Vec::with_capacity(self.words.len());
        let mut options_done = false;
        for (index, word) in self.words.iter().enumerate() {
            if index == 0 || options_done || !word.starts_with('-') || word == "-" {
                out.push(word.clone());
                continue;
            }
            if word == "--" {
                options_done = true;
                out.push(word.clone());
                continue;
            }
            out.extend(expand_option(&program, word));
        }
        out.join(" ")
    }
}

/// The canonical spelling of option `option` (`-x` or `--name`, a value after `=` removed)
/// of `program`: the short option a long name or alias means, for the programs whose
/// destructive options rules usually name (`rm`, `cp`, `mv`, `ln`, `chmod`, `chown`, `chgrp`,
/// `git`); anything else as written.
pub fn canonical_option(program: &str, option: &str) -> String {
    let option = option.split('=').next().unwrap_or(option);
    let mapped = match (program, option) {
        ("rm", "-R" | "--recursive") | ("cp", "-R" | "--recursive") => "-r",
        ("rm" | "cp" | "mv" | "ln", "--force") => "-f",
        ("rm", "--dir") => "-d",
        ("rm" | "cp" | "mv", "--interactive") => "-i",
        ("chmod" | "chown" | "chgrp", "-r" | "--recursive") => "-R",
        ("ln", "--symbolic") => "-s",
        ("git", "--force") => "-f",
        ("git", "--delete") => "-d",
        _ => option,
    };
    mapped.to_owned()
}

/// One option word of `program` as canonical options (`-rf` → `-r`, `-f`).
fn expand_option(program: &str, word: &str) -> Vec<String> {
    if word.starts_with("--") {
        return vec![canonical_option(program, word)];
    }
    word.chars()
        .skip(1)
        .map(|c| canonical_option(program, &format!("-{c}")))
        .collect()
}

fn split_arguments(program: &str, words: Option<&[String]>) -> (BTreeSet<String>, Vec<String>) {
    let mut flags = BTreeSet::new();
    let mut operands = Vec::new();
    let mut options_done = false;
    for word in words.unwrap_or_default() {
        if options_done || !word.starts_with('-') || word == "-" {
            operands.push(word.clone());
        } else if word == "--" {
            options_done = true;
        } else {
            flags.extend(expand_option(program, word));
        }
    }
    (flags, operands)
}

fn basename(word: &str) -> &str {
    word.rsplit('/').next().unwrap_or(word)
}

fn basename_at(words: &[String], index: usize) -> &str {
    words.get(index).map(|w| basename(w)).unwrap_or_default()
}

/// The byte offset of the first error or missing node.
fn first_error(node: Node<'_>) -> Option<usize> {
    if node.is_error() || node.is_missing() {
        return Some(node.start_byte());
    }
    let mut cursor = node.walk();
    let children: Vec<Node<'_>> = node.children(&mut cursor).collect();
    children
        .into_iter()
        .filter(|child| child.has_error() || child.is_missing())
        .find_map(first_error)
}

/// Operators between commands, as tree-sitter-bash spells them.
const OPERATORS: &[&str] = &[";", "&&", "||", "|", "|&", "&", ";;", ";&", ";;&"];

/// Control structures: an allow rule never matches a command that has one.
const STRUCTURES: &[&str] = &[
    "subshell",
    "compound_statement",
    "if_statement",
    "while_statement",
    "for_statement",
    "c_style_for_statement",
    "case_statement",
    "function_definition",
    "negated_command",
    "test_command",
];

/// Node kinds that hold a sequence of statements (a line break between two is an operator).
const STATEMENT_LISTS: &[&str] = &[
    "program",
    "compound_statement",
    "subshell",
    "do_group",
    "if_statement",
    "elif_clause",
    "else_clause",
    "case_item",
];

/// Shells whose `-c` argument, and builtins whose arguments, are themselves command lines.
const SHELLS: &[&str] = &["sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox"];

struct Walk<'a, 's> {
    source: &'s [u8],
    offset: usize,
    depth: usize,
    /// Arguments that are command lines in their own right (`sh -c TEXT`, `eval TEXT`), with
    /// their spans in the outer line.
    nested: Vec<(String, Range<usize>)>,
    command: &'a mut ShellCommand,
}

impl Walk<'_, '_> {
    fn text(&self, node: Node<'_>) -> String {
        node.utf8_text(self.source)
            .map(str::to_owned)
            .unwrap_or_default()
    }

    fn span(&self, node: Node<'_>) -> Range<usize> {
        let range = node.byte_range();
        self.offset + range.start..self.offset + range.end
    }

    fn construct(&mut self, token: &str, node: Node<'_>, nameable: bool) {
        let span = self.span(node);
        self.command.constructs.push(Construct {
            token: token.to_owned(),
            span,
            nameable,
        });
    }

    fn children<'t>(node: Node<'t>) -> Vec<Node<'t>> {
        let mut cursor = node.walk();
        node.children(&mut cursor).collect()
    }

    fn node(&mut self, node: Node<'_>) {
        let kind = node.kind();
        if !node.is_named() {
            if OPERATORS.contains(&kind) {
                self.construct(kind, node, true);
            }
            return;
        }
        if STATEMENT_LISTS.contains(&kind) {
            self.line_breaks(node);
        }
        match kind {
            "command" => return self.simple_command(node),
            "declaration_command" | "unset_command" => {
                // `export X=1`, `unset X`: words like a command's.
                let words = Self::children(node)
                    .into_iter()
                    .map(|child| self.word(child))
                    .collect();
                self.command.simple.push(SimpleCommand {
                    words,
                    assignments: Vec::new(),
                });
            }
            "variable_assignment" if is_statement(node) => {
                self.command.simple.push(SimpleCommand {
                    words: Vec::new(),
                    assignments: vec![self.text(node)],
                });
            }
            "command_substitution" => {
                let token = node
                    .child(0)
                    .map(|open| open.kind())
                    .filter(|open| *open == "`")
                    .unwrap_or("$(");
                self.construct(token, node, true);
                return self.inner(node);
            }
            "process_substitution" => {
                let token = node.child(0).map(|open| open.kind()).unwrap_or("<(");
                self.construct(token, node, true);
                return self.inner(node);
            }
            "file_redirect" | "heredoc_redirect" | "herestring_redirect" => {
                let token = Self::children(node)
                    .into_iter()
                    .find(|child| !child.is_named())
                    .map(|operator| operator.kind().to_owned())
                    .unwrap_or_else(|| kind.to_owned());
                self.construct(&token, node, true);
                return self.inner(node);
            }
            _ if STRUCTURES.contains(&kind) => self.construct(kind, node, false),
            _ => {}
        }
        self.inner(node);
    }

    fn inner(&mut self, node: Node<'_>) {
        for child in Self::children(node) {
            self.node(child);
        }
    }

    /// A line break between two statements of `node` separates commands like `;`.
    fn line_breaks(&mut self, node: Node<'_>) {
        let statements: Vec<Node<'_>> = Self::children(node)
            .into_iter()
            .filter(|child| child.is_named() && child.kind() != "comment")
            .collect();
        for pair in statements.windows(2) {
            let (end, start) = (pair[0].end_byte(), pair[1].start_byte());
            let between = self.source.get(end..start).unwrap_or_default();
            if let Some(at) = between.iter().position(|b| *b == b'\n') {
                let at = self.offset + end + at;
                self.command.constructs.push(Construct {
                    token: "\n".to_owned(),
                    span: at..at + 1,
                    nameable: true,
                });
            }
        }
    }

    fn simple_command(&mut self, node: Node<'_>) {
        let mut words = Vec::new();
        let mut assignments = Vec::new();
        let mut cursor = node.walk();
        let mut fields = Vec::new();
        if cursor.goto_first_child() {
            loop {
                fields.push((cursor.node(), cursor.field_name()));
                if !cursor.goto_next_sibling() {
                    break;
                }
            }
        }
        for (child, field) in &fields {
            match (field, child.kind()) {
                (Some("name" | "argument"), _) => words.push(self.word(*child)),
                (_, "variable_assignment") => assignments.push(self.text(*child)),
                _ => {}
            }
        }
        if self.depth < MAX_NESTING {
            self.nested_lines(&words, node);
        }
        self.command
            .simple
            .push(SimpleCommand { words, assignments });
        // Then what is inside: substitutions in words and assignments (constructs whose
        // commands run too), redirections.
        for (child, _) in fields {
            self.node(child);
        }
    }

    /// `sh -c TEXT`, `bash -lc TEXT`, `eval TEXT...`: TEXT runs as a command line too.
    fn nested_lines(&mut self, words: &[String], node: Node<'_>) {
        let span = self.span(node);
        let Some(program) = words.first().map(|w| basename(w)) else {
            return;
        };
        if program == "eval" {
            let text = words.get(1..).unwrap_or_default().join(" ");
            if !text.is_empty() {
                self.nested.push((text, span));
            }
            return;
        }
        if !SHELLS.contains(&program) {
            return;
        }
        let rest = words.get(1..).unwrap_or_default();
        let Some(flag) = rest.iter().position(|word| {
            word.starts_with('-') && !word.starts_with("--") && word.contains('c')
        }) else {
            return;
        };
        if let Some(text) = rest.get(flag + 1) {
            self.nested.push((text.clone(), span));
        }
    }

    /// A word's value when it is known before the command runs (quotes and escapes
    /// removed); otherwise the word as written.
    fn word(&self, node: Node<'_>) -> String {
        static_value(node, self.source).unwrap_or_else(|| self.text(node))
    }
}

/// Whether `node` stands as a statement of its own (not a prefix of a command).
fn is_statement(node: Node<'_>) -> bool {
    node.parent()
        .is_some_and(|parent| parent.kind() != "command" && parent.kind() != "variable_assignments")
}

/// The value of a word whose value does not depend on expansions.
fn static_value(node: Node<'_>, source: &[u8]) -> Option<String> {
    let text = node.utf8_text(source).ok()?;
    match node.kind() {
        "command_name" => node.child(0).and_then(|inner| static_value(inner, source)),
        "word" | "number" => Some(unescape_unquoted(text)),
        "raw_string" => Some(
            text.strip_prefix('\'')
                .and_then(|t| t.strip_suffix('\''))
                .unwrap_or(text)
                .to_owned(),
        ),
        "ansi_c_string" => Some(
            text.strip_prefix("$'")
                .and_then(|t| t.strip_suffix('\''))
                .unwrap_or(text)
                .to_owned(),
        ),
        "string" => {
            let mut cursor = node.walk();
            let mut value = String::new();
            for child in node.children(&mut cursor) {
                match child.kind() {
                    "\"" => {}
                    "string_content" => {
                        value.push_str(&unescape_double_quoted(child.utf8_text(source).ok()?));
                    }
                    _ => return None,
                }
            }
            Some(value)
        }
        "concatenation" => {
            let mut cursor = node.walk();
            let mut value = String::new();
            for child in node.children(&mut cursor) {
                value.push_str(&static_value(child, source)?);
            }
            Some(value)
        }
        _ => None,
    }
}

/// An unquoted word without its backslashes (`\r\m` → `rm`; a trailing `\` kept).
fn unescape_unquoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') => {}
                Some(next) => out.push(next),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Double-quoted text without the backslashes that escape `$`, `` ` ``, `"`, `\` and newline.
fn unescape_double_quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('\\', Some('$' | '`' | '"' | '\\')) => {
                out.extend(chars.next());
            }
            ('\\', Some('\n')) => {
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> ShellCommand {
        ShellCommand::parse(text).unwrap_or_else(|error| panic!("{text:?}: {error}"))
    }

    fn tokens(text: &str) -> Vec<String> {
        parse(text)
            .constructs()
            .iter()
            .map(|c| c.token.clone())
            .collect()
    }

    #[test]
    fn a_plain_command_is_one_simple_command() {
        let command = parse("cargo test --lib -- --nocapture");
        assert!(command.is_simple());
        assert_eq!(
            command.simple_commands()[0].words,
            ["cargo", "test", "--lib", "--", "--nocapture"]
        );
    }

    #[test]
    fn operators_substitutions_and_redirections_are_constructs() {
        assert_eq!(tokens("cargo test ; touch X"), [";"]);
        assert_eq!(tokens("a && b || c"), ["&&", "||"]);
        assert_eq!(tokens("a | b |& c"), ["|", "|&"]);
        assert_eq!(tokens("a & b"), ["&"]);
        assert_eq!(tokens("cargo test\ntouch X"), ["\n"]);
        assert_eq!(tokens("cargo build $(touch X)"), ["$("]);
        assert_eq!(tokens("cargo build `touch X`"), ["`"]);
        assert_eq!(tokens("diff <(a) >(b)"), ["<(", ">("]);
        assert_eq!(tokens("cargo test > out.txt"), [">"]);
        assert_eq!(tokens("cargo test 2>&1"), [">&"]);
        assert_eq!(tokens("cat <<EOF\nx\nEOF"), ["<<"]);
        assert_eq!(tokens("cat <<< hi"), ["<<<"]);
        assert_eq!(tokens("echo \"$(id)\""), ["$("]);
    }

    #[test]
    fn control_structures_cannot_be_named() {
        for text in [
            "(cargo test)",
            "{ cargo test; }",
            "if true; then cargo test; fi",
            "for x in a; do cargo test; done",
            "f() { cargo test; }",
            "! cargo test",
        ] {
            let command = parse(text);
            assert!(
                command.constructs().iter().any(|c| !c.nameable),
                "{text}: {:?}",
                command.constructs()
            );
        }
    }

    #[test]
    fn every_simple_command_inside_is_found() {
        let command = parse("echo $(rm -r -f x) | (cd y && git push --force)");
        let programs: Vec<&str> = command
            .simple_commands()
            .iter()
            .map(SimpleCommand::program)
            .collect();
        for program in ["echo", "rm", "cd", "git"] {
            assert!(programs.contains(&program), "{programs:?}");
        }
        let nested = parse("sh -c 'rm -fr x'");
        assert!(nested.simple_commands().iter().any(|c| c.program() == "rm"));
        assert!(
            parse("bash -lc \"eval 'rm -rf x'\"")
                .simple_commands()
                .iter()
                .any(|c| c.program() == "rm")
        );
    }

    #[test]
    fn quotes_and_escapes_are_removed_from_words() {
        let command = parse(r#"\rm -"r"'f' "a b" $'c'"#);
        assert_eq!(
            command.simple_commands()[0].words,
            ["rm", "-rf", "a b", "c"]
        );
        let dynamic = parse("rm $FLAGS");
        assert_eq!(dynamic.simple_commands()[0].words, ["rm", "$FLAGS"]);
    }

    #[test]
    fn flags_are_normalised() {
        let flags = |text: &str| parse(text).simple_commands()[0].flags(0);
        let expected: BTreeSet<String> = ["-f", "-r"].map(str::to_owned).into();
        for text in [
            "rm -rf x",
            "rm -fr x",
            "rm -r -f x",
            "rm --recursive --force x",
            "rm -R --force x",
            "/bin/rm -f -R x",
        ] {
            assert_eq!(flags(text), expected, "{text}");
        }
        assert!(flags("rm -- -rf").is_empty());
        assert_eq!(
            parse("rm -rf x").simple_commands()[0].normalised_text(),
            "rm -r -f x"
        );
    }

    #[test]
    fn invalid_syntax_is_an_error() {
        for text in [
            "echo 'unclosed",
            "cargo test &&",
            "a | | b",
            "$(",
            "if true; then",
        ] {
            assert!(
                matches!(
                    ShellCommand::parse(text),
                    Err(ShellSyntaxError::Invalid { .. })
                ),
                "{text:?} parsed"
            );
        }
    }
}
