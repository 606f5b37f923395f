//! Why a tool is hidden, refused or left out, as data: the exposure gates' reasons
//! ([`HiddenBecause`]), a refused permission ([`PermissionDenial`]), a tool its source offers
//! that was not registered ([`SkipReason`]), and problems in the exposure configuration
//! ([`ExposureError`]). A leaf: the error, the gates, the registry and the MCP client all speak
//! it; it knows none of them.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::tools::capability::Permission;
use crate::tools::source::ToolSource;

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
    /// The agent the run is in does not list it among its tools (a team's agent sees only
    /// the tools of its run that its own list names: it can narrow, never widen).
    Agent {
        /// The agent's path in the team, e.g. `main/researcher`.
        agent: String,
    },
    /// A hosted tool (the provider runs it, so no call can be asked about) whose
    /// permissions would be asked: allow them to offer it.
    NeedsApproval {
        /// The permissions that would be asked.
        permissions: Vec<Permission>,
    },
    /// Its source offers it but it was never registered: the source's own configuration leaves
    /// it out (an MCP server's `include` / `exclude` lists), or agcore cannot use it.
    NotRegistered {
        /// Where it comes from.
        source: ToolSource,
        /// Why.
        reason: SkipReason,
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
            HiddenBecause::Agent { agent } => write!(f, "not in the tools of agent '{agent}'"),
            HiddenBecause::Provider { provider, model } => {
                write!(
                    f,
                    "does not support provider '{provider}' (model '{model}')"
                )
            }
            HiddenBecause::Permissions { refused } => {
                write!(f, "permission denied: {}", join(refused))
            }
            HiddenBecause::NeedsApproval { permissions } => write!(
                f,
                "the provider runs it, so no call can be approved: allow {} to offer it",
                join(permissions)
            ),
            HiddenBecause::NotRegistered {
                source: ToolSource::Mcp { server },
                reason,
            } => write!(f, "not registered (mcp server '{server}'): {reason}"),
            HiddenBecause::NotRegistered { source, reason } => {
                write!(f, "not registered ({source}): {reason}")
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

/// A problem with the exposure configuration: a typo, an unreachable tool or an invalid rule.
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
    /// The tools counted as idempotent (`[tools] idempotent`) name a tool that is not
    /// registered.
    #[error("idempotent tool '{tool}' is not registered")]
    IdempotentUnknownTool {
        /// The name.
        tool: String,
    },
    /// An entry of the deferred tools (`[tools] deferred`, `"deferLoading"`) matches no
    /// registered tool.
    #[error("deferred entry '{entry}' matches no registered tool")]
    DeferredMatchesNothing {
        /// The entry, as written.
        entry: String,
    },
}

/// Every problem [`crate::tools::ExposurePolicy::check`] found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{} exposure problem(s): {}", problems.len(), join(problems))]
pub struct ExposureCheckError {
    /// The problems, in profile order.
    pub problems: Vec<ExposureError>,
}

/// Why one permission was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DenialReason {
    /// It is in `denied`.
    Denied,
    /// `allowed` is a whitelist and does not list it.
    NotAllowed,
    /// Nothing lists it and `allow_unspecified` is false (also: the tool declares nothing).
    Unspecified,
}

impl fmt::Display for DenialReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DenialReason::Denied => "it is in the denied list",
            DenialReason::NotAllowed => "it is not in the allowed list",
            DenialReason::Unspecified => "allow_unspecified is false",
        })
    }
}

/// One refused permission and why (data for reports and errors).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDenial {
    /// The permission (`Custom("unspecified")` when the tool declares none).
    pub permission: Permission,
    /// Why it was refused.
    pub reason: DenialReason,
}

impl fmt::Display for PermissionDenial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.permission, self.reason)
    }
}

/// Why a tool its source offers was not registered ([`HiddenBecause::NotRegistered`]). The texts
/// speak of a server: MCP servers are the sources whose tools agcore may leave out (the MCP
/// client re-exports this type as `McpSkipReason`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// Its input schema does not compile (e.g. an invalid `pattern` regex, an unresolvable
    /// `$ref`): arguments could not be validated.
    #[error("its input schema is not a valid JSON Schema: {detail}")]
    InvalidSchema {
        /// What the schema compiler reported.
        detail: String,
    },
    /// The source lists this name more than once; the first one is registered.
    #[error("the server lists a tool of this name more than once; the first one is used")]
    DuplicateName,
    /// The source's `include` list does not name it.
    #[error("the server's `include` list ({}) does not name it", include.join(", "))]
    NotIncluded {
        /// The `include` entries.
        include: Vec<String>,
    },
    /// The source's `exclude` list names it.
    #[error("excluded by the server's `exclude` entry '{pattern}'")]
    Excluded {
        /// The entry that matched.
        pattern: String,
    },
    /// The registry refused it.
    #[error("it could not be registered: {detail}")]
    Registration {
        /// The registry's error.
        detail: String,
    },
}
