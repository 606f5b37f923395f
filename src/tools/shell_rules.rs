//! How a rule on arguments judges a shell command line
//! ([`crate::tools::ArgumentKind::ShellCommand`]): allow rules by what the command line will
//! run and which constructs the rule names, deny and ask rules on every simple command inside.

use std::collections::BTreeMap;
use std::ops::Range;

use regex::Regex;

use crate::tools::rule_action::RuleAction;
use crate::tools::shell_syntax::{ShellCommand, ShellSyntaxError, SimpleCommand};

/// A rule's test, as [`crate::tools::rules`] compiled it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum TextTest<'a> {
    /// A regular expression.
    Matches(&'a Regex),
    /// A substring.
    Contains(&'a str),
    /// Any other test, applied to the raw text only.
    Raw,
}

/// What a rule makes of a command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Judged {
    /// The rule matches.
    Match,
    /// The rule does not match.
    NoMatch,
    /// A deny or ask rule cannot judge the command line: it does not parse.
    Unparsable(ShellSyntaxError),
}

/// Judge `command` with a rule whose test is `test` (`raw` applies it to a text) and whose
/// action is `action`.
pub(crate) fn judge(
    test: TextTest<'_>,
    action: RuleAction,
    command: &str,
    raw: impl Fn(&str) -> bool,
) -> Judged {
    match action {
        RuleAction::Allow => judge_allow(test, command, raw),
        RuleAction::Ask | RuleAction::Deny => judge_deny(test, command, raw),
    }
}

/// An allow rule matches a command line that parses, that the rule matches, and whose every
/// construct the rule names (see [`named`]).
fn judge_allow(test: TextTest<'_>, command: &str, raw: impl Fn(&str) -> bool) -> Judged {
    let Ok(parsed) = ShellCommand::parse(command) else {
        return Judged::NoMatch;
    };
    let span = match test {
        TextTest::Matches(regex) => regex.find(command).map(|found| found.range()),
        TextTest::Contains(needle) => command
            .find(needle)
            .map(|start| start..start + needle.len()),
        TextTest::Raw => raw(command).then_some(0..command.len()),
    };
    let Some(span) = span else {
        return Judged::NoMatch;
    };
    if named(test, &parsed, &span) {
        Judged::Match
    } else {
        Judged::NoMatch
    }
}

/// Whether the rule names every construct of `parsed`: each lies inside what the rule matched
/// (`span`), can be named, and its token is written literally in the rule as often as it
/// occurs in the command line. `^cargo (test|build)( |$)` names none (its `|` is the regex's
/// alternation, its `$` an anchor); `^cargo test 2>&1$` names the `>&` redirection.
fn named(test: TextTest<'_>, parsed: &ShellCommand, span: &Range<usize>) -> bool {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for construct in parsed.constructs() {
        if !construct.nameable || construct.span.start < span.start || construct.span.end > span.end
        {
            return false;
        }
        *counts.entry(construct.token.as_str()).or_default() += 1;
    }
    counts
        .into_iter()
        .all(|(token, count)| written(test, token) >= count)
}

/// How often `token` is written literally in the rule: in a pattern as plain text where that
/// is literal in a regular expression (`;`, `&&`, `>`) or escaped (`\|`, `\$\(`, `\n`).
fn written(test: TextTest<'_>, token: &str) -> usize {
    match test {
        TextTest::Contains(needle) => needle.matches(token).count(),
        TextTest::Matches(regex) => {
            let pattern = regex.as_str();
            let mut forms = vec![regex::escape(token), minimal_escape(token)];
            if token == "\n" {
                forms.push("\\n".to_owned());
            }
            forms.dedup();
            forms
                .iter()
                .map(|form| pattern.matches(form.as_str()).count())
                .max()
                .unwrap_or(0)
        }
        TextTest::Raw => 0,
    }
}

/// `token` with only the characters escaped that a regular expression reads as syntax
/// outside a class.
fn minimal_escape(token: &str) -> String {
    let mut out = String::with_capacity(token.len() * 2);
    for c in token.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// A deny or ask rule matches the raw text, or any simple command inside: its words (quotes
/// removed), the words with options normalised, or — for `contains` text that is itself a
/// command — the same program with at least the needle's options and its operands in order.
fn judge_deny(test: TextTest<'_>, command: &str, raw: impl Fn(&str) -> bool) -> Judged {
    if raw(command) {
        return Judged::Match;
    }
    let parsed = match ShellCommand::parse(command) {
        Ok(parsed) => parsed,
        Err(error) => return Judged::Unparsable(error),
    };
    let needle = match test {
        TextTest::Contains(needle) => ShellCommand::parse(needle)
            .ok()
            .filter(ShellCommand::is_simple)
            .and_then(|needle| needle.simple_commands().first().cloned())
            .filter(|needle| !needle.words.is_empty()),
        _ => None,
    };
    let hit = parsed.simple_commands().iter().any(|simple| {
        raw(&simple.text())
            || raw(&simple.normalised_text())
            || needle
                .as_ref()
                .is_some_and(|needle| contains_command(simple, needle))
    });
    if hit { Judged::Match } else { Judged::NoMatch }
}

/// Whether `simple` runs `needle`'s program (directly or through a wrapper such as `sudo` or
/// `xargs`) with at least its options and its operands in order.
fn contains_command(simple: &SimpleCommand, needle: &SimpleCommand) -> bool {
    let program = needle.program();
    let flags = needle.flags(0);
    let operands = needle.operands(0);
    (0..simple.words.len()).any(|start| {
        simple
            .words
            .get(start)
            .is_some_and(|word| word.rsplit('/').next() == Some(program))
            && flags.is_subset(&simple.flags(start))
            && is_subsequence(&operands, &simple.operands(start))
    })
}

fn is_subsequence(needle: &[String], haystack: &[String]) -> bool {
    let mut rest = haystack.iter();
    needle
        .iter()
        .all(|word| rest.any(|candidate| candidate == word))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn allow_regex(pattern: &str, command: &str) -> bool {
        let regex = Regex::new(pattern).unwrap();
        judge(
            TextTest::Matches(&regex),
            RuleAction::Allow,
            command,
            |text| regex.is_match(text),
        ) == Judged::Match
    }

    fn deny_contains(needle: &str, command: &str) -> Judged {
        judge(
            TextTest::Contains(needle),
            RuleAction::Deny,
            command,
            |text| text.contains(needle),
        )
    }

    const DOCS: &str = "^cargo (test|build)( |$)";

    #[test]
    fn the_docs_rule_allows_plain_cargo_commands_only() {
        assert!(allow_regex(DOCS, "cargo test --lib"));
        assert!(allow_regex(DOCS, "cargo build"));
        for command in [
            "cargo test ; touch X",
            "cargo build $(touch X)",
            "cargo build `touch X`",
            "cargo test && touch X",
            "cargo test || touch X",
            "cargo test | sh",
            "cargo test & touch X",
            "cargo test\ntouch X",
            "cargo test > ~/.bashrc",
            "cargo test <(touch X)",
            "cargo test 'unclosed",
        ] {
            assert!(!allow_regex(DOCS, command), "{command:?} was allowed");
        }
    }

    #[test]
    fn an_allow_rule_that_names_a_construct_allows_it_there_only() {
        assert!(allow_regex("^cargo test 2>&1$", "cargo test 2>&1"));
        assert!(!allow_regex("^cargo test 2>&1", "cargo test 2>&1 > /etc/x"));
        assert!(allow_regex(
            r"^make && make install$",
            "make && make install"
        ));
        assert!(!allow_regex(
            r"^make && make install",
            "make && make install && rm x"
        ));
        // `.*` matches the `;` but does not name it.
        assert!(!allow_regex("^cargo test.*$", "cargo test; touch X"));
        assert!(!allow_regex(r"^cargo test\|.*$", "cargo test | sh && x"));
    }

    #[test]
    fn deny_contains_matches_normalised_flags_in_every_simple_command() {
        for command in [
            "rm -rf x",
            "rm -r -f x",
            "rm -fr x",
            "rm --recursive --force x",
            "rm -R -f x",
            "/bin/rm -rfv x",
            "sudo rm -r -f /",
            "cargo test && rm -r -f x",
            "echo $(rm -f -r x)",
            "sh -c 'rm -r -f x'",
            "r\\m -r\"f\" x",
        ] {
            assert_eq!(
                deny_contains("rm -rf", command),
                Judged::Match,
                "{command:?}"
            );
        }
        for command in ["rm -r x", "rm -f x", "echo rm", "cargo test -rf"] {
            assert_eq!(
                deny_contains("rm -rf", command),
                Judged::NoMatch,
                "{command:?}"
            );
        }
    }

    #[test]
    fn an_unparsable_command_is_never_allowed_and_cannot_be_judged_by_a_deny() {
        assert!(!allow_regex(DOCS, "cargo test \"unclosed"));
        assert!(matches!(
            deny_contains("rm -rf", "rm -r -f x \"unclosed"),
            Judged::Unparsable(_)
        ));
        // The raw text still decides when it matches.
        assert_eq!(deny_contains("rm -rf", "rm -rf x 'unclosed"), Judged::Match);
    }
}
