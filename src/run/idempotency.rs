//! Idempotency keys: every tool call of a run gets a key that is the same on every retry and
//! every resumption of that call — in this process or another — and different for any other
//! call, so a tool (or the service behind it) can recognise a call it already performed.
//!
//! # Derivation
//!
//! The key is `agk1_` followed by the first 32 hex digits (128 bits) of
//!
//! ```text
//! SHA-256( "agcore idempotency key v1" 0x00
//!          len(session) session        -- the journal's session name ("" without one)
//!          len(run_id) run_id          -- RunState::run_id, random, given at the first tool turn
//!          turn                        -- RunState::turns at the tool turn (4 bytes, big-endian)
//!          len(call_id) call_id )      -- the call id the model gave
//! ```
//!
//! (`len` as 8 bytes big-endian, so no two field lists give the same input). The driver gives a
//! call its key once, before the run state that holds it is journaled and before its tool
//! first starts ([`crate::run::TurnCall::idempotency_key`]); a resumed run reads the key back
//! from its state instead of deriving it again. Because `run_id` is random, two runs never share
//! a key even when their session, turn number and call ids are equal (a retried prompt is a new
//! run, and a new effect).
//!
//! A tool reads its call's key from [`crate::tools::ToolContext::current`]; MCP calls carry it
//! in `_meta` under [`MCP_META_KEY`]; `fetch_url` can send it as the [`IDEMPOTENCY_HEADER`]
//! (`Idempotency-Key`).

use std::fmt::Write as _;

use sha2::{Digest, Sha256};

use crate::run::state::{Phase, RunState, TurnCall};

pub use crate::tools::context::{IDEMPOTENCY_HEADER, MCP_META_KEY};

/// The key of call `call_id` at tool turn `turn` of run `run_id` in `session` (see the module
/// docs for the derivation).
pub fn idempotency_key(session: Option<&str>, run_id: &str, turn: u32, call_id: &str) -> String {
    let mut hash = Sha256::new();
    hash.update(b"agcore idempotency key v1\0");
    for field in [session.unwrap_or(""), run_id] {
        hash.update((field.len() as u64).to_be_bytes());
        hash.update(field.as_bytes());
    }
    hash.update(turn.to_be_bytes());
    hash.update((call_id.len() as u64).to_be_bytes());
    hash.update(call_id.as_bytes());
    let digest = hash.finalize();
    let mut key = String::with_capacity(5 + 32);
    key.push_str("agk1_");
    for byte in &digest[..16] {
        let _ = write!(key, "{byte:02x}");
    }
    key
}

/// A new run id: 24 random alphanumerics.
fn new_run_id() -> String {
    let mut id = String::with_capacity(28);
    id.push_str("run_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

/// Give the run an id when it has none, and each call of its tool turn without a key its key.
/// Keys already given are kept: they were journaled, and a resumed call must keep its key.
pub(crate) fn assign_keys(state: &mut RunState, session: Option<&str>) {
    let run_id = state.run_id.get_or_insert_with(new_run_id).clone();
    let turn = state.turns;
    if let Some(turn_calls) = state.turn_mut() {
        for call in &mut turn_calls.calls {
            if call.idempotency_key.is_none() {
                call.idempotency_key = Some(idempotency_key(session, &run_id, turn, &call.call.id));
            }
        }
    }
}

/// The keys of the calls at `positions` of the run's tool turn, in that order.
pub(crate) fn keys_of(state: &RunState, positions: &[usize]) -> Vec<Option<String>> {
    let calls = turn_calls(state);
    positions
        .iter()
        .map(|&p| calls.get(p).and_then(|call| call.idempotency_key.clone()))
        .collect()
}

/// The position of the call `call_id` in the run's tool turn.
pub(crate) fn position_of(state: &RunState, call_id: &str) -> Option<usize> {
    turn_calls(state)
        .iter()
        .position(|call| call.call.id == call_id)
}

/// The calls of the run's tool turn (none outside one).
fn turn_calls(state: &RunState) -> &[TurnCall] {
    match &state.phase {
        Phase::AwaitingTools { turn } | Phase::AwaitingApproval { turn, .. } => &turn.calls,
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_depends_on_every_field_and_only_on_them() {
        let key = idempotency_key(Some("s"), "run_1", 3, "call_a");
        assert_eq!(key, idempotency_key(Some("s"), "run_1", 3, "call_a"));
        assert_eq!(key.len(), 5 + 32);
        assert!(key.starts_with("agk1_"));
        for other in [
            idempotency_key(Some("t"), "run_1", 3, "call_a"),
            idempotency_key(None, "run_1", 3, "call_a"),
            idempotency_key(Some("s"), "run_2", 3, "call_a"),
            idempotency_key(Some("s"), "run_1", 4, "call_a"),
            idempotency_key(Some("s"), "run_1", 3, "call_b"),
            // Length prefixes: moving a byte between fields changes the key.
            idempotency_key(Some("sr"), "un_1", 3, "call_a"),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn pinned_derivation() {
        // The documented derivation, computed by hand: a change here changes every stored key.
        let mut hash = Sha256::new();
        hash.update(b"agcore idempotency key v1\0");
        hash.update(4u64.to_be_bytes());
        hash.update(b"demo");
        hash.update(5u64.to_be_bytes());
        hash.update(b"run_x");
        hash.update(1u32.to_be_bytes());
        hash.update(6u64.to_be_bytes());
        hash.update(b"call_1");
        let hex: String = hash.finalize()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            idempotency_key(Some("demo"), "run_x", 1, "call_1"),
            format!("agk1_{hex}")
        );
    }
}
