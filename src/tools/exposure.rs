//! Exposure gates: which registered tools the model is offered, and which may run — with every
//! decision explained.
//!
//! Zed decides this with gates that drop tools *silently* (profile allowlists, feature flags,
//! restricted mode). agcore keeps the gates and says, for every tool, which gate hid it:
//!
//! - **profile**: the active [`Profile`]'s allowlist;
//! - **restricted mode** (untrusted workspace): tools with
//!   [`BaseTool::allow_in_restricted_mode`] `== false` (by default those needing `Network` or
//!   `Shell`);
//! - **feature flags**: [`BaseTool::required_flags`] must all be enabled;
//! - **provider**: [`BaseTool::supports_provider`];
//! - **permissions**: a tool whose declared permissions can never pass the registry's checker;
//! - **MCP server config**: a server's tool its `include` / `exclude` lists leave out (or that
//!   agcore cannot use) is never registered; [`ExposureReport::with_skipped_mcp_tools`] adds it
//!   to a report as hidden, with the reason.
//!
//! Profile, restricted mode and flags are checked again when a call runs, so a hidden tool a
//! model names anyway is refused with [`crate::tools::ToolError::NotExposed`], never run.

use std::collections::BTreeSet;
use std::fmt;

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::mcp::McpSkipReason;
use crate::tools::permission::{Permission, PermissionDenial};
use crate::tools::profile::{Profile, ProfileEntry, default_profiles};
use crate::tools::registry::ToolRegistry;

mod report;
mod unique;

pub use report::{ExposureReport, ToolExposure};
pub use unique::has_duplicate_names;

/// Why a gate hid a tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "gate", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HiddenBecause {
    /// The active profile does not list it.
    Profile {
        /// The active profile.
        profile: String,
    },
    /// Restricted mode is on and the tool is not allowed in it.
    RestrictedMode {
        /// The tool's permissions that restricted mode cuts (`Network`, `Shell`); empty when
        /// the tool itself opts out.
        permissions: Vec<Permission>,
    },
    /// Feature flags the tool requires are not enabled.
    FeatureFlags {
        /// The missing flags.
        missing: Vec<String>,
    },
    /// The tool does not support this provider/model.
    Provider {
        /// The provider.
        provider: String,
        /// The model.
        model: String,
    },
    /// The permission checker can never let it run.
    Permissions {
        /// Every refused permission and why.
        refused: Vec<PermissionDenial>,
    },
    /// An MCP server's tool that was not registered: the server's `include` / `exclude` lists
    /// leave it out, or agcore cannot use it (see [`McpSkipReason`]).
    McpSkipped {
        /// The server.
        server: String,
        /// Why.
        reason: McpSkipReason,
    },
}

impl fmt::Display for HiddenBecause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HiddenBecause::Profile { profile } => write!(f, "not in profile '{profile}'"),
            HiddenBecause::RestrictedMode { permissions } if permissions.is_empty() => {
                f.write_str("restricted mode: the tool is not allowed in untrusted workspaces")
            }
            HiddenBecause::RestrictedMode { permissions } => {
                write!(f, "restricted mode: needs {}", join(permissions))
            }
            HiddenBecause::FeatureFlags { missing } => {
                write!(f, "feature flag(s) not enabled: {}", missing.join(", "))
            }
            HiddenBecause::Provider { provider, model } => {
                write!(
                    f,
                    "does not support provider '{provider}' (model '{model}')"
                )
            }
            HiddenBecause::Permissions { refused } => {
                write!(f, "permission denied: {}", join(refused))
            }
            HiddenBecause::McpSkipped { server, reason } => {
                write!(f, "not registered (mcp server '{server}'): {reason}")
            }
        }
    }
}

/// `reasons` joined with `; ` (the text of [`crate::tools::ToolError::NotExposed`]).
pub fn describe_reasons(reasons: &[HiddenBecause]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

pub(crate) fn join<T: fmt::Display>(items: &[T]) -> String {
    items
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A problem with the exposure configuration: a typo or an unreachable tool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "problem", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ExposureError {
    /// The selected profile does not exist.
    #[error("unknown profile '{name}'; profiles are: {}", known.join(", "))]
    UnknownProfile {
        /// The requested name.
        name: String,
        /// The defined profiles.
        known: Vec<String>,
    },
    /// A profile lists a tool that is not registered.
    #[error("profile '{profile}' lists tool '{tool}', which is not registered{}", suggestion.as_ref().map(|s| format!(" (did you mean '{s}'?)")).unwrap_or_default())]
    UnknownTool {
        /// The profile.
        profile: String,
        /// The listed name.
        tool: String,
        /// The closest registered name, if one is close.
        suggestion: Option<String>,
    },
    /// A profile lists an MCP server none of the registered tools comes from.
    #[error(
        "profile '{profile}' lists MCP server '{server}', but no registered tool comes from it"
    )]
    UnknownMcpServer {
        /// The profile.
        profile: String,
        /// The server.
        server: String,
    },
    /// No profile lists the tool, so no profile can offer it.
    #[error("tool '{tool}' is not in any profile, so no profile can offer it")]
    Unreachable {
        /// The tool.
        tool: String,
    },
    /// A rule on arguments ([`crate::tools::rules`]) is not valid: a bad pattern, or not
    /// exactly one test.
    #[error("argument rule {rule} (tool '{tool}') is invalid: {reason}")]
    InvalidRule {
        /// The rule's number (1-based, in configuration order).
        rule: usize,
        /// The tool it names.
        tool: String,
        /// What is wrong.
        reason: String,
    },
    /// A rule on arguments names a tool that is not registered.
    #[error("argument rule {rule} names tool '{tool}', which is not registered")]
    RuleUnknownTool {
        /// The rule's number.
        rule: usize,
        /// The tool it names.
        tool: String,
    },
    /// A rule on arguments names an argument the tool's parameters do not declare.
    #[error(
        "argument rule {rule} names argument '{argument}' of tool '{tool}', which it does not declare (its arguments: {})",
        if known.is_empty() { "none".to_owned() } else { known.join(", ") }
    )]
    RuleUnknownArgument {
        /// The rule's number.
        rule: usize,
        /// The tool.
        tool: String,
        /// The argument it names.
        argument: String,
        /// The arguments the tool declares.
        known: Vec<String>,
    },
}

/// Every problem [`ExposurePolicy::check`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} exposure problem(s): {}", problems.len(), join(problems))]
pub struct ExposureCheckError {
    /// The problems, in profile order.
    pub problems: Vec<ExposureError>,
}

/// The exposure gates of a registry: profiles, restricted mode and feature flags.
///
/// The default has the built-in profiles (`ask`, `write`, `minimal`) with none selected (no
/// profile gate), restricted mode off and no flags.
///
/// ```
/// use agcore::tools::exposure::ExposurePolicy;
///
/// let policy = ExposurePolicy::default()
///     .with_profile("ask")?
///     .with_restricted_mode(true)
///     .with_flags(["lsp"]);
/// assert_eq!(policy.active_profile(), Some("ask"));
/// assert!(ExposurePolicy::default().with_profile("aks").is_err());
/// # Ok::<(), agcore::tools::exposure::ExposureError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExposurePolicy {
    profiles: IndexMap<String, Profile>,
    active: Option<String>,
    restricted: bool,
    flags: BTreeSet<String>,
}

impl Default for ExposurePolicy {
    fn default() -> Self {
        ExposurePolicy {
            profiles: default_profiles().into_iter().collect(),
            active: None,
            restricted: false,
            flags: BTreeSet::new(),
        }
    }
}

impl ExposurePolicy {
    /// The default policy (built-in profiles, none selected, nothing restricted).
    pub fn new() -> Self {
        Self::default()
    }

    /// A policy without any profile (not even the built-in ones); define your own with
    /// [`ExposurePolicy::with_profile_definition`].
    pub fn empty() -> Self {
        ExposurePolicy {
            profiles: IndexMap::new(),
            ..Self::default()
        }
    }

    /// Define (or replace) a profile.
    pub fn with_profile_definition(mut self, name: impl Into<String>, profile: Profile) -> Self {
        self.profiles.insert(name.into(), profile);
        self
    }

    /// Select the active profile; an unknown name is an error, never a silent no-op.
    pub fn with_profile(mut self, name: &str) -> Result<Self, ExposureError> {
        if !self.profiles.contains_key(name) {
            return Err(ExposureError::UnknownProfile {
                name: name.to_owned(),
                known: self.profiles.keys().cloned().collect(),
            });
        }
        self.active = Some(name.to_owned());
        Ok(self)
    }

    /// Turn restricted mode (untrusted workspace) on or off.
    pub fn with_restricted_mode(mut self, restricted: bool) -> Self {
        self.restricted = restricted;
        self
    }

    /// Enable feature flags.
    pub fn with_flags<I, S>(mut self, flags: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.flags.extend(flags.into_iter().map(Into::into));
        self
    }

    /// The defined profiles, in definition order.
    pub fn profiles(&self) -> impl Iterator<Item = (&str, &Profile)> {
        self.profiles
            .iter()
            .map(|(name, profile)| (name.as_str(), profile))
    }

    /// The active profile's name.
    pub fn active_profile(&self) -> Option<&str> {
        self.active.as_deref()
    }

    /// Whether restricted mode is on.
    pub fn is_restricted(&self) -> bool {
        self.restricted
    }

    /// The enabled flags.
    pub fn flags(&self) -> impl Iterator<Item = &str> {
        self.flags.iter().map(String::as_str)
    }

    /// What the policy's own gates (profile, restricted mode, flags) say about `tool`; empty =
    /// the policy lets it through. Provider and permissions are the registry's part.
    pub fn gate(&self, tool: &dyn BaseTool) -> Vec<HiddenBecause> {
        let mut reasons = Vec::new();
        if let Some(active) = &self.active
            && !self.profiles.get(active).is_some_and(|p| p.allows(tool))
        {
            reasons.push(HiddenBecause::Profile {
                profile: active.clone(),
            });
        }
        if self.restricted && !tool.allow_in_restricted_mode() {
            let permissions = tool
                .required_permissions()
                .into_iter()
                .filter(|p| matches!(p, Permission::Network | Permission::Shell))
                .collect();
            reasons.push(HiddenBecause::RestrictedMode { permissions });
        }
        let missing: Vec<String> = tool
            .required_flags()
            .into_iter()
            .filter(|flag| !self.flags.contains(flag))
            .collect();
        if !missing.is_empty() {
            reasons.push(HiddenBecause::FeatureFlags { missing });
        }
        reasons
    }

    /// Every exposure decision for `registry`'s tools when talking to `provider`/`model`.
    pub fn explain(&self, registry: &ToolRegistry, provider: &str, model: &str) -> ExposureReport {
        let tools = registry
            .tools()
            .map(|tool| {
                let decision = registry.permission_decision(tool.as_ref());
                let mut hidden_because = self.gate(tool.as_ref());
                if !tool.supports_provider(provider, model) {
                    hidden_because.push(HiddenBecause::Provider {
                        provider: provider.to_owned(),
                        model: model.to_owned(),
                    });
                }
                if !decision.refused.is_empty() {
                    hidden_because.push(HiddenBecause::Permissions {
                        refused: decision.refused,
                    });
                }
                ToolExposure {
                    rules: registry.argument_rules().describe(tool.name()),
                    name: tool.name().to_owned(),
                    source: tool.source(),
                    kind: tool.kind(),
                    permissions: tool.required_permissions(),
                    ask: decision.ask,
                    exposed: hidden_because.is_empty(),
                    hidden_because,
                }
            })
            .collect();
        ExposureReport {
            provider: provider.to_owned(),
            model: model.to_owned(),
            profile: self.active.clone(),
            restricted: self.restricted,
            flags: self.flags.iter().cloned().collect(),
            tools,
            problems: {
                let mut problems = self.profile_problems(registry);
                problems.extend(registry.rule_problems());
                problems
            },
        }
    }

    /// Typos in profiles: every tool name and MCP server a profile lists must exist in
    /// `registry`.
    pub fn profile_problems(&self, registry: &ToolRegistry) -> Vec<ExposureError> {
        let names = registry.list_tools();
        let servers: BTreeSet<String> = registry
            .tools()
            .filter_map(|tool| match tool.source() {
                ToolSource::Mcp { server } => Some(server),
                _ => None,
            })
            .collect();
        let mut problems = Vec::new();
        for (profile, definition) in &self.profiles {
            for entry in &definition.tools {
                match entry {
                    ProfileEntry::Tool(tool) if !names.contains(tool) => {
                        problems.push(ExposureError::UnknownTool {
                            profile: profile.clone(),
                            tool: tool.clone(),
                            suggestion: closest(tool, &names),
                        });
                    }
                    ProfileEntry::McpServer(server) if !servers.contains(server) => {
                        problems.push(ExposureError::UnknownMcpServer {
                            profile: profile.clone(),
                            server: server.clone(),
                        });
                    }
                    _ => {}
                }
            }
        }
        problems
    }

    /// Tools that no profile lists (Zed's "every tool is in the permission list" test,
    /// generalised).
    pub fn unreachable_tools(&self, registry: &ToolRegistry) -> Vec<ExposureError> {
        registry
            .tools()
            .filter(|tool| !self.profiles.values().any(|p| p.allows(tool.as_ref())))
            .map(|tool| ExposureError::Unreachable {
                tool: tool.name().to_owned(),
            })
            .collect()
    }

    /// For users' tests: every name a profile lists exists, and every registered tool is
    /// reachable in at least one profile.
    ///
    /// ```
    /// use agcore::tools::ToolRegistry;
    /// use agcore::tools::exposure::ExposurePolicy;
    ///
    /// // In your tests: build the registry your app builds, then
    /// let registry = ToolRegistry::new();
    /// ExposurePolicy::default().check(&registry).unwrap();
    /// ```
    pub fn check(&self, registry: &ToolRegistry) -> Result<(), ExposureCheckError> {
        let mut problems = self.profile_problems(registry);
        problems.extend(self.unreachable_tools(registry));
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ExposureCheckError { problems })
        }
    }
}

/// The closest of `names` to `typo` (edit distance at most 2, or a third of its length).
fn closest(typo: &str, names: &[String]) -> Option<String> {
    let limit = (typo.chars().count() / 3).max(2);
    names
        .iter()
        .map(|name| (edit_distance(typo, name), name))
        .filter(|(distance, _)| *distance <= limit)
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name.clone())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut previous = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitution = previous + usize::from(ca != *cb);
            previous = row[j + 1];
            row[j + 1] = substitution.min(row[j] + 1).min(previous + 1);
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typos_get_a_suggestion() {
        let names = vec!["read_file".to_owned(), "grep".to_owned()];
        assert_eq!(closest("raed_file", &names).as_deref(), Some("read_file"));
        assert_eq!(closest("fetch", &names), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
