//! Sessions: durable, append-only histories of committed steps, behind the [`SessionStore`]
//! trait, with two real implementations — [`SqliteStore`] (one embedded file, the default) and
//! [`PostgresStore`] (many processes and machines on one database).
//!
//! A session is a name, its timestamps, its [format version](SESSION_FORMAT_VERSION) and a
//! list of [`Step`]s with dense sequence numbers; the store never looks inside a step's JSON
//! payload. Writers append with optimistic concurrency and hold a [`SessionLease`] while they
//! run. The storage format is documented in `docs/8-sessions.md`.
//!
//! ```no_run
//! # async fn demo() -> Result<(), agcore::session::SessionError> {
//! use agcore::session::{LockMode, SessionStore, SqliteStore, Step};
//! let store = SqliteStore::open("/tmp/sessions.db").await?;
//! let _lease = store.lock("demo", LockMode::FailFast).await?;
//! let next = store.load("demo").await?.map_or(0, |s| s.next_seq());
//! store
//!     .append("demo", next, &[Step::new(next, "note", serde_json::json!({"text": "hi"}))])
//!     .await?;
//! # Ok(()) }
//! ```

mod error;
pub mod journal;
mod outputs;
pub mod owner_only;
mod postgres;
mod record;
mod sqlite;
mod store;

use std::sync::Arc;

pub use error::{Result, SessionError, StoreOperation};
pub use journal::{Restored, SessionJournal, replay};
pub use outputs::SessionOutputs;
pub use owner_only::{OwnerOnlyError, Tightened};
pub use postgres::{PostgresStore, PostgresTimeouts};
pub use record::{
    MAX_SESSION_NAME_BYTES, MAX_STEP_KIND_BYTES, SESSION_FORMAT_VERSION, Session, SessionSummary,
    Step, validate_name,
};
pub use sqlite::SqliteStore;
pub use store::{LockMode, SessionLease, SessionStore};

/// The version of the stores' table layout, kept in the `agcore_schema_version` table.
pub const SCHEMA_VERSION: u32 = 1;

/// Opens the store an address names: `sqlite:PATH` (also `sqlite://PATH`, or a bare path) or
/// `postgres://…` / `postgresql://…`. Any other `scheme://` is [`SessionError::UnsupportedUrl`].
pub async fn open(url: &str) -> Result<Arc<dyn SessionStore>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect(url).await?));
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    if path.is_empty() || (url.contains("://") && !url.starts_with("sqlite:")) {
        return Err(SessionError::UnsupportedUrl {
            url: url.split('@').next_back().unwrap_or_default().to_string(),
        });
    }
    Ok(Arc::new(SqliteStore::open(path).await?))
}

/// The 64-bit key a session's lock uses (FNV-1a of the name): the advisory-lock key in
/// PostgreSQL, the lock file's name in SQLite. Stable across builds and platforms.
fn lock_key(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Checks that loaded steps are exactly `0..next_seq` (a hole means a damaged database).
fn check_dense(name: &str, steps: &[Step], next_seq: i64) -> Result<()> {
    if let Some((i, s)) = steps.iter().enumerate().find(|(i, s)| s.seq != *i as u64) {
        return Err(SessionError::BadRecord {
            session: name.to_string(),
            seq: s.seq,
            reason: format!("found at position {i}: the sequence has a hole"),
        });
    }
    if steps.len() as i64 != next_seq {
        return Err(SessionError::BadRecord {
            session: name.to_string(),
            seq: steps.len() as u64,
            reason: format!(
                "the session row says {next_seq} steps but {} are stored",
                steps.len()
            ),
        });
    }
    Ok(())
}
