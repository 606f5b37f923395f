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
//! - Typed final output: [`crate::llm::LlmCycle::submit_typed`] returns the model's final
//!   answer as a Rust value checked against its schema ([`OutputSchema`], [`OutputMode`]).

mod answer;
mod budget;
mod context_turn;
mod cycle;
mod driver;
mod hooks;
pub mod journal;
mod model_turn;
mod output_schema;
mod request;
pub mod state;
pub mod step;
pub mod telemetry;
mod typed_output;

pub use journal::{JournalEntry, JournalError, RunJournal};
pub use output_schema::{OutputSchema, SchemaError, extract_json, strict_schema};
pub use request::{RunItem, RunOutcome, RunRequest, RunStream, Suspension};
pub use state::{Phase, RUN_STATE_VERSION, RepeatStreak, RunRules, RunState, ToolTurn, TurnCall};
pub use step::{
    Decision, Effect, Input, ModelRequest, ToolBatch, relaxed_tool_choice, rerun_idempotent, step,
};
pub use typed_output::{
    DEFAULT_OUTPUT_RETRIES, DEFAULT_OUTPUT_TOOL, OutputMode, TypedEvent, TypedOutput,
    TypedOutputError, TypedStream,
};
