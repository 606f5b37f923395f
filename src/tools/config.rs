//! [`ToolsConfig`]: the `[tools]` section of `agcore.toml` — permissions, approvals, profiles,
//! restricted mode and flags — and how it configures a [`ToolRegistry`].

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::tools::approval::{ApprovalPolicy, UnannotatedTools};
use crate::tools::exposure::{ExposureError, ExposurePolicy};
use crate::tools::permission::{Permission, PermissionChecker, PermissionConfig};
use crate::tools::profile::{Profile, ProfileEntry};
use crate::tools::registry::ToolRegistry;
use crate::tools::rules::{ArgumentRule, ArgumentRules};
use crate::tools::sandbox::SandboxPolicy;

/// The tool settings of a config file. Unknown keys are errors (a typo must not be ignored).
///
/// ```toml
/// [tools]
/// profile = "ask"            # ask | write | minimal | a profile defined below
/// restricted = false         # untrusted workspace: no Network/Shell tools
/// flags = ["lsp"]            # feature flags tools may require
/// ask = ["write"]            # permissions that need approval instead of allow
/// idempotent = ["run_command"] # also run again after a crash cut a call off (see below)
/// sandbox = { mode = "workspace-write", network = "off" }  # run_command's OS sandbox
/// unannotated = "ask"        # MCP tools without annotations: ask per call, or "hide"
/// deferred = ["mcp:github"]  # found with tool_search instead of sent (profile entries)
///
/// [tools.permissions]        # the design's PermissionConfig; default shown
/// allowed = ["read", "network"]
/// denied = ["delete", "shell"]
/// allow_unspecified = true
///
/// [tools.profiles.review]    # adds a profile (or replaces a built-in one of the same name)
/// description = "Read code, comment on GitHub"
/// tools = ["kind:read", "kind:search", "mcp:github"]
///
/// [[tools.rules]]            # rules on arguments (see crate::tools::rules)
/// tool = "run_command"
/// argument = "command"
/// matches = '^cargo (test|build)( [\w.=/-]+)*$'
/// action = "allow"
/// ```
///
/// Command-line flags override it: set the fields before calling [`ToolsConfig::apply`].
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolsConfig {
    /// Permission rules (default: [`PermissionConfig::default`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub permissions: Option<PermissionConfig>,
    /// Permissions that need approval instead of allow.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ask: Vec<Permission>,
    /// MCP tools without annotations (permissions only assumed): asked per call or hidden
    /// (unset: [`UnannotatedTools::Hide`]; the CLI makes it `ask`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unannotated: Option<UnannotatedTools>,
    /// The active profile (none: no profile gate).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<String>,
    /// Extra profiles, added to the built-in `ask`, `write` and `minimal`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub profiles: BTreeMap<String, Profile>,
    /// Restricted mode (untrusted workspace).
    #[serde(default)]
    pub restricted: bool,
    /// Enabled feature flags.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    /// Allow / ask / deny by a call's arguments ([`crate::tools::rules`]), in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rules: Vec<ArgumentRule>,
    /// Tools counted as idempotent besides those that declare it
    /// ([`crate::tools::BaseTool::idempotent`]): a call of one that a crash cut off runs again,
    /// with the same idempotency key, instead of being answered as interrupted
    /// ([`ToolRegistry::with_idempotent_tools`]). Name only tools whose every call is safe to
    /// repeat.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub idempotent: Vec<String>,
    /// The OS sandbox of `run_command` (`[tools.sandbox]`; default `workspace-write`, network
    /// off). Restricted mode makes it `read-only` with the network off whatever it says.
    #[serde(default, skip_serializing_if = "is_default_sandbox")]
    pub sandbox: SandboxPolicy,
    /// Deferred tools, written like a profile's entries (`mcp:github`, a tool name,
    /// `kind:fetch`): offered through `tool_search` instead of sent with every request
    /// ([`crate::tools::deferred`]; [`ToolRegistry::with_deferred_tools`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deferred: Vec<ProfileEntry>,
}

fn is_default_sandbox(policy: &SandboxPolicy) -> bool {
    *policy == SandboxPolicy::default()
}

impl ToolsConfig {
    /// The permission checker these settings describe.
    pub fn permission_checker(&self) -> PermissionChecker {
        PermissionChecker::new(self.permissions.clone().unwrap_or_default())
    }

    /// The sandbox policy in force: [`ToolsConfig::sandbox`], with restricted mode applied.
    pub fn sandbox_policy(&self) -> SandboxPolicy {
        self.sandbox.clone().restricted(self.restricted)
    }

    /// The approval policy these settings describe.
    pub fn approval_policy(&self) -> ApprovalPolicy {
        ApprovalPolicy::ask(self.ask.iter().cloned())
            .with_unannotated(self.unannotated.unwrap_or_default())
    }

    /// The exposure policy: built-in plus configured profiles, the selected profile (an unknown
    /// name is an error), restricted mode and flags.
    pub fn exposure_policy(&self) -> Result<ExposurePolicy, ExposureError> {
        let mut policy = self
            .profiles
            .iter()
            .fold(ExposurePolicy::default(), |policy, (name, profile)| {
                policy.with_profile_definition(name.clone(), profile.clone())
            })
            .with_restricted_mode(self.restricted)
            .with_flags(self.flags.iter().cloned());
        if let Some(profile) = &self.profile {
            policy = policy.with_profile(profile)?;
        }
        Ok(policy)
    }

    /// Configure `registry` with these settings (checker, approval policy, exposure policy,
    /// rules on arguments, idempotent tools, deferred tools). Check the profiles and rules against the registered tools
    /// afterwards with [`ToolRegistry::check_exposure`].
    pub fn apply(&self, registry: ToolRegistry) -> Result<ToolRegistry, ExposureError> {
        Ok(registry
            .with_permission_checker(self.permission_checker())
            .with_approval_policy(self.approval_policy())
            .with_exposure(self.exposure_policy()?)
            .with_argument_rules(ArgumentRules::new(self.rules.iter().cloned())?)
            .with_idempotent_tools(self.idempotent.iter().cloned())
            .with_deferred_tools(self.deferred.iter().cloned()))
    }
}
