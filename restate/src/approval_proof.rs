//! Approvals that count only when they come through the `approve` handler. A run waiting for
//! a decision waits on an awakeable, and anyone who can reach Restate's ingress can resolve an
//! awakeable by id (`POST /restate/awakeables/{id}/resolve`) without calling `approve`. So the
//! run draws a random nonce per waiting call (a journaled step, kept in the object's state
//! beside the awakeable, never shown by `state`), and `approve` resolves the awakeable with an
//! HMAC under that nonce over the session, the call id, the digest of the call as shown and
//! the decision. The run accepts a decision only with a valid proof; anything else resolving
//! the awakeable is ignored and the call waits on a new one.

use aws_lc_rs::hmac;

use crate::wire::{StoredPending, WireDecision};

/// Bytes of randomness in a nonce.
const NONCE_BYTES: usize = 32;

/// Why no nonce could be drawn.
#[derive(Debug, thiserror::Error)]
#[error("the system's random source failed")]
pub(crate) struct NoRandomness;

/// `count` fresh nonces, in hex.
pub(crate) fn nonces(count: usize) -> Result<Vec<String>, NoRandomness> {
    (0..count)
        .map(|_| {
            let mut bytes = [0u8; NONCE_BYTES];
            aws_lc_rs::rand::fill(&mut bytes).map_err(|_| NoRandomness)?;
            Ok(hex(&bytes))
        })
        .collect()
}

/// The proof `approve` gives `decision` for `pending` in `session`.
pub(crate) fn prove(session: &str, pending: &StoredPending, decision: &WireDecision) -> String {
    hex(hmac::sign(&key(pending), &signed(session, pending, decision)).as_ref())
}

/// Whether `decision` carries the proof `approve` would give it for `pending` in `session`.
pub(crate) fn verify(session: &str, pending: &StoredPending, decision: &WireDecision) -> bool {
    let Some(proof) = decision.proof.as_deref().and_then(unhex) else {
        return false;
    };
    // An entry kept by an endpoint from before proofs has no nonce: nothing proves for it.
    !pending.nonce.is_empty()
        && hmac::verify(&key(pending), &signed(session, pending, decision), &proof).is_ok()
}

fn key(pending: &StoredPending) -> hmac::Key {
    hmac::Key::new(hmac::HMAC_SHA256, pending.nonce.as_bytes())
}

/// The signed text: every field length-prefixed, so no two field lists sign alike.
fn signed(session: &str, pending: &StoredPending, decision: &WireDecision) -> Vec<u8> {
    let mut text = Vec::new();
    let message = decision.message.as_deref().unwrap_or("");
    for field in [
        "agcore-restate-approval-v1",
        session,
        &pending.call.id,
        &pending.digest,
        if decision.allow { "allow" } else { "deny" },
        message,
    ] {
        text.extend((field.len() as u64).to_be_bytes());
        text.extend(field.as_bytes());
    }
    text
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn unhex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::PendingCall;
    use serde_json::json;

    fn pending(nonce: &str) -> StoredPending {
        StoredPending {
            call: PendingCall {
                id: "call-1".to_owned(),
                tool: "run_command".to_owned(),
                arguments: json!({"command": "ls"}),
            },
            awakeable: "sign_1".to_owned(),
            nonce: nonce.to_owned(),
            digest: "ab".repeat(32),
        }
    }

    fn allow() -> WireDecision {
        WireDecision {
            allow: true,
            message: None,
            proof: None,
        }
    }

    #[test]
    fn only_the_proof_of_that_call_and_decision_counts() {
        let [nonce, other] = <[String; 2]>::try_from(nonces(2).unwrap()).unwrap();
        assert_ne!(nonce, other);
        let waiting = pending(&nonce);
        let mut decision = allow();
        decision.proof = Some(prove("s", &waiting, &decision));
        assert!(verify("s", &waiting, &decision));
        // No proof (a raw awakeable resolution), another session, another nonce, another
        // call's digest, the decision flipped: none counts.
        assert!(!verify("s", &waiting, &allow()));
        assert!(!verify("t", &waiting, &decision));
        assert!(!verify("s", &pending(&other), &decision));
        let mut moved = waiting.clone();
        moved.digest = "cd".repeat(32);
        assert!(!verify("s", &moved, &decision));
        let mut flipped = decision.clone();
        flipped.allow = false;
        assert!(!verify("s", &waiting, &flipped));
        assert!(!verify("s", &pending(""), &decision));
        let mut garbage = decision.clone();
        garbage.proof = Some("zz".to_owned());
        assert!(!verify("s", &waiting, &garbage));
    }
}
