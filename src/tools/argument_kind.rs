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
    /// A file path: rules match the path the tool will act on — what
    /// [`crate::tools::BaseTool::normalize_argument`] gives (the built-in file tools: the
    /// path resolved in the workspace, relative to its root, symlinks followed), or else the
    /// path cleaned lexically (`./a`, `sub/../a`, `a/`, `.//a` are all `a`). Deny and ask
    /// rules match the path as written or the normalised one; allow rules only the normalised
    /// one, so `docs/../private.txt` is not allowed by `^docs/`.
    Path,
    /// A URL: rules match it as written and as the URL parser normalises it (scheme and host
    /// lowercased, default port dropped: `HTTP://LOCALHOST:80/` is `http://localhost/`), deny
    /// and ask either, allow the normalised one. `fetch_url` checks every redirect hop the
    /// same way ([`crate::tools::recheck::recheck`]).
    Url,
}

impl ArgumentKind {
    /// The value rules read for `text` when the tool gives no normalisation of its own:
    /// shell commands and text as they are (`None`), a path cleaned lexically, a URL as the
    /// URL parser writes it.
    pub fn normalize(&self, text: &str) -> Option<String> {
        match self {
            ArgumentKind::Path => Some(clean_path(text)),
            ArgumentKind::Url => url::Url::parse(text).ok().map(String::from),
            _ => None,
        }
    }
}

/// `path` without `.` components, repeated or trailing `/`, and with `..` applied to the
/// component before it (a leading `..` stays).
pub fn clean_path(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." if parts.last().is_some_and(|last| *last != "..") => {
                parts.pop();
            }
            ".." if absolute => {}
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    match (absolute, joined.is_empty()) {
        (true, _) => format!("/{joined}"),
        (false, true) => ".".to_owned(),
        (false, false) => joined,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_cleaned_lexically() {
        for (path, clean) in [
            ("private.txt", "private.txt"),
            ("./private.txt", "private.txt"),
            ("sub/../private.txt", "private.txt"),
            ("private.txt/", "private.txt"),
            (".//private.txt", "private.txt"),
            ("../x", "../x"),
            ("/a/../../b", "/b"),
            (".", "."),
        ] {
            assert_eq!(clean_path(path), clean, "{path}");
        }
    }

    #[test]
    fn urls_are_normalised_by_the_parser() {
        assert_eq!(
            ArgumentKind::Url
                .normalize("HTTP://LOCALHOST:80/a")
                .as_deref(),
            Some("http://localhost/a")
        );
        assert_eq!(ArgumentKind::Text.normalize("x"), None);
    }
}
