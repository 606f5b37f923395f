//! The [`SessionStore`] trait, lock modes and the [`SessionLease`] a lock returns.

use std::time::Duration;

use async_trait::async_trait;

use super::error::Result;
use super::record::{Session, SessionSummary, Step};
use crate::context::spill::KeptOutput;
use crate::owner_only::Tightened;

/// How [`SessionStore::lock`] behaves when another holder has the session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// Wait up to `timeout` for the holder to let go, then fail with
    /// [`SessionError::Busy`](super::SessionError::Busy).
    Wait {
        /// The longest wait.
        timeout: Duration,
    },
    /// Fail at once with [`SessionError::Busy`](super::SessionError::Busy).
    FailFast,
}

/// What a commit shows to prove that its writer still holds the session's lease: the
/// session and the lease's epoch. Each taking of a lease gets a higher epoch than every lease
/// of that session before; a store refuses a commit whose epoch is not the current one
/// ([`SessionError::LeaseLost`](super::SessionError::LeaseLost)), in the same transaction as
/// the commit, so a worker paused past its lease cannot write after another took over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseFence {
    /// The session.
    pub session: String,
    /// The lease's epoch.
    pub epoch: u64,
}

/// A held session lock. Dropping it releases the lock; so does the death of the holding
/// process (the operating system closes the lock file or the database connection), so a
/// `kill -9`ed worker never blocks a session forever.
///
/// A lease of a store with epochs ([`SessionLease::fence`]) fences the commits made with it
/// ([`SessionStore::append_fenced`], [`crate::session::SessionJournal::with_lease`]).
pub struct SessionLease {
    session: String,
    epoch: Option<u64>,
    // The store-specific holder (a locked file, a database connection); releasing is dropping it.
    _guard: Box<dyn Send + Sync>,
}

impl SessionLease {
    /// Wraps a store's lock holder, without an epoch (its commits are not fenced). For
    /// implementations of [`SessionStore`]: the lock must be released when `guard` is dropped.
    pub fn new(session: impl Into<String>, guard: Box<dyn Send + Sync>) -> Self {
        Self {
            session: session.into(),
            epoch: None,
            _guard: guard,
        }
    }

    /// [`SessionLease::new`] for a lease with this epoch: commits made with its
    /// [`fence`](SessionLease::fence) are refused once another lease of the session was taken.
    pub fn with_epoch(session: impl Into<String>, epoch: u64, guard: Box<dyn Send + Sync>) -> Self {
        Self {
            session: session.into(),
            epoch: Some(epoch),
            _guard: guard,
        }
    }

    /// The session this lease holds.
    pub fn session(&self) -> &str {
        &self.session
    }

    /// The lease's epoch (`None`: a store without epochs).
    pub fn epoch(&self) -> Option<u64> {
        self.epoch
    }

    /// What a commit under this lease shows ([`SessionStore::append_fenced`]); `None` for a
    /// store without epochs.
    pub fn fence(&self) -> Option<LeaseFence> {
        self.epoch.map(|epoch| LeaseFence {
            session: self.session.clone(),
            epoch,
        })
    }
}

impl std::fmt::Debug for SessionLease {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionLease")
            .field("session", &self.session)
            .field("epoch", &self.epoch)
            .finish_non_exhaustive()
    }
}

/// Durable storage for sessions: an append-only list of committed steps per session name.
///
/// Writers use optimistic concurrency (`append` names the sequence number it expects next) and
/// hold a [`SessionLease`] while they run, so two workers never interleave their steps in
/// one history. Implementations: [`SqliteStore`](super::SqliteStore) (embedded, one file) and
/// [`PostgresStore`](super::PostgresStore) (many processes and machines).
#[async_trait]
pub trait SessionStore: Send + Sync {
    /// The session with all its steps in order, or `None` when there is none by that name.
    async fn load(&self, name: &str) -> Result<Option<Session>>;

    /// Commits `steps` (sequence numbers `expected_next_seq`, `expected_next_seq + 1`, …) in
    /// one transaction: all or none. When the session's next sequence number is not
    /// `expected_next_seq` nothing is written and the result is
    /// [`SessionError::Conflict`](super::SessionError::Conflict). A missing session is created
    /// only when `expected_next_seq` is 0. An empty `steps` writes nothing.
    async fn append(&self, name: &str, expected_next_seq: u64, steps: &[Step]) -> Result<()>;

    /// [`SessionStore::append`] under the lease `fence` proves: in the same transaction, the
    /// commit is refused with [`SessionError::LeaseLost`](super::SessionError::LeaseLost)
    /// (nothing written) when the session's lease is no longer `fence.epoch`. A store without
    /// epochs (the default) appends unfenced.
    async fn append_fenced(
        &self,
        fence: &LeaseFence,
        expected_next_seq: u64,
        steps: &[Step],
    ) -> Result<()> {
        self.append(&fence.session, expected_next_seq, steps).await
    }

    /// Renews the lease `fence` proves, now: its expiry moves to a full lease period from now.
    /// [`SessionError::LeaseLost`](super::SessionError::LeaseLost) when it is no longer the
    /// session's lease. A store whose leases do not expire (the default) has nothing to do. A
    /// store whose leases expire renews the leases it hands out by itself too, while their
    /// holder runs; this is for a holder that wants to know now.
    async fn renew(&self, fence: &LeaseFence) -> Result<()> {
        let _ = fence;
        Ok(())
    }

    /// Every session, by name.
    async fn list(&self) -> Result<Vec<SessionSummary>>;

    /// Deletes a session and its steps; `true` when it existed.
    async fn delete(&self, name: &str) -> Result<bool>;

    /// Takes the session's exclusive lease (the session need not exist yet). A second holder
    /// gets [`SessionError::Busy`](super::SessionError::Busy), at once or after waiting, per
    /// `mode`.
    async fn lock(&self, name: &str, mode: LockMode) -> Result<SessionLease>;

    /// Keeps a large tool output of session `name` whole as output `id` (the context engine
    /// cut it for the model; `crate::context::ReadOutput` pages it back). `false` (the
    /// default): this store does not keep outputs. Deleting the session deletes its outputs.
    async fn put_output(&self, name: &str, id: &str, output: &KeptOutput) -> Result<bool> {
        let _ = (name, id, output);
        Ok(false)
    }

    /// The files and folders of this store that other users could use when it was opened, and
    /// that it made owner-only then (none for a store without local files). Report them: the
    /// next open finds them private.
    fn tightened(&self) -> &[Tightened] {
        &[]
    }

    /// Output `id` of session `name`, or `None` (also for a store that keeps no outputs).
    async fn get_output(&self, name: &str, id: &str) -> Result<Option<KeptOutput>> {
        let _ = (name, id);
        Ok(None)
    }
}
