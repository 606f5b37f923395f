//! Mid-run authorization ([`crate::tools::ToolContext::authorize`]): while a call runs, its tool
//! asks whether it may go on, through the same approver, grants and rules as a before-call
//! approval.
//!
//! The registry runs each execution inside a [`CallAuthority`] (a task-local) holding what the
//! question needs — the approver, the session's grants, the rules, the call — so a tool asks
//! without a handle on the registry.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use futures::FutureExt;

use serde_json::{Value, json};

use crate::tools::approval::{
    ApprovalDecision, ApprovalRequest, Approver, GrantRecorder, SessionGrants,
};
use crate::tools::approval_trace::{DENIED, DecidedBy, approval_here};
use crate::tools::base::BaseTool;
use crate::tools::call_digest::CallDigest;
use crate::tools::continuation;
use crate::tools::error::ToolError;
use crate::tools::rules::{ArgumentRules, RuleAction};

/// The key of a call's continuation that holds the mid-run question it waits on.
const AUTHORIZE: &str = "authorize";

/// What a call's mid-run question needs (see the module docs).
#[derive(Clone)]
pub(crate) struct CallAuthority {
    pub(crate) call_id: String,
    pub(crate) tool: Arc<dyn BaseTool>,
    pub(crate) input: Value,
    pub(crate) approver: Option<Arc<dyn Approver>>,
    pub(crate) grants: Arc<SessionGrants>,
    pub(crate) recorder: Option<Arc<dyn GrantRecorder>>,
    pub(crate) rules: Arc<ArgumentRules>,
}

tokio::task_local! {
    static AUTHORITY: CallAuthority;
}

impl CallAuthority {
    /// Run `future` (the call's execution) with this authority.
    pub(crate) async fn scope<F: Future>(self, future: F) -> F::Output {
        AUTHORITY.scope(self, future).await
    }
}

/// Ask about the call running on this task (see [`crate::tools::ToolContext::authorize`]).
pub(crate) async fn authorize(reason: String) -> Result<(), ToolError> {
    let Ok(authority) = AUTHORITY.try_with(Clone::clone) else {
        return Err(ToolError::ApprovalDenied {
            tool: String::new(),
            message: format!(
                "mid-run authorization ({}) asked outside a tool call of a registry",
                crate::display::escape_for_terminal(&reason)
            ),
        });
    };
    authority.ask(reason).await
}

impl CallAuthority {
    async fn ask(&self, reason: String) -> Result<(), ToolError> {
        let name = self.tool.name().to_owned();
        // A run suspended on this very question and resumed with a decision that lets the
        // call go on (a denial refuses the call before it runs again).
        if let Some(resumed) = continuation::resumed()
            && resumed[AUTHORIZE]["reason"].as_str() == Some(reason.as_str())
        {
            approval_here(
                &name,
                &self.call_id,
                &ApprovalDecision::AllowOnce,
                DecidedBy::Caller,
            );
            return Ok(());
        }
        let _turn = self.grants.ask_turn().await;
        if self.grants.covers(&name, &self.input) {
            approval_here(
                &name,
                &self.call_id,
                &ApprovalDecision::AllowOnce,
                DecidedBy::Grant,
            );
            return Ok(());
        }
        let Some(approver) = &self.approver else {
            // Nobody to ask: as before a call, an allow rule on the arguments decides.
            let verdict = self.rules.evaluate_for(self.tool.as_ref(), &self.input);
            if verdict.action == Some(RuleAction::Allow) {
                approval_here(
                    &name,
                    &self.call_id,
                    &ApprovalDecision::AllowOnce,
                    DecidedBy::Rule,
                );
                return Ok(());
            }
            approval_here(&name, &self.call_id, &DENIED, DecidedBy::NoApprover);
            return Err(ToolError::ApprovalDenied {
                tool: name,
                message: format!("it asked mid-run to {reason}, and no approver is configured"),
            });
        };
        let request = ApprovalRequest {
            tool: name.clone(),
            call_id: self.call_id.clone(),
            title: self.tool.title(&self.input),
            kind: self.tool.kind(),
            arguments: self.input.clone(),
            permissions: Vec::new(),
            reason: format!("tool '{name}' asks while it runs: {reason}"),
            digest: Some(CallDigest::of(&name, &self.input)),
        };
        let decision = ask_approver(approver.as_ref(), &request).await;
        approval_here(&name, &self.call_id, &decision, DecidedBy::Approver);
        if let Some(grant) = self.grants.remember(&name, &self.input, &decision)
            && let Some(recorder) = &self.recorder
        {
            recorder.record_grant(&grant).await;
        }
        match decision {
            ApprovalDecision::AllowOnce
            | ApprovalDecision::AllowForSession
            | ApprovalDecision::AllowForSessionWithArgs => Ok(()),
            ApprovalDecision::Deny { message } => Err(ToolError::ApprovalDenied {
                tool: name,
                message: message.unwrap_or_else(|| format!("the user declined: {reason}")),
            }),
            ApprovalDecision::Defer => {
                // A run that can wait suspends on it: the question is kept with the call, which
                // is run again once a decision lets it go on (and then passes here at once).
                continuation::record(json!({ AUTHORIZE: { "reason": reason } }))
                    .await
                    .map_err(|why| ToolError::NotStarted {
                        tool: name.clone(),
                        reason: why,
                    })?;
                Err(ToolError::ApprovalDeferred {
                    request: Box::new(request),
                })
            }
        }
    }
}

/// `approver`'s decision on `request`; a panicking approver denies the call instead of taking
/// the turn down.
pub(crate) async fn ask_approver(
    approver: &dyn Approver,
    request: &ApprovalRequest,
) -> ApprovalDecision {
    AssertUnwindSafe(approver.approve(request))
        .catch_unwind()
        .await
        .unwrap_or_else(|panic| ApprovalDecision::Deny {
            message: Some(format!(
                "the approver failed ({})",
                panic_message(panic.as_ref())
            )),
        })
}

/// The text of a caught panic.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}
