//! The permission bridge: every call agcore would ask about goes to the editor as
//! `session/request_permission` with allow once / allow always / reject once / reject always.
//!
//! Only calls the registry's gates already turned into questions get here: a deny rule, a
//! denied permission or restricted mode refuses before any approver is asked, so the editor
//! can narrow but never widen. "Allow always" is the registry's session grant (remembered for
//! the session, stored with it); "reject always" is remembered here, for this session.

use std::collections::HashSet;
use std::sync::Mutex;

use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;
use async_trait::async_trait;

use super::kinds;

const ALLOW_ONCE: &str = "allow-once";
const ALLOW_ALWAYS: &str = "allow-always";
const REJECT_ONCE: &str = "reject-once";
const REJECT_ALWAYS: &str = "reject-always";

/// Asks the editor.
pub struct EditorApprover {
    connection: ConnectionTo<Client>,
    session: acp::SessionId,
    /// Tools the user rejected for the rest of the session.
    rejected: Mutex<HashSet<String>>,
}

impl EditorApprover {
    /// An approver asking through `connection` for `session`.
    pub fn new(connection: ConnectionTo<Client>, session: acp::SessionId) -> Self {
        Self {
            connection,
            session,
            rejected: Mutex::new(HashSet::new()),
        }
    }

    fn rejected(&self, tool: &str) -> bool {
        self.rejected
            .lock()
            .map(|rejected| rejected.contains(tool))
            .unwrap_or(true)
    }

    fn reject_always(&self, tool: &str) {
        if let Ok(mut rejected) = self.rejected.lock() {
            rejected.insert(tool.to_owned());
        }
    }
}

/// The four options, as ACP names their kinds.
fn options() -> Vec<acp::PermissionOption> {
    vec![
        acp::PermissionOption::new(
            ALLOW_ONCE,
            "Allow once",
            acp::PermissionOptionKind::AllowOnce,
        ),
        acp::PermissionOption::new(
            ALLOW_ALWAYS,
            "Allow always (this session)",
            acp::PermissionOptionKind::AllowAlways,
        ),
        acp::PermissionOption::new(REJECT_ONCE, "Reject", acp::PermissionOptionKind::RejectOnce),
        acp::PermissionOption::new(
            REJECT_ALWAYS,
            "Reject always (this session)",
            acp::PermissionOptionKind::RejectAlways,
        ),
    ]
}

/// The question's card: the call's title (with the team agent that makes it), kind and input.
fn question(request: &ApprovalRequest) -> acp::ToolCallUpdate {
    let title = match agcore::team::current_agent_path() {
        Some(agent) if agent.contains('/') => format!("{agent}: {}", request.title),
        _ => request.title.clone(),
    };
    acp::ToolCallUpdate::new(
        request.call_id.clone(),
        acp::ToolCallUpdateFields::new()
            .title(title)
            .kind(kinds::kind(request.kind))
            .status(acp::ToolCallStatus::Pending)
            .raw_input(request.arguments.clone()),
    )
}

fn deny(message: &str) -> ApprovalDecision {
    ApprovalDecision::Deny {
        message: Some(message.to_owned()),
    }
}

#[async_trait]
impl Approver for EditorApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        if self.rejected(&request.tool) {
            return deny("the user rejected every call of this tool for this session");
        }
        let asked =
            acp::RequestPermissionRequest::new(self.session.clone(), question(request), options());
        // Asked from a task of the connection, not of the turn: a cancelled turn stops waiting,
        // while the question itself is left to the editor, which answers it `cancelled` after
        // its `session/cancel` (ACP's rule; no `$/cancel_request`, which v1 editors need not
        // know).
        let (answered, answer) = tokio::sync::oneshot::channel();
        let connection = self.connection.clone();
        let spawned = self.connection.spawn(async move {
            let _ = answered.send(connection.send_request(asked).block_task().await);
            Ok(())
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "the editor could not be asked for a permission");
            return deny("the editor could not be asked");
        }
        let Ok(answer) = answer.await else {
            return deny("the editor could not be asked");
        };
        match answer {
            Ok(response) => match response.outcome {
                acp::RequestPermissionOutcome::Selected(selected) => match &*selected.option_id.0 {
                    ALLOW_ONCE => ApprovalDecision::AllowOnce,
                    ALLOW_ALWAYS => ApprovalDecision::AllowForSession,
                    REJECT_ALWAYS => {
                        self.reject_always(&request.tool);
                        deny(
                            "the user rejected this call (and every call of this tool for this session)",
                        )
                    }
                    _ => deny("the user rejected this call"),
                },
                _ => deny("the user cancelled"),
            },
            Err(error) => {
                tracing::warn!(%error, "the editor could not be asked for a permission");
                deny("the editor could not be asked")
            }
        }
    }
}
