//! Phase 1: prompt templates and system-prompt composition.
//!
//! - [`PromptTemplate`]: a `minijinja` template with strict undefined variables.
//! - [`PromptComposer`]: a system prompt built from ordered, named sections.

pub mod composer;
pub mod template;

pub use composer::PromptComposer;
pub use template::{PromptError, PromptTemplate};
