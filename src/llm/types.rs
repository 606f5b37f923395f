//! OpenAI Chat Completions wire types — the shared vocabulary, re-exported from
//! [`crate::vocab`] under their original path.

pub use crate::vocab::types::*;
