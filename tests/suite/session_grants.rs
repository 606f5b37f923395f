//! An "allow for the session" answer (`a` at the CLI's prompt) is stored with the session: a
//! later process that opens the session — another store handle on the same SQLite file or
//! PostgreSQL database — restores it, and the call runs without asking again. Other tools are
//! still asked. Runs on SQLite and, with `AGCORE_TEST_POSTGRES_URL` (scripts/with-postgres.sh),
//! PostgreSQL; without it the PostgreSQL test skips with a notice, or fails when `CI` is set.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use agcore::session::{LockMode, SessionJournal, SessionStore};
use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, Approver};
use agcore::tools::prelude::*;
use agcore::tools::{ApprovalPolicy, SessionGrant};

struct Edit(&'static str);

#[async_trait]
impl BaseTool for Edit {
    fn name(&self) -> &str {
        self.0
    }
    fn description(&self) -> &str {
        "Edits"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Write]
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("edited"))
    }
}

/// Answers every question the same way, and counts them.
struct Answers {
    decision: ApprovalDecision,
    asked: AtomicUsize,
}

#[async_trait]
impl Approver for Answers {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        self.asked.fetch_add(1, Ordering::SeqCst);
        self.decision.clone()
    }
}

/// One "process": a new store handle, the session's lease and journal, and a registry asking
/// `decision` with the session's grants restored and new ones recorded.
async fn process(
    url: &str,
    decision: ApprovalDecision,
) -> (
    ToolRegistry,
    Arc<Answers>,
    Vec<SessionGrant>,
    agcore::session::SessionLease,
) {
    let store: Arc<dyn SessionStore> = agcore::session::open(url).await.unwrap();
    // Waiting: PostgreSQL releases a dropped lease on a task, a moment later.
    let wait = LockMode::Wait {
        timeout: std::time::Duration::from_secs(30),
    };
    let lease = store.lock("s", wait).await.unwrap();
    let (journal, restored) = SessionJournal::open(store, "s").await.unwrap();
    let answers = Arc::new(Answers {
        decision,
        asked: AtomicUsize::new(0),
    });
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
        .with_approval_policy(ApprovalPolicy::ask([Permission::Write]))
        .with_approver(answers.clone())
        .with_grant_recorder(Arc::new(journal));
    registry.restore_session_grants(&restored.grants);
    registry.register(Arc::new(Edit("edit"))).unwrap();
    registry.register(Arc::new(Edit("other"))).unwrap();
    (registry, answers, restored.grants, lease)
}

async fn grants_survive_a_restart(url: &str) {
    let (registry, answers, grants, lease) = process(url, ApprovalDecision::AllowForSession).await;
    assert!(grants.is_empty());
    for _ in 0..2 {
        let call = registry.invoke("edit", json!({"path": "a"})).await.unwrap();
        assert_eq!(call.output.unwrap(), json!("edited"));
    }
    assert_eq!(
        answers.asked.load(Ordering::SeqCst),
        1,
        "asked once, then granted"
    );
    drop((registry, lease));

    // The next process would deny anything it asks.
    let deny = ApprovalDecision::Deny {
        message: Some("no".into()),
    };
    let (registry, answers, grants, lease) = process(url, deny).await;
    assert_eq!(
        grants,
        [SessionGrant {
            tool: "edit".into(),
            arguments: None,
        }]
    );
    let call = registry.invoke("edit", json!({"path": "b"})).await.unwrap();
    assert_eq!(call.output.unwrap(), json!("edited"));
    assert_eq!(
        answers.asked.load(Ordering::SeqCst),
        0,
        "the grant was asked again"
    );
    // A grant is for its tool only.
    let error = registry
        .invoke("other", json!({"path": "b"}))
        .await
        .unwrap_err();
    assert!(matches!(error, ToolError::ApprovalDenied { .. }), "{error}");
    assert_eq!(answers.asked.load(Ordering::SeqCst), 1);
    drop((registry, lease));

    // Granted for these arguments only: restored as such.
    let (registry, _, _, lease) = process(url, ApprovalDecision::AllowForSessionWithArgs).await;
    registry
        .invoke("other", json!({"path": "c"}))
        .await
        .unwrap();
    drop((registry, lease));
    let deny = ApprovalDecision::Deny { message: None };
    let (registry, answers, grants, _lease) = process(url, deny).await;
    assert_eq!(grants.len(), 2, "{grants:?}");
    registry
        .invoke("other", json!({"path": "c"}))
        .await
        .unwrap();
    assert_eq!(answers.asked.load(Ordering::SeqCst), 0);
    registry
        .invoke("other", json!({"path": "d"}))
        .await
        .unwrap_err();
    assert_eq!(answers.asked.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_session_grants_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("sessions.db").display());
    grants_survive_a_restart(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_session_grants_survive_a_restart() {
    let Some(url) = support::session::fresh_db("grants").await else {
        return;
    };
    grants_survive_a_restart(&url).await;
}
