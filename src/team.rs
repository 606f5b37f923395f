//! Teams of agents: agents as tools, handoffs and guardrails, as one tree of runs — one
//! budget, one trace, one journal.
//!
//! - [`Agent`]: instructions, tools (a narrowing of the run's), model, sub-agents, handoffs,
//!   limits, typed output, guardrails.
//! - [`Team`]: the agents by name, checked before a run ([`Team::check`]: unknown agents and
//!   tools, cycles, name clashes — each with the path where it is) and described
//!   ([`Team::report`]).
//! - A run with a team: [`crate::run::RunRequest::with_team`]. The agent it starts with is
//!   the one the history's last handoff left ([`current_agent`]), else the one named.
//!
//! # Sub-agents (agents as tools)
//! A sub-agent is offered to its parent as a tool named like it, with arguments
//! `{"task": string}` (or its input schema). A call runs the child with a fresh history —
//! its instructions, the slice of the parent's history it asks for ([`ParentHistory`]), the
//! task — and its final answer (typed output as JSON) is the call's answer; a child that
//! fails gives an error answer the parent's model can act on. Several calls in one turn run
//! concurrently, next to the turn's other tools, at most the registry's concurrency limit of
//! children at a time. Every agent sees the run's tools through the run's gates — the same
//! permissions, rules, approver and session grants — narrowed to its own list
//! ([`crate::tools::ToolRegistry::narrowed_for_agent`]): no agent can use a tool the run may
//! not use, or skip an approval the run would ask for.
//!
//! # One budget, one trace, one journal
//! A child may spend what its own limits allow and what its parent has left; what it spent
//! counts in its parent's run (requests beyond the parent's turns, tool calls, tokens), so
//! the root's limits bound the tree. Sub-agents nest at most [`Team::max_depth`] deep
//! (default 3). Dropping the run cancels every child. The child's `invoke_agent` span sits
//! under its parent's `execute_tool` span, with `gen_ai.agent.name`; hooks, tools and
//! approvers can ask [`current_agent_path`]. A child's journal records go into its parent's
//! journal, inside the parent's call ([`crate::run::JournalEntry::Child`]): a run that crashed
//! mid-child continues the child without running its finished calls again; a call inside a
//! child that waits for approval suspends the whole run, named by its agent path
//! ([`crate::run::RunState::agent_of`]), and a decision on it continues inside the child.
//!
//! # Handoffs
//! `transfer_to_<agent>` hands the conversation over: from the next request on, the other
//! agent's instructions (the system prompt), tools and model answer, over the history its
//! [`HandoffHistory`] filter leaves. The call and its answer record the switch in the
//! history; [`crate::llm::StreamEvent::Handoff`] announces it. Handoffs may go back and forth.
//!
//! # Guardrails
//! An agent's input guardrails check its prompt (or task) before its model sees it; its
//! output guardrails check its final answer before its caller does. A trip stops the run with
//! [`crate::run::LlmError::GuardrailTripped`] (a sub-agent's: its parent reads the reason).

mod agent;
mod budget;
pub(crate) mod child;
mod error;
mod guardrail;
mod handoff;
mod roster;
mod scope;
pub(crate) mod tools;

pub use agent::{Agent, HandoffHistory, ParentHistory};
pub use error::TeamError;
pub use guardrail::{AgentGuardrail, FnGuardrail, Guardrail, GuardrailStage, GuardrailVerdict};
pub use handoff::{current_agent, current_agent_in};
pub use roster::{AgentReport, DEFAULT_MAX_DEPTH, Team};
pub use scope::current_agent_path;
pub use tools::TRANSFER_PREFIX;

pub use budget::MAX_CONCURRENT_CHILDREN;
pub(crate) use budget::{charge, child_limits};
pub(crate) use guardrail::check as check_guardrails;
pub(crate) use handoff::filter as handoff_filter;
pub(crate) use roster::agent_registry;
pub(crate) use scope::{AgentCell, AgentScoped};
