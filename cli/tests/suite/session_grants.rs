//! `a` (allow for the session) at `agcore chat --session`'s approval question is stored with
//! the session: a later `agcore run --session` of the same session — another process, with
//! nobody to ask — runs the same tool without asking (before, it suspended for approval).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use expectrl::{ControlCode, Session, WaitStatus};
use support::{Reply, agcore, base_url, fake_openai, trust};

/// Generous: the pty test must not depend on the machine's speed.
const TIMEOUT: Duration = Duration::from_secs(20);

fn expect(session: &mut Session, text: &str) {
    if let Err(error) = session.expect(text) {
        panic!("expected {text:?} on the terminal: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_in_one_process_is_remembered_by_the_next_with_the_session() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(
        workspace.path().join("agcore.toml"),
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
    )
    .unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_a", "write_file", r#"{"path":"a.txt","content":"A"}"#),
        Reply::text("Wrote a.txt."),
        Reply::tool("call_b", "write_file", r#"{"path":"b.txt","content":"B"}"#),
        Reply::text("Wrote b.txt without asking."),
    ])
    .await;
    trust(workspace.path());
    let url = base_url(&server);
    let mut command = agcore(workspace.path());
    command.args(["chat", "--base-url", &url, "--model", "fake-model"]);
    command.args(["--tools", "builtin", "--session", "work"]);
    command.env("TERM", "xterm");
    let status = tokio::task::block_in_place(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(TIMEOUT));
        expect(&mut session, "you> ");
        session.send_line("write a").unwrap();
        expect(&mut session, "allow?");
        session.send_line("a").unwrap();
        expect(&mut session, "Wrote a.txt.");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );

    // Another process, without a terminal: a call needing approval would suspend the run.
    let output = agcore(workspace.path())
        .args(["run", "--base-url", &url, "--model", "fake-model"])
        .args(["--tools", "builtin", "--session", "work", "write b"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(
        String::from_utf8_lossy(&output.stdout).contains("Wrote b.txt without asking."),
        "{output:?}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("b.txt")).unwrap(),
        "B"
    );
}
