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

mod call_updates;
mod child_steps;
mod error;
pub mod journal;
mod outputs;

mod postgres;
mod record;
mod sqlite;
mod store;

use std::sync::Arc;

pub use crate::owner_only::{OwnerOnlyError, Tightened};
pub use call_updates::{StoredCallUpdate, call_updates};
pub use error::{Result, SessionError, StoreOperation};
pub use journal::{Restored, SessionJournal, replay};
pub use outputs::SessionOutputs;
pub use postgres::{PostgresStore, PostgresTimeouts};
pub use record::{
    MAX_SESSION_NAME_BYTES, MAX_STEP_KIND_BYTES, SESSION_FORMAT_VERSION, Session, SessionSummary,
    Step, validate_name,
};
pub use sqlite::SqliteStore;
pub use store::{LeaseFence, LockMode, SessionLease, SessionStore};

/// The version of the stores' table layout, kept in the `agcore_schema_version` table.
/// Version 2 added `agcore_leases` (lease epochs, for fenced commits); a version-1 database
/// is migrated when a store opens it.
pub const SCHEMA_VERSION: u32 = 2;

/// Opens the store an address names: `sqlite:PATH` (also `sqlite://PATH`, or a bare path) or
/// `postgres://…` / `postgresql://…`. Any other `scheme://` is [`SessionError::UnsupportedUrl`].
pub async fn open(url: &str) -> Result<Arc<dyn SessionStore>> {
    open_with(url, PostgresTimeouts::default()).await
}

/// [`open`], with these bounds on a PostgreSQL server's answers (a SQLite store ignores them).
pub async fn open_with(url: &str, timeouts: PostgresTimeouts) -> Result<Arc<dyn SessionStore>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return Ok(Arc::new(PostgresStore::connect_with(url, timeouts).await?));
    }
    let path = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
        .unwrap_or(url);
    if path.is_empty() || (url.contains("://") && !url.starts_with("sqlite:")) {
        return Err(SessionError::UnsupportedUrl {
            url: redact_address(url),
        });
    }
    Ok(Arc::new(SqliteStore::open(path).await?))
}

/// A store address fit to show: `postgres://user:secret@host/db?password=secret` →
/// `postgres://user@host/db?password=REDACTED`, parsed as a URL (so a password holding `@` or
/// `/` goes whole); in a libpq `key=value` string the `password` value is hidden. An address
/// that does not parse is not shown at all, only its scheme.
pub fn redact_address(address: &str) -> String {
    const HIDDEN: &str = "REDACTED";
    let secret =
        |key: &str| key.eq_ignore_ascii_case("password") || key.eq_ignore_ascii_case("sslpassword");
    if let Some((scheme, _)) = address.split_once("://") {
        let Ok(mut url) = url::Url::parse(address) else {
            return format!("{scheme}://(an address that does not parse; not shown)");
        };
        let _ = url.set_password(None);
        if url.query_pairs().any(|(key, _)| secret(&key)) {
            let pairs: Vec<(String, String)> = url
                .query_pairs()
                .map(|(key, value)| {
                    let value = if secret(&key) {
                        HIDDEN.into()
                    } else {
                        value.into_owned()
                    };
                    (key.into_owned(), value)
                })
                .collect();
            url.query_pairs_mut().clear().extend_pairs(pairs);
        }
        return url.to_string();
    }
    if !address.contains('=') {
        return address.to_owned(); // a path
    }
    // libpq: `key = value` pairs, a value either bare or in single quotes with \ escapes.
    let mut shown = Vec::new();
    let mut rest = address.trim_start();
    while !rest.is_empty() {
        let Some((key, after)) = rest.split_once('=') else {
            return "(a connection string that does not parse; not shown)".to_owned();
        };
        let key = key.trim();
        let after = after.trim_start();
        let (value, remaining) = if let Some(quoted) = after.strip_prefix('\'') {
            let mut end = None;
            let mut escaped = false;
            for (i, c) in quoted.char_indices() {
                match c {
                    _ if escaped => escaped = false,
                    '\\' => escaped = true,
                    '\'' => {
                        end = Some(i);
                        break;
                    }
                    _ => {}
                }
            }
            let Some(end) = end else {
                return "(a connection string that does not parse; not shown)".to_owned();
            };
            (&after[..end + 2], &quoted[end + 1..])
        } else {
            let end = after.find(char::is_whitespace).unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        shown.push(format!(
            "{key}={}",
            if secret(key) { HIDDEN } else { value }
        ));
        rest = remaining.trim_start();
    }
    shown.join(" ")
}

/// The 64-bit key a session's lock uses (FNV-1a of the name): the lock file's name in SQLite.
/// Stable across builds and platforms.
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
