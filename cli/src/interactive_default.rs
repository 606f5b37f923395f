//! The CLI's interactive default permission profile: with someone to ask (a terminal for
//! `agcore chat`, the editor for `agcore acp`) and no permission settings of the user's,
//! writes, edits and commands are *asked* rather than refused — what users of Zed's agent,
//! Codex and Claude Code expect. The library's `PermissionConfig::default()` (Read and
//! Network allowed, Delete and Shell denied) stays the default everywhere else: nobody to ask
//! means the safe refusal.

use agcore::tools::ToolsConfig;
use agcore::tools::permission::{Permission, PermissionConfig};

/// Make `tools` the interactive default unless the user configured permissions or approvals
/// (`[tools.permissions]`, `ask`): Read and Network allowed, Write and Shell asked, Delete still
/// denied. Returns whether it did (so a caller can say so).
pub fn apply(tools: &mut ToolsConfig) -> bool {
    if tools.permissions.is_some() || !tools.ask.is_empty() {
        return false;
    }
    tools.permissions = Some(PermissionConfig {
        allowed: vec![Permission::Read, Permission::Network],
        // Shell is no longer denied outright, only asked: an explicit deny would win over ask.
        denied: vec![Permission::Delete],
        allow_unspecified: true,
    });
    tools.ask = vec![Permission::Write, Permission::Shell];
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unconfigured_cli_asks_for_writes_and_commands() {
        let mut tools = ToolsConfig::default();
        assert!(apply(&mut tools));
        assert_eq!(tools.ask, [Permission::Write, Permission::Shell]);
        let permissions = tools.permissions.unwrap_or_default();
        assert!(!permissions.denied.contains(&Permission::Shell));
        assert!(permissions.denied.contains(&Permission::Delete));
    }

    #[test]
    fn the_users_permission_settings_win() {
        let mut configured = ToolsConfig {
            ask: vec![Permission::Network],
            ..ToolsConfig::default()
        };
        assert!(!apply(&mut configured));
        assert_eq!(configured.ask, [Permission::Network]);
        assert!(configured.permissions.is_none());

        let mut explicit = ToolsConfig {
            permissions: Some(PermissionConfig::default()),
            ..ToolsConfig::default()
        };
        assert!(!apply(&mut explicit));
        assert!(explicit.ask.is_empty());
    }

    #[test]
    fn the_librarys_default_is_untouched() {
        let library = PermissionConfig::default();
        assert!(library.denied.contains(&Permission::Shell));
        assert!(!library.allowed.contains(&Permission::Write));
    }
}
