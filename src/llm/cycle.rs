//! [`LlmCycle`] (stub).

/// A conversation with a model.
#[derive(Debug)]
pub struct LlmCycle;
