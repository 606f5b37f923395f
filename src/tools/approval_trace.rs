//! Approval decisions as `tracing` events (an OpenTelemetry span event named `approval`, on
//! the `execute_tool` span the call runs in, or on the run's span for a call that never got
//! one): what was decided, for how long, and by whom. No messages or arguments: a denial's
//! text may quote the call.

use tracing::Span;

use crate::tools::approver::ApprovalDecision;

/// A denial, for the events of refusals that carry no decision of their own.
pub(crate) const DENIED: ApprovalDecision = ApprovalDecision::Deny { message: None };

/// Who or what decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DecidedBy {
    /// The approver was asked.
    Approver,
    /// An earlier session-wide answer covered the call.
    Grant,
    /// The call needed approval and no approver is configured.
    NoApprover,
    /// A rule on the call's arguments denied it.
    Rule,
    /// The permission configuration denied it.
    Permission,
    /// A hook denied it.
    Hook,
    /// The caller that resumed a suspended run gave the decision.
    Caller,
    /// A decision was given, but for another call than the one to run (its tool or
    /// arguments changed since the approver was asked).
    Mismatch,
}

impl DecidedBy {
    fn name(self) -> &'static str {
        match self {
            DecidedBy::Approver => "approver",
            DecidedBy::Grant => "grant",
            DecidedBy::NoApprover => "no_approver",
            DecidedBy::Rule => "rule",
            DecidedBy::Permission => "permission",
            DecidedBy::Hook => "hook",
            DecidedBy::Caller => "caller",
            DecidedBy::Mismatch => "mismatch",
        }
    }
}

/// `allowed` / `denied` / `deferred`, and for an allow how long it holds.
fn verdict(decision: &ApprovalDecision) -> (&'static str, Option<&'static str>) {
    match decision {
        ApprovalDecision::AllowOnce => ("allowed", Some("once")),
        ApprovalDecision::AllowForSession => ("allowed", Some("session")),
        ApprovalDecision::AllowForSessionWithArgs => ("allowed", Some("session_with_args")),
        ApprovalDecision::Deny { .. } => ("denied", None),
        ApprovalDecision::Defer => ("deferred", None),
    }
}

/// Record `decision` on `call_id` (of `tool`, when known) as an event of `parent`.
pub(crate) fn approval_event(
    parent: &Span,
    tool: Option<&str>,
    call_id: &str,
    decision: &ApprovalDecision,
    by: DecidedBy,
) {
    let (decision, scope) = verdict(decision);
    tracing::event!(
        target: "agcore::approval",
        parent: parent,
        tracing::Level::INFO,
        gen_ai.tool.name = tool,
        gen_ai.tool.call.id = call_id,
        agcore.approval.decision = decision,
        agcore.approval.scope = scope,
        agcore.approval.by = by.name(),
        "approval"
    );
}

/// [`approval_event`] on the current span (the call's, when it runs inside a run).
pub(crate) fn approval_here(tool: &str, call_id: &str, decision: &ApprovalDecision, by: DecidedBy) {
    approval_event(&Span::current(), Some(tool), call_id, decision, by);
}
