//! [`RunJournal`]: where a run records its progress as it goes — the history before each model
//! request, the tool turn when it opens or suspends, each call as it starts and as it finishes —
//! so that a run stopped anywhere (a crash, `kill -9`, a suspension) can be continued from what
//! was recorded, without running a finished call again.
//!
//! The driver awaits each record before the effect that follows it: a call is recorded as
//! started before its tool runs. A failed record stops the run ([`crate::run::LlmError::Journal`])
//! before its next effect. [`crate::session::SessionJournal`] records into a session store.

use async_trait::async_trait;

use crate::run::state::RunState;
use crate::vocab::{OpenaiChatMessage, ToolAnswer};

/// One record of a run's progress, in the order the run makes them.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum JournalEntry<'a> {
    /// The run's history as it stands: before each model request (the committed turns plus
    /// the pending prompt) and when the run ends (the committed turns). Replaces the history
    /// recorded before: a run that failed drops its prompt, a compaction rewrites old turns.
    History(&'a [OpenaiChatMessage]),
    /// The run's state at a tool turn — when it opens, suspends, or gets its decisions —
    /// without its history (`messages` is empty; it is the last [`JournalEntry::History`]).
    /// A later `History` closes the turn.
    Run(&'a RunState),
    /// A call of the current tool turn is about to start: from now on it may have had effects.
    CallStarted {
        /// The call id.
        call_id: &'a str,
        /// The call's idempotency key ([`crate::run::idempotency`]); `None` only for a call
        /// of a run without keys (none are made without a tool turn).
        idempotency_key: Option<&'a str>,
    },
    /// A call of the current tool turn recorded how it goes on if it is run again (an MCP
    /// task's id, a multi-round-trip request's state), before it goes on: a run restored after
    /// a crash or suspension continues the call from this instead of starting it again.
    /// Opaque to the journal; bounded by the tool that records it.
    CallContinues {
        /// The call id.
        call_id: &'a str,
        /// The continuation (the latest replaces earlier ones).
        continuation: &'a serde_json::Value,
    },
    /// A call of the current tool turn reported an update
    /// ([`crate::tools::ToolContext::report`]), kept so that a reopened session replays it.
    /// Not part of the run's state: a run restored from its journal skips it.
    CallUpdate {
        /// The call id.
        call_id: &'a str,
        /// The update (already bounded).
        update: &'a crate::tools::event::ToolCallUpdate,
    },
    /// A call of the current tool turn finished with this answer.
    CallFinished {
        /// The call id.
        call_id: &'a str,
        /// What the model reads.
        answer: &'a ToolAnswer,
        /// The call's media (images, audio) as the message that follows the turn's tool
        /// messages, when the model takes them: replayed with the answer, so a resumed run
        /// shows the model the same parts.
        media: Option<&'a OpenaiChatMessage>,
    },
    /// A record of a sub-agent's run, inside the parent's call `call_id` of the current tool
    /// turn (a team's agent offered as a tool). Its `History` entries hold the child's whole
    /// history; a child of a child nests one more `Child`.
    Child {
        /// The parent's call that runs the sub-agent.
        call_id: &'a str,
        /// The sub-agent's name.
        agent: &'a str,
        /// The child's own record.
        entry: &'a JournalEntry<'a>,
    },
}

/// Why a journal could not record an entry.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct JournalError {
    message: String,
    #[source]
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl JournalError {
    /// An error saying `message`, caused by `source`.
    pub fn new(
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        JournalError {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// An error saying `message`.
    pub fn message(message: impl Into<String>) -> Self {
        JournalError {
            message: message.into(),
            source: None,
        }
    }
}

/// Records a run's progress (see the module docs). Implementations must make each record
/// durable before returning: the run starts the next effect right after.
#[async_trait]
pub trait RunJournal: Send + Sync {
    /// Record `entry`.
    async fn record(&self, entry: JournalEntry<'_>) -> Result<(), JournalError>;

    /// The session this journal records, when it records one: part of the run's calls'
    /// idempotency keys ([`crate::run::idempotency`]). `None` by default.
    fn session(&self) -> Option<&str> {
        None
    }

    /// Keep a large tool output whole as output `id` (the context engine cut it for the model;
    /// `tail_start` is where the tail the model has starts), durably, before returning.
    /// `None` (the default): this journal does not keep outputs, and the engine writes a spill
    /// file instead.
    async fn keep_output(
        &self,
        id: &str,
        content: &str,
        tail_start: Option<usize>,
    ) -> Option<Result<(), JournalError>> {
        let _ = (id, content, tail_start);
        None
    }
}
