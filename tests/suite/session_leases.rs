//! Fenced leases on SQLite and a real PostgreSQL (`scripts/with-postgres.sh`): each taking of
//! a session's lease raises its epoch; a commit under an older epoch is refused in its own
//! transaction and writes nothing; a run whose lease was taken over stops before its next
//! effect; PostgreSQL leases expire unless renewed and go at once with a dead holder; a
//! version-1 database is migrated.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::time::Duration;

use agcore::llm::{CycleConfig, LlmCycle, LlmError, OpenAiClient, OpenAiConfig};
use agcore::run::RunRequest;
use agcore::session::{
    LockMode, PostgresStore, PostgresTimeouts, SessionError, SessionJournal, SessionStore,
    SqliteStore, Step,
};
use agcore::tools::prelude::*;
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn step(seq: u64, text: &str) -> Step {
    Step::new(seq, "note", json!({ "text": text }))
}

fn texts(store_steps: &[Step]) -> Vec<&str> {
    store_steps
        .iter()
        .map(|s| s.payload["text"].as_str().unwrap_or(s.kind.as_str()))
        .collect()
}

/// A's lease is followed by B's: A's commits are refused (nothing written), B's go through.
async fn a_stale_lease_cannot_commit(store: Arc<dyn SessionStore>) {
    let a = store.lock("fenced", LockMode::FailFast).await.unwrap();
    let a_fence = a.fence().expect("a lease with an epoch");
    store
        .append_fenced(&a_fence, 0, &[step(0, "by a")])
        .await
        .unwrap();
    drop(a);
    // The next holder: a higher epoch. (A worker that was paused keeps its fence.)
    let b = store
        .lock(
            "fenced",
            LockMode::Wait {
                timeout: Duration::from_secs(10),
            },
        )
        .await
        .unwrap();
    let b_fence = b.fence().unwrap();
    assert!(
        b_fence.epoch > a_fence.epoch,
        "{a_fence:?} then {b_fence:?}"
    );
    let err = store
        .append_fenced(&a_fence, 1, &[step(1, "late a")])
        .await
        .unwrap_err();
    match &err {
        SessionError::LeaseLost {
            session,
            epoch,
            current,
        } => {
            assert_eq!(
                (session.as_str(), *epoch, *current),
                ("fenced", a_fence.epoch, Some(b_fence.epoch))
            );
        }
        other => panic!("expected LeaseLost: {other:?}"),
    }
    assert!(err.to_string().contains("lease"), "{err}");
    assert!(matches!(
        store.renew(&a_fence).await,
        Err(SessionError::LeaseLost { .. })
    ));
    store.renew(&b_fence).await.unwrap();
    store
        .append_fenced(&b_fence, 1, &[step(1, "by b")])
        .await
        .unwrap();
    let session = store.load("fenced").await.unwrap().unwrap();
    assert_eq!(texts(&session.steps), ["by a", "by b"]);
}

#[tokio::test]
async fn sqlite_a_stale_lease_cannot_commit() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(dir.path().join("s.db")).await.unwrap();
    a_stale_lease_cannot_commit(Arc::new(store)).await;
}

#[tokio::test]
async fn postgres_a_stale_lease_cannot_commit() {
    let Some(url) = support::session::fresh_db("fence").await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    a_stale_lease_cannot_commit(Arc::new(store)).await;
}

/// PostgreSQL: a live holder keeps the session (`Busy`) while it renews; once its lease
/// expired (renewal stopped: here the row is aged by hand, as a paused holder's would be)
/// another worker takes it over, and the first one's commits and renewals are refused.
#[tokio::test]
async fn postgres_an_expired_lease_is_taken_over_and_fences_out_its_holder() {
    let Some(url) = support::session::fresh_db("expiry").await else {
        return;
    };
    // A long lease: the holder's own renewal does not run during the test.
    let timeouts = PostgresTimeouts::default().with_lease(Duration::from_secs(60));
    let store = PostgresStore::connect_with(&url, timeouts).await.unwrap();
    let a = store.lock("expiry", LockMode::FailFast).await.unwrap();
    let a_fence = a.fence().unwrap();
    store
        .append_fenced(&a_fence, 0, &[step(0, "by a")])
        .await
        .unwrap();
    assert!(matches!(
        store.lock("expiry", LockMode::FailFast).await,
        Err(SessionError::Busy { .. })
    ));
    support::session::psql(
        &url,
        "UPDATE agcore_leases SET expires_ms = 0 WHERE name = 'expiry'",
    )
    .await;
    let b = store.lock("expiry", LockMode::FailFast).await.unwrap();
    let b_fence = b.fence().unwrap();
    assert_eq!(b_fence.epoch, a_fence.epoch + 1);
    assert!(matches!(
        store.append_fenced(&a_fence, 1, &[step(1, "zombie")]).await,
        Err(SessionError::LeaseLost { current: Some(e), .. }) if e == b_fence.epoch
    ));
    assert!(matches!(
        store.renew(&a_fence).await,
        Err(SessionError::LeaseLost { .. })
    ));
    // The zombie lets go of its lease: that does not free the session from its new holder.
    drop(a);
    let third = PostgresStore::connect(&url).await.unwrap();
    assert!(matches!(
        third
            .lock(
                "expiry",
                LockMode::Wait {
                    timeout: Duration::from_millis(300)
                }
            )
            .await,
        Err(SessionError::Busy { .. })
    ));
    store
        .append_fenced(&b_fence, 1, &[step(1, "by b")])
        .await
        .unwrap();
    let session = store.load("expiry").await.unwrap().unwrap();
    assert_eq!(texts(&session.steps), ["by a", "by b"]);
}

/// PostgreSQL: a short lease is kept alive by the store's renewal for as long as its holder
/// runs (several lease periods here), and a dropped lease is free at once.
#[tokio::test]
async fn postgres_a_held_lease_is_renewed_and_a_dropped_one_is_free() {
    let Some(url) = support::session::fresh_db("renew").await else {
        return;
    };
    let timeouts = PostgresTimeouts::default().with_lease(Duration::from_millis(300));
    let store = PostgresStore::connect_with(&url, timeouts).await.unwrap();
    let other = PostgresStore::connect_with(&url, timeouts).await.unwrap();
    let a = store.lock("renew", LockMode::FailFast).await.unwrap();
    // Three lease periods of trying: a lease that was not renewed would be taken.
    assert!(matches!(
        other
            .lock(
                "renew",
                LockMode::Wait {
                    timeout: Duration::from_millis(900)
                }
            )
            .await,
        Err(SessionError::Busy { .. })
    ));
    store.renew(&a.fence().unwrap()).await.unwrap();
    drop(a);
    let b = other
        .lock(
            "renew",
            LockMode::Wait {
                timeout: Duration::from_secs(10),
            },
        )
        .await
        .unwrap();
    assert!(b.epoch().unwrap() >= 2);
}

// ---------------------------------------------------------------------------------------------
// A run whose lease is taken over stops.

/// The model asks for `work`, whose tool — while it runs — stands for another worker taking
/// the session over (its lease epoch goes up); then the model would be asked again.
async fn model() -> MockServer {
    let server = MockServer::start().await;
    let calls = json!({
        "id": "r", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "tool_calls",
                     "message": {"role": "assistant", "content": null, "tool_calls": [
                        {"id": "call_w", "type": "function", "function": {"name": "work", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    });
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_json(calls))
        .mount(&server)
        .await;
    server
}

/// A tool that runs `take_over` (another worker taking the session) before it answers.
struct TakenOverWhileRunning {
    take_over: Box<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>,
}

#[async_trait]
impl BaseTool for TakenOverWhileRunning {
    fn name(&self) -> &str {
        "work"
    }
    fn description(&self) -> &str {
        "works while the session is taken over"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        (self.take_over)().await;
        Ok(json!("worked"))
    }
}

async fn a_run_that_lost_its_lease_stops(
    store: Arc<dyn SessionStore>,
    take_over: Box<dyn Fn() -> futures::future::BoxFuture<'static, ()> + Send + Sync>,
) {
    let server = model().await;
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(TakenOverWhileRunning { take_over }))
        .unwrap();
    let lease = store.lock("lost", LockMode::FailFast).await.unwrap();
    let (journal, _) = SessionJournal::open(store.clone(), "lost").await.unwrap();
    let journal = journal.with_lease(&lease);
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("m"));
    let outcome = cycle
        .run_with(
            RunRequest::prompt("work")
                .with_tools(&registry)
                .with_journal(&journal),
        )
        .await;
    let Err(LlmError::Journal { message }) = &outcome else {
        panic!("expected a journal failure: {outcome:?}")
    };
    assert!(message.contains("lease"), "{message}");
    // No further effect: the model was asked once, and the store holds nothing after the run
    // state that holds the call's start.
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let session = store.load("lost").await.unwrap().unwrap();
    let kinds: Vec<&str> = session.steps.iter().map(|s| s.kind.as_str()).collect();
    assert_eq!(kinds, ["messages", "run"]);
}

#[tokio::test]
async fn sqlite_a_run_whose_lease_was_taken_over_stops_before_its_next_effect() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.db");
    let store = SqliteStore::open(&path).await.unwrap();
    let take_over = Box::new(move || {
        let path = path.clone();
        Box::pin(async move {
            // Another writer's lease (the flock is this test's; the epoch is what fences).
            rusqlite::Connection::open(&path)
                .unwrap()
                .execute(
                    "UPDATE agcore_leases SET epoch = epoch + 1 WHERE name = 'lost'",
                    [],
                )
                .unwrap();
        }) as futures::future::BoxFuture<'static, ()>
    });
    a_run_that_lost_its_lease_stops(Arc::new(store), take_over).await;
}

#[tokio::test]
async fn postgres_a_run_whose_lease_was_taken_over_stops_before_its_next_effect() {
    let Some(url) = support::session::fresh_db("lost").await else {
        return;
    };
    let store = PostgresStore::connect(&url).await.unwrap();
    let take_over = Box::new(move || {
        let url = url.clone();
        Box::pin(async move {
            support::session::psql(
                &url,
                "UPDATE agcore_leases SET epoch = epoch + 1, expires_ms = 0 WHERE name = 'lost'",
            )
            .await;
        }) as futures::future::BoxFuture<'static, ()>
    });
    a_run_that_lost_its_lease_stops(Arc::new(store), take_over).await;
}

// ---------------------------------------------------------------------------------------------
// Databases of schema version 1.

const SQLITE_V1: &str = "
CREATE TABLE agcore_schema_version (version INTEGER NOT NULL);
INSERT INTO agcore_schema_version VALUES (1);
CREATE TABLE agcore_sessions (
    name TEXT PRIMARY KEY, format_version INTEGER NOT NULL, created_ms INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL, next_seq INTEGER NOT NULL
);
CREATE TABLE agcore_steps (
    session TEXT NOT NULL, seq INTEGER NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
    PRIMARY KEY (session, seq)
) WITHOUT ROWID;
INSERT INTO agcore_sessions VALUES ('old', 2, 1767225600000, 1767225660000, 1);
INSERT INTO agcore_steps VALUES ('old', 0, 'note', '{\"text\":\"before\"}');
";

#[tokio::test]
async fn sqlite_a_version_1_database_is_migrated_to_lease_epochs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("v1.db");
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(SQLITE_V1)
        .unwrap();
    let store = SqliteStore::open(&path).await.unwrap();
    let lease = store.lock("old", LockMode::FailFast).await.unwrap();
    assert_eq!(lease.epoch(), Some(1));
    store
        .append_fenced(&lease.fence().unwrap(), 1, &[step(1, "after")])
        .await
        .unwrap();
    let session = store.load("old").await.unwrap().unwrap();
    assert_eq!(texts(&session.steps), ["before", "after"]);
    let version: i64 = rusqlite::Connection::open(&path)
        .unwrap()
        .query_row("SELECT max(version) FROM agcore_schema_version", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(version, i64::from(agcore::session::SCHEMA_VERSION));
    assert_eq!(version, 2);
    drop(lease);
    // Opened again: nothing left to migrate.
    let again = SqliteStore::open(&path).await.unwrap();
    assert_eq!(
        again.lock("old", LockMode::FailFast).await.unwrap().epoch(),
        Some(2)
    );
}

#[tokio::test]
async fn postgres_a_version_1_database_is_migrated_to_lease_epochs() {
    let Some(url) = support::session::fresh_db("v1").await else {
        return;
    };
    support::session::psql(
        &url,
        "CREATE TABLE agcore_schema_version (version INTEGER PRIMARY KEY, applied_ms BIGINT NOT NULL);
         INSERT INTO agcore_schema_version VALUES (1, 0);
         CREATE TABLE agcore_sessions (
             name TEXT PRIMARY KEY, format_version INTEGER NOT NULL, created_ms BIGINT NOT NULL,
             updated_ms BIGINT NOT NULL, next_seq BIGINT NOT NULL);
         CREATE TABLE agcore_steps (
             session TEXT NOT NULL REFERENCES agcore_sessions (name) ON DELETE CASCADE,
             seq BIGINT NOT NULL, kind TEXT NOT NULL, payload TEXT NOT NULL,
             PRIMARY KEY (session, seq));
         INSERT INTO agcore_sessions VALUES ('old', 2, 1767225600000, 1767225660000, 1);
         INSERT INTO agcore_steps VALUES ('old', 0, 'note', '{\"text\":\"before\"}');",
    )
    .await;
    let store = PostgresStore::connect(&url).await.unwrap();
    let lease = store.lock("old", LockMode::FailFast).await.unwrap();
    assert_eq!(lease.epoch(), Some(1));
    store
        .append_fenced(&lease.fence().unwrap(), 1, &[step(1, "after")])
        .await
        .unwrap();
    let session = store.load("old").await.unwrap().unwrap();
    assert_eq!(texts(&session.steps), ["before", "after"]);
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let versions: Vec<i32> = client
        .query(
            "SELECT version FROM agcore_schema_version ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, [1, 2]);
}
