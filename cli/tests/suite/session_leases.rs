//! Fenced leases end to end on a real PostgreSQL (`scripts/with-postgres.sh`): a worker
//! (`agcore run --session`) paused with SIGSTOP past its lease loses the session to another
//! worker; when it is continued (SIGCONT) its commit is refused, it stops, and the session's
//! history holds one run — the second worker's.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

fn postgres_url() -> Option<String> {
    support::mcp::require_env(
        "AGCORE_TEST_POSTGRES_URL",
        "run the tests through scripts/with-postgres.sh",
    )
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

fn output_of(command: std::process::Command) -> Output {
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// The roles of `sessions show --json`'s messages after the system prompt.
fn history(dir: &Path, store: &str, name: &str) -> Vec<Value> {
    let mut command = agcore(dir);
    command.args(["sessions", "show", name, "--json", "--store", store]);
    let output = output_of(command);
    assert!(output.status.success(), "{output:?}");
    let messages: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    messages
        .into_iter()
        .skip_while(|m| m["role"] == "system")
        .collect()
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_paused_past_its_lease_cannot_commit_after_another_took_the_session() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;

    let Some(store) = postgres_url() else { return };
    let dir = tempfile::tempdir().unwrap();
    let started = dir.path().join("started");
    // The tool: says it started, then works for 2 s (its own process: not paused with agcore).
    let work = format!(
        r#"{{"command":"echo run >> '{}'; sleep 2; echo finished"}}"#,
        started.display()
    );
    let server = fake_openai(vec![
        Reply::Tools(vec![("call_work".into(), "run_command".into(), work)]),
        Reply::text("Taken over."),
    ])
    .await;
    let config = dir.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n\n[session]\nlease = 1\n",
    )
    .unwrap();
    let name = unique("zombie");
    let flags = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["run", "--base-url", &base_url(&server), "--model", "m"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.extend(["--tools", "builtin", "--config"].map(str::to_owned));
        args.push(config.display().to_string());
        args.extend(["--session", &name, "--store", &store].map(str::to_owned));
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };

    // Worker A: runs until its tool started, then is paused.
    let mut first = agcore(dir.path());
    first
        .args(flags(&["do the work"]))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut first = first.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::fs::read_to_string(&started).unwrap_or_default() != "run\n" {
        assert!(Instant::now() < deadline, "the tool never started");
        assert!(first.try_wait().unwrap().is_none(), "worker A ended early");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pid = Pid::from_raw(i32::try_from(first.id()).unwrap());
    kill(pid, Signal::SIGSTOP).unwrap();

    // Worker B: waits for A's lease to expire (A renews no more), takes the session over and
    // resumes the run: A's call is answered as interrupted.
    let mut second = agcore(dir.path());
    second.args(flags(&["--wait-session", "20", "--resume"]));
    let output = output_of(second);
    assert!(output.status.success(), "{output:?}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("Taken over."),
        "{output:?}"
    );

    // A continues: its tool's answer cannot be committed, and it stops there.
    kill(pid, Signal::SIGCONT).unwrap();
    let first = tokio::task::spawn_blocking(move || first.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stderr = String::from_utf8_lossy(&first.stderr);
    assert!(!first.status.success(), "worker A must fail: {stderr}");
    assert!(stderr.contains("lease"), "{stderr}");

    // One run in the history: B's. A's answer is not there, and A asked the model nothing more.
    let messages = history(dir.path(), &store, &name);
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(
        roles,
        ["user", "assistant", "tool", "assistant"],
        "{messages:?}"
    );
    let answer = messages[2]["content"].as_str().unwrap();
    assert!(answer.contains("interrupted"), "{answer}");
    assert!(!answer.contains("finished"), "{answer}");
    assert_eq!(messages[3]["content"], "Taken over.");
    assert_eq!(request_bodies(&server).await.len(), 2);
    assert_eq!(std::fs::read_to_string(&started).unwrap(), "run\n");
}
