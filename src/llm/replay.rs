//! Replay.

/// Replay a history as events.
pub fn replay() {}
