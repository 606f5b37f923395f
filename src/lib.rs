//! # agcore
//!
//! Build LLM agents in Rust: talk to any OpenAI-compatible chat server ([`llm`]), compose
//! prompts ([`prompt`]), and let the model call tools — your own Rust tools and the tools of
//! any MCP server ([`tools`]) — in an automatic, permission-checked, streaming tool loop.
//!
//! The three layers follow the design documents in `docs/`:
//! - Phase 0, [`llm`]: wire types, the [`llm::ChatModel`] provider seam, the OpenAI-compatible
//!   client, stream assembly and [`llm::LlmCycle`] (history, retries, the tool loop).
//! - Phase 1, [`prompt`]: templates on `minijinja`, a system-prompt composer, and agcore's
//!   system prompt (base instructions, the workspace's `AGENTS.md`, the user's template).
//! - Phase 2, [`tools`]: [`tools::BaseTool`], typed tools, [`tools::ToolRegistry`], permissions,
//!   exposure gates, approvals and [`tools::McpClient`].

#![forbid(unsafe_code)]

pub mod context;
pub mod display;
pub mod llm;
pub mod prompt;
pub mod run;
pub mod session;
pub mod tools;
pub mod vocab;

// The README's library example is compiled as a doc test, so it cannot rot.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
