//! # agcore
//!
//! Build LLM agents in Rust: talk to any OpenAI-compatible chat server, compose prompts, and let
//! the model call tools — your own Rust tools and the tools of any MCP server — in an
//! automatic, permission-checked, streaming tool loop that can suspend, resume and keep its
//! history in a durable session.
//!
//! ```
//! # async fn demo() -> Result<(), agcore::LlmError> {
//! use agcore::llm::testing::ScriptedModel;
//! use agcore::{Conversation, CycleConfig, ToolRegistry};
//!
//! let model = ScriptedModel::new().reply_text("Hello!");
//! let mut conversation = Conversation::new(model, CycleConfig::new("gpt-4o-mini"));
//! let reply = conversation
//!     .submit_with_tools("Hi".to_string(), &ToolRegistry::new())
//!     .await?;
//! assert_eq!(reply.text(), "Hello!");
//! # Ok(()) }
//! ```
//!
//! ## The layers
//!
//! Each module uses only the ones above it in this table (no module imports one below it);
//! `tests/suite/layering.rs` holds the code to it, and to no import circle across folders.
//! `llm` re-exports the design's names for the conversation (`agcore::llm::{LlmCycle,
//! StreamEvent, ...}`) from below it: a façade, not a use. Still against the table: the run
//! names the team's types (issue 31, item 2), listed one by one in that test.
//!
//! | module | what it holds | guide |
//! |---|---|---|
//! | [`vocab`] | the words every layer shares: messages, tool calls, definitions, usage, call ids | — |
//! | [`display`] | terminal-safe text for anything a model, server or tool sent | `docs/security.md` |
//! | [`owner_only`] | files and folders only their owner may read (secrets, sessions, tokens) | `docs/security.md` |
//! | [`llm`] | the provider layer: the [`ChatModel`] seam, the backends, SSE and body bounds, retries, stream assembly into [`llm::ModelEvent`]s | `docs/0-llm-cycle.md` |
//! | [`tools`] | [`BaseTool`], typed [`Tool`]s, the [`ToolRegistry`] (validation, permissions, rules, exposure, approvals), built-in tools, the [`McpClient`] | `docs/5-tool-system.md`, `docs/7-mcp.md` |
//! | [`prompt`] | templates, the system-prompt composer, `AGENTS.md` | `docs/1-prompts.md` |
//! | [`context`] | the context engine: window, estimate, compaction, large outputs kept whole | `docs/9-context.md` |
//! | [`run`] | the conversation ([`Conversation`], also named [`LlmCycle`]): the tool loop as a serde step machine, one handler per effect, its [`StreamEvent`]s, hooks, usage limits, typed output, suspend and resume | `docs/6-tool-loop.md`, `docs/10-control.md`, `docs/11-prompts-output.md` |
//! | [`team`] | agents that call each other as tools and hand the conversation over, guardrails, a team's budget | `docs/14-teams.md` |
//! | [`session`] | durable histories: [`SessionStore`] on SQLite and PostgreSQL, the run's journal | `docs/8-sessions.md` |
//!
//! The items most programs need are re-exported here, at the crate root; every item also has
//! the path of the module that defines it. The names of the design documents
//! (`agcore::llm::{LlmCycle, CycleConfig, LlmError, ...}`) keep working.

#![forbid(unsafe_code)]
#![warn(unreachable_pub)]

pub mod context;
pub mod display;
pub mod llm;
pub mod owner_only;
pub mod prompt;
pub mod run;
pub mod session;
pub mod team;
pub mod tools;
pub mod vocab;

pub use context::ContextConfig;
pub use llm::{ChatModel, OpenAiClient, OpenAiConfig, ProviderError, StreamEvent};
pub use prompt::{PromptComposer, PromptTemplate, SystemPrompt};
/// The design's name for [`Conversation`].
pub use run::Conversation as LlmCycle;
pub use run::{
    Conversation, CycleConfig, HookChain, Hooks, LlmError, RunRequest, RunState, RunUsage,
    UsageLimits,
};
pub use session::{PostgresStore, SessionStore, SqliteStore};
pub use tools::{
    BaseTool, McpClient, Permission, PermissionChecker, Tool, ToolError, ToolRegistry,
};
pub use vocab::{ChatResponse, FinishReason, OpenaiChatMessage, ToolCall, ToolDefinition};

// The README's library example is compiled as a doc test, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
