//! What agcore keeps on disk is owner-only: the SQLite session store (its folder, database,
//! `-wal`/`-shm`, lock folder and lock files), spilled outputs and OAuth tokens are created
//! 0700/0600 whatever the umask; ones found open to others are tightened and reported once; a
//! lock file of another user is refused, and one another process could have opened while it
//! was readable is replaced, so nobody else can hold a session's lease.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use agcore::context::spill::OutputStore;
use agcore::session::{LockMode, SessionError, SessionStore, SqliteStore, Step};
use agcore::tools::mcp::auth::FileCredentialStore;
use rmcp::transport::auth::{CredentialStore, StoredCredentials};
use serde_json::json;

const CHILD_DIR: &str = "AGCORE_TEST_PRIVATE_DIR";

fn mode(path: &Path) -> u32 {
    std::fs::symlink_metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// This test's name as the test harness knows it (the module path without the crate's name),
/// so the child is found however the tests are grouped into binaries.
fn test_name(function: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{function}"),
        None => function.to_owned(),
    }
}

/// Creates everything agcore keeps under `root` (in a process whose umask the parent set) and
/// prints each file's mode as `MODE <relative path> <octal>`.
#[tokio::test]
#[ignore = "run by files_are_created_owner_only_whatever_the_umask in a child process"]
async fn create_everything_child() {
    let Ok(root) = std::env::var(CHILD_DIR) else {
        panic!("run by files_are_created_owner_only_whatever_the_umask, with {CHILD_DIR}")
    };
    let root = PathBuf::from(root);
    let data = root.join("data/agcore");
    let db = data.join("sessions.db");
    let store = SqliteStore::open(&db).await.unwrap();
    store
        .append(
            "s",
            0,
            &[Step::new(0, "note", json!({"secret": "hunter2"}))],
        )
        .await
        .unwrap();
    let lease = store.lock("s", LockMode::FailFast).await.unwrap();
    let outputs = OutputStore::new(data.join("outputs"));
    let id = outputs.save("a large output", Some(3)).unwrap();
    let tokens = FileCredentialStore::new(data.join("mcp-auth/server.json"));
    let credentials: StoredCredentials = serde_json::from_value(json!({
        "client_id": "client-1",
        "token_response": {"access_token": "tok-secret", "token_type": "bearer"},
    }))
    .unwrap();
    tokens.save(credentials).await.unwrap();

    let locks = data.join("sessions.db.locks");
    let lock_file = std::fs::read_dir(&locks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let mut paths = vec![
        root.join("data"),
        data.clone(),
        db.clone(),
        data.join("sessions.db-wal"),
        data.join("sessions.db-shm"),
        locks,
        lock_file,
        data.join("outputs"),
        data.join(format!("outputs/{id}.txt")),
        data.join(format!("outputs/{id}.cut")),
        data.join("mcp-auth"),
        data.join("mcp-auth/server.json"),
    ];
    paths.sort();
    for path in paths {
        println!(
            "MODE {} {:o}",
            path.strip_prefix(&root).unwrap().display(),
            mode(&path)
        );
    }
    drop(lease);
}

#[test]
fn files_are_created_owner_only_whatever_the_umask() {
    for umask in ["022", "000"] {
        let root = tempfile::tempdir().unwrap();
        // The umask is the process's: set it in a child, never in this (threaded) test binary.
        let output = Command::new("sh")
            .arg("-c")
            .arg(format!("umask {umask} && exec \"$0\" \"$@\""))
            .arg(std::env::current_exe().unwrap())
            .args([
                "--exact",
                &test_name("create_everything_child"),
                "--ignored",
                "--nocapture",
                "--test-threads",
                "1",
            ])
            .env(CHILD_DIR, root.path())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "umask {umask}: the child failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let modes: Vec<(&str, &str)> = stdout
            .lines()
            .filter_map(|line| line.split_once("MODE ").map(|(_, rest)| rest))
            .filter_map(|line| line.rsplit_once(' '))
            .collect();
        assert_eq!(modes.len(), 12, "umask {umask}: {stdout}");
        let loose: Vec<_> = modes
            .iter()
            .filter(|(path, mode)| {
                let dir = root.path().join(path).is_dir();
                *mode != if dir { "700" } else { "600" }
            })
            .collect();
        assert!(
            loose.is_empty(),
            "umask {umask}: not owner-only: {loose:?} (all: {modes:?})"
        );
    }
}

/// A store made by an older agcore (folder 0755, database 0644, lock folder 0755, lock file
/// 0644): opening it makes each owner-only and says which, once.
#[tokio::test]
async fn loose_files_are_tightened_on_open_and_reported_once() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("agcore");
    let db = data.join("sessions.db");
    {
        let store = SqliteStore::open(&db).await.unwrap();
        store
            .append("s", 0, &[Step::new(0, "note", json!({}))])
            .await
            .unwrap();
        drop(store.lock("s", LockMode::FailFast).await.unwrap());
    }
    let locks = data.join("sessions.db.locks");
    let lock_file = std::fs::read_dir(&locks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    set_mode(&data, 0o755);
    set_mode(&db, 0o644);
    set_mode(&locks, 0o755);
    set_mode(&lock_file, 0o644);

    let store = SqliteStore::open(&db).await.unwrap();
    for (path, want) in [(&db, 0o600), (&locks, 0o700)] {
        assert_eq!(mode(path), want, "{}", path.display());
    }
    // The loose lock file is replaced (see the last test), by an owner-only one.
    assert!(!lock_file.exists());
    drop(store.lock("s", LockMode::FailFast).await.unwrap());
    assert_eq!(mode(&lock_file), 0o600);
    // The database's own folder is the caller's (it may be shared on purpose): left alone.
    assert_eq!(mode(&data), 0o755);
    let reported: Vec<_> = store
        .tightened()
        .iter()
        .map(|t| (t.path.clone(), t.was))
        .collect();
    assert!(reported.contains(&(db.clone(), 0o644)), "{reported:?}");
    assert!(reported.contains(&(locks.clone(), 0o755)), "{reported:?}");
    assert!(
        reported.contains(&(lock_file.clone(), 0o644)),
        "{reported:?}"
    );
    // SQLite gave the -wal and -shm it made on opening the database's (still loose) mode.
    for side in ["sessions.db-wal", "sessions.db-shm"] {
        assert_eq!(mode(&data.join(side)), 0o600, "{side}");
        assert!(reported.contains(&(data.join(side), 0o644)), "{reported:?}");
    }
    assert_eq!(reported.len(), 5, "{reported:?}");
    assert_eq!(store.load("s").await.unwrap().unwrap().steps.len(), 1);
    drop(store);

    let again = SqliteStore::open(&db).await.unwrap();
    assert!(again.tightened().is_empty(), "{:?}", again.tightened());
}

/// Another user's lock folder or lock file (made here by chown, so only as root) is refused
/// with a typed error instead of being used.
#[tokio::test]
async fn a_lock_of_another_user_is_refused() {
    if support::mcp::require(
        "root (to make a file of another user with chown)",
        "run the tests as root",
        (nix_uid() == 0).then_some(()),
    )
    .is_none()
    {
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("sessions.db");
    let store = SqliteStore::open(&db).await.unwrap();
    drop(store.lock("s", LockMode::FailFast).await.unwrap());
    let locks = root.path().join("sessions.db.locks");
    let lock_file = std::fs::read_dir(&locks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    chown(&lock_file, 65534);
    let error = store.lock("s", LockMode::FailFast).await.unwrap_err();
    assert!(
        matches!(
            &error,
            SessionError::NotPrivate(agcore::owner_only::OwnerOnlyError::NotOwned {
                owner: 65534,
                ..
            })
        ),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("belongs to user 65534"),
        "{error}"
    );

    std::fs::remove_file(&lock_file).unwrap();
    chown(&locks, 65534);
    let error = store.lock("s", LockMode::FailFast).await.unwrap_err();
    assert!(matches!(&error, SessionError::NotPrivate(_)), "{error:?}");
    drop(store);
    let error = SqliteStore::open(&db).await.unwrap_err();
    assert!(matches!(&error, SessionError::NotPrivate(_)), "{error:?}");
    // Another user's database: refused before it is read or written.
    chown(&locks, 0);
    chown(&db, 65534);
    let error = SqliteStore::open(&db).await.unwrap_err();
    assert!(
        matches!(
            &error,
            SessionError::NotPrivate(agcore::owner_only::OwnerOnlyError::NotOwned {
                owner: 65534,
                ..
            })
        ),
        "{error:?}"
    );
}

/// A lock file that was readable (an older agcore made it 0644) may be open in another user's
/// process, which can `flock` it through that descriptor: the store replaces it, so the other
/// process's lock no longer holds the session.
#[tokio::test]
async fn a_lock_file_opened_while_it_was_readable_cannot_hold_the_session() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("sessions.db");
    let store = SqliteStore::open(&db).await.unwrap();
    drop(store.lock("s", LockMode::FailFast).await.unwrap());
    drop(store);
    let locks = root.path().join("sessions.db.locks");
    let lock_file = std::fs::read_dir(&locks)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    set_mode(&locks, 0o755);
    set_mode(&lock_file, 0o644);
    // The other user: read access is all `flock` needs.
    let other = std::fs::File::open(&lock_file).unwrap();
    other.try_lock_shared().unwrap();

    let store = SqliteStore::open(&db).await.unwrap();
    let lease = store.lock("s", LockMode::FailFast).await.unwrap();
    assert_eq!(mode(&lock_file), 0o600);
    // Exclusion still holds among the store's own holders.
    let error = store.lock("s", LockMode::FailFast).await.unwrap_err();
    assert!(matches!(error, SessionError::Busy { .. }), "{error:?}");
    drop(lease);
    drop(other);
}

fn nix_uid() -> u32 {
    std::fs::metadata("/proc/self").map_or(u32::MAX, |m| m.uid())
}

fn chown(path: &Path, uid: u32) {
    std::os::unix::fs::chown(path, Some(uid), None).unwrap();
}
