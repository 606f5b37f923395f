//! [`McpToolFilter`]: which of a server's tools the user wants (`include` / `exclude` in its
//! config entry). A tool left out is not registered and is listed with the rule that left it out
//! ([`McpSkipReason::NotIncluded`], [`McpSkipReason::Excluded`]) — never hidden without a reason.
//!
//! Entries are tool names on the server; `*` matches any run of characters (`browser_*`).

use serde::{Deserialize, Serialize};

use crate::tools::reasons::SkipReason as McpSkipReason;

/// Per-server tool lists: with `include`, only the tools it names; then `exclude` removes
/// tools (it wins over `include`).
///
/// ```
/// use agcore::tools::mcp::McpToolFilter;
///
/// let filter = McpToolFilter::default().include(["echo", "get_*"]).exclude(["get_env"]);
/// assert!(filter.allows("echo"));
/// assert!(filter.allows("get_sum"));
/// assert!(!filter.allows("get_env"));
/// assert!(!filter.allows("longRunningOperation"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpToolFilter {
    /// When set, only tools matching one of these are registered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include: Option<Vec<String>>,
    /// Tools matching one of these are not registered.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
}

impl McpToolFilter {
    /// Only the tools matching `patterns` (added to any earlier `include`).
    pub fn include<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.include
            .get_or_insert_with(Vec::new)
            .extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Not the tools matching `patterns`.
    pub fn exclude<I, S>(mut self, patterns: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.exclude.extend(patterns.into_iter().map(Into::into));
        self
    }

    /// Whether the filter lets every tool through.
    pub fn is_empty(&self) -> bool {
        self.include.is_none() && self.exclude.is_empty()
    }

    /// Whether `tool` (its name on the server) is registered.
    pub fn allows(&self, tool: &str) -> bool {
        self.verdict(tool).is_none()
    }

    /// Why `tool` is left out, `None` when it is kept.
    pub fn verdict(&self, tool: &str) -> Option<McpSkipReason> {
        if let Some(pattern) = self.exclude.iter().find(|p| matches(p, tool)) {
            return Some(McpSkipReason::Excluded {
                pattern: pattern.clone(),
            });
        }
        match &self.include {
            Some(include) if !include.iter().any(|p| matches(p, tool)) => {
                Some(McpSkipReason::NotIncluded {
                    include: include.clone(),
                })
            }
            _ => None,
        }
    }

    /// The entries that match none of `tools` — likely typos, worth a warning.
    pub fn unmatched<'a>(&'a self, tools: &[&str]) -> Vec<&'a str> {
        self.include
            .iter()
            .flatten()
            .chain(&self.exclude)
            .filter(|pattern| !tools.iter().any(|tool| matches(pattern, tool)))
            .map(String::as_str)
            .collect()
    }
}

/// `pattern` against `name`, where `*` matches any run of characters (no other syntax).
fn matches(pattern: &str, name: &str) -> bool {
    let mut parts = pattern.split('*');
    let first = parts.next().unwrap_or_default();
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: exact
    };
    for part in middle {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_only_with_star() {
        assert!(matches("echo", "echo"));
        assert!(!matches("echo", "echo2"));
        assert!(matches("get_*", "get_env"));
        assert!(matches("*_env", "get_env"));
        assert!(!matches("g*t*x", "get_env"));
        assert!(matches("g*t*nv", "get_env"));
        assert!(matches("*", "anything"));
        assert!(!matches("a*a", "a"));
        assert!(matches("a*a", "aa"));
    }

    #[test]
    fn exclude_wins_and_says_which_entry() {
        let filter = McpToolFilter::default()
            .include(["get_*"])
            .exclude(["get_env"]);
        assert_eq!(
            filter.verdict("get_env"),
            Some(McpSkipReason::Excluded {
                pattern: "get_env".into()
            })
        );
        assert_eq!(
            filter.verdict("echo"),
            Some(McpSkipReason::NotIncluded {
                include: vec!["get_*".into()]
            })
        );
        assert_eq!(filter.verdict("get_sum"), None);
        assert_eq!(filter.unmatched(&["get_sum", "echo"]), vec!["get_env"]);
    }
}
