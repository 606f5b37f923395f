//! [`PermissionChecker`]: decides, before a tool runs, whether its declared permissions pass.

use serde::{Deserialize, Serialize};

pub use crate::tools::capability::Permission;
use crate::tools::error::ToolError;
pub use crate::tools::reasons::{DenialReason, PermissionDenial};

/// Which permissions pass.
///
/// Rules, in order, for each permission a tool declares:
/// 1. in `denied` → refused (deny wins);
/// 2. in `allowed` → passes;
/// 3. `allowed` is not empty → refused (whitelist);
/// 4. `allowed` is empty → passes when `allow_unspecified` is true.
///
/// A tool passes only when every permission it declares passes; a tool declaring none passes
/// only when `allow_unspecified` is true.
///
/// Deserialised from a config file, a missing field keeps its [`Default`] value, so writing
/// only `allowed = [...]` keeps Delete and Shell denied (write `denied = []` to lift that).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PermissionConfig {
    /// Allowed permissions (empty = decided by `allow_unspecified`).
    pub allowed: Vec<Permission>,
    /// Refused permissions; they win over `allowed`.
    pub denied: Vec<Permission>,
    /// Whether tools that declare no permissions (and, with an empty `allowed`, unlisted
    /// permissions) may run.
    pub allow_unspecified: bool,
}

impl Default for PermissionConfig {
    /// Allow Read and Network, deny Delete and Shell, allow tools that declare nothing.
    fn default() -> Self {
        Self {
            allowed: vec![Permission::Read, Permission::Network],
            denied: vec![Permission::Delete, Permission::Shell],
            allow_unspecified: true,
        }
    }
}

/// The `PermissionDenied` error for `tool` with these refusals (`declared_none`: the tool
/// declares no permissions at all).
pub(crate) fn denied_error(
    tool: &str,
    refused: &[PermissionDenial],
    declared_none: bool,
) -> ToolError {
    if declared_none {
        return ToolError::PermissionDenied(
            tool.to_owned(),
            "declared permissions, but it declares none and allow_unspecified is false".to_owned(),
        );
    }
    let detail = refused
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    ToolError::PermissionDenied(tool.to_owned(), detail)
}

/// Checks declared permissions against a [`PermissionConfig`]. Share it between registries
/// through `Arc`.
#[derive(Debug, Clone, Default)]
pub struct PermissionChecker {
    config: PermissionConfig,
}

impl PermissionChecker {
    /// A checker for `config`.
    pub fn new(config: PermissionConfig) -> Self {
        Self { config }
    }

    /// The configuration.
    pub fn config(&self) -> &PermissionConfig {
        &self.config
    }

    /// The decision for one permission: `None` when it passes, else why not.
    pub fn decide(&self, permission: &Permission) -> Option<DenialReason> {
        let config = &self.config;
        if config.denied.contains(permission) {
            Some(DenialReason::Denied)
        } else if config.allowed.contains(permission) {
            None
        } else if !config.allowed.is_empty() {
            Some(DenialReason::NotAllowed)
        } else if config.allow_unspecified {
            None
        } else {
            Some(DenialReason::Unspecified)
        }
    }

    /// Every refused permission of `permissions` with its reason (empty = allowed). A tool that
    /// declares nothing is refused with [`DenialReason::Unspecified`] when `allow_unspecified` is false;
    /// it is reported as `Custom("unspecified")`.
    pub fn denials(&self, permissions: &[Permission]) -> Vec<(Permission, DenialReason)> {
        if permissions.is_empty() {
            return if self.config.allow_unspecified {
                Vec::new()
            } else {
                vec![(
                    Permission::Custom("unspecified".to_owned()),
                    DenialReason::Unspecified,
                )]
            };
        }
        let mut refused: Vec<(Permission, DenialReason)> = Vec::new();
        for permission in permissions {
            if let Some(reason) = self.decide(permission)
                && !refused.iter().any(|(seen, _)| seen == permission)
            {
                refused.push((permission.clone(), reason));
            }
        }
        refused
    }

    /// Check whether `tool_name`, declaring `permissions`, may run. The error names the tool,
    /// every refused permission and why.
    pub fn check(&self, tool_name: &str, permissions: &[Permission]) -> Result<(), ToolError> {
        let refused: Vec<PermissionDenial> = self
            .denials(permissions)
            .into_iter()
            .map(|(permission, reason)| PermissionDenial { permission, reason })
            .collect();
        if refused.is_empty() {
            Ok(())
        } else {
            Err(denied_error(tool_name, &refused, permissions.is_empty()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn checker(
        allowed: Vec<Permission>,
        denied: Vec<Permission>,
        allow_unspecified: bool,
    ) -> PermissionChecker {
        PermissionChecker::new(PermissionConfig {
            allowed,
            denied,
            allow_unspecified,
        })
    }

    #[test]
    fn default_config_allows_read_and_network_and_denies_delete_and_shell() {
        let checker = PermissionChecker::new(PermissionConfig::default());
        assert!(
            checker
                .check("t", &[Permission::Read, Permission::Network])
                .is_ok()
        );
        assert!(checker.check("t", &[Permission::Shell]).is_err());
        assert!(checker.check("t", &[Permission::Delete]).is_err());
        assert!(checker.check("t", &[]).is_ok());
    }

    #[test]
    fn whitelist_mode_refuses_unlisted_permissions() {
        let checker = checker(vec![Permission::Read], vec![], true);
        let error = checker.check("writer", &[Permission::Write]).unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(tool, detail) if tool == "writer" && detail.contains("Write"))
        );
    }

    #[test]
    fn blacklist_mode_with_empty_allowed_uses_allow_unspecified() {
        let open = checker(vec![], vec![Permission::Shell], true);
        assert!(open.check("t", &[Permission::Write]).is_ok());
        assert!(open.check("t", &[Permission::Shell]).is_err());
        let closed = checker(vec![], vec![Permission::Shell], false);
        assert!(closed.check("t", &[Permission::Write]).is_err());
    }

    #[test]
    fn empty_lists_follow_allow_unspecified() {
        assert!(
            checker(vec![], vec![], true)
                .check("t", &[Permission::Delete])
                .is_ok()
        );
        assert!(
            checker(vec![], vec![], false)
                .check("t", &[Permission::Read])
                .is_err()
        );
        assert!(checker(vec![], vec![], false).check("t", &[]).is_err());
        assert!(checker(vec![], vec![], true).check("t", &[]).is_ok());
    }

    #[test]
    fn denied_permission_wins_over_allowed() {
        let checker = checker(vec![Permission::Write], vec![Permission::Write], true);
        assert!(checker.check("t", &[Permission::Write]).is_err());
    }

    #[test]
    fn custom_permissions_are_matched_by_name() {
        let checker = checker(
            vec![Permission::Custom("db:read".into())],
            vec![Permission::Custom("db:admin".into())],
            true,
        );
        assert!(
            checker
                .check("t", &[Permission::Custom("db:read".into())])
                .is_ok()
        );
        assert!(
            checker
                .check("t", &[Permission::Custom("db:admin".into())])
                .is_err()
        );
        assert!(
            checker
                .check("t", &[Permission::Custom("db:write".into())])
                .is_err()
        );
    }

    #[test]
    fn every_declared_permission_must_pass_and_all_failures_are_named() {
        let checker = PermissionChecker::new(PermissionConfig::default());
        let error = checker
            .check(
                "mixed",
                &[Permission::Read, Permission::Shell, Permission::Delete],
            )
            .unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("mixed") && text.contains("Shell") && text.contains("Delete"),
            "{text}"
        );
        assert!(!text.contains("Read ("), "{text}");
    }

    #[test]
    fn missing_config_fields_keep_the_safe_defaults() {
        let config: PermissionConfig =
            serde_json::from_str(r#"{"allowed": ["read", "write"]}"#).unwrap();
        assert_eq!(config.allowed, [Permission::Read, Permission::Write]);
        assert_eq!(config.denied, [Permission::Delete, Permission::Shell]);
        assert!(config.allow_unspecified);
        assert!(serde_json::from_str::<PermissionConfig>(r#"{"alowed": []}"#).is_err());
    }

    #[test]
    fn permissions_round_trip_through_config_text() {
        let parsed: Vec<Permission> =
            serde_json::from_str(r#"["read","Shell","custom:db:admin","other"]"#).unwrap();
        assert_eq!(
            parsed,
            vec![
                Permission::Read,
                Permission::Shell,
                Permission::Custom("db:admin".into()),
                Permission::Custom("other".into())
            ]
        );
        let text = serde_json::to_string(&parsed).unwrap();
        assert_eq!(text, r#"["read","shell","custom:db:admin","custom:other"]"#);
    }

    fn any_permission() -> impl Strategy<Value = Permission> {
        prop_oneof![
            Just(Permission::Read),
            Just(Permission::Write),
            Just(Permission::Delete),
            Just(Permission::Network),
            Just(Permission::Shell),
            Just(Permission::FileSystem),
            "[a-c]{1,2}".prop_map(Permission::Custom),
        ]
    }

    proptest! {
        #[test]
        fn a_denied_permission_never_passes(
            allowed in proptest::collection::vec(any_permission(), 0..5),
            denied in proptest::collection::vec(any_permission(), 1..5),
            others in proptest::collection::vec(any_permission(), 0..4),
            allow_unspecified in any::<bool>(),
            pick in any::<prop::sample::Index>(),
        ) {
            let victim = denied[pick.index(denied.len())].clone();
            let checker = checker(allowed, denied, allow_unspecified);
            let mut declared = others;
            declared.push(victim);
            prop_assert!(checker.check("t", &declared).is_err());
        }
    }
}
