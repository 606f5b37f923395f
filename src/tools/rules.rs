//! [`ArgumentRules`]: allow / ask / deny by what a call's arguments say — e.g.
//! `run_command.command` matching `^cargo (test|build)( [\w.=/-]+)*$` is allowed without
//! asking, containing `rm -rf` is denied, `fetch_url.url` with a host in a list is allowed.
//!
//! An argument the tool declares as a shell command ([`ArgumentKind::ShellCommand`]) is
//! judged by what it runs: an allow rule never matches operators, substitutions or
//! redirections it does not name, and deny rules see every simple command inside with its
//! options normalised (see [`ArgumentKind::ShellCommand`]).
//!
//! Rules are evaluated after the permission check (a tool whose permission is denied stays
//! denied) and after the arguments are validated. Of the rules that match a call, **deny beats
//! ask, and ask beats allow**: a matching deny refuses the call, a matching ask asks for
//! approval even when the permission is allowed, and a matching allow lets a call whose
//! permission is configured as *ask* run without asking. No match: the permission decision
//! stands. MCP tools are covered the same way (their arguments are their input schema's
//! properties).
//!
//! A rule that names a tool that is not registered, or an argument the tool's schema does not
//! declare, is a problem reported by [`crate::tools::ToolRegistry::check_exposure`] and
//! `explain` — never a silent no-op.
//!
//! ```toml
//! [[tools.rules]]
//! tool = "run_command"
//! argument = "command"
//! matches = '^cargo (test|build)( [\w.=/-]+)*$'
//! action = "allow"
//!
//! [[tools.rules]]
//! tool = "run_command"
//! argument = "command"
//! contains = "rm -rf"
//! action = "deny"
//!
//! [[tools.rules]]
//! tool = "fetch_url"
//! argument = "url"
//! host_in = ["docs.rs", "crates.io"]
//! action = "allow"
//! ```

use std::fmt;

use regex::Regex;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::BaseTool;
use crate::tools::reasons::ExposureError;
pub use crate::tools::rule_action::RuleAction;
use crate::tools::shell_rules::{self, Judged, TextTest};

/// One rule on one argument of one tool. Exactly one of `matches`, `contains` and `host_in`
/// is set.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentRule {
    /// The tool.
    pub tool: String,
    /// The argument: a top-level property of the tool's parameters.
    pub argument: String,
    /// A regular expression the argument's text must match (anywhere; anchor it with `^…$`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub matches: Option<String>,
    /// Text the argument must contain.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub contains: Option<String>,
    /// Hosts the argument, a URL, must have (the host itself or a subdomain of it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub host_in: Vec<String>,
    /// What a match does.
    pub action: RuleAction,
}

/// How a rule tests the argument's text.
#[derive(Debug, Clone)]
enum Test {
    Matches(Regex),
    Contains(String),
    HostIn(Vec<String>),
}

/// A checked rule, with its number (1-based, in configuration order).
#[derive(Debug, Clone)]
struct Compiled {
    number: usize,
    rule: ArgumentRule,
    test: Test,
}

/// Every rule of a registry, checked and compiled once.
#[derive(Debug, Clone, Default)]
pub struct ArgumentRules {
    rules: Vec<Compiled>,
}

/// The rules that matched one call, and what they decide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleVerdict {
    /// The winning action (deny over ask over allow); `None` when no rule matched.
    pub action: Option<RuleAction>,
    /// Why: the matching rules with the winning action, explained.
    pub because: Vec<String>,
}

impl RuleVerdict {
    /// The explanation as one text.
    pub fn explain(&self) -> String {
        self.because.join("; ")
    }
}

impl ArgumentRules {
    /// Check and compile `rules`: a pattern that is not a valid regular expression, or a rule
    /// without exactly one test, is an error naming the rule.
    pub fn new(rules: impl IntoIterator<Item = ArgumentRule>) -> Result<Self, ExposureError> {
        let mut compiled = Vec::new();
        for (index, rule) in rules.into_iter().enumerate() {
            let number = index + 1;
            let invalid = |reason: String| ExposureError::InvalidRule {
                rule: number,
                tool: rule.tool.clone(),
                reason,
            };
            let tests = usize::from(rule.matches.is_some())
                + usize::from(rule.contains.is_some())
                + usize::from(!rule.host_in.is_empty());
            if tests != 1 {
                return Err(invalid(
                    "a rule needs exactly one of matches, contains and host_in".to_owned(),
                ));
            }
            let test = match (&rule.matches, &rule.contains) {
                (Some(pattern), _) => Test::Matches(
                    Regex::new(pattern)
                        .map_err(|error| invalid(format!("matches {pattern:?}: {error}")))?,
                ),
                (None, Some(text)) => Test::Contains(text.clone()),
                (None, None) => Test::HostIn(
                    rule.host_in
                        .iter()
                        .map(|host| host.trim_end_matches('.').to_ascii_lowercase())
                        .collect(),
                ),
            };
            compiled.push(Compiled { number, rule, test });
        }
        Ok(ArgumentRules { rules: compiled })
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What the rules decide for a call of `tool` with `input` (validated arguments), every
    /// argument read as plain text.
    pub fn evaluate(&self, tool: &str, input: &Value) -> RuleVerdict {
        self.judge(tool, |_| ArgumentKind::Text, |_, _| None, input)
    }

    /// What the rules decide for a call of `tool` with `input` (validated arguments), each
    /// argument read as the tool says it is meant ([`BaseTool::argument_kind`]: a shell
    /// command is judged by what it runs, a path by where it leads). The registry decides
    /// with this.
    pub fn evaluate_for(&self, tool: &dyn BaseTool, input: &Value) -> RuleVerdict {
        self.judge(
            tool.name(),
            |argument| tool.argument_kind(argument),
            |argument, value| tool.normalize_argument(argument, value),
            input,
        )
    }

    fn judge(
        &self,
        tool: &str,
        kind: impl Fn(&str) -> ArgumentKind,
        normalize: impl Fn(&str, &Value) -> Option<String>,
        input: &Value,
    ) -> RuleVerdict {
        let mut matched: Vec<(RuleAction, String)> = Vec::new();
        for c in self.rules.iter().filter(|c| c.rule.tool == tool) {
            let Some(value) = input.get(&c.rule.argument) else {
                continue;
            };
            match (kind(&c.rule.argument), value) {
                (ArgumentKind::ShellCommand, Value::String(command)) => {
                    match shell_rules::judge(c.text_test(), c.rule.action, command, |text| {
                        c.test(&Value::String(text.to_owned()))
                    }) {
                        Judged::Match => matched.push((c.rule.action, c.to_string())),
                        Judged::NoMatch => {}
                        // What it runs is unknown: ask rather than let it through.
                        Judged::Unparsable(error) => matched.push((
                            RuleAction::Ask,
                            format!("{c}, but the command cannot be judged ({error}), so asks"),
                        )),
                    }
                }
                (kind @ (ArgumentKind::Path | ArgumentKind::Url), Value::String(raw)) => {
                    // What the tool acts on; an allow must hold for it, a deny for either.
                    let normal = normalize(&c.rule.argument, value).or_else(|| kind.normalize(raw));
                    let on_normal = normal
                        .as_ref()
                        .map(|normal| c.test(&Value::String(normal.clone())));
                    let hit = match (c.rule.action, on_normal) {
                        (RuleAction::Allow, Some(on_normal)) => on_normal,
                        (_, on_normal) => on_normal == Some(true) || c.test(value),
                    };
                    if hit {
                        let read_as = match &normal {
                            Some(normal) if normal != raw => format!(" (read as {normal:?})"),
                            _ => String::new(),
                        };
                        matched.push((c.rule.action, format!("{c}{read_as}")));
                    }
                }
                _ if c.test(value) => matched.push((c.rule.action, c.to_string())),
                _ => {}
            }
        }
        let action = matched.iter().map(|(action, _)| *action).max();
        RuleVerdict {
            action,
            because: matched
                .into_iter()
                .filter(|(a, _)| Some(*a) == action)
                .map(|(_, because)| because)
                .collect(),
        }
    }

    /// Every rule of `tool`, explained (for `agcore tools`).
    pub fn describe(&self, tool: &str) -> Vec<String> {
        self.rules
            .iter()
            .filter(|c| c.rule.tool == tool)
            .map(ToString::to_string)
            .collect()
    }

    /// Rules that name a tool that is not in `tools`, or an argument the tool does not
    /// declare.
    pub fn problems<'a>(
        &self,
        tools: impl Iterator<Item = &'a dyn BaseTool>,
    ) -> Vec<ExposureError> {
        let tools: Vec<&dyn BaseTool> = tools.collect();
        let mut problems = Vec::new();
        for c in &self.rules {
            let Some(tool) = tools.iter().find(|t| t.name() == c.rule.tool) else {
                problems.push(ExposureError::RuleUnknownTool {
                    rule: c.number,
                    tool: c.rule.tool.clone(),
                });
                continue;
            };
            let parameters = tool.parameters();
            let known: Vec<String> = parameters
                .get("properties")
                .and_then(Value::as_object)
                .map(|properties| properties.keys().cloned().collect())
                .unwrap_or_default();
            if !known.contains(&c.rule.argument) {
                problems.push(ExposureError::RuleUnknownArgument {
                    rule: c.number,
                    tool: c.rule.tool.clone(),
                    argument: c.rule.argument.clone(),
                    known,
                });
            }
        }
        problems
    }
}

impl Compiled {
    fn text_test(&self) -> TextTest<'_> {
        match &self.test {
            Test::Matches(regex) => TextTest::Matches(regex),
            Test::Contains(needle) => TextTest::Contains(needle),
            Test::HostIn(_) => TextTest::Raw,
        }
    }

    fn test(&self, value: &Value) -> bool {
        let text = match value {
            Value::String(text) => std::borrow::Cow::Borrowed(text.as_str()),
            other => std::borrow::Cow::Owned(other.to_string()),
        };
        match &self.test {
            Test::Matches(regex) => regex.is_match(&text),
            Test::Contains(needle) => text.contains(needle.as_str()),
            Test::HostIn(hosts) => reqwest::Url::parse(&text)
                .ok()
                .and_then(|url| {
                    url.host_str()
                        .map(|h| h.trim_end_matches('.').to_ascii_lowercase())
                })
                .is_some_and(|host| {
                    hosts.iter().any(|allowed| {
                        host == *allowed
                            || host
                                .strip_suffix(allowed.as_str())
                                .is_some_and(|prefix| prefix.ends_with('.'))
                    })
                }),
        }
    }
}

/// `rule 2: run_command.command contains "rm -rf" → deny`.
impl fmt::Display for Compiled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let rule = &self.rule;
        write!(f, "rule {}: {}.{} ", self.number, rule.tool, rule.argument)?;
        match &self.test {
            Test::Matches(regex) => write!(f, "matches {:?}", regex.as_str())?,
            Test::Contains(text) => write!(f, "contains {text:?}")?,
            Test::HostIn(hosts) => write!(f, "has a host in [{}]", hosts.join(", "))?,
        }
        write!(f, " → {}", rule.action)
    }
}
