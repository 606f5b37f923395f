//! The data a session store keeps: [`Session`], [`Step`], [`SessionSummary`], and the name and
//! step rules every store enforces the same way.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::error::{Result, SessionError};

/// The format version this build writes and the newest it reads. A session stored with a
/// larger number is refused with [`SessionError::UnsupportedVersion`]. See docs/8-sessions.md.
///
/// - 1: steps of the run journal.
/// - 2: assistant messages in steps may carry continuation `artifacts` (reasoning state a
///   version-1 reader would drop without a word). A version-1 session still loads as it is;
///   the first append of this build marks it 2, so an older build refuses it from then on.
pub const SESSION_FORMAT_VERSION: u32 = 2;

/// The longest session name, in bytes.
pub const MAX_SESSION_NAME_BYTES: usize = 128;

/// The longest step kind, in bytes.
pub const MAX_STEP_KIND_BYTES: usize = 64;

/// One committed step of a session: a dense sequence number, a kind chosen by the writer
/// (e.g. `"run_state"`, `"tool_started"`) and an opaque JSON payload the store never reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The step's position, dense from 0 within its session.
    pub seq: u64,
    /// What the payload is; the store only bounds its length.
    pub kind: String,
    /// The step's data, stored byte-exact as its JSON text.
    pub payload: serde_json::Value,
}

impl Step {
    /// A step at `seq`.
    pub fn new(seq: u64, kind: impl Into<String>, payload: serde_json::Value) -> Self {
        Self {
            seq,
            kind: kind.into(),
            payload,
        }
    }
}

/// A stored session: its metadata and every committed step, in order.
#[derive(Debug, Clone, PartialEq)]
pub struct Session {
    /// The session's name.
    pub name: String,
    /// The format version it was written with.
    pub format_version: u32,
    /// When its first step was committed (millisecond precision).
    pub created: SystemTime,
    /// When its last step was committed (millisecond precision).
    pub updated: SystemTime,
    /// All steps, `steps[i].seq == i`.
    pub steps: Vec<Step>,
}

impl Session {
    /// The sequence number the next `append` must pass as `expected_next_seq`.
    pub fn next_seq(&self) -> u64 {
        self.steps.len() as u64
    }
}

/// A session as `list` shows it: metadata and step count, no payloads.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionSummary {
    /// The session's name.
    pub name: String,
    /// The format version it was written with.
    pub format_version: u32,
    /// When its first step was committed.
    pub created: SystemTime,
    /// When its last step was committed.
    pub updated: SystemTime,
    /// How many steps it has (its next sequence number).
    pub steps: u64,
}

/// Checks a session name: 1 to [`MAX_SESSION_NAME_BYTES`] bytes, no control characters.
pub fn validate_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        Some("it is empty".to_string())
    } else if name.len() > MAX_SESSION_NAME_BYTES {
        Some(format!(
            "it is {} bytes long; the limit is {MAX_SESSION_NAME_BYTES}",
            name.len()
        ))
    } else if name.chars().any(char::is_control) {
        Some("it contains a control character".to_string())
    } else {
        None
    };
    match reason {
        Some(reason) => Err(SessionError::InvalidName {
            name: name.chars().take(MAX_SESSION_NAME_BYTES).collect(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Checks the steps of an append: sequence numbers dense from `expected_next_seq`, kinds
/// bounded and printable, every number representable as a database BIGINT.
pub(crate) fn validate_steps(session: &str, expected_next_seq: u64, steps: &[Step]) -> Result<()> {
    let invalid = |reason: String| SessionError::InvalidStep {
        session: session.to_string(),
        reason,
    };
    let last = expected_next_seq.saturating_add(steps.len() as u64);
    if last > i64::MAX as u64 {
        return Err(invalid(format!(
            "sequence number {last} exceeds {}",
            i64::MAX
        )));
    }
    for (i, step) in steps.iter().enumerate() {
        let want = expected_next_seq + i as u64;
        if step.seq != want {
            return Err(invalid(format!(
                "step {i} of the batch has seq {}; expected {want} (dense from expected_next_seq)",
                step.seq
            )));
        }
        if step.kind.is_empty()
            || step.kind.len() > MAX_STEP_KIND_BYTES
            || step.kind.chars().any(char::is_control)
        {
            return Err(invalid(format!(
                "kind {:?} must be 1 to {MAX_STEP_KIND_BYTES} bytes without control characters",
                step.kind
            )));
        }
    }
    Ok(())
}

/// Checks a stored format version against [`SESSION_FORMAT_VERSION`].
pub(crate) fn check_version(session: &str, found: i64) -> Result<u32> {
    match u32::try_from(found) {
        Ok(v) if (1..=SESSION_FORMAT_VERSION).contains(&v) => Ok(v),
        _ => Err(SessionError::UnsupportedVersion {
            session: session.to_string(),
            found: u32::try_from(found).unwrap_or(u32::MAX),
            supported: SESSION_FORMAT_VERSION,
        }),
    }
}

/// Now, as Unix milliseconds (the stores' timestamp columns).
pub(crate) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

/// Unix milliseconds back to a time (negative values clamp to the epoch).
pub(crate) fn from_ms(ms: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(u64::try_from(ms).unwrap_or(0))
}

/// Decodes one stored step.
pub(crate) fn decode_step(session: &str, seq: i64, kind: String, payload: &str) -> Result<Step> {
    let bad = |reason: String| SessionError::BadRecord {
        session: session.to_string(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    let seq = u64::try_from(seq).map_err(|_| bad(format!("negative sequence number {seq}")))?;
    let payload = serde_json::from_str(payload).map_err(|e| bad(format!("payload JSON: {e}")))?;
    Ok(Step { seq, kind, payload })
}
