//! [`RuleAction`]: what a matching argument rule does (the rules themselves are
//! `crate::tools::rules`; the shell-command judge reads the action too).

use std::fmt;

use serde::{Deserialize, Serialize};

/// What a matching rule does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleAction {
    /// Run without asking (when the permission is *ask*).
    Allow,
    /// Ask for approval, even when the permission is allowed.
    Ask,
    /// Refuse the call.
    Deny,
}

impl fmt::Display for RuleAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleAction::Allow => "allow",
            RuleAction::Ask => "ask",
            RuleAction::Deny => "deny",
        })
    }
}
