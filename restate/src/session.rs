//! [`AgentSession`]: the Virtual Object, keyed by session name. One `run` at a time per
//! session (Restate queues the next); `approve` and `state` are shared, so they are not
//! queued behind a run that waits for a decision.

use std::sync::Arc;

use restate_sdk::prelude::*;
use serde_json::Value;

use crate::agent::Agent;
use crate::wire::{ApproveInput, ApproveOutput, SessionState, StoredPending, WireDecision};

/// The K/V key of the committed history.
pub(crate) const MESSAGES: &str = "messages";
/// The K/V key of the calls waiting for approval (with their awakeables).
pub(crate) const PENDING: &str = "pending";
/// The K/V key of the run in progress (its state between steps).
pub(crate) const RUN: &str = "run";

/// The Virtual Object serving one agent's sessions.
pub struct AgentSession {
    agent: Arc<Agent>,
}

impl AgentSession {
    /// The object for `agent`.
    pub fn new(agent: Arc<Agent>) -> Self {
        AgentSession { agent }
    }
}

// The retry policy of every invocation: an endpoint that restarts is retried every second at
// most, and an invocation is paused (not failed) only after about ten minutes of failures.
#[restate_sdk::object(
    name = "AgentSession",
    invocation_retry_policy(
        initial_interval = "100ms",
        factor = 2.0,
        max_interval = "1s",
        max_attempts = 600,
        on_max_attempts = "pause",
    )
)]
impl AgentSession {
    /// Run the prompt (a JSON string) to the final answer (a JSON string).
    #[handler]
    async fn run(&self, ctx: ObjectContext<'_>, prompt: String) -> HandlerResult<String> {
        crate::run_handler::run(&self.agent, ctx, prompt).await
    }

    /// Decide a call waiting for approval: `{"id", "allow", "message"?}`.
    #[handler]
    async fn approve(
        &self,
        ctx: SharedObjectContext<'_>,
        input: Json<Value>,
    ) -> HandlerResult<Json<ApproveOutput>> {
        let input: ApproveInput = serde_json::from_value(input.into_inner()).map_err(|error| {
            TerminalError::new_with_code(
                400,
                format!(
                    "approve takes {{\"id\": CALL_ID, \"allow\": true|false, \"message\"?: TEXT}}: {error}"
                ),
            )
        })?;
        let pending: Vec<StoredPending> = ctx
            .get::<Json<Vec<StoredPending>>>(PENDING)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        let Some(waiting) = pending.iter().find(|p| p.call.id == input.id) else {
            let ids: Vec<&str> = pending.iter().map(|p| p.call.id.as_str()).collect();
            return Err(TerminalError::new_with_code(
                404,
                format!(
                    "session {:?} has no call {:?} waiting for approval (pending: {})",
                    ctx.key(),
                    input.id,
                    if ids.is_empty() {
                        "none".to_owned()
                    } else {
                        ids.join(", ")
                    }
                ),
            )
            .into());
        };
        let mut decision = WireDecision {
            allow: input.allow,
            message: input.message,
            proof: None,
        };
        // Only a decision with this proof counts for the waiting run (see `approval_proof`).
        decision.proof = Some(crate::approval_proof::prove(ctx.key(), waiting, &decision));
        ctx.resolve_awakeable(&waiting.awakeable, Json(decision));
        Ok(Json(ApproveOutput {
            id: input.id,
            allow: input.allow,
            resolved: true,
        }))
    }

    /// The session's committed history and the calls waiting for approval.
    #[handler]
    async fn state(&self, ctx: SharedObjectContext<'_>) -> HandlerResult<Json<SessionState>> {
        let messages = ctx
            .get::<Json<Vec<agcore::vocab::OpenaiChatMessage>>>(MESSAGES)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        let pending = ctx
            .get::<Json<Vec<StoredPending>>>(PENDING)
            .await?
            .map(Json::into_inner)
            .unwrap_or_default();
        Ok(Json(SessionState {
            session: ctx.key().to_owned(),
            messages,
            pending: pending.into_iter().map(|p| p.call).collect(),
        }))
    }
}
