//! [`SessionError`]: every way a session store can fail, typed.

use std::path::PathBuf;

/// An error from a [`SessionStore`](super::SessionStore).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session name breaks a rule (length, control characters).
    #[error("invalid session name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// The rule it breaks.
        reason: String,
    },
    /// A step handed to `append` is malformed (sequence numbers not dense from
    /// `expected_next_seq`, a bad `kind`).
    #[error("invalid step for session {session:?}: {reason}")]
    InvalidStep {
        /// The session.
        session: String,
        /// What is wrong with the step.
        reason: String,
    },
    /// Optimistic concurrency: the session's next sequence number is not the one the caller
    /// expected (another writer appended first, or the session is missing and
    /// `expected_next_seq` was not 0). Nothing was written.
    #[error(
        "session {session:?} changed underneath: expected next step {expected}, the store has {found}"
    )]
    Conflict {
        /// The session.
        session: String,
        /// The `expected_next_seq` the caller passed.
        expected: u64,
        /// The session's actual next sequence number (0 when the session does not exist).
        found: u64,
    },
    /// Fencing: the writer's lease on the session is no longer the current one — it expired
    /// and another worker took the session over (a worker paused past its lease), or the
    /// session's lease was taken again. Nothing was written: stop, the session is someone
    /// else's now.
    #[error(
        "session {session:?}: this worker's lease (epoch {epoch}) was lost — {}; nothing was written",
        match current { Some(current) => format!("another worker holds epoch {current} now"), None => "the lease is gone".to_owned() }
    )]
    LeaseLost {
        /// The session.
        session: String,
        /// The epoch this writer's lease had.
        epoch: u64,
        /// The session's current lease epoch (`None`: no lease row).
        current: Option<u64>,
    },
    /// Another holder has the session's lease (`LockMode::FailFast`), or the wait timed out.
    #[error("session {session:?} is busy: another worker holds it")]
    Busy {
        /// The session.
        session: String,
    },
    /// A session was written in a format version this build does not understand.
    #[error(
        "session {session:?} has format version {found}; this build supports up to {supported}"
    )]
    UnsupportedVersion {
        /// The session.
        session: String,
        /// The version stored.
        found: u32,
        /// The newest version this build reads ([`SESSION_FORMAT_VERSION`](super::SESSION_FORMAT_VERSION)).
        supported: u32,
    },
    /// The database's schema was created by a newer build.
    #[error(
        "session database {location} has schema version {found}; this build supports up to {supported}"
    )]
    UnsupportedSchema {
        /// The file path or the (password-free) database address.
        location: String,
        /// The schema version stored.
        found: u32,
        /// The newest schema version this build knows.
        supported: u32,
    },
    /// The SQLite file is damaged, or is not a SQLite database at all (e.g. a text file).
    #[error("session database {} is corrupt or not a SQLite database: {reason}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What SQLite (or the decoder) said.
        reason: String,
    },
    /// The database is a valid database of something else (other tables, no agcore schema).
    #[error("session database {location} belongs to something else: {reason}")]
    Foreign {
        /// The file path or the (password-free) database address.
        location: String,
        /// Why it is not ours.
        reason: String,
    },
    /// A stored step could not be decoded (its JSON payload or a column is damaged).
    #[error("session {session:?}, step {seq}: stored data is damaged: {reason}")]
    BadRecord {
        /// The session.
        session: String,
        /// The step's sequence number.
        seq: u64,
        /// What is wrong.
        reason: String,
    },
    /// The database server cannot be reached, or the connection broke mid-operation. An
    /// append that fails this way was not committed unless the server committed it before
    /// the connection broke; reload to see.
    #[error("session store connection to {location} failed: {reason}")]
    Connection {
        /// The (password-free) database address.
        location: String,
        /// What the driver said.
        reason: String,
    },
    /// The database server did not answer an operation within its time limit (a frozen or
    /// unreachable-but-not-refusing server). An append that timed out may still commit if the
    /// server wakes up, whole or not at all; reload to see.
    #[error("session store {location}: {operation} got no answer within {after:?}")]
    Timeout {
        /// The (password-free) database address.
        location: String,
        /// What timed out.
        operation: StoreOperation,
        /// The limit it hit.
        after: std::time::Duration,
    },
    /// Any other database error.
    #[error("session store error on {location}: {reason}")]
    Database {
        /// The file path or the (password-free) database address.
        location: String,
        /// What the driver said.
        reason: String,
    },
    /// A file-system error (creating the database's folder, a lock file).
    #[error("session store I/O error on {}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A file or folder the store keeps owner-only belongs to another user or is not what it
    /// should be (a symbolic link where the lock file is): the store refuses to use it.
    #[error("session store file is not private: {0}")]
    NotPrivate(#[from] crate::owner_only::OwnerOnlyError),
    /// A store address `open` does not understand.
    #[error("unsupported session store address {url:?}: use sqlite:PATH or postgres://...")]
    UnsupportedUrl {
        /// The address (passwords elided).
        url: String,
    },
}

/// A session store operation, as [`SessionError::Timeout`] names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreOperation {
    /// Connecting (a new connection, or waiting for one of the pool's).
    Connect,
    /// Creating or checking the tables.
    Migrate,
    /// `SessionStore::load`.
    Load,
    /// `SessionStore::append`.
    Append,
    /// `SessionStore::list`.
    List,
    /// `SessionStore::delete`.
    Delete,
    /// `SessionStore::lock`.
    Lock,
    /// `SessionStore::put_output`.
    PutOutput,
    /// `SessionStore::get_output`.
    GetOutput,
    /// `SessionStore::renew`.
    Renew,
}

impl std::fmt::Display for StoreOperation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreOperation::Connect => "connect",
            StoreOperation::Migrate => "schema check",
            StoreOperation::Load => "load",
            StoreOperation::Append => "append",
            StoreOperation::List => "list",
            StoreOperation::Delete => "delete",
            StoreOperation::Lock => "lock",
            StoreOperation::PutOutput => "output write",
            StoreOperation::GetOutput => "output read",
            StoreOperation::Renew => "lease renewal",
        })
    }
}

/// The result type of session stores.
pub type Result<T, E = SessionError> = std::result::Result<T, E>;
