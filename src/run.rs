//! The run: the tool loop as data, on top of providers ([`crate::llm`]) and tools
//! ([`crate::tools`]).
//!
//! - [`RunState`]: one run, serialisable and versioned ([`RUN_STATE_VERSION`]).
//! - [`step`]: the loop's rules as a pure function `(state, input) -> (state, effect)`.
//! - The driver performs each [`Effect`] (model request, tool calls, approvals) and feeds the
//!   result back; [`crate::llm::LlmCycle`]'s `submit*` and `resume*` methods are thin
//!   wrappers over it.
//! - [`RunRequest`] + [`crate::llm::LlmCycle::run_with`]: a run that can **suspend** (an
//!   approver answered [`crate::tools::ApprovalDecision::Defer`]) and be continued from its
//!   saved state with decisions, here or in another process, and that records its progress
//!   in a [`RunJournal`] (e.g. [`crate::session::SessionJournal`]) before each effect, so a
//!   crashed run resumes without running a finished call again.

mod cycle;
mod driver;
pub mod journal;
mod model_turn;
mod request;
pub mod state;
pub mod step;

pub use journal::{JournalEntry, JournalError, RunJournal};
pub use request::{RunItem, RunOutcome, RunRequest, RunStream, Suspension};
pub use state::{Phase, RUN_STATE_VERSION, RepeatStreak, RunRules, RunState, ToolTurn, TurnCall};
pub use step::{
    Decision, Effect, Input, ModelRequest, ToolBatch, relaxed_tool_choice, rerun_idempotent, step,
};
