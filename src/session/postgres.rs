//! [`PostgresStore`]: sessions in PostgreSQL, for many processes and machines on one database.
//! Appends are one atomic statement (or one transaction when a session is created); a
//! session's lease is a `pg_advisory_lock` held by a dedicated connection, which the server
//! releases when that connection ends — drop, or the holder's death.

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
use super::store::{LockMode, SessionLease, SessionStore};
use super::{SCHEMA_VERSION, SESSION_FORMAT_VERSION, lock_key};
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
}

impl Default for PostgresTimeouts {
    fn default() -> Self {
        PostgresTimeouts {
            connect: Duration::from_secs(5),
            statement: Duration::from_secs(30),
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
const APPEND: &str = "
WITH s AS (
    UPDATE agcore_sessions
    SET next_seq = $2 + cardinality($3::bigint[]), updated_ms = $6, format_version = $7
    WHERE name = $1 AND next_seq = $2 AND format_version <= $7
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
        let migrations: [(i32, &str); 1] = [(1, SCHEMA_V1)];
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

/// Holds the lease's connection, which holds the advisory lock. On drop the lock is released:
/// `pg_advisory_unlock_all` on a task, then the connection goes back to the idle list; without
/// a runtime, or if that fails, the connection is closed, and the server drops the lock with it.
struct PgLease {
    client: Option<Client>,
    idle: Arc<Mutex<Vec<Client>>>,
    limit: Duration,
}

impl Drop for PgLease {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return; // dropping the client closes the connection
        };
        let idle = Arc::clone(&self.idle);
        let limit = self.limit;
        rt.spawn(async move {
            // Bounded: a frozen server must not keep this task (and its connection) forever;
            // closing the connection releases the lock just the same.
            let unlock = timeout(
                limit,
                client.batch_execute("SELECT pg_advisory_unlock_all()"),
            );
            if unlock.await.is_ok_and(|r| r.is_ok())
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
            self.append_on(&mut client, name, expected_next_seq, steps),
        )
        .await;
        self.finish(StoreOperation::Append, client, appended)
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
        // A connection of its own, not the pool's: the lock lives as long as it, or until the
        // lease unlocks it.
        let client = self.lock_client().await?;
        let key = lock_key(name) as i64;
        let busy = || SessionError::Busy {
            session: name.to_string(),
        };
        let statement = self.timeouts.statement;
        // On a timeout `client` is dropped here, which closes the connection: the server
        // drops whatever it took for it when it wakes.
        let frozen = |after| self.timed_out(StoreOperation::Lock, after);
        let held = match mode {
            LockMode::Wait { timeout: wait } if !wait.is_zero() => {
                // The server wakes us the moment the holder lets go; lock_timeout bounds it.
                let ms = wait.as_millis().clamp(1, i32::MAX as u128);
                timeout(
                    statement,
                    client.batch_execute(&format!("SET lock_timeout = {ms}")),
                )
                .await
                .map_err(|_| frozen(statement))?
                .map_err(|e| self.err(e))?;
                let waited = timeout(
                    wait + statement,
                    client.execute("SELECT pg_advisory_lock($1)", &[&key]),
                )
                .await
                .map_err(|_| frozen(wait + statement))?;
                match waited {
                    Ok(_) => true,
                    Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => false,
                    Err(e) => return Err(self.err(e)),
                }
            }
            _ => timeout(
                statement,
                client.query_one("SELECT pg_try_advisory_lock($1)", &[&key]),
            )
            .await
            .map_err(|_| frozen(statement))?
            .map_err(|e| self.err(e))?
            .get(0),
        };
        if held {
            Ok(SessionLease::new(
                name,
                Box::new(PgLease {
                    client: Some(client),
                    idle: Arc::clone(&self.idle_locks),
                    limit: statement,
                }),
            ))
        } else {
            Err(busy())
        }
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
    ) -> Result<()> {
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
                    &[&name, &expected, &seqs, &kinds, &payloads, &now, &supported],
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
                    &[&name, &expected, &seqs, &kinds, &payloads, &now, &supported],
                )
                .await
                .map_err(|e| self.err(e))?
        };
        if inserted == steps.len() as u64 {
            Ok(())
        } else {
            Err(self.diagnose(client, name, expected_next_seq).await)
        }
    }
}
