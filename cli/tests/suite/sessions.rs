//! Issue 11, item 6: `--session`, `--store`, `--resume` and `agcore sessions`, end to end against
//! the scripted model server, on SQLite and (with `AGCORE_TEST_POSTGRES_URL`, which
//! `scripts/with-postgres.sh` sets) a real PostgreSQL. Without the URL the PostgreSQL tests
//! skip with a notice, or fail when `CI` is set (the rule of tests/session_store.rs).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use agcore::session::{LockMode, Step};
use assert_cmd::Command;
use serde_json::{Value, json};
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies};

/// The PostgreSQL test server, or `None` (skipping) — a failure on CI.
fn postgres_url() -> Option<String> {
    support::mcp::require_env(
        "AGCORE_TEST_POSTGRES_URL",
        "run the tests through scripts/with-postgres.sh",
    )
}

/// A session name no other test (or earlier run on the shared PostgreSQL) uses.
fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

fn run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> Output {
    let mut command = agcore(dir);
    command.args(["run", "--base-url", &base_url(server), "--model", "m"]);
    command.args(extra);
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

fn sessions(dir: &Path, extra: &[&str]) -> Output {
    let mut command = agcore(dir);
    command.arg("sessions").args(extra);
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// The stored history, by `agcore sessions show NAME --json`, after its system prompt.
fn shown(dir: &Path, store: &[&str], name: &str) -> Vec<Value> {
    let mut args = vec!["show", name, "--json"];
    args.extend_from_slice(store);
    let output = sessions(dir, &args);
    assert!(output.status.success(), "{output:?}");
    let history: Vec<Value> = serde_json::from_slice(&output.stdout).unwrap();
    conversation(&history).to_vec()
}

/// The messages after the system prompt (agcore's base instructions), which comes first.
fn conversation(messages: &[Value]) -> &[Value] {
    assert_eq!(messages[0]["role"], "system", "{messages:?}");
    &messages[1..]
}

fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

/// A config letting `run_command` run without asking.
fn shell_config(dir: &Path) -> PathBuf {
    let config = dir.join("shell.toml");
    std::fs::write(
        &config,
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    config
}

fn sqlite_store(dir: &Path) -> String {
    format!("sqlite:{}", dir.join("store/sessions.db").display())
}

async fn two_runs_continue_one_conversation(store: Option<&str>) {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("Hello Ada."), Reply::text("You are Ada.")]).await;
    let name = unique("two");
    let mut flags = vec!["--session", name.as_str()];
    let store_flags: Vec<&str> = store.map(|url| vec!["--store", url]).unwrap_or_default();
    flags.extend(&store_flags);

    let first = run(dir.path(), &server, &[&flags[..], &["I am Ada."]].concat());
    assert!(first.status.success(), "{first:?}");
    let second = run(dir.path(), &server, &[&flags[..], &["Who am I?"]].concat());
    assert!(second.status.success(), "{second:?}");

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let sent = conversation(bodies[1]["messages"].as_array().unwrap());
    assert_eq!(roles(sent), ["user", "assistant", "user"], "{sent:?}");
    assert_eq!(sent[0]["content"], "I am Ada.");
    assert_eq!(sent[1]["content"], "Hello Ada.");
    assert_eq!(sent[2]["content"], "Who am I?");

    let history = shown(dir.path(), &store_flags, &name);
    assert_eq!(roles(&history), ["user", "assistant", "user", "assistant"]);
    assert_eq!(history[3]["content"], "You are Ada.");
    if store.is_none() {
        // The default store: SQLite under $XDG_DATA_HOME (the support helper's temp dir).
        assert!(dir.path().join(".home/data/agcore/sessions.db").is_file());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_with_the_session_sends_the_first_conversation() {
    two_runs_continue_one_conversation(None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_run_with_the_session_sends_the_first_conversation_postgres() {
    let Some(url) = postgres_url() else { return };
    two_runs_continue_one_conversation(Some(&url)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_list_show_and_rm_in_json_and_for_people() {
    let dir = tempfile::tempdir().unwrap();
    // The model's reply holds a terminal escape: shown for people, it must come out escaped.
    let server = fake_openai(vec![Reply::text("red \u{1b}[31malert")]).await;
    let store = sqlite_store(dir.path());
    let output = run(
        dir.path(),
        &server,
        &["--session", "notes", "--store", &store, "hi"],
    );
    assert!(output.status.success(), "{output:?}");

    let list = sessions(dir.path(), &["list", "--json", "--store", &store]);
    assert!(list.status.success(), "{list:?}");
    let rows: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["name"], "notes");
    assert!(rows[0]["steps"].as_u64().unwrap() >= 1);
    let list = sessions(dir.path(), &["list", "--store", &store]);
    assert!(stdout(&list).starts_with("notes  "), "{list:?}");

    let history = shown(dir.path(), &["--store", &store], "notes");
    assert_eq!(roles(&history), ["user", "assistant"]);
    assert_eq!(history[1]["content"], "red \u{1b}[31malert");
    let human = sessions(dir.path(), &["show", "notes", "--store", &store]);
    assert!(human.status.success(), "{human:?}");
    let text = stdout(&human);
    assert!(text.contains("user: hi"), "{text}");
    assert!(text.contains("assistant: red"), "{text}");
    assert!(
        !text.contains('\u{1b}'),
        "an escape reached the terminal: {text:?}"
    );

    let removed = sessions(dir.path(), &["rm", "notes", "--store", &store]);
    assert!(removed.status.success(), "{removed:?}");
    assert!(stdout(&removed).contains("deleted session notes"));
    let list = sessions(dir.path(), &["list", "--json", "--store", &store]);
    assert_eq!(stdout(&list).trim(), "[]");
    let missing = sessions(dir.path(), &["show", "notes", "--store", &store]);
    assert!(!missing.status.success());
    assert!(stderr(&missing).contains("no session notes"), "{missing:?}");
    let missing = sessions(dir.path(), &["rm", "notes", "--store", &store]);
    assert!(!missing.status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_held_by_another_process_is_busy() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("never")]).await;
    let store_url = sqlite_store(dir.path());
    let store = agcore::session::open(&store_url).await.unwrap();
    let _lease = store.lock("shared", LockMode::FailFast).await.unwrap();

    let output = run(
        dir.path(),
        &server,
        &["--session", "shared", "--store", &store_url, "hi"],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr(&output).contains("session shared is busy (used by another agcore process)"),
        "{output:?}"
    );
    assert!(
        request_bodies(&server).await.is_empty(),
        "the model was asked"
    );

    // Waiting gives up after the wait, with the same message.
    let started = Instant::now();
    let output = run(
        dir.path(),
        &server,
        &[
            "--session",
            "shared",
            "--store",
            &store_url,
            "--wait-session",
            "1",
            "hi",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stderr(&output).contains("is busy"), "{output:?}");
    assert!(started.elapsed() >= Duration::from_millis(900));
}

/// Runs `agcore run --session` until the model's second request (a slow tool) and kills it
/// with SIGKILL while the tool runs; then checks the stored history and resumes.
/// The kinds of session `name`'s steps, read straight from the store.
async fn step_kinds(store: &str, name: &str) -> Vec<String> {
    let store = agcore::session::open(store).await.unwrap();
    store
        .load(name)
        .await
        .unwrap()
        .map(|session| session.steps.into_iter().map(|step| step.kind).collect())
        .unwrap_or_default()
}

/// Issue 11's crash test: SIGKILL while the second call of a two-call turn runs (the first
/// finished); the resumed run does not run the finished call again, answers the unfinished
/// one as interrupted, and completes.
async fn resume_after_kill_9(store: &str) {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    let slow = dir.path().join("slow");
    let count = format!(r#"{{"command":"echo run >> '{}'"}}"#, counter.display());
    let key_file = dir.path().join("key");
    // The command writes down its call's idempotency key, which the resumed run must name.
    let sleep = format!(
        r#"{{"command":"printf %s $AGCORE_IDEMPOTENCY_KEY > '{}'; echo run >> '{}'; sleep 20"}}"#,
        key_file.display(),
        slow.display()
    );
    let server = fake_openai(vec![
        Reply::Tools(vec![
            ("call_count".into(), "run_command".into(), count),
            ("call_slow".into(), "run_command".into(), sleep),
        ]),
        Reply::text("All done."),
    ])
    .await;
    let config = shell_config(dir.path());
    let name = unique("crash");
    let mut command = agcore(dir.path());
    command
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--tools", "builtin", "--config"])
        .arg(&config)
        .args(["--session", &name, "--store", store, "count, then sleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    // Until the first call's answer is stored and the slow one runs.
    loop {
        let kinds = step_kinds(store, &name).await;
        let slow_runs = std::fs::read_to_string(&slow).unwrap_or_default();
        if kinds.iter().any(|k| k == "call_finished") && slow_runs == "run\n" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never got there: {kinds:?}"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    child.kill().unwrap(); // SIGKILL: nothing more is written
    child.wait().unwrap();

    let store_flags = ["--store", store];
    // The turn in progress is not part of the history yet.
    let history = shown(dir.path(), &store_flags, &name);
    assert_eq!(roles(&history), ["user"], "{history:?}");
    let output = sessions(dir.path(), &["show", &name, "--store", store]);
    assert!(
        stderr(&output).contains("interrupted mid-turn"),
        "{output:?}"
    );
    // A new prompt is refused while the run waits to be resumed.
    let output = run(
        dir.path(),
        &server,
        &[
            "--session",
            &name,
            "--store",
            store,
            "--wait-session",
            "10",
            "hello?",
        ],
    );
    assert!(!output.status.success(), "{output:?}");
    assert!(stderr(&output).contains("--resume"), "{output:?}");

    let mut resume = vec!["--tools", "builtin", "--config", config.to_str().unwrap()];
    // A killed PostgreSQL holder's lock goes when the server sees its connection close: wait
    // for that rather than race it.
    resume.extend([
        "--session",
        &name,
        "--store",
        store,
        "--wait-session",
        "10",
        "--resume",
    ]);
    let output = run(dir.path(), &server, &resume);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("All done."), "{output:?}");
    // Neither call ran again: the finished one is never re-run, the interrupted one is not
    // idempotent.
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "run\n");
    assert_eq!(std::fs::read_to_string(&slow).unwrap(), "run\n");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let sent = conversation(bodies[1]["messages"].as_array().unwrap());
    assert_eq!(
        roles(sent),
        ["user", "assistant", "tool", "tool"],
        "{sent:?}"
    );
    assert_eq!(sent[2]["tool_call_id"], "call_count");
    assert_eq!(sent[3]["tool_call_id"], "call_slow");
    let interrupted = sent[3]["content"].as_str().unwrap();
    assert!(
        interrupted.contains("interrupted")
            && interrupted.contains("whether it had any effect is unknown"),
        "{interrupted}"
    );
    // The key the killed process gave the command is the one the resumed process names.
    let key = std::fs::read_to_string(&key_file).unwrap();
    assert!(key.starts_with("agk1_"), "{key:?}");
    assert!(interrupted.contains(&key), "{interrupted}");
    let history = shown(dir.path(), &store_flags, &name);
    assert_history_valid(&history);
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "tool", "assistant"]
    );

    // Nothing left to resume: said so, exit 0, no request.
    let output = run(dir.path(), &server, &resume);
    assert!(output.status.success(), "{output:?}");
    assert!(stderr(&output).contains("nothing to resume"), "{output:?}");
    assert_eq!(request_bodies(&server).await.len(), 2);
}

/// A config asking before writes (reads allowed).
fn ask_config(dir: &Path) -> PathBuf {
    let config = dir.join("ask.toml");
    std::fs::write(
        &config,
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
    )
    .unwrap();
    config
}

/// Without a terminal, a write suspends `agcore run --session` (exit 3, the pending request
/// printed and as a JSON event); a second process decides with `--approve` or `--deny`.
async fn suspend_then_decide(store: &str, approve: bool) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("in.txt"), "input").unwrap();
    let write = r#"{"path":"out.txt","content":"hi"}"#;
    let server = fake_openai(vec![
        Reply::Tools(vec![
            (
                "call_r".into(),
                "read_file".into(),
                r#"{"path":"in.txt"}"#.into(),
            ),
            ("call_w".into(), "write_file".into(), write.into()),
        ]),
        Reply::text("Finished."),
    ])
    .await;
    let config = ask_config(dir.path());
    let name = unique("suspend");
    let base = [
        "--tools",
        "builtin",
        "--workspace",
        dir.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--session",
        &name,
        "--store",
        store,
    ];
    let output = run(
        dir.path(),
        &server,
        &[&base[..], &["--json", "copy it"]].concat(),
    );
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let suspended = events.last().unwrap();
    assert_eq!(suspended["type"], "suspended", "{events:?}");
    assert_eq!(suspended["requests"][0]["call_id"], "call_w");
    assert_eq!(suspended["requests"][0]["tool"], "write_file");
    assert!(stderr(&output).contains("call_w"), "{output:?}");
    assert!(
        !dir.path().join("out.txt").exists(),
        "the write ran without approval"
    );
    let output = sessions(dir.path(), &["show", &name, "--store", store]);
    assert!(stderr(&output).contains("wait for approval"), "{output:?}");

    // Another process decides.
    let decision = if approve { "--approve" } else { "--deny" };
    let decide = [&base[..], &["--resume", decision, "call_w"]].concat();
    let output = run(dir.path(), &server, &decide);
    assert!(output.status.success(), "{output:?}");
    assert!(stdout(&output).contains("Finished."), "{output:?}");
    assert_eq!(dir.path().join("out.txt").exists(), approve);
    let bodies = request_bodies(&server).await;
    assert_eq!(
        bodies.len(),
        2,
        "one request per turn: no request while suspended"
    );
    let sent = conversation(bodies[1]["messages"].as_array().unwrap());
    assert_eq!(
        roles(sent),
        ["user", "assistant", "tool", "tool"],
        "{sent:?}"
    );
    assert!(
        sent[2]["content"].as_str().unwrap().contains("input"),
        "{sent:?}"
    );
    let answer = sent[3]["content"].as_str().unwrap();
    if approve {
        assert!(!answer.starts_with("Error"), "{answer}");
    } else {
        assert!(
            answer.contains("was not approved: the user denied this call"),
            "{answer}"
        );
    }
    // The history shows the decision.
    let history = shown(dir.path(), &["--store", store], &name);
    assert_history_valid(&history);
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool", "tool", "assistant"]
    );
    assert_eq!(history[3]["tool_call_id"], "call_w");
    assert_eq!(
        history[3].get("is_error").is_some(),
        !approve,
        "{history:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_is_approved_by_a_second_process() {
    let dir = tempfile::tempdir().unwrap();
    suspend_then_decide(&sqlite_store(dir.path()), true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_is_denied_by_a_second_process() {
    let dir = tempfile::tempdir().unwrap();
    suspend_then_decide(&sqlite_store(dir.path()), false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_suspended_run_is_approved_by_a_second_process_postgres() {
    let Some(url) = postgres_url() else { return };
    suspend_then_decide(&url, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_on_an_unknown_call_is_refused_and_the_run_stays_suspended() {
    let dir = tempfile::tempdir().unwrap();
    let store = sqlite_store(dir.path());
    let server = fake_openai(vec![
        Reply::tool(
            "call_w",
            "write_file",
            r#"{"path":"out.txt","content":"hi"}"#,
        ),
        Reply::text("Finished."),
    ])
    .await;
    let config = ask_config(dir.path());
    let name = unique("unknown");
    let base = [
        "--tools",
        "builtin",
        "--workspace",
        dir.path().to_str().unwrap(),
        "--config",
        config.to_str().unwrap(),
        "--session",
        &name,
        "--store",
        &store,
    ];
    let output = run(dir.path(), &server, &[&base[..], &["write it"]].concat());
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let output = run(
        dir.path(),
        &server,
        &[&base[..], &["--resume", "--approve", "call_x"]].concat(),
    );
    assert!(!output.status.success(), "{output:?}");
    assert!(
        stderr(&output).contains("no approval is pending for tool call call_x"),
        "{output:?}"
    );
    // Still suspended: without a decision (and no terminal) it suspends again; --yes approves.
    let output = run(dir.path(), &server, &[&base[..], &["--resume"]].concat());
    assert_eq!(output.status.code(), Some(3), "{output:?}");
    let output = run(
        dir.path(),
        &server,
        &[&base[..], &["--resume", "--yes"]].concat(),
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("out.txt")).unwrap(),
        "hi"
    );
    assert_eq!(request_bodies(&server).await.len(), 2);
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_kill_9_during_a_slow_tool_completes_without_rerunning_a_finished_call() {
    let dir = tempfile::tempdir().unwrap();
    resume_after_kill_9(&sqlite_store(dir.path())).await;
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_after_kill_9_during_a_slow_tool_postgres() {
    let Some(url) = postgres_url() else { return };
    resume_after_kill_9(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_runs_the_unanswered_calls_of_a_stored_history_then_asks_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let counter = dir.path().join("counter");
    let store_url = sqlite_store(dir.path());
    let store = agcore::session::open(&store_url).await.unwrap();
    let count = format!("echo run >> '{}'", counter.display());
    let messages = json!([
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
            "function": {"name": "run_command", "arguments": json!({"command": count}).to_string()}}]},
    ]);
    store
        .append(
            "open",
            0,
            &[Step::new(0, "messages", json!({ "messages": messages }))],
        )
        .await
        .unwrap();
    drop(store);
    let server = fake_openai(vec![Reply::text("Counted.")]).await;
    let config = shell_config(dir.path());
    let output = run(
        dir.path(),
        &server,
        &[
            "--tools",
            "builtin",
            "--config",
            config.to_str().unwrap(),
            "--session",
            "open",
            "--store",
            &store_url,
            "--resume",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(std::fs::read_to_string(&counter).unwrap(), "run\n");
    let history = shown(dir.path(), &["--store", &store_url], "open");
    assert_history_valid(&history);
    assert_eq!(roles(&history), ["user", "assistant", "tool", "assistant"]);
    assert_eq!(history[2]["tool_call_id"], "call_1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_request_leaves_the_session_as_the_library_left_the_history() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::Status(400, "bad request".to_owned())]).await;
    let store = sqlite_store(dir.path());
    let output = run(
        dir.path(),
        &server,
        &["--session", "f", "--store", &store, "hi"],
    );
    assert!(!output.status.success(), "{output:?}");
    // The prompt was stored before the request (a crash then resumes it); the library dropped
    // it when the request failed, and so does the session.
    assert!(shown(dir.path(), &["--store", &store], "f").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_store_comes_from_agcore_store_or_the_users_config() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("ok")]).await;
    let from_env = dir.path().join("env.db");
    let mut command = agcore(dir.path());
    command
        .env("AGCORE_STORE", format!("sqlite:{}", from_env.display()))
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--session", "e", "hi"]);
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert!(from_env.is_file());

    let from_config = dir.path().join("config.db");
    let user_config = dir.path().join(".home/config/agcore");
    std::fs::create_dir_all(&user_config).unwrap();
    std::fs::write(
        user_config.join("config.toml"),
        format!("[session]\nstore = \"sqlite:{}\"\n", from_config.display()),
    )
    .unwrap();
    // An untrusted workspace config naming another store is not read.
    let untrusted = dir.path().join("untrusted.db");
    std::fs::write(
        dir.path().join("agcore.toml"),
        format!("[session]\nstore = \"sqlite:{}\"\n", untrusted.display()),
    )
    .unwrap();
    let output = run(dir.path(), &server, &["--session", "c", "hi"]);
    assert!(output.status.success(), "{output:?}");
    assert!(from_config.is_file());
    assert!(!untrusted.exists());
    let list = sessions(dir.path(), &["list", "--json"]);
    let rows: Vec<Value> = serde_json::from_slice(&list.stdout).unwrap();
    assert_eq!(rows[0]["name"], "c", "{rows:?}");

    // A relative SQLite path in a config file is relative to that file.
    let elsewhere = dir.path().join("conf");
    std::fs::create_dir_all(&elsewhere).unwrap();
    std::fs::write(
        elsewhere.join("c.toml"),
        "[session]\nstore = \"sqlite:rel.db\"\n",
    )
    .unwrap();
    let config = elsewhere.join("c.toml");
    let output = run(
        dir.path(),
        &server,
        &["--config", config.to_str().unwrap(), "--session", "r", "hi"],
    );
    assert!(output.status.success(), "{output:?}");
    assert!(elsewhere.join("rel.db").is_file());
    assert!(!dir.path().join("rel.db").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_store_address_is_a_clear_error_without_the_password() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("never")]).await;
    let output = run(
        dir.path(),
        &server,
        &["--session", "s", "--store", "redis://h/0", "hi"],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(
        stderr(&output).contains("unsupported session store address"),
        "{output:?}"
    );
    let output = run(
        dir.path(),
        &server,
        &[
            "--session",
            "s",
            "--store",
            "postgres://me:hunter2@127.0.0.1:1/db",
            "hi",
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stderr(&output);
    assert!(
        text.contains("could not open the session store postgres://me@127.0.0.1:1/db"),
        "{text}"
    );
    assert!(!text.contains("hunter2"), "{text}");
    assert!(request_bodies(&server).await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_sqlite_file_is_a_clear_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("never")]).await;
    let file = dir.path().join("broken.db");
    std::fs::write(&file, "this is not a database, just text ".repeat(200)).unwrap();
    let store = format!("sqlite:{}", file.display());
    let output = run(
        dir.path(),
        &server,
        &["--session", "s", "--store", &store, "hi"],
    );
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let text = stderr(&output);
    assert!(text.contains("corrupt or not a SQLite database"), "{text}");
    assert!(text.contains(&file.display().to_string()), "{text}");
    let output = sessions(dir.path(), &["list", "--store", &store]);
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains(&file.display().to_string()),
        "{output:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_a_session_continues_and_stores_the_conversation() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("First."), Reply::text("Second.")]).await;
    let store = sqlite_store(dir.path());
    let first = run(
        dir.path(),
        &server,
        &["--session", "c", "--store", &store, "one"],
    );
    assert!(first.status.success(), "{first:?}");

    let mut command = agcore(dir.path());
    command
        .args(["chat", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--session", "c", "--store", &store]);
    let output = Command::from_std(command)
        .write_stdin("two\n")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    // The system prompt, then the first conversation.
    assert!(
        stdout(&output).contains("session c · 3 messages"),
        "{output:?}"
    );
    let bodies = request_bodies(&server).await;
    let sent = conversation(bodies[1]["messages"].as_array().unwrap());
    assert_eq!(roles(sent), ["user", "assistant", "user"], "{sent:?}");
    let history = shown(dir.path(), &["--store", &store], "c");
    assert_eq!(roles(&history), ["user", "assistant", "user", "assistant"]);
    assert_eq!(history[3]["content"], "Second.");
}

#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_during_a_tool_stores_what_the_library_kept() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_slow", "run_command", r#"{"command":"sleep 20"}"#),
        Reply::text("never"),
    ])
    .await;
    let config = shell_config(dir.path());
    let store = sqlite_store(dir.path());
    let mut command = agcore(dir.path());
    command
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--tools", "builtin", "--config"])
        .arg(&config)
        .args(["--session", "int", "--store", &store, "sleep"])
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let mut child = command.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while request_bodies(&server).await.is_empty() {
        assert!(Instant::now() < deadline, "the run never asked the model");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    tokio::time::sleep(Duration::from_millis(700)).await;
    let killed = std::process::Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < deadline, "Ctrl-C did not end the run");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(status.code(), Some(130));
    // The tool had started, so the library kept the turn with the call answered as cancelled.
    let history = shown(dir.path(), &["--store", &store], "int");
    assert_history_valid(&history);
    assert_eq!(
        roles(&history),
        ["user", "assistant", "tool"],
        "{history:?}"
    );
    let answer = history[2]["content"].as_str().unwrap();
    assert!(answer.contains("cancelled"), "{answer}");
}
