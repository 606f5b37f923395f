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
//! - **source config**: a tool its source offers but leaves out (an MCP server's `include` /
//!   `exclude` lists), or that agcore cannot use, is never registered;
//!   [`ExposureReport::with_unregistered`] adds it to a report as hidden, with the reason.
//!
//! Profile, restricted mode and flags are checked again when a call runs, so a hidden tool a
//! model names anyway is refused with [`crate::tools::ToolError::NotExposed`], never run.
//!
//! This module holds the policy and its gate; the reasons are a leaf module of their own, and
//! the registry builds the [`ExposureReport`] ([`crate::tools::ToolRegistry::explain`]).

use std::collections::BTreeSet;
use std::sync::Arc;

use indexmap::IndexMap;

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::capability::Permission;
use crate::tools::profile::{Profile, ProfileEntry, default_profiles};

mod report;
mod unique;

pub use crate::tools::reasons::{
    ExposureCheckError, ExposureError, HiddenBecause, SkipReason, describe_reasons,
};
pub use report::{ExposureReport, ToolExposure};
pub use unique::has_duplicate_names;

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
    /// The tool lists of the team's agents this registry runs for, outermost first: a tool
    /// must be on every one (see [`ExposurePolicy::with_agent_tools`]).
    agents: Vec<(String, Profile)>,
}

impl Default for ExposurePolicy {
    fn default() -> Self {
        ExposurePolicy {
            profiles: default_profiles().into_iter().collect(),
            active: None,
            restricted: false,
            flags: BTreeSet::new(),
            agents: Vec::new(),
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

    /// Narrow the policy to the tools an agent lists (`agent`: its path in the team, shown
    /// in the reason). Each call adds a gate: an agent inside another sees only tools both
    /// list, so a sub-agent can never widen what its parent may use.
    pub fn with_agent_tools(mut self, agent: impl Into<String>, tools: Profile) -> Self {
        self.agents.push((agent.into(), tools));
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
        for (agent, tools) in &self.agents {
            if !tools.allows(tool) {
                reasons.push(HiddenBecause::Agent {
                    agent: agent.clone(),
                });
            }
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

    /// Typos in profiles: every tool name and MCP server a profile lists must exist among
    /// `tools` (a `&ToolRegistry` is such a list).
    pub fn profile_problems<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a Arc<dyn BaseTool>>,
    ) -> Vec<ExposureError> {
        let tools: Vec<&Arc<dyn BaseTool>> = tools.into_iter().collect();
        let names: Vec<String> = tools.iter().map(|tool| tool.name().to_owned()).collect();
        let servers: BTreeSet<String> = tools
            .iter()
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
    pub fn unreachable_tools<'a>(
        &self,
        tools: impl IntoIterator<Item = &'a Arc<dyn BaseTool>>,
    ) -> Vec<ExposureError> {
        tools
            .into_iter()
            .filter(|tool| !self.profiles.values().any(|p| p.allows(tool.as_ref())))
            .map(|tool| ExposureError::Unreachable {
                tool: tool.name().to_owned(),
            })
            .collect()
    }

    /// For users' tests: every name a profile lists exists, and every registered tool is
    /// reachable in at least one profile (`tools`: a `&ToolRegistry`, or any list of tools).
    ///
    /// ```
    /// use agcore::tools::ToolRegistry;
    /// use agcore::tools::exposure::ExposurePolicy;
    ///
    /// // In your tests: build the registry your app builds, then
    /// let registry = ToolRegistry::new();
    /// ExposurePolicy::default().check(&registry).unwrap();
    /// ```
    pub fn check<'a, T>(&self, tools: T) -> Result<(), ExposureCheckError>
    where
        T: IntoIterator<Item = &'a Arc<dyn BaseTool>>,
        T::IntoIter: Clone,
    {
        let tools = tools.into_iter();
        let mut problems = self.profile_problems(tools.clone());
        problems.extend(self.unreachable_tools(tools));
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
