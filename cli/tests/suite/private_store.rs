//! The CLI's data folder and session store are owner-only: a store an older agcore left open to
//! other users (folder 0755, database 0644) is tightened when a command opens it, and one line
//! on stderr says so — once: the next command finds nothing to say.
#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use support::{Reply, agcore, base_url, fake_openai};

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o7777
}

fn list(dir: &Path) -> String {
    let output = agcore(dir)
        .args(["sessions", "list"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn a_loose_data_folder_and_store_are_tightened_and_reported_once() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".home/data/agcore");
    let db = data.join("sessions.db");
    list(dir.path());
    assert_eq!(mode(&data), 0o700, "a new data folder is owner-only");
    assert_eq!(mode(&db), 0o600, "a new store is owner-only");

    std::fs::set_permissions(&data, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    let stderr = list(dir.path());
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|line| line.contains("owner-only"))
        .collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].contains(&format!("{} (was 0755)", data.display()))
            && lines[0].contains(&format!("{} (was 0644)", db.display())),
        "{stderr}"
    );
    assert_eq!(mode(&data), 0o700);
    assert_eq!(mode(&db), 0o600);

    let stderr = list(dir.path());
    assert!(!stderr.contains("owner-only"), "said twice: {stderr}");
}

/// A store address's password never reaches stderr: a `?password=` parameter, or a password
/// holding an `@`.
#[test]
fn a_store_password_is_never_shown() {
    let dir = tempfile::tempdir().unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    for store in [
        format!("postgres://me@127.0.0.1:{port}/x?password=hunter2"),
        format!("postgres://me:hun%40ter2@127.0.0.1:{port}/x"),
        "postgres://me@127.0.0.1:notaport/x?password=hunter2".to_owned(),
    ] {
        let output = agcore(dir.path())
            .args(["sessions", "list", "--store", &store])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "{store}: {stderr}");
        assert!(
            stderr.contains("could not open the session store postgres://"),
            "{store}: {stderr}"
        );
        assert!(
            !stderr.contains("hunter2") && !stderr.contains("ter2"),
            "{store}: {stderr}"
        );
    }
}

/// A transcript (`--transcript`) holds the conversation: a new one is owner-only too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_transcript_is_owner_only() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("the secret is 42")]).await;
    let transcript = dir.path().join("t.json");
    let output = agcore(dir.path())
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .arg("--transcript")
        .arg(&transcript)
        .arg("hi")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(mode(&transcript), 0o600);
}

/// A PostgreSQL server that accepts connections and never answers (a stopped postmaster: the
/// kernel still completes the handshake) fails the command within `[session]
/// connect_timeout`, with an error naming the operation, instead of hanging it.
#[test]
fn a_silent_postgres_fails_within_the_configured_timeout() {
    let dir = tempfile::tempdir().unwrap();
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port();
    let config = dir.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[session]\nconnect_timeout = 1\nstatement_timeout = 1\n",
    )
    .unwrap();
    let started = std::time::Instant::now();
    let output = agcore(dir.path())
        .args(["sessions", "list", "--config"])
        .arg(&config)
        .arg("--store")
        .arg(format!("postgres://me@127.0.0.1:{port}/x"))
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let elapsed = started.elapsed();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("connect got no answer within 1s"),
        "{stderr}"
    );
    // The default bound is 5 s: well under it, whatever the machine.
    assert!(elapsed < std::time::Duration::from_secs(5), "{elapsed:?}");
    drop(silent);
}

/// Issue 33, item 7: the spill folder of large outputs is agcore's own: one left `0755` (by an
/// older agcore, a umask) is made owner-only when it is used, with its `agcore` parent.
#[test]
#[cfg(unix)]
fn an_open_spill_folder_is_made_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join(".home/data/agcore");
    let outputs = data.join("outputs");
    std::fs::create_dir_all(&outputs).unwrap();
    for folder in [&data, &outputs] {
        std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let config = dir.path().join(".home/config/agcore");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        "[context]\nkeep_large_outputs = true\n",
    )
    .unwrap();
    let output = crate::support::agcore(dir.path())
        .args(["tools", "--tools", "builtin"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    for folder in [&data, &outputs] {
        let mode = std::fs::metadata(folder).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{} is {mode:o}", folder.display());
    }
}
