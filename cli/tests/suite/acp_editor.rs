//! `agcore acp` driven by an editor made of the official ACP Python SDK
//! (`cli/tests/fixtures/acp/acp_client.py`, the judge of every message's shape) against a fake
//! OpenAI server on 127.0.0.1: a tool call with its permission allowed and rejected (the file is
//! and is not written), cancel while a permission question is open, load in a new process with
//! the conversation replayed, an editor's MCP server (mcp-server-time from PyPI), and bad input
//! on the raw wire.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{
    self, Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies,
};

/// The SDK's Python, or a skip (a failure on CI).
fn python() -> Option<PathBuf> {
    let venv = support::mcp::venv();
    let python = venv.join("bin/python");
    let ready = python.exists()
        && Command::new(&python)
            .args(["-c", "import acp"])
            .status()
            .is_ok_and(|status| status.success());
    support::require::require(
        "the ACP Python SDK (agent-client-protocol)",
        "run `.ci/install-mcp-servers.sh` (a venv in .ci/venv) or set AGCORE_TEST_VENV",
        ready.then_some(python),
    )
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/acp/acp_client.py")
}

/// Run the editor: `scenario` against `agcore acp ARGS` in `workspace`; its JSON report.
fn editor(python: &Path, scenario: &str, workspace: &Path, session: &str, args: &[&str]) -> Value {
    // The agent's environment is the one `support::agcore` gives the binary (its own HOME and
    // data directory), passed through the editor.
    let template = agcore(workspace);
    let mut command = Command::new(python);
    for (name, value) in template.get_envs() {
        match value {
            Some(value) => command.env(name, value),
            None => command.env_remove(name),
        };
    }
    // The editor's MCP server (mcp-server-time) is found on the venv's PATH.
    let bin = python.parent().unwrap();
    let path = std::env::join_paths(std::iter::once(bin.to_owned()).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    command
        .env("PATH", path)
        .arg(script())
        .args([
            scenario,
            workspace.to_str().unwrap(),
            session,
            env!("CARGO_BIN_EXE_agcore"),
        ])
        .args(args)
        .current_dir(workspace);
    let output = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the editor failed: {}\nstdout: {stdout}\nstderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    let report: Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|error| panic!("the editor's report is not JSON ({error}): {stdout}"));
    assert_eq!(
        report["errors"],
        json!([]),
        "the SDK rejected messages; stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    report
}

fn model_args(server: &wiremock::MockServer) -> Vec<String> {
    vec![
        "--base-url".to_owned(),
        base_url(server),
        "--model".to_owned(),
        "fake-model".to_owned(),
        "--tools".to_owned(),
        "builtin".to_owned(),
    ]
}

fn updates_of<'a>(report: &'a Value, kind: &str) -> Vec<&'a Value> {
    report["updates"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|update| update["sessionUpdate"] == kind)
        .collect()
}

fn text_of(report: &Value, kind: &str) -> String {
    updates_of(report, kind)
        .iter()
        .filter_map(|update| update["content"]["text"].as_str())
        .collect()
}

/// The last update of call `id` that sets a status.
fn final_status(report: &Value, id: &str) -> String {
    updates_of(report, "tool_call_update")
        .iter()
        .filter(|update| update["toolCallId"] == id)
        .rev()
        .find_map(|update| update["status"].as_str())
        .unwrap_or_else(|| panic!("no status update for {id}: {report}"))
        .to_owned()
}

fn write_call() -> Vec<Reply> {
    vec![
        Reply::tool(
            "call_write",
            "write_file",
            r#"{"path":"out.txt","content":"hello"}"#,
        ),
        Reply::text("Written."),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_write_asks_the_editor_shows_a_diff_and_writes_the_file() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("out.txt"), "old\n").unwrap();
    let server = fake_openai(write_call()).await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "allow", workspace.path(), "-", &args));

    assert_eq!(report["initialize"]["protocolVersion"], 1);
    assert_eq!(
        report["initialize"]["agentCapabilities"]["loadSession"],
        true
    );
    // Images are offered only for a model configured to read them (see the raw-wire test).
    assert_eq!(
        report["initialize"]["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    assert_eq!(
        report["initialize"]["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    assert_eq!(report["stops"], json!(["end_turn"]));
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("out.txt")).unwrap(),
        "hello"
    );
    // One question, with the four options, about the call the editor was shown.
    let permissions = report["permissions"].as_array().unwrap();
    assert_eq!(permissions.len(), 1, "{report}");
    assert_eq!(permissions[0]["tool_call"]["toolCallId"], "call_write");
    let kinds: Vec<&str> = permissions[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|option| option["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        ["allow_once", "allow_always", "reject_once", "reject_always"]
    );
    let calls = updates_of(&report, "tool_call");
    assert_eq!(calls.len(), 1, "{report}");
    assert_eq!(calls[0]["toolCallId"], "call_write");
    assert_eq!(calls[0]["kind"], "edit");
    assert_eq!(final_status(&report, "call_write"), "completed");
    // The finished call carries the diff of the file, old and new text, at its absolute path.
    let diff = updates_of(&report, "tool_call_update")
        .iter()
        .filter_map(|update| update["content"].as_array())
        .flatten()
        .find(|content| content["type"] == "diff")
        .cloned()
        .unwrap_or_else(|| panic!("no diff: {report}"));
    assert_eq!(diff["oldText"], "old\n");
    assert_eq!(diff["newText"], "hello");
    assert!(Path::new(diff["path"].as_str().unwrap()).is_absolute());
    assert_eq!(text_of(&report, "agent_message_chunk"), "Written.");
}

/// The run parses a call's arguments as they stream (tool-events): the card's title improves
/// from the tool's name to the tool's own title while the call is still pending.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_calls_title_improves_before_it_runs() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    // Long enough that the first half of the arguments (the fake streams two halves) holds the
    // whole path and is parsed at once.
    let content = "a".repeat(2000);
    let arguments = json!({"path": "long.txt", "content": content}).to_string();
    let server = fake_openai(vec![
        Reply::tool("call_long", "write_file", &arguments),
        Reply::text("Written."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "allow", workspace.path(), "-", &args));
    let updates = report["updates"].as_array().unwrap();
    let first = updates
        .iter()
        .position(|update| update["sessionUpdate"] == "tool_call")
        .unwrap();
    assert_eq!(updates[first]["title"], "write_file");
    let improved = updates
        .iter()
        .position(|update| {
            update["sessionUpdate"] == "tool_call_update"
                && update["status"] == "pending"
                && update["title"] == "Write long.txt"
        })
        .unwrap_or_else(|| panic!("no streamed title: {report}"));
    let running = updates
        .iter()
        .position(|update| update["status"] == "in_progress")
        .unwrap();
    assert!(first < improved && improved < running, "{report}");
    assert_eq!(final_status(&report, "call_long"), "completed");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("long.txt")).unwrap(),
        content
    );
}

/// An editor that offers `fs/read_text_file`: `read_file` reads its (unsaved) buffer, not the
/// disk; a path out of the workspace is refused before the editor is asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_goes_through_the_editors_buffer_confined_to_the_workspace() {
    let Some(python) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "launch is on friday\n").unwrap();
    std::fs::write(root.path().join("outside.txt"), "secret\n").unwrap();
    let server = fake_openai(vec![
        Reply::Tools(vec![
            (
                "call_in".to_owned(),
                "read_file".to_owned(),
                r#"{"path":"notes.txt"}"#.to_owned(),
            ),
            (
                "call_out".to_owned(),
                "read_file".to_owned(),
                r#"{"path":"../outside.txt"}"#.to_owned(),
            ),
        ]),
        Reply::text("Monday, then."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = tokio::task::block_in_place(|| editor(&python, "buffer", &workspace, "-", &args));
    assert_eq!(report["stops"], json!(["end_turn"]));
    // One read reached the editor: the file inside, by its absolute path.
    let reads = report["reads"].as_array().unwrap();
    assert_eq!(reads.len(), 1, "{report}");
    let canonical = std::fs::canonicalize(workspace.join("notes.txt")).unwrap();
    assert_eq!(reads[0]["path"], canonical.display().to_string());
    assert_eq!(final_status(&report, "call_in"), "completed");
    assert_eq!(final_status(&report, "call_out"), "failed");
    let bodies = request_bodies(&server).await;
    let messages = bodies[1]["messages"].as_array().unwrap();
    let answer = |id: &str| {
        messages
            .iter()
            .find(|message| message["tool_call_id"] == id)
            .unwrap()["content"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let inside = answer("call_in");
    assert!(inside.contains("moved to monday"), "{inside}");
    assert!(!inside.contains("friday"), "{inside}");
    assert!(!answer("call_out").contains("secret"));
}

/// An editor that offers its file system and terminals: `edit_file` edits its (unsaved)
/// buffer and `write_file` writes a buffer — the disk is not touched —, and `run_command` runs
/// in its terminal, under agcore's sandbox helper, embedded in the call's card.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_writes_and_commands_go_through_the_editor() {
    let Some(python) = python() else { return };
    let root = tempfile::tempdir().unwrap();
    let workspace = root.path().join("project");
    std::fs::create_dir(&workspace).unwrap();
    std::fs::write(workspace.join("notes.txt"), "launch is on friday\n").unwrap();
    let server = fake_openai(vec![
        Reply::Tools(vec![
            (
                "call_edit".to_owned(),
                "edit_file".to_owned(),
                r#"{"path":"notes.txt","old_string":"monday","new_string":"tuesday"}"#.to_owned(),
            ),
            (
                "call_write".to_owned(),
                "write_file".to_owned(),
                r#"{"path":"sub/new.txt","content":"fresh"}"#.to_owned(),
            ),
            (
                "call_escape".to_owned(),
                "write_file".to_owned(),
                r#"{"path":"../outside.txt","content":"no"}"#.to_owned(),
            ),
            (
                "call_run".to_owned(),
                "run_command".to_owned(),
                r#"{"command":"echo from-the-terminal"}"#.to_owned(),
            ),
        ]),
        Reply::text("Done."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report = tokio::task::block_in_place(|| editor(&python, "editor", &workspace, "-", &args));
    assert_eq!(report["stops"], json!(["end_turn"]), "{report}");
    let canonical = std::fs::canonicalize(&workspace).unwrap();
    let notes = canonical.join("notes.txt").display().to_string();
    let new = canonical.join("sub/new.txt").display().to_string();
    // The edit started from the editor's buffer and landed there; the disk is as it was.
    assert_eq!(
        report["buffers"][&notes], "unsaved: the launch moved to tuesday\n",
        "{report}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.join("notes.txt")).unwrap(),
        "launch is on friday\n"
    );
    assert_eq!(report["buffers"][&new], "fresh", "{report}");
    assert!(!workspace.join("sub/new.txt").exists());
    // The path out of the workspace never reached the editor.
    assert!(!root.path().join("outside.txt").exists());
    assert!(
        !report["writes"].to_string().contains("outside"),
        "{report}"
    );
    assert_eq!(final_status(&report, "call_escape"), "failed");
    assert_eq!(final_status(&report, "call_edit"), "completed");
    let diff = updates_of(&report, "tool_call_update")
        .iter()
        .filter(|update| update["toolCallId"] == "call_edit")
        .filter_map(|update| update["content"].as_array())
        .flatten()
        .find(|content| content["type"] == "diff")
        .cloned()
        .unwrap_or_else(|| panic!("no diff: {report}"));
    assert_eq!(diff["oldText"], "unsaved: the launch moved to monday\n");
    assert_eq!(diff["newText"], "unsaved: the launch moved to tuesday\n");
    // One terminal, running the sandbox helper with the command, released at the end.
    let terminals = report["terminals"].as_array().unwrap();
    assert_eq!(terminals.len(), 1, "{report}");
    let argv = terminals[0]["args"].to_string();
    assert!(argv.contains("__sandbox-exec"), "{argv}");
    assert!(argv.contains("echo from-the-terminal"), "{argv}");
    assert_eq!(terminals[0]["cwd"], canonical.display().to_string());
    assert_eq!(terminals[0]["released"], true, "{report}");
    let card = updates_of(&report, "tool_call_update")
        .iter()
        .filter(|update| update["toolCallId"] == "call_run")
        .filter_map(|update| update["content"].as_array())
        .flatten()
        .find(|content| content["type"] == "terminal")
        .cloned()
        .unwrap_or_else(|| panic!("no terminal in the card: {report}"));
    assert_eq!(card["terminalId"], terminals[0]["id"]);
    assert_eq!(final_status(&report, "call_run"), "completed");
    let bodies = request_bodies(&server).await;
    let messages = bodies[1]["messages"].as_array().unwrap();
    let answer = messages
        .iter()
        .find(|message| message["tool_call_id"] == "call_run")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer.contains("from-the-terminal"), "{answer}");
}

/// Cancel while a command runs in the editor's terminal: the turn ends `cancelled` at once, and
/// the terminal is killed and released (no command outlives its call).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_while_a_command_runs_in_the_editors_terminal_kills_it() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::tool(
        "call_sleep",
        "run_command",
        r#"{"command":"sleep 30"}"#,
    )])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let started = std::time::Instant::now();
    let report = tokio::task::block_in_place(|| {
        editor(&python, "editor_cancel", workspace.path(), "-", &args)
    });
    assert_eq!(report["stops"], json!(["cancelled"]), "{report}");
    assert!(started.elapsed() < Duration::from_secs(20), "{report}");
    let terminals = report["terminals"].as_array().unwrap();
    assert_eq!(terminals.len(), 1, "{report}");
    assert_eq!(terminals[0]["killed"], true, "{report}");
    assert_eq!(terminals[0]["released"], true, "{report}");
    assert_eq!(final_status(&report, "call_sleep"), "failed");
}

/// "Allow always" is asked once: the session's later calls of the tool run without a
/// question, and so do they after the session is loaded in a new agent process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_always_is_remembered_for_the_session_and_after_a_load() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_a", "write_file", r#"{"path":"a.txt","content":"a"}"#),
        Reply::tool("call_b", "write_file", r#"{"path":"b.txt","content":"b"}"#),
        Reply::text("Both written."),
        Reply::tool("call_c", "write_file", r#"{"path":"c.txt","content":"c"}"#),
        Reply::text("Written again."),
    ])
    .await;
    let store = format!("sqlite:{}", workspace.path().join("sessions.db").display());
    let mut args = model_args(&server);
    args.extend(["--store".to_owned(), store]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first =
        tokio::task::block_in_place(|| editor(&python, "always", workspace.path(), "-", &args));
    assert_eq!(first["stops"], json!(["end_turn"]), "{first}");
    assert_eq!(first["permissions"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("a.txt")).unwrap(),
        "a"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("b.txt")).unwrap(),
        "b"
    );
    let session = first["session"].as_str().unwrap().to_owned();
    // A new process that would reject any question: none is asked, the write happens.
    let again = tokio::task::block_in_place(|| {
        editor(&python, "load_prompt", workspace.path(), &session, &args)
    });
    assert_eq!(again["stops"], json!(["end_turn"]), "{again}");
    assert_eq!(again["permissions"], json!([]), "{again}");
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("c.txt")).unwrap(),
        "c"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_write_is_not_written_and_the_model_is_told() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(write_call()).await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "reject", workspace.path(), "-", &args));
    assert_eq!(report["stops"], json!(["end_turn"]));
    assert!(!workspace.path().join("out.txt").exists());
    assert_eq!(final_status(&report, "call_write"), "failed");
    let bodies = request_bodies(&server).await;
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(tool["role"], "tool");
    assert!(
        tool["content"].as_str().unwrap().contains("rejected"),
        "{tool}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_during_a_permission_question_ends_the_turn_and_the_session_goes_on() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_write",
            "write_file",
            r#"{"path":"out.txt","content":"hello"}"#,
        ),
        Reply::text("Second answer."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "cancel", workspace.path(), "-", &args));
    assert_eq!(
        report["stops"],
        json!(["cancelled", "end_turn"]),
        "{report}"
    );
    assert!(!workspace.path().join("out.txt").exists());
    assert_eq!(final_status(&report, "call_write"), "failed");
    assert!(text_of(&report, "agent_message_chunk").contains("Second answer."));
    // The next request's history is wire-valid: the cancelled call is answered.
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    assert_history_valid(bodies[1]["messages"].as_array().unwrap());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_loads_in_a_new_process_and_replays_its_conversation() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "launch is on friday\n").unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_read", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("The notes say friday."),
    ])
    .await;
    let store = format!("sqlite:{}", workspace.path().join("sessions.db").display());
    let mut args = model_args(&server);
    args.extend(["--store".to_owned(), store]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let first =
        tokio::task::block_in_place(|| editor(&python, "allow", workspace.path(), "-", &args));
    // A read needs no question.
    assert_eq!(first["permissions"], json!([]));
    assert_eq!(first["stops"], json!(["end_turn"]));
    let session = first["session"].as_str().unwrap().to_owned();

    let loaded =
        tokio::task::block_in_place(|| editor(&python, "load", workspace.path(), &session, &args));
    assert_eq!(text_of(&loaded, "user_message_chunk"), "do the thing");
    let calls = updates_of(&loaded, "tool_call");
    assert_eq!(calls.len(), 1, "{loaded}");
    assert_eq!(calls[0]["toolCallId"], "call_read");
    assert_eq!(calls[0]["kind"], "read");
    assert_eq!(final_status(&loaded, "call_read"), "completed");
    assert!(loaded.to_string().contains("launch is on friday"));
    assert_eq!(
        text_of(&loaded, "agent_message_chunk"),
        "The notes say friday."
    );
    // Nothing was sent to the model by the load.
    assert_eq!(request_bodies(&server).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_editors_mcp_server_joins_the_sessions_tools() {
    let Some(python) = python() else { return };
    if support::mcp::python_script("mcp-server-time").is_none() {
        return;
    }
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_time", "get_current_time", r#"{"timezone":"UTC"}"#),
        Reply::text("It is now."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "mcp", workspace.path(), "-", &args));
    assert_eq!(report["stops"], json!(["end_turn"]));
    assert_eq!(final_status(&report, "call_time"), "completed", "{report}");
    let bodies = request_bodies(&server).await;
    let tools = bodies[0]["tools"].to_string();
    assert!(tools.contains("get_current_time"), "{tools}");
    let answer = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert!(
        answer["content"].as_str().unwrap().contains("UTC"),
        "{answer}"
    );
}

/// A tool that reports progress while it works, seen in the editor: server-everything's
/// long-running operation sends `notifications/progress`, which become the call's
/// `tool_call_update`s (a progress line on its card) before the call completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tools_progress_updates_its_card_in_the_editor() {
    let Some(python) = python() else { return };
    let Some(everything) =
        support::mcp::npm_script("@modelcontextprotocol/server-everything", "dist/index.js")
    else {
        return;
    };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "long1",
            "trigger-long-running-operation",
            r#"{"duration":0.6,"steps":3}"#,
        ),
        Reply::text("It ran."),
    ])
    .await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let everything = everything.display().to_string();
    let report = tokio::task::block_in_place(|| {
        editor(
            &python,
            "mcp_progress",
            workspace.path(),
            &everything,
            &args,
        )
    });
    assert_eq!(report["stops"], json!(["end_turn"]), "{report}");
    assert_eq!(final_status(&report, "long1"), "completed", "{report}");
    let updates: Vec<String> = updates_of(&report, "tool_call_update")
        .into_iter()
        .filter(|update| update["toolCallId"] == "long1")
        .map(Value::to_string)
        .collect();
    for step in ["progress: 1/3", "progress: 2/3", "progress: 3/3"] {
        assert!(
            updates.iter().any(|update| update.contains(step)),
            "no update says {step}: {updates:#?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modes_are_the_tool_profiles_and_an_unknown_one_is_refused() {
    let Some(python) = python() else { return };
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("unused")]).await;
    let args = model_args(&server);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let report =
        tokio::task::block_in_place(|| editor(&python, "modes", workspace.path(), "-", &args));
    let switched = updates_of(&report, "current_mode_update");
    assert_eq!(switched.len(), 1, "{report}");
    assert_eq!(switched[0]["currentModeId"], "ask");
    let refused = report["unknown_mode"].as_str().unwrap();
    assert!(refused.contains("no mode"), "{refused}");
}

/// The judge can fail: the SDK's models reject malformed updates (a tool call or a call update
/// without its id, a text block without text).
#[test]
fn the_sdk_judge_rejects_malformed_updates() {
    let Some(python) = python() else { return };
    let output = Command::new(python)
        .arg(script())
        .args(["selfcheck", "-", "-", "-"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(report["rejected"], 3, "{report}");
    assert_eq!(report["of"], 3);
    assert_eq!(report["good"], "s");
}

/// Reads stdout lines on a thread, so every wait has a deadline.
fn lines(stdout: std::process::ChildStdout) -> std::sync::mpsc::Receiver<String> {
    let (sender, receiver) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sender.send(line).is_err() {
                break;
            }
        }
    });
    receiver
}

fn next(receiver: &std::sync::mpsc::Receiver<String>) -> Value {
    let line = receiver
        .recv_timeout(Duration::from_secs(30))
        .expect("no answer from agcore acp");
    serde_json::from_str(&line)
        .unwrap_or_else(|error| panic!("not JSON on stdout ({error}): {line}"))
}

#[test]
fn bad_input_gets_json_rpc_errors_and_the_agent_keeps_serving() {
    let workspace = tempfile::tempdir().unwrap();
    let mut child = agcore(workspace.path())
        .args(["acp", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = lines(child.stdout.take().unwrap());
    let mut send = |line: &str| {
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    };

    send("this is not json");
    assert_eq!(next(&answers)["error"]["code"], -32700);
    send(r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"one"}}"#);
    let bad = next(&answers);
    assert_eq!(bad["id"], 2);
    assert_eq!(bad["error"]["code"], -32602);
    // Still serving: a good initialize is answered.
    send(r#"{"jsonrpc":"2.0","id":4,"method":"initialize","params":{"protocolVersion":1}}"#);
    let good = next(&answers);
    assert_eq!(good["id"], 4);
    assert_eq!(good["result"]["protocolVersion"], 1);
    send(r#"{"jsonrpc":"2.0","id":1,"method":"no/such_method","params":{}}"#);
    let unknown = next(&answers);
    assert_eq!(unknown["id"], 1);
    assert_eq!(unknown["error"]["code"], -32601);
    send(
        r#"{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"nope","prompt":[]}}"#,
    );
    let missing = next(&answers);
    assert_eq!(missing["id"], 3);
    assert_eq!(missing["error"]["code"], -32602, "{missing}");
    // A line over the transport's bound (32 MiB) is a parse error, not a crash or a hang.
    let oversized = format!(
        r#"{{"jsonrpc":"2.0","id":6,"method":"initialize","params":{{"protocolVersion":1,"x":"{}"}}}}"#,
        "a".repeat(33 * 1024 * 1024)
    );
    send(&oversized);
    assert_eq!(next(&answers)["error"]["code"], -32700);
    send(r#"{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":1}}"#);
    assert_eq!(next(&answers)["id"], 7);
    // A relative cwd is bad params, not a crash.
    send(
        r#"{"jsonrpc":"2.0","id":5,"method":"session/new","params":{"cwd":"relative/dir","mcpServers":[]}}"#,
    );
    let relative = next(&answers);
    assert_eq!(relative["id"], 5);
    assert_eq!(relative["error"]["code"], -32602);

    drop(stdin);
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "agcore acp exited with {status}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "agcore acp did not exit at EOF"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `initialize` on the raw wire with `args`: its result.
fn initialize_with(workspace: &Path, args: &[&str]) -> Value {
    let mut child = agcore(workspace)
        .args(["acp", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let answers = lines(child.stdout.take().unwrap());
    stdin
        .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1}}\n")
        .unwrap();
    let answer = next(&answers);
    drop(stdin);
    child.wait().unwrap();
    answer["result"].clone()
}

#[test]
fn image_prompts_are_offered_when_the_model_reads_images() {
    let workspace = tempfile::tempdir().unwrap();
    let plain = initialize_with(workspace.path(), &[]);
    assert_eq!(
        plain["agentCapabilities"]["promptCapabilities"]["image"],
        false
    );
    let config = workspace.path().join("vision.toml");
    std::fs::write(&config, "[model]\naccepts_images = true\n").unwrap();
    let vision = initialize_with(workspace.path(), &["--config", config.to_str().unwrap()]);
    assert_eq!(
        vision["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{vision}"
    );
}
