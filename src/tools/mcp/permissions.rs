//! Which permissions an MCP tool needs: its annotations read with the spec's defaults, unless
//! the user overrides them (see [`McpToolAdapter`](crate::tools::mcp::McpToolAdapter)).
//!
//! Annotations are hints from the server. agcore believes a configured server's hints by
//! default — configuring a server is the trust decision, and a stdio server runs as the user
//! anyway, so a lying server is no worse than the code it already runs — but an absent hint
//! takes the spec's default (`readOnlyHint: false`, `destructiveHint: true`,
//! `openWorldHint: true`): a tool that says nothing counts as writing, destructive and
//! open-world. A user who does not believe a server turns its hints off
//! (`trust_annotations = false`: every tool counts as unannotated); a user who knows better
//! names a tool's permissions outright.

use std::collections::BTreeMap;

use rmcp::model::ToolAnnotations;

use crate::tools::kind::ToolKind;
use crate::tools::permission::Permission;

/// What the user said about a server's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PermissionRule {
    /// Whether the server's annotations count (default true).
    pub trust_annotations: bool,
    /// Replaces the spec's default (`Write`, `Delete`) for tools that say neither
    /// `readOnlyHint` nor `destructiveHint` (empty = the spec's default).
    pub default: Vec<Permission>,
    /// Exact permissions per tool (by its name on the server); wins over everything.
    pub per_tool: BTreeMap<String, Vec<Permission>>,
}

impl Default for PermissionRule {
    fn default() -> Self {
        PermissionRule {
            trust_annotations: true,
            default: Vec::new(),
            per_tool: BTreeMap::new(),
        }
    }
}

impl PermissionRule {
    /// Whether the permissions of `tool` with `annotations` are the spec's worst-case defaults
    /// because it says nothing about what it does: no user override, and neither
    /// `readOnlyHint` nor `destructiveHint` (counting distrusted annotations as absent).
    pub(crate) fn assumed(&self, tool: &str, annotations: Option<&ToolAnnotations>) -> bool {
        if self.per_tool.contains_key(tool) || !self.default.is_empty() {
            return false;
        }
        match annotations.filter(|_| self.trust_annotations) {
            Some(hints) => hints.read_only_hint.is_none() && hints.destructive_hint.is_none(),
            None => true,
        }
    }

    /// The permissions and kind of the tool `tool` with `annotations`.
    pub(crate) fn permissions(
        &self,
        tool: &str,
        annotations: Option<&ToolAnnotations>,
    ) -> (Vec<Permission>, ToolKind) {
        if let Some(explicit) = self.per_tool.get(tool) {
            return (explicit.clone(), kind_of(explicit));
        }
        let none = ToolAnnotations::default();
        let hints = annotations
            .filter(|_| self.trust_annotations)
            .unwrap_or(&none);
        let says_nothing = hints.read_only_hint.is_none() && hints.destructive_hint.is_none();
        let (mut permissions, mut kind) = if hints.read_only_hint == Some(true) {
            (vec![Permission::Read], ToolKind::Read)
        } else if says_nothing && !self.default.is_empty() {
            (self.default.clone(), ToolKind::Other)
        } else if hints.destructive_hint.unwrap_or(true) {
            (
                vec![Permission::Write, Permission::Delete],
                ToolKind::Delete,
            )
        } else {
            (vec![Permission::Write], ToolKind::Edit)
        };
        if hints.open_world_hint != Some(false) && !permissions.contains(&Permission::Network) {
            permissions.push(Permission::Network);
        }
        if hints.open_world_hint == Some(true) && kind == ToolKind::Other {
            kind = ToolKind::Fetch;
        }
        (permissions, kind)
    }
}

/// The kind that best describes an explicit permission list.
fn kind_of(permissions: &[Permission]) -> ToolKind {
    let has = |p: Permission| permissions.contains(&p);
    if has(Permission::Shell) {
        ToolKind::Execute
    } else if has(Permission::Delete) {
        ToolKind::Delete
    } else if has(Permission::Write) {
        ToolKind::Edit
    } else if has(Permission::Read) {
        ToolKind::Read
    } else if has(Permission::Network) {
        ToolKind::Fetch
    } else {
        ToolKind::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Permission::{Delete, Network, Read, Write};

    fn of(annotations: Option<ToolAnnotations>) -> (Vec<Permission>, ToolKind) {
        PermissionRule::default().permissions("t", annotations.as_ref())
    }

    #[test]
    fn an_unannotated_tool_counts_as_writing_destructive_and_open_world() {
        assert_eq!(of(None), (vec![Write, Delete, Network], ToolKind::Delete));
        let titled = ToolAnnotations::with_title("Only a title");
        assert_eq!(
            of(Some(titled)),
            (vec![Write, Delete, Network], ToolKind::Delete)
        );
    }

    #[test]
    fn annotations_map_to_permissions_with_the_spec_defaults_for_absent_hints() {
        let read = ToolAnnotations::new().read_only(true).open_world(false);
        assert_eq!(of(Some(read)), (vec![Read], ToolKind::Read));
        let read_open = ToolAnnotations::new().read_only(true);
        assert_eq!(of(Some(read_open)), (vec![Read, Network], ToolKind::Read));
        // readOnlyHint: true makes destructiveHint meaningless (the spec).
        let both = ToolAnnotations::new().read_only(true).destructive(true);
        assert_eq!(of(Some(both)), (vec![Read, Network], ToolKind::Read));
        let write = ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .open_world(false);
        assert_eq!(of(Some(write)), (vec![Write], ToolKind::Edit));
        let not_destructive = ToolAnnotations::new().destructive(false);
        assert_eq!(
            of(Some(not_destructive)),
            (vec![Write, Network], ToolKind::Edit)
        );
        let closed = ToolAnnotations::new().read_only(false).open_world(false);
        assert_eq!(of(Some(closed)), (vec![Write, Delete], ToolKind::Delete));
        let web = ToolAnnotations::new().open_world(true);
        assert_eq!(
            of(Some(web)),
            (vec![Write, Delete, Network], ToolKind::Delete)
        );
    }

    #[test]
    fn only_a_tool_that_says_nothing_has_assumed_permissions() {
        let rule = PermissionRule::default();
        assert!(rule.assumed("t", None));
        assert!(rule.assumed("t", Some(&ToolAnnotations::new().open_world(true))));
        assert!(!rule.assumed("t", Some(&ToolAnnotations::new().destructive(true))));
        assert!(!rule.assumed("t", Some(&ToolAnnotations::new().read_only(false))));
        let distrusted = PermissionRule {
            trust_annotations: false,
            ..PermissionRule::default()
        };
        assert!(distrusted.assumed("t", Some(&ToolAnnotations::new().read_only(true))));
        let overridden = PermissionRule {
            per_tool: BTreeMap::from([("t".to_owned(), vec![Read])]),
            ..PermissionRule::default()
        };
        assert!(!overridden.assumed("t", None));
        let server_default = PermissionRule {
            default: vec![Read],
            ..PermissionRule::default()
        };
        assert!(!server_default.assumed("t", None));
    }

    #[test]
    fn distrusted_annotations_count_as_absent() {
        let rule = PermissionRule {
            trust_annotations: false,
            ..PermissionRule::default()
        };
        let lying = ToolAnnotations::new().read_only(true).open_world(false);
        assert_eq!(
            rule.permissions("rm", Some(&lying)),
            (vec![Write, Delete, Network], ToolKind::Delete)
        );
    }

    #[test]
    fn user_overrides_win() {
        let rule = PermissionRule {
            trust_annotations: true,
            default: vec![Read],
            per_tool: BTreeMap::from([("clock".to_owned(), vec![Read])]),
        };
        assert_eq!(
            rule.permissions("clock", None),
            (vec![Read], ToolKind::Read)
        );
        let lying = ToolAnnotations::new().read_only(true);
        assert_eq!(
            rule.permissions("clock", Some(&lying)),
            (vec![Read], ToolKind::Read)
        );
        // The server-wide default replaces Write + Delete for tools that say neither hint;
        // Network still follows openWorldHint.
        assert_eq!(
            rule.permissions("other", None),
            (vec![Read, Network], ToolKind::Other)
        );
        let destructive = ToolAnnotations::new().destructive(true).open_world(false);
        assert_eq!(
            rule.permissions("other", Some(&destructive)),
            (vec![Write, Delete], ToolKind::Delete)
        );
        let shell = PermissionRule {
            per_tool: BTreeMap::from([("sh".to_owned(), vec![Permission::Shell])]),
            ..PermissionRule::default()
        };
        assert_eq!(
            shell.permissions("sh", None),
            (vec![Permission::Shell], ToolKind::Execute)
        );
    }
}
