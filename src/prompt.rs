//! Prompts: templates, system-prompt composition, and the workspace's `AGENTS.md`.
//!
//! - [`PromptTemplate`]: a `minijinja` template with strict undefined variables.
//! - [`PromptComposer`]: a system prompt built from ordered, named sections (templates or
//!   literal text); [`crate::run::Conversation::with_composer`] makes it a cycle's system prompt.
//! - [`SystemPrompt`]: agcore's composition — base instructions, `AGENTS.md`, the user's
//!   template — in that order.
//! - [`AgentsMd`]: the nearest `AGENTS.md` from the working directory up to the workspace
//!   root, read up to a limit.

pub mod agents_md;
pub mod composer;
pub mod system;
pub mod template;

pub use agents_md::{AGENTS_MD_FILE, AgentsMd, AgentsMdError, DEFAULT_AGENTS_MD_LIMIT};
pub use composer::PromptComposer;
pub use system::{BASE_INSTRUCTIONS, SectionInUse, SystemPrompt};
pub use template::{PromptError, PromptTemplate};
