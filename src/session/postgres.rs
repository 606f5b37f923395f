//! [`PostgresStore`]: sessions in PostgreSQL, for many processes and machines on one database.
//! Appends are one atomic statement (or one transaction when a session is created); a
//! session's lease is a row of `agcore_leases` with an epoch, naming the backend of a dedicated
//! connection of its holder (gone: the holder died, the lease is free at once) and an expiry
//! the store renews while the holder runs (a paused holder loses it). Fenced commits check the
//! epoch in their own statement.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use deadpool_postgres::{
    Manager, ManagerConfig, Object, Pool, PoolError, RecyclingMethod, Runtime,
};
use tokio::time::timeout;
use tokio_postgres::error::SqlState;
use tokio_postgres::{Client, Config, NoTls};

use super::error::{Result, SessionError, StoreOperation};
use super::record::{
    Session, SessionSummary, Step, check_version, decode_step, from_ms, now_ms, validate_name,
    validate_steps,
};
use super::store::{LeaseFence, LockMode, SessionLease, SessionStore};
use super::{SCHEMA_VERSION, SESSION_FORMAT_VERSION};
use crate::context::spill::KeptOutput;

/// How long [`PostgresStore`] waits for the server, per operation: a dead or frozen server is a
/// typed error ([`SessionError::Timeout`] naming the operation), never a hang.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct PostgresTimeouts {
    /// A new connection (TCP and the server's start-up answer); also the longest wait for a
    /// free connection of the pool, added to `statement`. Default 5 s; a `connect_timeout` in
    /// the address wins for the TCP part.
    pub connect: Duration,
    /// One operation's statements (a load, an append, a schema check…), and releasing a
    /// lease. A lease wait (`LockMode::Wait`) gets its own timeout plus this. Default 30 s.
    pub statement: Duration,
    /// How long a session's lease lasts without renewal. The store renews the leases it hands
    /// out every third of this while their holder runs; a holder that stops renewing (paused,
    /// partitioned from the server) loses the session when it expires: another worker may
    /// take it, and the paused holder's commits are refused from then on
    /// ([`SessionError::LeaseLost`]). A holder whose connection ends (it died) loses it at
    /// once. Default 30 s.
    pub lease: Duration,
}

impl Default for PostgresTimeouts {
    fn default() -> Self {
        PostgresTimeouts {
            connect: Duration::from_secs(5),
            statement: Duration::from_secs(30),
            lease: Duration::from_secs(30),
        }
    }
}

impl PostgresTimeouts {
    /// With `connect` as the connection bound.
    pub fn with_connect(mut self, connect: Duration) -> Self {
        self.connect = connect;
        self
    }

    /// With `statement` as the bound of one operation.
    pub fn with_statement(mut self, statement: Duration) -> Self {
        self.statement = statement;
        self
    }

    /// With `lease` as the lease period (see [`PostgresTimeouts::lease`]; at least 100 ms).
    pub fn with_lease(mut self, lease: Duration) -> Self {
        self.lease = lease.max(Duration::from_millis(100));
        self
    }
}

/// Connections the pool keeps at most.
const POOL_SIZE: usize = 16;

/// Idle lock connections kept for reuse at most.
const IDLE_LOCKS: usize = 16;

/// Serialises concurrent first-use migrations ("agcore" in ASCII).
const MIGRATION_LOCK: i64 = 0x6167_636f_7265;

const SCHEMA_V1: &str = "
CREATE TABLE agcore_sessions (
    name           TEXT    PRIMARY KEY,
    format_version INTEGER NOT NULL,
    created_ms     BIGINT  NOT NULL,
    updated_ms     BIGINT  NOT NULL,
    next_seq       BIGINT  NOT NULL
);
CREATE TABLE agcore_steps (
    session TEXT   NOT NULL REFERENCES agcore_sessions (name) ON DELETE CASCADE,
    seq     BIGINT NOT NULL,
    kind    TEXT   NOT NULL,
    payload TEXT   NOT NULL,
    PRIMARY KEY (session, seq)
);
";

/// Schema version 2: each session's lease — its epoch (raised by every taking), the backend
/// of the holder's lease connection (gone: the holder died) and its expiry (server clock, ms).
const SCHEMA_V2: &str = "
CREATE TABLE agcore_leases (
    name       TEXT    PRIMARY KEY,
    epoch      BIGINT  NOT NULL,
    holder_pid INTEGER,
    expires_ms BIGINT  NOT NULL
);
";

/// The server's clock in ms: every worker's lease is timed by the same clock.
const SERVER_NOW_MS: &str = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

/// Large tool outputs (the context engine's, paged by `read_output`): added to layout 1
/// without a version change — older readers never look at it.
const OUTPUTS: &str = "
CREATE TABLE IF NOT EXISTS agcore_outputs (
    session    TEXT   NOT NULL,
    id         TEXT   NOT NULL,
    content    TEXT   NOT NULL,
    tail_start BIGINT,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (session, id)
);
";

// The commit of an existing session: bump next_seq only where it is still the expected one,
// and insert the steps only if that update matched — one statement, so atomic in autocommit.
// The steps are of this build's format, so an older session is marked with it from now on.
// Fenced ($8 an epoch, not NULL): the lease row is read FOR SHARE in the same statement, so a
// taking-over (an UPDATE of that row) waits for this commit or this commit sees its new epoch.
const APPEND: &str = "
WITH l AS (
    SELECT 1 FROM agcore_leases WHERE name = $1 AND epoch = $8 FOR SHARE
), s AS (
    UPDATE agcore_sessions
    SET next_seq = $2 + cardinality($3::bigint[]), updated_ms = $6, format_version = $7
    WHERE name = $1 AND next_seq = $2 AND format_version <= $7
      AND ($8::bigint IS NULL OR EXISTS (SELECT 1 FROM l))
    RETURNING name
)
INSERT INTO agcore_steps (session, seq, kind, payload)
SELECT s.name, u.seq, u.kind, u.payload
FROM s, unnest($3::bigint[], $4::text[], $5::text[]) AS u (seq, kind, payload)
";

/// A [`SessionStore`] on a PostgreSQL database (tables `agcore_*`, created on first use).
/// Cheap to clone; clones share one connection pool.
#[derive(Clone)]
pub struct PostgresStore {
    pool: Pool,
    config: Config,
    location: String,
    timeouts: PostgresTimeouts,
    // Lock connections between leases: a connect costs a server process start, so a released
    // lease's connection (unlocked first) serves the next lease.
    idle_locks: Arc<Mutex<Vec<Client>>>,
}

impl std::fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresStore")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// The address without its password, for messages.
fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            tokio_postgres::config::Host::Tcp(h) => h.clone(),
            tokio_postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .unwrap_or_default();
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "postgres://{}@{host}:{port}/{}",
        config.get_user().unwrap_or(""),
        config.get_dbname().unwrap_or("")
    )
}

impl PostgresStore {
    /// Connects to `url` (`postgres://user:password@host:port/db`, or a libpq key=value
    /// string) and creates or checks the schema. An unreachable server is
    /// [`SessionError::Connection`]; a newer schema is [`SessionError::UnsupportedSchema`].
    /// Waits are bounded by the default [`PostgresTimeouts`].
    pub async fn connect(url: &str) -> Result<Self> {
        Self::connect_with(url, PostgresTimeouts::default()).await
    }

    /// [`PostgresStore::connect`] with these bounds on every wait for the server: a server
    /// that does not answer in time is [`SessionError::Timeout`].
    pub async fn connect_with(url: &str, timeouts: PostgresTimeouts) -> Result<Self> {
        let mut config: Config = url.parse().map_err(|e| SessionError::UnsupportedUrl {
            url: format!("{} ({e})", super::redact_address(url)),
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(timeouts.connect);
        }
        let location = describe(&config);
        let manager = Manager::from_config(
            config.clone(),
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager)
            .max_size(POOL_SIZE)
            .runtime(Runtime::Tokio1)
            .wait_timeout(Some(timeouts.connect + timeouts.statement))
            .create_timeout(Some(timeouts.connect))
            .build()
            .map_err(|e| SessionError::Database {
                location: location.clone(),
                reason: e.to_string(),
            })?;
        let store = Self {
            pool,
            config,
            location,
            timeouts,
            idle_locks: Arc::default(),
        };
        let mut client = store.client().await?;
        let migrated = timeout(timeouts.statement, store.migrate(&mut client)).await;
        store.finish(StoreOperation::Migrate, client, migrated)?;
        Ok(store)
    }

    /// The server address, without the password.
    pub fn location(&self) -> &str {
        &self.location
    }

    fn err(&self, e: tokio_postgres::Error) -> SessionError {
        map_pg(&self.location, e)
    }

    fn timed_out(&self, operation: StoreOperation, after: Duration) -> SessionError {
        SessionError::Timeout {
            location: self.location.clone(),
            operation,
            after,
        }
    }

    /// The result of an operation on `client` bounded by `timeout`: on a timeout the connection
    /// is closed, not pooled — its statement may still be running, or the server frozen.
    fn finish<T>(
        &self,
        operation: StoreOperation,
        client: Object,
        outcome: std::result::Result<Result<T>, tokio::time::error::Elapsed>,
    ) -> Result<T> {
        match outcome {
            Ok(result) => result,
            Err(_) => {
                drop(Object::take(client));
                Err(self.timed_out(operation, self.timeouts.statement))
            }
        }
    }

    async fn client(&self) -> Result<Object> {
        self.pool.get().await.map_err(|e| match e {
            PoolError::Backend(e) => self.err(e),
            PoolError::Timeout(_) => self.timed_out(StoreOperation::Connect, self.timeouts.connect),
            other => SessionError::Connection {
                location: self.location.clone(),
                reason: other.to_string(),
            },
        })
    }

    async fn migrate(&self, client: &mut Object) -> Result<()> {
        let tx = client.transaction().await.map_err(|e| self.err(e))?;
        tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
            .await
            .map_err(|e| self.err(e))?;
        let row = tx
            .query_one(
                "SELECT to_regclass('agcore_schema_version') IS NOT NULL,
                        to_regclass('agcore_sessions') IS NOT NULL",
                &[],
            )
            .await
            .map_err(|e| self.err(e))?;
        let (has_version, has_sessions): (bool, bool) = (row.get(0), row.get(1));
        let found: i32 = if has_version {
            let row = tx
                .query_one(
                    "SELECT coalesce(max(version), 0) FROM agcore_schema_version",
                    &[],
                )
                .await
                .map_err(|e| self.err(e))?;
            row.get(0)
        } else if has_sessions {
            return Err(SessionError::Foreign {
                location: self.location.clone(),
                reason: "a table agcore_sessions exists without agcore_schema_version".into(),
            });
        } else {
            tx.batch_execute(
                "CREATE TABLE agcore_schema_version (
                     version    INTEGER PRIMARY KEY,
                     applied_ms BIGINT  NOT NULL
                 )",
            )
            .await
            .map_err(|e| self.err(e))?;
            0
        };
        if found > SCHEMA_VERSION as i32 {
            return Err(SessionError::UnsupportedSchema {
                location: self.location.clone(),
                found: found as u32,
                supported: SCHEMA_VERSION,
            });
        }
        // Versioned migrations: each runs once, in order, recorded in agcore_schema_version.
        let migrations: [(i32, &str); 2] = [(1, SCHEMA_V1), (2, SCHEMA_V2)];
        for (version, sql) in migrations {
            if version > found {
                tx.batch_execute(sql).await.map_err(|e| self.err(e))?;
                tx.execute(
                    "INSERT INTO agcore_schema_version (version, applied_ms) VALUES ($1, $2)",
                    &[&version, &now_ms()],
                )
                .await
                .map_err(|e| self.err(e))?;
            }
        }
        tx.batch_execute(OUTPUTS).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))
    }

    /// The session's current lease epoch (`None`: no lease was ever taken).
    async fn lease_epoch(&self, client: &Client, name: &str) -> Result<Option<u64>> {
        let row = client
            .query_opt("SELECT epoch FROM agcore_leases WHERE name = $1", &[&name])
            .await
            .map_err(|e| self.err(e))?;
        Ok(row.and_then(|row| u64::try_from(row.get::<_, i64>(0)).ok()))
    }

    /// Why an append matched no row: missing session, stale sequence, or a newer format.
    async fn diagnose(&self, client: &Client, name: &str, expected: u64) -> SessionError {
        let row = client
            .query_opt(
                "SELECT next_seq, format_version FROM agcore_sessions WHERE name = $1",
                &[&name],
            )
            .await;
        let conflict = |found: i64| SessionError::Conflict {
            session: name.to_string(),
            expected,
            found: u64::try_from(found).unwrap_or(0),
        };
        match row {
            Err(e) => self.err(e),
            Ok(None) => conflict(0),
            Ok(Some(row)) => {
                let (next, version): (i64, i32) = (row.get(0), row.get(1));
                match check_version(name, i64::from(version)) {
                    Err(e) => e,
                    Ok(_) => conflict(next),
                }
            }
        }
    }
}

/// Maps a driver error: a broken or refused connection (or a server shutting down) is
/// `Connection`, the rest `Database`.
fn map_pg(location: &str, e: tokio_postgres::Error) -> SessionError {
    let connection = match e.code() {
        Some(code) => {
            let c = code.code();
            c.starts_with("08") || c.starts_with("57P") || *code == SqlState::TOO_MANY_CONNECTIONS
        }
        None => {
            e.is_closed()
                || std::error::Error::source(&e)
                    .is_some_and(|s| s.downcast_ref::<std::io::Error>().is_some())
                || e.to_string().contains("connection")
        }
    };
    let reason = match std::error::Error::source(&e) {
        Some(s) => format!("{e}: {s}"),
        None => e.to_string(),
    };
    let location = location.to_string();
    if connection {
        SessionError::Connection { location, reason }
    } else {
        SessionError::Database { location, reason }
    }
}

/// How often a waiting `lock` tries again.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// Takes session `$1`'s lease for this connection's backend, for `$2` ms: when nobody holds
/// it, its holder let it go, its holder's connection is gone (the holder died), or it expired
/// (the holder stopped renewing: paused, or cut off). The epoch goes up on every taking; no
/// row back means another live holder has it. Timed by the server's clock.
fn acquire_sql() -> String {
    format!(
        "INSERT INTO agcore_leases AS l (name, epoch, holder_pid, expires_ms)
         VALUES ($1, 1, pg_backend_pid(), {SERVER_NOW_MS} + $2)
         ON CONFLICT (name) DO UPDATE
         SET epoch = l.epoch + 1, holder_pid = EXCLUDED.holder_pid, expires_ms = EXCLUDED.expires_ms
         WHERE l.holder_pid IS NULL
            OR l.expires_ms <= {SERVER_NOW_MS}
            OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.holder_pid)
         RETURNING epoch"
    )
}

/// A held lease: its connection (whose backend the lease row names: while it lives the holder
/// lives) and the task that renews it. On drop the renewal stops and the lease is let go on a
/// task (the row released, then the connection back to the idle list); without a runtime, or
/// if that fails, the connection is closed, and the next taker sees its holder gone.
struct PgLease {
    client: Option<Client>,
    idle: Arc<Mutex<Vec<Client>>>,
    limit: Duration,
    session: String,
    epoch: i64,
    renewal: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for PgLease {
    fn drop(&mut self) {
        if let Some(renewal) = self.renewal.take() {
            renewal.abort();
        }
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return; // dropping the client closes the connection
        };
        let idle = Arc::clone(&self.idle);
        let limit = self.limit;
        let (session, epoch) = (std::mem::take(&mut self.session), self.epoch);
        rt.spawn(async move {
            // Bounded: a frozen server must not keep this task (and its connection) forever;
            // closing the connection lets the lease go just the same.
            let release = timeout(
                limit,
                client.execute(
                    "UPDATE agcore_leases SET holder_pid = NULL, expires_ms = 0
                     WHERE name = $1 AND epoch = $2",
                    &[&session, &epoch],
                ),
            )
            .await;
            if release.is_ok_and(|r| r.is_ok())
                && let Ok(mut idle) = idle.lock()
                && idle.len() < IDLE_LOCKS
            {
                idle.push(client);
            }
        });
    }
}

impl PostgresStore {
    /// An idle lock connection, or a new one.
    async fn lock_client(&self) -> Result<Client> {
        loop {
            let reused = match self.idle_locks.lock() {
                Ok(mut idle) => idle.pop(),
                Err(_) => None,
            };
            match reused {
                Some(c) if !c.is_closed() => return Ok(c),
                Some(_) => continue,
                None => break,
            }
        }
        // The TCP connect has its own bound; this one covers the server's start-up answer too.
        let (client, connection) = timeout(self.timeouts.connect, self.config.connect(NoTls))
            .await
            .map_err(|_| self.timed_out(StoreOperation::Connect, self.timeouts.connect))?
            .map_err(|e| self.err(e))?;
        tokio::spawn(async move {
            // Ends when the client is dropped (or the server goes away).
            let _ = connection.await;
        });
        Ok(client)
    }
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn load(&self, name: &str) -> Result<Option<Session>> {
        validate_name(name)?;
        let mut client = self.client().await?;
        let loaded = timeout(self.timeouts.statement, self.load_on(&mut client, name)).await;
        self.finish(StoreOperation::Load, client, loaded)
    }

    async fn append(&self, name: &str, expected_next_seq: u64, steps: &[Step]) -> Result<()> {
        validate_name(name)?;
        validate_steps(name, expected_next_seq, steps)?;
        if steps.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let appended = timeout(
            self.timeouts.statement,
            self.append_on(&mut client, name, expected_next_seq, steps, None),
        )
        .await;
        self.finish(StoreOperation::Append, client, appended)
    }

    async fn append_fenced(
        &self,
        fence: &LeaseFence,
        expected_next_seq: u64,
        steps: &[Step],
    ) -> Result<()> {
        let name = fence.session.as_str();
        validate_name(name)?;
        validate_steps(name, expected_next_seq, steps)?;
        if steps.is_empty() {
            return Ok(());
        }
        let mut client = self.client().await?;
        let appended = timeout(
            self.timeouts.statement,
            self.append_on(
                &mut client,
                name,
                expected_next_seq,
                steps,
                Some(fence.epoch),
            ),
        )
        .await;
        self.finish(StoreOperation::Append, client, appended)
    }

    async fn renew(&self, fence: &LeaseFence) -> Result<()> {
        let client = self.client().await?;
        let renewed = timeout(self.timeouts.statement, async {
            let row = client
                .query_opt(
                    &format!(
                        "UPDATE agcore_leases SET expires_ms = {SERVER_NOW_MS} + $3
                         WHERE name = $1 AND epoch = $2 RETURNING epoch"
                    ),
                    &[&fence.session, &(fence.epoch as i64), &self.lease_ms()],
                )
                .await
                .map_err(|e| self.err(e))?;
            if row.is_some() {
                return Ok(());
            }
            let current = self.lease_epoch(&client, &fence.session).await?;
            Err(SessionError::LeaseLost {
                session: fence.session.clone(),
                epoch: fence.epoch,
                current,
            })
        })
        .await;
        self.finish(StoreOperation::Renew, client, renewed)
    }

    async fn list(&self) -> Result<Vec<SessionSummary>> {
        let client = self.client().await?;
        let listed = timeout(self.timeouts.statement, async {
            let rows = client
                .query(
                    "SELECT name, format_version, created_ms, updated_ms, next_seq
                     FROM agcore_sessions ORDER BY name",
                    &[],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(rows
                .into_iter()
                .map(|r| SessionSummary {
                    name: r.get(0),
                    format_version: u32::try_from(r.get::<_, i32>(1)).unwrap_or(u32::MAX),
                    created: from_ms(r.get(2)),
                    updated: from_ms(r.get(3)),
                    steps: u64::try_from(r.get::<_, i64>(4)).unwrap_or(0),
                })
                .collect())
        })
        .await;
        self.finish(StoreOperation::List, client, listed)
    }

    async fn delete(&self, name: &str) -> Result<bool> {
        validate_name(name)?;
        let client = self.client().await?;
        let deleted = timeout(self.timeouts.statement, async {
            // The steps go with the row (ON DELETE CASCADE), the outputs in the same statement.
            let n = client
                .execute(
                    "WITH outputs AS (DELETE FROM agcore_outputs WHERE session = $1)
                     DELETE FROM agcore_sessions WHERE name = $1",
                    &[&name],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(n > 0)
        })
        .await;
        self.finish(StoreOperation::Delete, client, deleted)
    }

    async fn put_output(&self, name: &str, id: &str, output: &KeptOutput) -> Result<bool> {
        validate_name(name)?;
        let client = self.client().await?;
        let tail_start = output.tail_start.map(|t| t as i64);
        let put = timeout(self.timeouts.statement, async {
            client
                .execute(
                    "INSERT INTO agcore_outputs (session, id, content, tail_start, created_ms)
                     VALUES ($1, $2, $3, $4, $5)
                     ON CONFLICT (session, id) DO UPDATE
                     SET content = EXCLUDED.content, tail_start = EXCLUDED.tail_start",
                    &[&name, &id, &output.content, &tail_start, &now_ms()],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(true)
        })
        .await;
        self.finish(StoreOperation::PutOutput, client, put)
    }

    async fn get_output(&self, name: &str, id: &str) -> Result<Option<KeptOutput>> {
        validate_name(name)?;
        let client = self.client().await?;
        let got = timeout(self.timeouts.statement, async {
            let row = client
                .query_opt(
                    "SELECT content, tail_start FROM agcore_outputs WHERE session = $1 AND id = $2",
                    &[&name, &id],
                )
                .await
                .map_err(|e| self.err(e))?;
            Ok(row.map(|row| KeptOutput {
                content: row.get(0),
                tail_start: row
                    .get::<_, Option<i64>>(1)
                    .and_then(|t| usize::try_from(t).ok()),
            }))
        })
        .await;
        self.finish(StoreOperation::GetOutput, client, got)
    }

    async fn lock(&self, name: &str, mode: LockMode) -> Result<SessionLease> {
        validate_name(name)?;
        // A connection of its own, not the pool's: the lease row names its backend, so the
        // lease goes with it when the holder dies.
        let client = self.lock_client().await?;
        let statement = self.timeouts.statement;
        let deadline = match mode {
            LockMode::Wait { timeout } => Some(tokio::time::Instant::now() + timeout),
            LockMode::FailFast => None,
        };
        let acquire = acquire_sql();
        loop {
            // On a timeout `client` is dropped, which closes the connection.
            let taken = timeout(
                statement,
                client.query_opt(&acquire, &[&name, &self.lease_ms()]),
            )
            .await
            .map_err(|_| self.timed_out(StoreOperation::Lock, statement))?
            .map_err(|e| self.err(e))?;
            if let Some(row) = taken {
                let epoch: i64 = row.get(0);
                let fence = LeaseFence {
                    session: name.to_owned(),
                    epoch: u64::try_from(epoch).unwrap_or(0),
                };
                let renewal = self.renew_while_held(fence.clone());
                return Ok(SessionLease::with_epoch(
                    name,
                    fence.epoch,
                    Box::new(PgLease {
                        client: Some(client),
                        idle: Arc::clone(&self.idle_locks),
                        limit: statement,
                        session: name.to_owned(),
                        epoch,
                        renewal: Some(renewal),
                    }),
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

impl PostgresStore {
    /// The lease period in ms.
    fn lease_ms(&self) -> i64 {
        i64::try_from(self.timeouts.lease.as_millis()).unwrap_or(i64::MAX)
    }

    /// Renews the lease `fence` proves every third of the lease period until it is lost (or
    /// the task is aborted: the lease was dropped). A failed renewal is tried again at the
    /// next tick; a lost lease ends the task — the holder's next commit is refused.
    fn renew_while_held(&self, fence: LeaseFence) -> tokio::task::JoinHandle<()> {
        let store = self.clone();
        let every = self.timeouts.lease / 3;
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                match store.renew(&fence).await {
                    Ok(()) => {}
                    Err(error @ SessionError::LeaseLost { .. }) => {
                        tracing::warn!(%error, "session lease lost");
                        return;
                    }
                    Err(error) => tracing::warn!(%error, "could not renew a session lease"),
                }
            }
        })
    }
}

impl PostgresStore {
    async fn load_on(&self, client: &mut Object, name: &str) -> Result<Option<Session>> {
        // REPEATABLE READ: the session row and its steps from one snapshot.
        let tx = client
            .build_transaction()
            .isolation_level(tokio_postgres::IsolationLevel::RepeatableRead)
            .read_only(true)
            .start()
            .await
            .map_err(|e| self.err(e))?;
        let head = tx
            .prepare_cached(
                "SELECT format_version, created_ms, updated_ms, next_seq
                 FROM agcore_sessions WHERE name = $1",
            )
            .await
            .map_err(|e| self.err(e))?;
        let Some(row) = tx
            .query_opt(&head, &[&name])
            .await
            .map_err(|e| self.err(e))?
        else {
            return Ok(None);
        };
        let (version, created, updated, next_seq): (i32, i64, i64, i64) =
            (row.get(0), row.get(1), row.get(2), row.get(3));
        let format_version = check_version(name, i64::from(version))?;
        let select = tx
            .prepare_cached(
                "SELECT seq, kind, payload FROM agcore_steps WHERE session = $1 ORDER BY seq",
            )
            .await
            .map_err(|e| self.err(e))?;
        let rows = tx.query(&select, &[&name]).await.map_err(|e| self.err(e))?;
        tx.commit().await.map_err(|e| self.err(e))?;
        let mut steps = Vec::with_capacity(rows.len());
        for r in rows {
            steps.push(decode_step(name, r.get(0), r.get(1), r.get(2))?);
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

    async fn append_on(
        &self,
        client: &mut Object,
        name: &str,
        expected_next_seq: u64,
        steps: &[Step],
        fence: Option<u64>,
    ) -> Result<()> {
        let epoch: Option<i64> = fence.map(|e| e as i64);
        let seqs: Vec<i64> = steps.iter().map(|s| s.seq as i64).collect();
        let kinds: Vec<&str> = steps.iter().map(|s| s.kind.as_str()).collect();
        let payloads: Vec<String> = steps.iter().map(|s| s.payload.to_string()).collect();
        let expected = expected_next_seq as i64;
        let now = now_ms();
        let supported = SESSION_FORMAT_VERSION as i32;
        let inserted = if expected_next_seq == 0 {
            // Creating: the session row and the first steps in one transaction.
            let tx = client.transaction().await.map_err(|e| self.err(e))?;
            tx.execute(
                "INSERT INTO agcore_sessions (name, format_version, created_ms, updated_ms, next_seq)
                 VALUES ($1, $2, $3, $3, 0) ON CONFLICT (name) DO NOTHING",
                &[&name, &supported, &now],
            )
            .await
            .map_err(|e| self.err(e))?;
            let stmt = tx.prepare_cached(APPEND).await.map_err(|e| self.err(e))?;
            let n = tx
                .execute(
                    &stmt,
                    &[
                        &name, &expected, &seqs, &kinds, &payloads, &now, &supported, &epoch,
                    ],
                )
                .await
                .map_err(|e| self.err(e))?;
            if n == steps.len() as u64 {
                tx.commit().await.map_err(|e| self.err(e))?;
            }
            n
        } else {
            let stmt = client
                .prepare_cached(APPEND)
                .await
                .map_err(|e| self.err(e))?;
            client
                .execute(
                    &stmt,
                    &[
                        &name, &expected, &seqs, &kinds, &payloads, &now, &supported, &epoch,
                    ],
                )
                .await
                .map_err(|e| self.err(e))?
        };
        if inserted == steps.len() as u64 {
            return Ok(());
        }
        if let Some(epoch) = fence {
            match self.lease_epoch(client, name).await {
                Ok(current) if current != Some(epoch) => {
                    return Err(SessionError::LeaseLost {
                        session: name.to_string(),
                        epoch,
                        current,
                    });
                }
                Ok(_) => {}
                Err(error) => return Err(error),
            }
        }
        Err(self.diagnose(client, name, expected_next_seq).await)
    }
}
