//! `[hooks]` commands (issue 14, item 3) in `agcore run` against a fake OpenAI server on
//! 127.0.0.1: a command gets the JSON event on stdin and answers on stdout (deny, rewrite,
//! rewrite the output) or denies by exiting 2.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies};

/// Run `agcore run` with `hooks` (TOML) in a trusted `--config`; the transcript.
async fn run_with_hooks(dir: &Path, hooks: &str, replies: Vec<Reply>) -> (Vec<Value>, String) {
    run_with_hooks_and(dir, hooks, replies, &[]).await
}

/// [`run_with_hooks`] with `extra` arguments to `agcore run`.
async fn run_with_hooks_and(
    dir: &Path,
    hooks: &str,
    replies: Vec<Reply>,
    extra: &[&str],
) -> (Vec<Value>, String) {
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/inner.txt"), "x").unwrap();
    std::fs::write(dir.join("notes.txt"), "hello\n").unwrap();
    let config = dir.join("hooks.toml");
    std::fs::write(&config, hooks).unwrap();
    let server = fake_openai(replies).await;
    let file = dir.join("transcript.json");
    let mut command = agcore(dir);
    command.args(["run", "--base-url", &base_url(&server), "--model", "m"]);
    command
        .args(["--tools", "builtin", "--config"])
        .arg(&config);
    command.args(extra);
    command.arg("--transcript").arg(&file).arg("what is here?");
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(request_bodies(&server).await.len(), 2);
    let transcript: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_history_valid(&transcript);
    (transcript, String::from_utf8(output.stderr).unwrap())
}

fn replies() -> Vec<Reply> {
    vec![
        Reply::tool("call_list", "list_directory", r#"{"path":"."}"#),
        Reply::text("Done."),
    ]
}

fn tool_answer(transcript: &[Value]) -> &str {
    transcript.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap()
}

fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).unwrap();
    path.to_string_lossy().into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_command_reads_the_event_and_denies_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let event = dir.path().join("event.json");
    let hook = script(
        dir.path(),
        "guard.sh",
        &format!(
            "cat > '{}'\necho '{{\"decision\": \"deny\", \"reason\": \"listing is off\"}}'\n",
            event.display()
        ),
    );
    let hooks = format!(
        "[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{hook}\"]\ntools = [\"list_directory\"]\n"
    );
    let (transcript, _) = run_with_hooks(dir.path(), &hooks, replies()).await;
    assert_eq!(
        tool_answer(&transcript),
        format!(
            "Error: tool 'list_directory' was blocked by hook 'sh {hook}': listing is off. Do not retry this call as it is."
        )
    );
    let event: Value = serde_json::from_str(&std::fs::read_to_string(&event).unwrap()).unwrap();
    assert_eq!(event["event"], "before_tool_call");
    assert_eq!(event["tool"], "list_directory");
    assert_eq!(event["call_id"], "call_list");
    assert_eq!(event["arguments"]["path"], ".");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_2_denies_with_stderr_and_a_rewrite_runs_the_new_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let hook = script(dir.path(), "no.sh", "echo 'not today' >&2\nexit 2\n");
    let hooks = format!("[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{hook}\"]\n");
    let (transcript, _) = run_with_hooks(dir.path(), &hooks, replies()).await;
    let answer = tool_answer(&transcript);
    assert!(
        answer.contains(&format!("blocked by hook 'sh {hook}': not today")),
        "{answer}"
    );

    let dir = tempfile::tempdir().unwrap();
    let rewrite = script(
        dir.path(),
        "rewrite.sh",
        "cat > /dev/null\necho '{\"decision\": \"rewrite\", \"arguments\": {\"path\": \"sub\"}}'\n",
    );
    let redact = script(
        dir.path(),
        "redact.sh",
        "cat > /dev/null\necho '{\"output\": \"[listing redacted]\"}'\n",
    );
    let hooks = format!(
        "[hooks]\ntimeout_ms = 20000\n[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{rewrite}\"]\n\
         [[hooks.after_tool_call]]\ncommand = [\"sh\", \"{redact}\"]\n"
    );
    let (transcript, _) = run_with_hooks(dir.path(), &hooks, replies()).await;
    assert_eq!(tool_answer(&transcript), "[listing redacted]");

    // Without the redaction, the rewritten call lists `sub`.
    let dir = tempfile::tempdir().unwrap();
    let rewrite = script(
        dir.path(),
        "rewrite.sh",
        "cat > /dev/null\necho '{\"decision\": \"rewrite\", \"arguments\": {\"path\": \"sub\"}}'\n",
    );
    let hooks = format!("[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{rewrite}\"]\n");
    let (transcript, _) = run_with_hooks(dir.path(), &hooks, replies()).await;
    let answer = tool_answer(&transcript);
    assert!(
        answer.contains("inner.txt") && !answer.contains("notes.txt"),
        "{answer}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_hook_command_is_reported_and_denies_the_call() {
    let dir = tempfile::tempdir().unwrap();
    let hook = script(
        dir.path(),
        "broken.sh",
        "cat > /dev/null\necho 'not json'\n",
    );
    let hooks = format!("[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{hook}\"]\n");
    let (transcript, stderr) = run_with_hooks(dir.path(), &hooks, replies()).await;
    assert!(
        tool_answer(&transcript).contains("its stdout is not a JSON object"),
        "{transcript:?}"
    );
    assert!(stderr.contains("warning: hook command sh "), "{stderr}");
}

/// A `before_tool_call` hook that tries to write `hook-wrote.txt` in its directory and to
/// connect to `port` on 127.0.0.1, and denies the call with what happened as the reason.
fn probing_hook(dir: &Path, port: u16) -> String {
    let body = format!(
        r#"cat > /dev/null
if echo x > hook-wrote.txt 2>/dev/null; then W=wrote; else W=write-blocked; fi
if python3 -c "import socket; s = socket.socket(); s.settimeout(5); s.connect(('127.0.0.1', {port}))" 2>/dev/null; then C=connected; else C=connect-blocked; fi
printf '{{"decision": "deny", "reason": "%s %s"}}\n' "$W" "$C"
"#
    );
    let hook = script(dir, "probe.sh", &body);
    format!(
        "[[hooks.before_tool_call]]\ncommand = [\"sh\", \"{hook}\"]\n\
         sandbox = {{ mode = \"full\", network = \"on\" }}\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restricted_mode_runs_hooks_read_only_without_network_whatever_their_sandbox_says() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = || {
        let mut count = 0;
        while listener.accept().is_ok() {
            count += 1;
        }
        count
    };
    // The hook asks for no sandbox; without --restricted it gets it: it writes and connects
    // (the probe can tell).
    let dir = tempfile::tempdir().unwrap();
    let hooks = probing_hook(dir.path(), port);
    let (transcript, _) = run_with_hooks(dir.path(), &hooks, replies()).await;
    let answer = tool_answer(&transcript);
    assert!(answer.contains("wrote connected"), "{answer}");
    assert!(dir.path().join("hook-wrote.txt").exists());
    assert_eq!(accepted(), 1);
    // With --restricted the same hook can neither write nor connect.
    let dir = tempfile::tempdir().unwrap();
    let hooks = probing_hook(dir.path(), port);
    let (transcript, _) =
        run_with_hooks_and(dir.path(), &hooks, replies(), &["--restricted"]).await;
    let answer = tool_answer(&transcript);
    assert!(answer.contains("write-blocked connect-blocked"), "{answer}");
    assert!(!dir.path().join("hook-wrote.txt").exists());
    assert_eq!(accepted(), 0);
}
