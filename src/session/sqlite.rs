//! [`SqliteStore`]: sessions in one SQLite file (WAL, `synchronous=NORMAL`), the embedded
//! default. Locks are `flock`s on per-session files in a `<file>.locks/` folder beside the
//! database, so the kernel releases them when the holder dies.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use rusqlite::{Connection, ErrorCode, OptionalExtension, TransactionBehavior, params};

use super::error::{Result, SessionError};
use super::record::{
    Session, SessionSummary, Step, check_version, decode_step, from_ms, now_ms, validate_name,
    validate_steps,
};
use super::store::{LeaseFence, LockMode, SessionLease, SessionStore};
use super::{SCHEMA_VERSION, lock_key};
use crate::context::spill::KeptOutput;
use crate::owner_only::{self, Tightened};

/// How long a write waits for another process's write transaction on the same file.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Commits between two WAL checkpoints of this connection (SQLite's automatic checkpoint
/// comes at 1,000 pages; a tool turn's commit writes a few).
const CHECKPOINT_EVERY: u64 = 256;

/// How often a waiting `lock` retries.
const LOCK_POLL: Duration = Duration::from_millis(20);

const SCHEMA: &str = "
CREATE TABLE agcore_schema_version (version INTEGER NOT NULL);
CREATE TABLE agcore_sessions (
    name           TEXT    PRIMARY KEY,
    format_version INTEGER NOT NULL,
    created_ms     INTEGER NOT NULL,
    updated_ms     INTEGER NOT NULL,
    next_seq       INTEGER NOT NULL
);
CREATE TABLE agcore_steps (
    session TEXT    NOT NULL,
    seq     INTEGER NOT NULL,
    kind    TEXT    NOT NULL,
    payload TEXT    NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
";

/// Large tool outputs (the context engine's, paged by `read_output`): added to layout 1
/// without a version change — older readers never look at it.
const OUTPUTS: &str = "
CREATE TABLE IF NOT EXISTS agcore_outputs (
    session    TEXT    NOT NULL,
    id         TEXT    NOT NULL,
    content    TEXT    NOT NULL,
    tail_start INTEGER,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (session, id)
) WITHOUT ROWID;
";

/// Schema version 2: each session's lease epoch, raised by every `lock` and checked by every
/// fenced commit in its transaction.
const LEASES: &str = "
CREATE TABLE IF NOT EXISTS agcore_leases (
    name        TEXT    PRIMARY KEY,
    epoch       INTEGER NOT NULL,
    acquired_ms INTEGER NOT NULL
) WITHOUT ROWID;
";

/// A [`SessionStore`] in one SQLite file. Cheap to clone; clones share one connection
/// (SQLite has one writer at a time anyway). Reads and whatever may wait run on tokio's
/// blocking pool; a commit that can take the write lock at once runs on the caller's thread.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Arc<Inner>,
}

struct Inner {
    path: PathBuf,
    lock_dir: PathBuf,
    conn: Mutex<Connection>,
    tightened: Vec<Tightened>,
    /// Commits through [`SqliteStore::write`], for [`SqliteStore::checkpoint_later`].
    commits: AtomicU64,
}

impl std::fmt::Debug for SqliteStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqliteStore")
            .field("path", &self.inner.path)
            .finish_non_exhaustive()
    }
}

impl SqliteStore {
    /// Opens (creating when missing) the session database at `path`, and its folder. A file
    /// that is not a SQLite database is [`SessionError::Corrupt`]; a SQLite database of
    /// something else is [`SessionError::Foreign`]; a newer schema is
    /// [`SessionError::UnsupportedSchema`].
    ///
    /// The database, its `-wal`/`-shm` files, the `<file>.locks/` folder and its lock files
    /// are owner-only (`0600`/`0700`, whatever the umask; folders it creates too): ones found
    /// open to other users are made so, and listed by [`SessionStore::tightened`]. A lock
    /// file or folder of another user is [`SessionError::NotPrivate`].
    pub async fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let opened = tokio::task::spawn_blocking(move || open_blocking(path)).await;
        let inner = opened.map_err(|e| SessionError::Database {
            location: "sqlite".into(),
            reason: format!("open task failed: {e}"),
        })??;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.inner.path
    }

    /// Runs a short write `f` on the caller's thread when it need not wait, else on the
    /// blocking pool ([`Self::with_conn`]).
    ///
    /// Why: a commit that takes the write lock at once costs tens of microseconds, and the
    /// two thread hand-offs of the blocking pool cost more CPU than the commit itself — on a
    /// journaled tool turn they were most of the journal's cost. What may wait stays off the
    /// executor: a connection in use by another task, another process's write transaction
    /// (the busy handler gives up at once here, the transaction rolls back, and the blocking
    /// pool runs it again with the full timeout), and the WAL checkpoint's `fsync`
    /// (automatic checkpoints are off on this connection; [`Self::checkpoint_later`] runs
    /// them on the blocking pool).
    async fn write<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&mut Connection, &Path) -> Result<T> + Send + 'static,
    {
        if let Ok(mut conn) = self.inner.conn.try_lock() {
            let busy = Arc::new(AtomicBool::new(false));
            let seen = Arc::clone(&busy);
            let inline = conn
                .busy_handler(Some(move |_| {
                    seen.store(true, Ordering::Relaxed);
                    false
                }))
                .map_err(map_err(&self.inner.path));
            let result = inline.and_then(|()| f(&mut conn, &self.inner.path));
            // Back to waiting for other writers, for everything else on this connection.
            conn.busy_timeout(BUSY_TIMEOUT)
                .map_err(map_err(&self.inner.path))?;
            drop(conn);
            if !busy.load(Ordering::Relaxed) {
                self.checkpoint_later();
                return result;
            }
        }
        let written = self.with_conn(f).await;
        self.checkpoint_later();
        written
    }

    /// Counts a commit; every [`CHECKPOINT_EVERY`] commits, checkpoints the WAL on the
    /// blocking pool, so its `fsync` never runs on the executor. On the store's own
    /// connection, holding it: commits of this store made meanwhile wait on the blocking pool
    /// behind it, so the checkpoint catches up with the WAL and the next commit starts the WAL
    /// over (a checkpoint on the side, racing a stream of commits, never caught up: the WAL
    /// grew without bound).
    fn checkpoint_later(&self) {
        let commits = self.inner.commits.fetch_add(1, Ordering::Relaxed) + 1;
        if !commits.is_multiple_of(CHECKPOINT_EVERY) {
            return;
        }
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || {
            // Best effort: a checkpoint that fails now is done by the next one (or by SQLite
            // when the connection closes). Passive: it never waits for other processes.
            if let Ok(conn) = inner.conn.lock() {
                let _ = conn.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |_| Ok(()));
            }
        });
    }

    /// Runs `f` on the connection on the blocking pool.
    async fn with_conn<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection, &Path) -> Result<T> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        let joined = tokio::task::spawn_blocking(move || {
            let mut conn = inner.conn.lock().map_err(|_| SessionError::Database {
                location: inner.path.display().to_string(),
                reason: "connection mutex poisoned by a panic".into(),
            })?;
            f(&mut conn, &inner.path)
        })
        .await;
        joined.map_err(|e| SessionError::Database {
            location: self.inner.path.display().to_string(),
            reason: format!("blocking task failed: {e}"),
        })?
    }
}

/// Maps a rusqlite error: damaged or non-database files are `Corrupt`, the rest `Database`.
fn map_err(path: &Path) -> impl Fn(rusqlite::Error) -> SessionError + '_ {
    move |e| match e.sqlite_error_code() {
        Some(ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt) => SessionError::Corrupt {
            path: path.to_path_buf(),
            reason: e.to_string(),
        },
        _ => SessionError::Database {
            location: path.display().to_string(),
            reason: e.to_string(),
        },
    }
}

fn open_blocking(path: PathBuf) -> Result<Inner> {
    if let Some(dir) = path.parent() {
        // Folders it creates are owner-only; an existing one is the caller's choice.
        owner_only::create_dir_all(dir)?;
    }
    let mut tightened = Vec::new();
    if std::fs::metadata(&path).is_ok() {
        // Another user's database: what we would write there would not be private.
        owner_only::check_owner(&path)?;
    } else {
        // Created here, 0600: SQLite gives its -wal and -shm the database's mode.
        owner_only::open_file(&path)?;
    }
    let err = map_err(&path);
    let mut conn = Connection::open(&path).map_err(&err)?;
    conn.busy_timeout(BUSY_TIMEOUT).map_err(&err)?;
    // Whose file is it? Asked before anything changes (journal mode, permissions): a database
    // of something else is refused as it was found. A text file fails here with NOTADB.
    let tables: Vec<String> = {
        let mut stmt = conn
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .map_err(&err)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(&err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&err)?
    };
    if !tables.is_empty() && !tables.iter().any(|t| t == "agcore_schema_version") {
        return Err(foreign(&path, &tables));
    }
    let mode: String = conn
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .map_err(&err)?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(SessionError::Database {
            location: path.display().to_string(),
            reason: format!("cannot switch to WAL journaling (journal_mode is {mode})"),
        });
    }
    // NORMAL in WAL mode: a commit survives a process crash; an OS crash may lose the last
    // commits but never corrupts the file.
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(&err)?;
    // Checkpoints (an `fsync`) run on the blocking pool, never inside a commit made on the
    // caller's thread: `SqliteStore::checkpoint_later`.
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(&err)?;
    init_schema(&mut conn, &path)?;
    tightened.extend(owner_only::tighten(&path)?);
    // An older agcore left these to the umask (0644): the database's mode was copied to them.
    for suffix in ["-wal", "-shm"] {
        let mut side = path.clone().into_os_string();
        side.push(suffix);
        tightened.extend(owner_only::tighten(Path::new(&side))?);
    }
    let mut lock_dir = path.clone().into_os_string();
    lock_dir.push(".locks");
    let lock_dir = PathBuf::from(lock_dir);
    tightened.extend(tighten_locks(&lock_dir)?);
    // Reported by `tightened()` (the CLI prints one line); at info here, not twice at warn.
    for t in &tightened {
        tracing::info!(path = %t.path.display(), was = format_args!("{:04o}", t.was), "other users could use this session store file; it is owner-only now");
    }
    Ok(Inner {
        path: path.clone(),
        lock_dir,
        conn: Mutex::new(conn),
        tightened,
        commits: AtomicU64::new(0),
    })
}

/// Makes an existing lock folder owner-only, and replaces each lock file other users could
/// open: such a file may be open in another user's process, which can `flock` it through that
/// descriptor and so hold the session. It is removed even when held (by another user, or by an
/// older agcore still running — which then shares the session for that run; the appends'
/// sequence check still keeps its history whole); a holder re-checks the path after locking,
/// see [`lock_file`].
fn tighten_locks(dir: &Path) -> Result<Vec<Tightened>> {
    let mut tightened = Vec::new();
    if !dir.exists() {
        return Ok(tightened);
    }
    tightened.extend(owner_only::ensure_dir(dir)?);
    let entries = std::fs::read_dir(dir).map_err(|source| SessionError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries.flatten() {
        let path = entry.path();
        let loose = entry
            .metadata()
            .is_ok_and(|m| m.is_file() && owner_only::is_loose(&m));
        if loose && path.extension().is_some_and(|e| e == "lock") {
            tightened.extend(replace_loose_lock(&path)?);
        }
    }
    Ok(tightened)
}

/// Removes the lock file at `path` when others could open it (see [`tighten_locks`]).
fn replace_loose_lock(path: &Path) -> Result<Option<Tightened>> {
    let (_file, loose) = owner_only::open_file(path)?;
    if loose.is_some() {
        std::fs::remove_file(path).map_err(|source| SessionError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(loose)
}

fn foreign(path: &Path, tables: &[String]) -> SessionError {
    SessionError::Foreign {
        location: path.display().to_string(),
        reason: format!("it has tables {tables:?} and no agcore_schema_version table"),
    }
}

fn init_schema(conn: &mut Connection, path: &Path) -> Result<()> {
    let err = map_err(path);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    let tables: Vec<String> = {
        let mut stmt = tx
            .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            .map_err(&err)?;
        let rows = stmt.query_map([], |r| r.get(0)).map_err(&err)?;
        rows.collect::<rusqlite::Result<_>>().map_err(&err)?
    };
    let has = |t: &str| tables.iter().any(|n| n == t);
    if has("agcore_schema_version") {
        let found: Option<i64> = tx
            .query_row("SELECT max(version) FROM agcore_schema_version", [], |r| {
                r.get(0)
            })
            .map_err(&err)?;
        let found = found.unwrap_or(0);
        if found > i64::from(SCHEMA_VERSION) {
            return Err(SessionError::UnsupportedSchema {
                location: path.display().to_string(),
                found: u32::try_from(found).unwrap_or(u32::MAX),
                supported: SCHEMA_VERSION,
            });
        }
        if found < 1 || !has("agcore_sessions") || !has("agcore_steps") {
            return Err(SessionError::Corrupt {
                path: path.to_path_buf(),
                reason: format!("agcore_schema_version says {found} but the tables are {tables:?}"),
            });
        }
        let mut changed = false;
        if !has("agcore_outputs") {
            tx.execute_batch(OUTPUTS).map_err(&err)?;
            changed = true;
        }
        if found < 2 {
            // Version 1 → 2: the lease epochs (a version-1 build refuses the file from now on,
            // rather than write to it unfenced).
            tx.execute_batch(LEASES).map_err(&err)?;
            tx.execute("INSERT INTO agcore_schema_version (version) VALUES (2)", [])
                .map_err(&err)?;
            changed = true;
        }
        if changed {
            return tx.commit().map_err(&err);
        }
        return Ok(());
    }
    if !tables.is_empty() {
        return Err(foreign(path, &tables));
    }
    tx.execute_batch(SCHEMA).map_err(&err)?;
    tx.execute_batch(OUTPUTS).map_err(&err)?;
    tx.execute_batch(LEASES).map_err(&err)?;
    tx.execute(
        "INSERT INTO agcore_schema_version (version) VALUES (?1)",
        [SCHEMA_VERSION],
    )
    .map_err(&err)?;
    tx.commit().map_err(&err)
}

fn load_blocking(conn: &mut Connection, path: &Path, name: &str) -> Result<Option<Session>> {
    let err = map_err(path);
    // One read transaction: the session row and its steps from the same snapshot.
    let tx = conn.transaction().map_err(&err)?;
    let row: Option<(i64, i64, i64, i64)> = tx
        .prepare_cached(
            "SELECT format_version, created_ms, updated_ms, next_seq
             FROM agcore_sessions WHERE name = ?1",
        )
        .and_then(|mut s| {
            s.query_row([name], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?)))
                .optional()
        })
        .map_err(&err)?;
    let Some((version, created, updated, next_seq)) = row else {
        return Ok(None);
    };
    let format_version = check_version(name, version)?;
    let mut steps = Vec::with_capacity(usize::try_from(next_seq).unwrap_or(0).min(1 << 20));
    {
        let mut stmt = tx
            .prepare_cached(
                "SELECT seq, kind, payload FROM agcore_steps WHERE session = ?1 ORDER BY seq",
            )
            .map_err(&err)?;
        let mut rows = stmt.query([name]).map_err(&err)?;
        while let Some(r) = rows.next().map_err(&err)? {
            let seq: i64 = r.get(0).map_err(&err)?;
            let kind: String = r.get(1).map_err(&err)?;
            let payload: String = r.get(2).map_err(&err)?;
            steps.push(decode_step(name, seq, kind, &payload)?);
        }
    }
    super::check_dense(name, &steps, next_seq)?;
    Ok(Some(Session {
        name: name.to_string(),
        format_version,
        created: from_ms(created),
        updated: from_ms(updated),
        steps,
    }))
}

fn append_blocking(
    conn: &mut Connection,
    path: &Path,
    name: &str,
    expected: u64,
    steps: &[EncodedStep],
    fence: Option<u64>,
) -> Result<()> {
    let err = map_err(path);
    // IMMEDIATE: take the write lock before reading next_seq, so the check and the write are
    // one atomic step even across processes.
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    if let Some(epoch) = fence {
        // In the commit's transaction: a lease taken since (a higher epoch) refuses it.
        let current: Option<i64> = tx
            .prepare_cached("SELECT epoch FROM agcore_leases WHERE name = ?1")
            .and_then(|mut s| s.query_row([name], |r| r.get(0)).optional())
            .map_err(&err)?;
        let current = current.and_then(|c| u64::try_from(c).ok());
        if current != Some(epoch) {
            return Err(SessionError::LeaseLost {
                session: name.to_string(),
                epoch,
                current,
            });
        }
    }
    let row: Option<(i64, i64)> = tx
        .prepare_cached("SELECT next_seq, format_version FROM agcore_sessions WHERE name = ?1")
        .and_then(|mut s| {
            s.query_row([name], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(&err)?;
    let now = now_ms();
    let conflict = |found: i64| SessionError::Conflict {
        session: name.to_string(),
        expected,
        found: u64::try_from(found).unwrap_or(0),
    };
    match row {
        None if expected != 0 => return Err(conflict(0)),
        None => {
            tx.prepare_cached(
                "INSERT INTO agcore_sessions (name, format_version, created_ms, updated_ms, next_seq)
                 VALUES (?1, ?2, ?3, ?3, 0)",
            )
            .and_then(|mut s| s.execute(params![name, super::SESSION_FORMAT_VERSION, now]))
            .map_err(&err)?;
        }
        Some((next, version)) => {
            check_version(name, version)?;
            if next != expected as i64 {
                return Err(conflict(next));
            }
        }
    }
    {
        let mut insert = tx
            .prepare_cached(
                "INSERT INTO agcore_steps (session, seq, kind, payload) VALUES (?1, ?2, ?3, ?4)",
            )
            .map_err(&err)?;
        for (seq, kind, payload) in steps {
            insert
                .execute(params![name, *seq, kind, payload])
                .map_err(&err)?;
        }
    }
    let next = (expected + steps.len() as u64) as i64;
    // Steps of this build are of its format: an older session is marked with it from now on.
    tx.prepare_cached(
        "UPDATE agcore_sessions SET next_seq = ?2, updated_ms = ?3, format_version = ?4 WHERE name = ?1",
    )
    .and_then(|mut s| s.execute(params![name, next, now, super::SESSION_FORMAT_VERSION]))
        .map_err(&err)?;
    tx.commit().map_err(&err)
}

/// A step as its row: sequence number, kind, payload as JSON text.
type EncodedStep = (i64, String, String);

/// The rows of `steps`, encoded before the blocking task: the payloads are written as text
/// once, not cloned to be moved there.
fn encode(steps: &[Step]) -> Vec<EncodedStep> {
    steps
        .iter()
        .map(|step| (step.seq as i64, step.kind.clone(), step.payload.to_string()))
        .collect()
}

fn list_blocking(conn: &mut Connection, path: &Path) -> Result<Vec<SessionSummary>> {
    let err = map_err(path);
    let mut stmt = conn
        .prepare_cached(
            "SELECT name, format_version, created_ms, updated_ms, next_seq
             FROM agcore_sessions ORDER BY name",
        )
        .map_err(&err)?;
    let rows = stmt
        .query_map([], |r| {
            Ok(SessionSummary {
                name: r.get(0)?,
                format_version: u32::try_from(r.get::<_, i64>(1)?).unwrap_or(u32::MAX),
                created: from_ms(r.get(2)?),
                updated: from_ms(r.get(3)?),
                steps: u64::try_from(r.get::<_, i64>(4)?).unwrap_or(0),
            })
        })
        .map_err(&err)?;
    rows.collect::<rusqlite::Result<_>>().map_err(&err)
}

fn delete_blocking(conn: &mut Connection, path: &Path, name: &str) -> Result<bool> {
    let err = map_err(path);
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(&err)?;
    tx.execute("DELETE FROM agcore_steps WHERE session = ?1", [name])
        .map_err(&err)?;
    tx.execute("DELETE FROM agcore_outputs WHERE session = ?1", [name])
        .map_err(&err)?;
    let n = tx
        .execute("DELETE FROM agcore_sessions WHERE name = ?1", [name])
        .map_err(&err)?;
    tx.commit().map_err(&err)?;
    Ok(n > 0)
}

/// Tries to take the lock file at `path` (created `0600`, never through a symbolic link, only
/// this user's): the locked file, or `None` when another holder has it.
fn lock_file(path: &Path) -> Result<Option<File>> {
    let io = |source| SessionError::Io {
        path: path.to_path_buf(),
        source,
    };
    loop {
        if replace_loose_lock(path)?.is_some() {
            tracing::warn!(path = %path.display(), "other users could open this lock file; replaced by an owner-only one");
        }
        let (file, _) = owner_only::open_file(path)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => return Ok(None),
            Err(TryLockError::Error(e)) => return Err(io(e)),
        }
        // Replaced while we waited for it (see `tighten_locks`): lock the file it names now.
        if owner_only::same_file(&file, path) {
            return Ok(Some(file));
        }
    }
}

/// Holds an exclusive `flock` on the session's lock file; closing the file (drop, or the
/// process dying) releases it.
struct FileLease {
    _file: File,
}

#[async_trait]
impl SessionStore for SqliteStore {
    async fn load(&self, name: &str) -> Result<Option<Session>> {
        validate_name(name)?;
        let name = name.to_string();
        self.with_conn(move |c, p| load_blocking(c, p, &name)).await
    }

    async fn append(&self, name: &str, expected_next_seq: u64, steps: &[Step]) -> Result<()> {
        validate_name(name)?;
        validate_steps(name, expected_next_seq, steps)?;
        if steps.is_empty() {
            return Ok(());
        }
        let name = name.to_string();
        let steps = encode(steps);
        self.write(move |c, p| append_blocking(c, p, &name, expected_next_seq, &steps, None))
            .await
    }

    async fn append_fenced(
        &self,
        fence: &LeaseFence,
        expected_next_seq: u64,
        steps: &[Step],
    ) -> Result<()> {
        validate_name(&fence.session)?;
        validate_steps(&fence.session, expected_next_seq, steps)?;
        if steps.is_empty() {
            return Ok(());
        }
        let (name, epoch) = (fence.session.clone(), fence.epoch);
        let steps = encode(steps);
        self.write(move |c, p| append_blocking(c, p, &name, expected_next_seq, &steps, Some(epoch)))
            .await
    }

    async fn renew(&self, fence: &LeaseFence) -> Result<()> {
        // The flock does not expire: renewing only checks that the lease is still current.
        let (name, epoch) = (fence.session.clone(), fence.epoch);
        let current = self
            .with_conn(move |conn, path| {
                conn.query_row(
                    "SELECT epoch FROM agcore_leases WHERE name = ?1",
                    [&name],
                    |r| r.get::<_, i64>(0),
                )
                .optional()
                .map_err(map_err(path))
            })
            .await?
            .and_then(|c| u64::try_from(c).ok());
        if current == Some(epoch) {
            Ok(())
        } else {
            Err(SessionError::LeaseLost {
                session: fence.session.clone(),
                epoch,
                current,
            })
        }
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        self.with_conn(list_blocking).await
    }

    async fn delete(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let name = name.to_string();
        self.with_conn(move |c, p| delete_blocking(c, p, &name))
            .await
    }

    async fn put_output(&self, name: &str, id: &str, output: &KeptOutput) -> Result<bool> {
        validate_name(name)?;
        let (name, id, output) = (name.to_owned(), id.to_owned(), output.clone());
        self.with_conn(move |conn, path| {
            conn.execute(
                "INSERT OR REPLACE INTO agcore_outputs (session, id, content, tail_start, created_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
                rusqlite::params![
                    name,
                    id,
                    output.content,
                    output.tail_start.map(|t| t as i64),
                    now_ms()
                ],
            )
            .map_err(map_err(path))?;
            Ok(true)
        })
        .await
    }

    async fn get_output(&self, name: &str, id: &str) -> Result<Option<KeptOutput>> {
        validate_name(name)?;
        let (name, id) = (name.to_owned(), id.to_owned());
        self.with_conn(move |conn, path| {
            let row = conn.query_row(
                "SELECT content, tail_start FROM agcore_outputs WHERE session = ?1 AND id = ?2",
                [&name, &id],
                |row| Ok((row.get::<_, String>(0)?, row.get::<_, Option<i64>>(1)?)),
            );
            match row {
                Ok((content, tail_start)) => Ok(Some(KeptOutput {
                    content,
                    tail_start: tail_start.and_then(|t| usize::try_from(t).ok()),
                })),
                Err(rusqlite::Error::QueryReturnedNoRows) => Ok(None),
                Err(error) => Err(map_err(path)(error)),
            }
        })
        .await
    }

    fn tightened(&self) -> &[Tightened] {
        &self.inner.tightened
    }

    async fn lock(&self, name: &str, mode: LockMode) -> Result<SessionLease> {
        validate_name(name)?;
        let dir = &self.inner.lock_dir;
        if let Some(t) = owner_only::ensure_dir(dir)? {
            tracing::warn!(path = %t.path.display(), "other users could use the lock folder; it is owner-only now");
        }
        // Hashed: names may hold '/' and other characters a file name cannot.
        let file_path = dir.join(format!("{:016x}.lock", lock_key(name)));
        let deadline = match mode {
            LockMode::FailFast => None,
            LockMode::Wait { timeout } => Some(tokio::time::Instant::now() + timeout),
        };
        loop {
            if let Some(file) = lock_file(&file_path)? {
                // Held: a new epoch, which fences out every earlier holder's commits.
                let session = name.to_owned();
                let epoch = self
                    .with_conn(move |conn, path| {
                        conn.query_row(
                            "INSERT INTO agcore_leases (name, epoch, acquired_ms) VALUES (?1, 1, ?2)
                             ON CONFLICT (name) DO UPDATE
                             SET epoch = epoch + 1, acquired_ms = excluded.acquired_ms
                             RETURNING epoch",
                            params![session, now_ms()],
                            |r| r.get::<_, i64>(0),
                        )
                        .map_err(map_err(path))
                    })
                    .await?;
                let epoch = u64::try_from(epoch).unwrap_or(0);
                return Ok(SessionLease::with_epoch(
                    name,
                    epoch,
                    Box::new(FileLease { _file: file }),
                ));
            }
            match deadline {
                Some(d) if tokio::time::Instant::now() < d => tokio::time::sleep(LOCK_POLL).await,
                _ => {
                    return Err(SessionError::Busy {
                        session: name.to_string(),
                    });
                }
            }
        }
    }
}
