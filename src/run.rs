//! The run: the tool loop as data, on top of providers ([`crate::llm`]) and tools
//! ([`crate::tools`]).
//!
//! - [`RunState`]: one run, serialisable and versioned ([`RUN_STATE_VERSION`]).
//! - [`step`]: the loop's rules as a pure function `(state, input) -> (state, effect)`.
//! - The driver performs each [`Effect`] (model request, tool calls, approvals) and feeds the
//!   result back; [`crate::run::Conversation`]'s `submit*` and `resume*` methods are thin
//!   wrappers over it.
//! - [`RunRequest`] + [`crate::run::Conversation::run_with`]: a run that can **suspend** (an
//!   approver answered [`crate::tools::ApprovalDecision::Defer`]) and be continued from its
//!   saved state with decisions, here or in another process, and that records its progress
//!   in a [`RunJournal`] (e.g. [`crate::session::SessionJournal`]) before each effect, so a
//!   crashed run resumes without running a finished call again.
//! - Typed final output: [`crate::run::Conversation::submit_typed`] returns the model's final
//!   answer as a Rust value checked against its schema ([`OutputSchema`], [`OutputMode`]).

mod answer;
pub(crate) mod budget;
mod call_updates;
pub mod config;
mod context_turn;
mod continued;
pub mod conversation;
pub(crate) mod driver;
pub mod error;
pub mod event;
pub mod external;
pub(crate) mod handle;
pub mod hooks;
pub mod idempotency;
mod input_stream;
pub mod journal;
mod journal_batch;
mod metered;
pub(crate) mod model_turn;
pub(crate) mod output_schema;
pub mod replay;
mod request;
pub mod state;
pub mod step;
pub mod telemetry;
pub(crate) mod typed_output;
pub mod usage;

pub use config::{CycleConfig, RepeatedCallAction, RepeatedCallGuard};
pub use continued::waiting_for_input;
pub use conversation::{Conversation, EventStream};
pub use error::LlmError;
pub use event::StreamEvent;
pub use hooks::{HookChain, HookRequest, Hooks, RequestPurpose, ToolCallDecision};
pub use idempotency::idempotency_key;
pub use journal::{JournalEntry, JournalError, RunJournal};
pub use output_schema::{
    OutputMode, OutputSchema, SavedSchema, SchemaError, TypedRun, extract_json, strict_schema,
};
pub use request::{RunItem, RunOutcome, RunRequest, RunStream, Suspension};
pub use state::{Phase, RUN_STATE_VERSION, RepeatStreak, RunRules, RunState, ToolTurn, TurnCall};
pub use step::{
    Decision, Effect, Input, ModelRequest, ToolBatch, relaxed_tool_choice, rerun_idempotent, step,
};
pub use typed_output::{
    DEFAULT_OUTPUT_RETRIES, DEFAULT_OUTPUT_TOOL, TypedEvent, TypedOutcome, TypedOutput,
    TypedOutputError, TypedStream,
};
pub use usage::{Prices, RunUsage, UsageLimit, UsageLimits};
