//! The run: the tool loop as data, on top of providers ([`crate::llm`]) and tools
//! ([`crate::tools`]).
//!
//! - [`RunState`]: one run, serialisable and versioned ([`RUN_STATE_VERSION`]).
//! - [`step`]: the loop's rules as a pure function `(state, input) -> (state, effect)`.
//! - The driver performs each [`Effect`] (model request, tool calls, approvals) and feeds the
//!   result back; [`crate::llm::LlmCycle`]'s `submit*` and `resume*` methods are thin
//!   wrappers over it.

mod budget;
mod cycle;
mod driver;
mod hooks;
mod model_turn;
pub mod state;
pub mod step;
pub mod telemetry;

pub use state::{Phase, RUN_STATE_VERSION, RepeatStreak, RunRules, RunState, ToolTurn, TurnCall};
pub use step::{Decision, Effect, Input, ModelRequest, ToolBatch, relaxed_tool_choice, step};
