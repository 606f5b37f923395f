//! What the context engine reports when it changes the history before a request: a
//! [`ContextEvent`] per compaction or repair, which the run streams as its own event.

use serde::{Deserialize, Serialize};

/// One change the context engine made to the history before a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum ContextEvent {
    /// The history was compacted (see `docs/9-context.md`); the history itself records it.
    ContextCompacted {
        /// How.
        tier: CompactionTier,
        /// The estimated prompt tokens before.
        tokens_before: u64,
        /// The estimated prompt tokens after.
        tokens_after: u64,
        /// Messages stubbed, summarised or dropped.
        messages: u64,
        /// The model's context window the budget was computed from.
        window: u64,
    },
    /// The history was repaired before its first request (one event per repair).
    HistoryRepaired {
        /// What was wrong.
        kind: RepairKind,
        /// The call id (or message position) concerned, as text.
        detail: String,
    },
}

/// How a [`ContextEvent::ContextCompacted`] made room.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CompactionTier {
    /// Tier 1: old tool outputs replaced by a stub naming the call.
    StubToolOutputs,
    /// Tier 2: older turns summarised into one message by the model.
    Summary,
    /// Tier 3: the oldest turns dropped, with a marker saying so.
    DropTurns,
}

impl CompactionTier {
    /// 1, 2 or 3.
    pub fn number(self) -> u8 {
        match self {
            CompactionTier::StubToolOutputs => 1,
            CompactionTier::Summary => 2,
            CompactionTier::DropTurns => 3,
        }
    }
}

/// What a [`ContextEvent::HistoryRepaired`] fixed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum RepairKind {
    /// A tool result that answers no call was removed.
    OrphanToolResult,
    /// A call without a result was answered "not run".
    UnansweredCall,
    /// A call id used twice was renamed (the call and its result).
    DuplicateCallId,
    /// An assistant message with neither text nor calls was dropped.
    EmptyAssistant,
}
