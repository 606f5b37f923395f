//! Small CLI hardening against a fake model on 127.0.0.1: a resumed run takes the limits of the
//! command that resumes it, output into a closed pipe ends the command quietly, and a hook's
//! background child does not outlive the hook.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::Read;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

fn run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> std::process::Output {
    let mut command = agcore(dir);
    command
        .args(["run", "--base-url", &base_url(server), "--model", "m"])
        .args(extra)
        .stdin(Stdio::null());
    Command::from_std(command).output().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_run_applies_the_limits_given_when_it_is_resumed() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("ask.toml");
    std::fs::write(&config, "[tools]\nask = [\"read\"]\n").unwrap();
    let config = config.to_str().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_list", "list_directory", r#"{"path":"."}"#),
        Reply::text("Done."),
    ])
    .await;
    let common = ["--tools", "builtin", "--config", config, "--session", "s"];
    let mut first = common.to_vec();
    first.push("what is here?");
    let output = run(dir.path(), &server, &first);
    assert_eq!(output.status.code(), Some(3), "{output:?}");

    // One request was made before the suspension; the resuming command allows one in all.
    let mut again = common.to_vec();
    again.extend(["--resume", "--approve", "call_list", "--max-requests", "1"]);
    again.push("--json");
    let output = run(dir.path(), &server, &again);
    assert!(!output.status.success(), "{output:?}");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let error: Value = stdout
        .lines()
        .filter_map(|line| serde_json::from_str::<Value>(line).ok())
        .find(|event| event["type"] == "error")
        .unwrap_or_else(|| panic!("no error event: {output:?}"));
    assert_eq!(error["kind"], "usage_limit_exceeded", "{error}");
    // No chat request after the suspension's.
    assert_eq!(request_bodies(&server).await.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_into_a_closed_pipe_ends_the_command_quietly() {
    let dir = tempfile::tempdir().unwrap();
    // Far more than a pipe holds, so the writer meets the closed end.
    let long = "x".repeat(400_000);
    let server = fake_openai(vec![Reply::text(&long)]).await;
    let output = run(dir.path(), &server, &["--session", "big", "say a lot"]);
    assert!(output.status.success(), "{output:?}");

    let mut child = agcore(dir.path())
        .args(["sessions", "show", "big", "--json"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut head = vec![0u8; 600];
    stdout.read_exact(&mut head).unwrap();
    // `| head -c 600`: the reader goes away.
    drop(stdout);
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(stderr.trim().is_empty(), "{stderr}");
    assert_eq!(output.status.code(), Some(0), "{output:?}");
}

/// Whether process `pid` is gone (or a zombie nobody reaped: it no longer runs).
fn gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .is_some_and(|state| state == "Z" || state == "X"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hooks_background_child_is_killed_when_the_hook_ends() {
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("child.pid");
    let config = dir.path().join("hooks.toml");
    // The hook starts a long-lived child in the background (its output elsewhere, so the hook
    // itself ends at once) and exits.
    let script = format!(
        "sleep 300 </dev/null >/dev/null 2>&1 & echo $! > '{}'",
        pid_file.display()
    );
    std::fs::write(
        &config,
        format!("[[hooks.before_model_request]]\ncommand = [\"sh\", \"-c\", {script:?}]\n"),
    )
    .unwrap();
    let server = fake_openai(vec![Reply::text("Hello.")]).await;
    let output = run(
        dir.path(),
        &server,
        &["--config", config.to_str().unwrap(), "hi"],
    );
    assert!(output.status.success(), "{output:?}");
    let pid: u32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    // The hook (and agcore) ended: the child must be gone by now; give the kernel a bounded
    // moment to deliver the signal.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !gone(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survived = !gone(pid);
    if survived {
        let _ = std::process::Command::new("kill")
            .args(["-9", &pid.to_string()])
            .status();
    }
    assert!(!survived, "the hook's background child {pid} outlived it");
}
