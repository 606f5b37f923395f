//! The vocabulary every layer shares: messages, tool calls, tool definitions, usage, finish
//! reasons and call ids; and [`text`], cutting text to a budget at character and line
//! boundaries, which every layer uses.
//!
//! Providers ([`crate::llm`]) and tools ([`crate::tools`]) both speak it and neither imports
//! the other; the run ([`crate::run`]) sits on top of both. The same items are also reachable
//! under their older paths (`agcore::llm::types::*`, `agcore::tools::registry::generate_call_id`).

mod answer;
mod arguments;
pub mod artifact;
mod call_id;
pub mod hosted;
pub mod text;
pub mod trace_context;
pub mod types;

pub(crate) use answer::truncate_answer;
pub use answer::{DEFAULT_TOOL_OUTPUT_LIMIT, ToolAnswer};
pub use arguments::{is_blank_arguments, normalise_arguments};
pub use artifact::{Artifact, ArtifactPlace, ArtifactProvider, Element};
pub use call_id::generate_call_id;
pub use hosted::HostedTool;
pub use types::*;
