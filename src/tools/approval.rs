//! Approvals (human in the loop): a permission can be configured as *ask*; before such a call
//! runs, an [`Approver`] is asked with the tool, its arguments and the reason.
//!
//! Precedence per declared permission: `denied` (in [`crate::tools::PermissionConfig`]) always
//! refuses; otherwise a permission listed in [`ApprovalPolicy::ask`] is asked — also when the
//! checker alone would refuse it as not allowed; otherwise the checker decides. No approver
//! configured + *ask* = the call is denied with a message saying so.

use std::sync::Mutex;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use crate::tools::approver::{
    ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DeferAll, DenyAll,
};
use crate::tools::capability::Permission;
use crate::tools::permission::PermissionChecker;
use crate::tools::reasons::{DenialReason, PermissionDenial};

/// Which permissions need a human's approval instead of a plain allow.
///
/// Kept apart from [`crate::tools::PermissionConfig`] so the design's struct literal
/// `PermissionConfig { allowed, denied, allow_unspecified }` keeps compiling.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalPolicy {
    /// Permissions whose calls must be approved (e.g. `["write"]`).
    #[serde(default)]
    pub ask: Vec<Permission>,
    /// What happens to a tool whose permissions are only assumed
    /// ([`crate::tools::BaseTool::permissions_assumed`]: an MCP tool without annotations)
    /// when the checker would refuse them.
    #[serde(default)]
    pub unannotated: UnannotatedTools,
}

/// What a registry does with a tool whose permissions are a worst-case guess (an MCP tool
/// whose server says nothing about what it does) when the permission checker would refuse
/// the guess.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnannotatedTools {
    /// Hide it, like a tool that declares those permissions (the library's default: without
    /// an approver an asked call is denied anyway).
    #[default]
    Hide,
    /// Offer it and ask the [`Approver`] before each call (an "allow for the session" answer
    /// covers its later calls), as Codex and Claude Code do. A refusal of a guessed
    /// permission becomes a question, even when the permission is in `denied`: the tool was
    /// never known to need it. Restricted mode, profiles and flags still hide it.
    Ask,
}

impl ApprovalPolicy {
    /// Ask before calls needing any of `ask`.
    pub fn ask(ask: impl IntoIterator<Item = Permission>) -> Self {
        ApprovalPolicy {
            ask: ask.into_iter().collect(),
            unannotated: UnannotatedTools::default(),
        }
    }

    /// Set what happens to tools whose permissions are only assumed.
    pub fn with_unannotated(mut self, unannotated: UnannotatedTools) -> Self {
        self.unannotated = unannotated;
        self
    }

    /// The decision for a tool declaring `declared` (`assumed`: a worst-case guess, see
    /// [`crate::tools::BaseTool::permissions_assumed`]) under `checker`. With
    /// [`UnannotatedTools::Ask`], an assumed tool's refused permissions are asked instead.
    pub fn decide_for(
        &self,
        checker: Option<&PermissionChecker>,
        declared: &[Permission],
        assumed: bool,
    ) -> PermissionDecision {
        let mut decision = self.decide(checker, declared);
        if assumed && self.unannotated == UnannotatedTools::Ask && !decision.refused.is_empty() {
            for denial in std::mem::take(&mut decision.refused) {
                if !decision.ask.contains(&denial.permission) {
                    decision.ask.push(denial.permission);
                }
            }
            decision.unannotated = true;
        }
        decision
    }

    /// The decision for a tool declaring `declared`, under `checker` (none = allow everything).
    pub fn decide(
        &self,
        checker: Option<&PermissionChecker>,
        declared: &[Permission],
    ) -> PermissionDecision {
        let mut refused = Vec::new();
        if let Some(checker) = checker {
            for (permission, reason) in checker.denials(declared) {
                // An explicit deny always wins; "not allowed"/"unspecified" become a question
                // when the permission is configured as ask.
                let askable = reason != DenialReason::Denied && self.ask.contains(&permission);
                if !askable {
                    refused.push(PermissionDenial { permission, reason });
                }
            }
        }
        let mut ask: Vec<Permission> = Vec::new();
        for permission in declared {
            if self.ask.contains(permission) && !ask.contains(permission) {
                ask.push(permission.clone());
            }
        }
        PermissionDecision {
            refused,
            ask,
            unannotated: false,
        }
    }
}

/// What the permission rules say about one tool.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PermissionDecision {
    /// Permissions refused outright (the tool can never run while this is not empty).
    pub refused: Vec<PermissionDenial>,
    /// Permissions that need approval before each call (unless granted for the session).
    pub ask: Vec<Permission>,
    /// The tool's permissions are only assumed (it says nothing about what it does), and it
    /// is asked instead of refused ([`UnannotatedTools::Ask`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub unannotated: bool,
}

/// An "allow for the session" answer, as a session store keeps it: a run resumed in another
/// process continues with the grants the session was given.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGrant {
    /// The tool.
    pub tool: String,
    /// For [`ApprovalDecision::AllowForSessionWithArgs`]: only calls with these arguments.
    /// `None`: every call of the tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Value>,
}

/// Where a [`crate::tools::ToolRegistry`] records each session grant it is given
/// (`ToolRegistry::with_grant_recorder`): `crate::session::SessionJournal` stores it with the
/// session, so it survives the process.
#[async_trait]
pub trait GrantRecorder: Send + Sync {
    /// Keep `grant`. A failure is the recorder's to report (the grant still holds in this
    /// process; a later one asks again).
    async fn record_grant(&self, grant: &SessionGrant);
}

/// Approvals granted for the rest of the session (kept by the registry).
#[derive(Debug, Default)]
pub(crate) struct SessionGrants {
    inner: Mutex<Grants>,
    /// Held while an approver is asked: parallel calls wait, then see the grant it gave.
    asking: tokio::sync::Mutex<()>,
}

#[derive(Debug, Default)]
struct Grants {
    tools: Vec<String>,
    calls: Vec<(String, Value)>,
}

impl SessionGrants {
    fn lock(&self) -> std::sync::MutexGuard<'_, Grants> {
        // A panic while holding the lock cannot leave the lists half-updated; keep using them.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Whether `tool` (or `tool` with exactly these arguments) was granted for the session.
    pub(crate) fn covers(&self, tool: &str, arguments: &Value) -> bool {
        let grants = self.lock();
        // `Value` equality ignores object key order, so `{"a":1,"b":2}` matches `{"b":2,"a":1}`.
        grants.tools.iter().any(|granted| granted == tool)
            || grants
                .calls
                .iter()
                .any(|(granted, args)| granted == tool && args == arguments)
    }

    /// Remember a session-wide answer; the grant when it is a new one.
    pub(crate) fn remember(
        &self,
        tool: &str,
        arguments: &Value,
        decision: &ApprovalDecision,
    ) -> Option<SessionGrant> {
        let grant = match decision {
            ApprovalDecision::AllowForSession => SessionGrant {
                tool: tool.to_owned(),
                arguments: None,
            },
            ApprovalDecision::AllowForSessionWithArgs => SessionGrant {
                tool: tool.to_owned(),
                arguments: Some(arguments.clone()),
            },
            ApprovalDecision::AllowOnce
            | ApprovalDecision::Deny { .. }
            | ApprovalDecision::Defer => return None,
        };
        self.restore(&grant).then_some(grant)
    }

    /// Add a grant (one the session was given earlier); `false` when it was there already.
    pub(crate) fn restore(&self, grant: &SessionGrant) -> bool {
        let mut grants = self.lock();
        match &grant.arguments {
            None if grants.tools.contains(&grant.tool) => false,
            None => {
                grants.tools.push(grant.tool.clone());
                true
            }
            Some(arguments) => {
                let call = (grant.tool.clone(), arguments.clone());
                if grants.calls.contains(&call) {
                    false
                } else {
                    grants.calls.push(call);
                    true
                }
            }
        }
    }

    /// Wait for the turn to ask an approver (one question at a time).
    pub(crate) async fn ask_turn(&self) -> tokio::sync::MutexGuard<'_, ()> {
        self.asking.lock().await
    }

    /// Forget the grants for `tool` (it was unregistered: a tool registered later under the
    /// same name is another tool, and the user never approved it).
    pub(crate) fn forget(&self, tool: &str) {
        let mut grants = self.lock();
        grants.tools.retain(|granted| granted != tool);
        grants.calls.retain(|(granted, _)| granted != tool);
    }

    /// Forget every grant.
    pub(crate) fn clear(&self) {
        let mut grants = self.lock();
        grants.tools.clear();
        grants.calls.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::permission::PermissionConfig;

    #[test]
    fn ask_turns_a_not_allowed_permission_into_a_question() {
        let checker = PermissionChecker::new(PermissionConfig::default());
        let policy = ApprovalPolicy::ask([Permission::Write]);
        let decision = policy.decide(Some(&checker), &[Permission::Read, Permission::Write]);
        assert!(decision.refused.is_empty());
        assert_eq!(decision.ask, [Permission::Write]);
    }

    #[test]
    fn an_explicit_deny_wins_over_ask() {
        let checker = PermissionChecker::new(PermissionConfig::default());
        let policy = ApprovalPolicy::ask([Permission::Shell]);
        let decision = policy.decide(Some(&checker), &[Permission::Shell]);
        assert_eq!(decision.refused.len(), 1);
        assert_eq!(decision.refused[0].reason, DenialReason::Denied);
    }

    #[test]
    fn an_allowed_permission_listed_as_ask_is_still_asked() {
        let checker = PermissionChecker::new(PermissionConfig::default());
        let decision = ApprovalPolicy::ask([Permission::Network])
            .decide(Some(&checker), &[Permission::Network]);
        assert!(decision.refused.is_empty());
        assert_eq!(decision.ask, [Permission::Network]);
    }

    #[test]
    fn session_grants_match_arguments_regardless_of_key_order() {
        let grants = SessionGrants::default();
        let args: Value = serde_json::from_str(r#"{"a":1,"b":2}"#).unwrap();
        grants.remember("t", &args, &ApprovalDecision::AllowForSessionWithArgs);
        let reordered: Value = serde_json::from_str(r#"{"b":2,"a":1}"#).unwrap();
        assert!(grants.covers("t", &reordered));
        assert!(!grants.covers("t", &serde_json::json!({"a": 1})));
        assert!(!grants.covers("u", &args));
        grants.clear();
        assert!(!grants.covers("t", &args));
    }
}
