//! A team's run across processes, from the command line: a SIGKILL mid-child resumed on
//! SQLite and PostgreSQL without re-running a finished call, an approval inside a child
//! suspended in one process (exit 3, the call named `main/researcher`) and given in another,
//! and the terminal question for a call inside a child. The fake checks every request like in
//! `suite::agents_cli`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::process::Stdio;
use std::time::{Duration, Instant};

use support::team_cli::*;
use support::team_model::{AgentScript, TeamModel};
use support::{Reply, agcore};

/// The step kinds the store holds for a session (to see what was recorded before a kill).
async fn stored_steps(store: &str, name: &str) -> Vec<String> {
    let store = agcore::session::open(store).await.unwrap();
    store
        .load(name)
        .await
        .unwrap()
        .map(|session| {
            session
                .steps
                .into_iter()
                .map(|step| format!("{} {}", step.kind, step.payload))
                .collect()
        })
        .unwrap_or_default()
}

/// SIGKILL while the researcher's second tool blocks on a fifo (its first finished in an
/// earlier turn of the child); `--resume` in a new process continues inside the child: the
/// finished call is not run again, the cut-off one is answered as interrupted, the child
/// answers and so does the parent.
#[cfg(unix)]
async fn resume_after_kill_mid_child(store: &str) {
    let (dir, config) = workspace(
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
        &["run_command"],
    );
    let counter = dir.path().join("counter");
    let slow = dir.path().join("slow");
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    let count = serde_json::json!({"command": format!("echo run >> '{}'", counter.display())});
    let block = serde_json::json!({"command": format!(
        "echo run >> '{}'; cat '{}'", slow.display(), fifo.display())});
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"count, then wait"}"#),
                Reply::text("Main is done."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            &["run_command"],
            vec![
                Reply::tool("call_count", "run_command", &count.to_string()),
                Reply::tool("call_block", "run_command", &block.to_string()),
                Reply::text("Counted once."),
            ],
        ),
    ])
    .await;
    let name = unique("kill");
    let stored = ["--session", &name, "--store", store];
    let session = [&["--agent", "main"], &stored[..]].concat();
    let mut child = command(
        dir.path(),
        &model,
        &config,
        &[&session[..], &["count for me"]].concat(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Until the child's second tool runs: its first turn (the finished call) is recorded
    // before its second request.
    loop {
        let asked = model.requests_of("researcher").len();
        let blocked = std::fs::read_to_string(&slow).unwrap_or_default() == "run\n";
        if asked == 2 && blocked {
            break;
        }
        assert!(Instant::now() < deadline, "the child never got there");
        if child.try_wait().unwrap().is_some() {
            let output = child.wait_with_output().unwrap();
            panic!("the run ended early: {output:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let recorded = stored_steps(store, &name).await.join("\n");
    assert!(recorded.contains("call_count"), "{recorded}");
    child.kill().unwrap(); // SIGKILL: nothing more is written
    child.wait().unwrap();
    // The orphaned `cat` ends when the fifo gets a writer.
    let _ = std::fs::OpenOptions::new().write(true).open(&fifo);

    let output = run(
        dir.path(),
        &model,
        &config,
        // Without --agent: the stored run knows its agent.
        &[&stored[..], &["--wait-session", "10", "--resume", "--json"]].concat(),
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        text_of(&events(&output), None),
        "Main is done.",
        "{output:?}"
    );
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "run\n");
    assert_eq!(std::fs::read_to_string(&slow).unwrap(), "run\n");
    assert_eq!(
        model.routed(),
        ["main", "researcher", "researcher", "researcher", "main"]
    );
    // The child went on from its own history: the finished call's answer kept, the cut-off
    // one answered as interrupted.
    let child = model.requests_of("researcher");
    assert!(!answer_to(&child[2], "call_count").contains("interrupted"));
    let interrupted = answer_to(&child[2], "call_block");
    assert!(interrupted.contains("interrupted"), "{interrupted}");
    assert_eq!(
        answer_to(&model.requests_of("main")[1], "call_r"),
        "Counted once."
    );
    // The resumed events are the child's, marked.
    assert!(
        events(&output)
            .iter()
            .any(|e| e["agent"] == "main/researcher" && e["type"] == "assistant_text_delta"),
        "{output:?}"
    );
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_child_resumes_inside_the_child_without_rerunning_finished_calls() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    resume_after_kill_mid_child(&store).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sigkill_mid_child_resumes_inside_the_child_postgres() {
    let Some(url) = postgres_url() else { return };
    resume_after_kill_mid_child(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approval_inside_a_child_suspends_the_run_and_another_process_gives_it() {
    let writer = ["read_file", "search_files", "write_file"];
    let (dir, config) = workspace(
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
        &writer,
    );
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"write the summary"}"#),
                Reply::text("The summary is written."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            &writer,
            vec![
                Reply::tool(
                    "call_w",
                    "write_file",
                    r#"{"path":"summary.txt","content":"hello"}"#,
                ),
                Reply::text("Wrote summary.txt."),
            ],
        ),
    ])
    .await;
    let name = unique("approve");
    let session = ["--agent", "main", "--session", &name, "--store", &store];
    let output = run(
        dir.path(),
        &model,
        &config,
        &[&session[..], &["--json", "summarise the notes"]].concat(),
    );
    model.assert_clean();
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let events = events(&output);
    let suspended = events.last().unwrap();
    assert_eq!(suspended["type"], "suspended", "{events:#?}");
    assert_eq!(suspended["requests"][0]["call_id"], "call_w");
    assert_eq!(suspended["requests"][0]["tool"], "write_file");
    assert_eq!(suspended["requests"][0]["agent"], "main/researcher");
    let said = stderr(&output);
    assert!(
        said.lines()
            .any(|line| line.contains("call_w") && line.contains("(agent main/researcher)")),
        "{said}"
    );
    assert!(!dir.path().join("summary.txt").exists(), "written unasked");

    // Another process approves; the run continues inside the child, then the parent.
    let output = run(
        dir.path(),
        &model,
        &config,
        &[&session[..], &["--resume", "--approve", "call_w"]].concat(),
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "The summary is written.");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("summary.txt")).unwrap(),
        "hello"
    );
    assert_eq!(
        model.routed(),
        ["main", "researcher", "researcher", "main"],
        "no request while suspended, none repeated"
    );
    assert_eq!(
        answer_to(&model.requests_of("main")[1], "call_r"),
        "Wrote summary.txt."
    );
}

/// Wait for `text` on the pseudo-terminal.
fn expect_on(session: &mut expectrl::Session, text: &str) {
    if let Err(error) = session.expect(text) {
        panic!("expected {text:?} on the terminal: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_asks_on_the_terminal_for_a_call_inside_a_child_naming_the_agent() {
    use expectrl::{ControlCode, WaitStatus};

    let writer = ["read_file", "write_file"];
    let (dir, config) = workspace(
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
        &writer,
    );
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"write it"}"#),
                Reply::text("Done by the researcher."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            &writer,
            vec![
                Reply::tool(
                    "call_w",
                    "write_file",
                    r#"{"path":"out.txt","content":"hello"}"#,
                ),
                Reply::text("Wrote it."),
            ],
        ),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .args(["chat", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--tools", "builtin", "--workspace"])
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["--var", "team=Blue", "--agent", "main"])
        .env("TERM", "xterm");
    let status = tokio::task::block_in_place(move || {
        let mut session = expectrl::Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(Duration::from_secs(20)));
        expect_on(&mut session, "main you> ");
        session.send_line("write hello to out.txt").unwrap();
        expect_on(
            &mut session,
            "? main/researcher › write_file wants to run: Write out.txt",
        );
        expect_on(&mut session, "allow?");
        session.send_line("y").unwrap();
        expect_on(&mut session, "Done by the researcher.");
        expect_on(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    model.assert_clean();
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hello"
    );
    assert_eq!(model.routed(), ["main", "researcher", "researcher", "main"]);
}
