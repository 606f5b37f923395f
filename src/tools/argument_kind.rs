//! [`ArgumentKind`]: what a tool's argument holds, so that rules on arguments
//! ([`crate::tools::rules`]) judge what the tool will act on rather than the text the model
//! wrote.

/// What an argument holds (see [`crate::tools::BaseTool::argument_kind`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ArgumentKind {
    /// Plain text: rules read it as it is.
    #[default]
    Text,
    /// A shell command line (`run_command`'s `command`): rules judge what it will run
    /// ([`crate::tools::shell_syntax::ShellCommand`]). An allow rule matches only a command
    /// that parses and whose operators (`;`, `&&`, `||`, `|`, `&`, line breaks),
    /// substitutions (`$(…)`, backticks, `<(…)`) and redirections the rule names — written
    /// literally in its pattern and inside what the pattern matched; a subshell, group, `if`,
    /// loop or function definition is never allowed by a rule. Deny and ask rules match the
    /// raw text and every simple command inside (its words with quotes removed, and options
    /// normalised: `contains = "rm -rf"` also matches `rm -r -f`, `rm -fr`,
    /// `rm --recursive --force`, `sudo rm -R -f`). A command that does not parse is never
    /// allowed by a rule, and when deny or ask rules exist for it, it is asked about.
    ShellCommand,
}
