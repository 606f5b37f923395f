//! How a run ends: finished (the agent's output guardrails, then the history recorded) or
//! failed (what it committed recorded, the error reported).

use crate::run::error::LlmError;
use crate::run::handle::RunContext;
use crate::run::handle::journal::record;
use crate::run::journal::JournalEntry;
use crate::run::state::{Phase, RunState};
use crate::run::telemetry;
use crate::team::{GuardrailStage, check_guardrails};
use crate::vocab::{ChatResponse, OpenaiChatMessage};

/// The run finished with `reply`: the error that keeps the answer from the caller, if any.
pub(crate) async fn done(
    cx: &RunContext<'_>,
    state: &mut RunState,
    reply: &ChatResponse,
) -> Result<(), LlmError> {
    // Output guardrails: before the caller sees the answer.
    if let Some(agent) = cx.agent
        && let Some(error) = check_guardrails(
            agent,
            &cx.path_of(agent.name()),
            GuardrailStage::Output,
            &reply.text(),
        )
        .await
    {
        // The answer never reaches the caller: it leaves the history too.
        if matches!(
            state.messages.last(),
            Some(OpenaiChatMessage::Assistant { .. })
        ) {
            state.messages.pop();
        }
        state.committed = state.committed.min(state.messages.len());
        state.phase = Phase::Failed {
            error: error.to_string(),
        };
        if let Err(journal_error) = record(
            cx.journal,
            JournalEntry::History(state.committed_messages()),
        )
        .await
        {
            tracing::warn!(error = %journal_error, "could not record the history of a run its guardrail stopped");
        }
        telemetry::record_error(&cx.agent_span, &error);
        return Err(error);
    }
    record(
        cx.journal,
        JournalEntry::History(state.committed_messages()),
    )
    .await?;
    telemetry::record_usage(&cx.agent_span, reply.usage);
    Ok(())
}

/// The run failed with `error`: record what it committed (a failure drops the prompt) and
/// tell the telemetry and the hooks.
pub(crate) async fn fail(cx: &RunContext<'_>, state: &RunState, error: &LlmError) {
    if let Err(journal_error) = record(
        cx.journal,
        JournalEntry::History(state.committed_messages()),
    )
    .await
    {
        tracing::warn!(error = %journal_error, "could not record the failed run's history");
    }
    telemetry::record_usage(&cx.agent_span, state.usage);
    telemetry::record_error(&cx.agent_span, error);
    cx.config.hooks.on_error(error).await;
}
