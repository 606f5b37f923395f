//! What an [`Approver`] is asked ([`ApprovalRequest`]) and what it answers
//! ([`ApprovalDecision`]), and the approvers agcore ships. When to ask is
//! [`crate::tools::approval`]'s part.

use crate::tools::call_digest::CallDigest;
use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::capability::Permission;
use crate::tools::kind::ToolKind;

/// What an [`Approver`] is asked. Serialisable: a suspended run stores its pending requests
/// (see [`ApprovalDecision::Defer`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRequest {
    /// The tool.
    pub tool: String,
    /// The call id.
    pub call_id: String,
    /// A human title for the call ([`crate::tools::BaseTool::title`]).
    pub title: String,
    /// The tool's kind.
    pub kind: ToolKind,
    /// The (validated) arguments.
    pub arguments: Value,
    /// The permissions configured as *ask* that this call needs.
    pub permissions: Vec<Permission>,
    /// Why approval is needed, in words.
    pub reason: String,
    /// The digest of the call as shown here (tool and arguments), taken when it was asked:
    /// a decision for a deferred call applies only while the call still has it. `None` in
    /// requests stored by earlier versions (then it is computed from `tool` and `arguments`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<CallDigest>,
}

impl ApprovalRequest {
    /// The digest of the call this request shows: its tool and arguments.
    pub fn shown_digest(&self) -> CallDigest {
        CallDigest::of(&self.tool, &self.arguments)
    }
}

/// An approver's answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum ApprovalDecision {
    /// Run this call.
    AllowOnce,
    /// Run this call and every later call of this tool in the session.
    AllowForSession,
    /// Run this call and later calls of this tool with the same arguments in the session.
    AllowForSessionWithArgs,
    /// Do not run it; `message` (if any) is passed to the model.
    Deny {
        /// A message for the model (e.g. "use the staging database instead").
        message: Option<String>,
    },
    /// Decide later (a person who is not there now, a review queue). A run started with
    /// [`crate::run::RunRequest`] then suspends, holding this request until a decision is
    /// given, in this process or another; any other caller (the design's `submit_with_tools`,
    /// [`crate::tools::ToolRegistry::invoke`]) cannot wait, and refuses the call with
    /// [`crate::tools::ToolError::ApprovalDeferred`].
    Defer,
}

/// Decides whether a call that needs approval may run (a terminal prompt, a UI, a policy).
///
/// ```
/// use agcore::tools::prelude::*;
/// use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
///
/// struct OnlyTmp;
///
/// #[async_trait]
/// impl Approver for OnlyTmp {
///     async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
///         match request.arguments["path"].as_str() {
///             Some(path) if path.starts_with("/tmp/") => ApprovalDecision::AllowOnce,
///             _ => ApprovalDecision::Deny { message: Some("only /tmp is writable".into()) },
///         }
///     }
/// }
/// ```
#[async_trait]
pub trait Approver: Send + Sync {
    /// Answer one request.
    ///
    /// The registry asks one request at a time (per registry), so an "allow for the session"
    /// answer also covers the parallel calls waiting behind it instead of asking again.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision;
}

/// Approves everything once (the CLI's `--yes`).
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

#[async_trait]
impl Approver for ApproveAll {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::AllowOnce
    }
}

/// Denies everything with the same message (non-interactive runs without `--yes`).
#[derive(Debug, Clone, Default)]
pub struct DenyAll {
    /// The message for the model.
    pub message: Option<String>,
}

#[async_trait]
impl Approver for DenyAll {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Deny {
            message: self.message.clone(),
        }
    }
}

/// Defers every request: a run that can suspend does, with every call that needs approval
/// pending (the CLI's `agcore run --session` without a terminal).
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferAll;

#[async_trait]
impl Approver for DeferAll {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Defer
    }
}
