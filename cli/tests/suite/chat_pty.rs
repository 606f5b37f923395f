//! `agcore chat` driven through a pseudo-terminal against a fake OpenAI server on 127.0.0.1:
//! a tool turn, a Ctrl-C cancel, /save, an approval question answered `n`, Ctrl-D.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use expectrl::{ControlCode, Session, WaitStatus};
use serde_json::Value;
use support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies, trust};

/// Generous: the pty test must not depend on the machine's speed.
const TIMEOUT: Duration = Duration::from_secs(20);

fn spawn_chat(command: std::process::Command) -> Session {
    let mut command = command;
    command.env("TERM", "xterm");
    let mut session = Session::spawn(command).unwrap();
    session.set_expect_timeout(Some(TIMEOUT));
    session
}

fn expect(session: &mut Session, text: &str) {
    if let Err(error) = session.expect(text) {
        panic!("expected {text:?} on the terminal: {error}");
    }
}

/// Wait (up to TIMEOUT) until `server` has received `count` requests.
fn wait_for_requests(handle: &tokio::runtime::Handle, server: &wiremock::MockServer, count: usize) {
    let deadline = std::time::Instant::now() + TIMEOUT;
    while handle.block_on(request_bodies(server)).len() < count {
        assert!(
            std::time::Instant::now() < deadline,
            "the server never got request {count}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_runs_a_tool_turn_cancels_a_slow_turn_saves_and_exits_on_ctrl_d() {
    let workspace = tempfile::tempdir().unwrap();
    std::fs::write(workspace.path().join("notes.txt"), "launch is on friday\n").unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_read", "read_file", r#"{"path":"notes.txt"}"#),
        Reply::text("The notes say the launch is on friday."),
        Reply::Delayed(
            Duration::from_secs(60),
            Box::new(Reply::text("far too late")),
        ),
    ])
    .await;
    let saved = workspace.path().join("history.json");

    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--tools", "builtin", "--workspace"]);
    command.arg(workspace.path());
    let handle = tokio::runtime::Handle::current();
    let saved_path = saved.clone();
    let server_ref = &server;
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "agcore chat · model fake-model");
        expect(&mut session, "you> ");

        // A turn with a tool call: the tool line, then the streamed answer.
        session.send_line("what do my notes say?").unwrap();
        expect(&mut session, "read_file(path=notes.txt) ok in");
        expect(&mut session, "The notes say the launch is on friday.");
        expect(&mut session, "you> ");

        // A slow turn, cancelled with Ctrl-C once the request is in flight.
        session.send_line("and the weather?").unwrap();
        wait_for_requests(&handle, server_ref, 3);
        session.send(ControlCode::EndOfText).unwrap();
        expect(&mut session, "cancelled");
        expect(&mut session, "you> ");

        session
            .send_line(format!("/save {}", saved_path.display()))
            .unwrap();
        expect(&mut session, "saved 5 messages");
        expect(&mut session, "you> ");

        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );

    let history: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_history_valid(&history);
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    // agcore's base instructions come first.
    assert_eq!(roles, ["system", "user", "assistant", "tool", "assistant"]);
    assert!(history[3]["content"].as_str().unwrap().contains("friday"));
    let text = serde_json::to_string(&history).unwrap();
    assert!(
        !text.contains("and the weather?"),
        "the cancelled prompt stayed in the history"
    );
    // The cancelled turn was the last request: nothing was sent after it.
    assert_eq!(request_bodies(&server).await.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_asks_before_a_write_and_the_denial_reaches_the_model() {
    let workspace = tempfile::tempdir().unwrap();
    let config = workspace.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
    )
    .unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_write",
            "write_file",
            r#"{"path":"out.txt","content":"hello"}"#,
        ),
        Reply::text("Understood, I did not write the file."),
    ])
    .await;

    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--tools", "builtin", "--config"]);
    command.arg(&config);
    command.arg("--workspace").arg(workspace.path());
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "you> ");
        session.send_line("write hello to out.txt").unwrap();
        expect(&mut session, "write_file wants to run: Write out.txt");
        expect(&mut session, "allow?");
        session.send_line("n").unwrap();
        expect(&mut session, "write_file(");
        expect(&mut session, "failed");
        expect(&mut session, "Understood, I did not write the file.");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    assert!(!workspace.path().join("out.txt").exists());

    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    let tool = messages.last().unwrap();
    assert_eq!(tool["role"], "tool");
    assert_eq!(tool["tool_call_id"], "call_write");
    let content = tool["content"].as_str().unwrap();
    assert!(content.contains("denied"), "{content}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_turn_prints_the_error_and_the_session_goes_on_with_slash_commands() {
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::Status(401, "Incorrect API key provided".into()),
        Reply::text("Hello again."),
    ])
    .await;
    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args([
        "--system",
        "Be terse.",
        "--tools",
        "builtin",
        "--restricted",
    ]);
    command.arg("--workspace").arg(workspace.path());
    let saved = workspace.path().join("after-clear.json");
    let saved_path = saved.clone();
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "profile default (all tools) · restricted");
        expect(&mut session, "you> ");
        session.send_line("hi").unwrap();
        expect(&mut session, "error: authentication failed (HTTP 401)");
        expect(&mut session, "you> ");
        // Up arrow: the line history brings back "hi".
        session.send("\x1b[A").unwrap();
        expect(&mut session, "you> hi");
        session.send_line("").unwrap();
        expect(&mut session, "Hello again.");
        expect(&mut session, "you> ");

        session.send_line("/tools").unwrap();
        expect(&mut session, "restricted: yes");
        expect(&mut session, "run_command");
        expect(&mut session, "you> ");
        session.send_line("/nosuch").unwrap();
        expect(&mut session, "unknown command /nosuch");
        expect(&mut session, "you> ");
        session.send_line("/help").unwrap();
        expect(&mut session, "/save FILE");
        expect(&mut session, "you> ");
        session.send_line("/usage").unwrap();
        expect(&mut session, "this chat   usage: ");
        expect(&mut session, "you> ");
        session.send_line("/clear").unwrap();
        expect(&mut session, "conversation cleared");
        expect(&mut session, "you> ");
        session
            .send_line(format!("/save {}", saved_path.display()))
            .unwrap();
        expect(&mut session, "saved 1 messages");
        expect(&mut session, "you> ");
        // Ctrl-C at the prompt clears the line, it does not end the session.
        session.send("half a line").unwrap();
        session.send(ControlCode::EndOfText).unwrap();
        expect(&mut session, "you> ");
        session.send_line("/exit").unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    // After /clear only the system prompt is left.
    let history: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0]["role"], "system");
    // agcore's base instructions, then --system.
    let system = history[0]["content"].as_str().unwrap();
    assert!(
        system.starts_with(agcore::prompt::BASE_INSTRUCTIONS),
        "{system}"
    );
    assert!(system.ends_with("\n\nBe terse."), "{system}");
    // The failed turn left nothing behind: the second request held only the second prompt.
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["content"], "hi");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_at_an_approval_question_denies_and_cancels_the_turn() {
    let workspace = tempfile::tempdir().unwrap();
    let config = workspace.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n",
    )
    .unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_write",
            "write_file",
            r#"{"path":"out.txt","content":"hello"}"#,
        ),
        Reply::text("This answer belongs to the next prompt."),
    ])
    .await;
    let saved = workspace.path().join("history.json");
    let saved_path = saved.clone();
    // ./agcore.toml is read without --config once trusted.
    trust(workspace.path());
    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--tools", "builtin"]);
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "you> ");
        session.send_line("write hello to out.txt").unwrap();
        expect(&mut session, "write_file wants to run: Write out.txt");
        expect(&mut session, "allow?");
        session.send(ControlCode::EndOfText).unwrap();
        expect(&mut session, "the user cancelled");
        expect(&mut session, "cancelled: the turn was dropped");
        expect(&mut session, "you> ");
        // The prompt reads again (no stray reader holds stdin).
        session
            .send_line(format!("/save {}", saved_path.display()))
            .unwrap();
        expect(&mut session, "saved 1 messages");
        expect(&mut session, "you> ");
        session.send_line("next prompt").unwrap();
        expect(&mut session, "This answer belongs to the next prompt.");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    assert!(!workspace.path().join("out.txt").exists());
    let history: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    // Only the system prompt is left.
    assert_eq!(history.len(), 1, "{history:?}");
    assert_eq!(history[0]["role"], "system");
    // The cancelled turn made one request; the next prompt starts afresh.
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 2);
    let messages = bodies[1]["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert_eq!(messages[1]["content"], "next prompt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn always_allows_the_tool_for_the_rest_of_the_session() {
    let workspace = tempfile::tempdir().unwrap();
    let config = workspace.path().join("agcore.toml");
    std::fs::write(
        &config,
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
    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--tools", "builtin"]);
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "you> ");
        session.send_line("write a").unwrap();
        expect(&mut session, "allow?");
        session.send_line("a").unwrap();
        expect(&mut session, "Wrote a.txt.");
        expect(&mut session, "you> ");
        // No second question: had one been asked, this turn would wait for an answer.
        session.send_line("write b").unwrap();
        expect(&mut session, "write_file(content=B, path=b.txt) ok in");
        expect(&mut session, "Wrote b.txt without asking.");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("a.txt")).unwrap(),
        "A"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("b.txt")).unwrap(),
        "B"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_while_the_first_turns_tool_runs_keeps_the_prompt_and_the_turn() {
    let workspace = tempfile::tempdir().unwrap();
    let config_dir = tempfile::tempdir().unwrap();
    let config = config_dir.path().join("agcore.toml");
    std::fs::write(
        &config,
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_slow",
            "run_command",
            r#"{"command":"touch started && sleep 30"}"#,
        ),
        Reply::text("never sent"),
    ])
    .await;
    let saved = workspace.path().join("history.json");
    let saved_path = saved.clone();
    let started = workspace.path().join("started");
    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
        "--tools",
        "builtin",
        "--config",
    ]);
    command.arg(&config);
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "you> ");
        session.send_line("start the slow job").unwrap();
        // Ctrl-C once the command is really running.
        let deadline = std::time::Instant::now() + TIMEOUT;
        while !started.exists() {
            assert!(std::time::Instant::now() < deadline, "the tool never ran");
            std::thread::sleep(Duration::from_millis(20));
        }
        session.send(ControlCode::EndOfText).unwrap();
        expect(&mut session, "the turn is kept");
        expect(&mut session, "you> ");
        session
            .send_line(format!("/save {}", saved_path.display()))
            .unwrap();
        expect(&mut session, "saved 4 messages");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    let history: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    assert_history_valid(&history);
    let roles: Vec<&str> = history
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool"]);
    assert_eq!(history[1]["content"], "start the slow job");
    assert!(
        history[3]["content"]
            .as_str()
            .unwrap()
            .starts_with("Error: cancelled before the tool finished")
    );
    assert_eq!(request_bodies(&server).await.len(), 1);
}

/// The interactive default (no permission settings, a terminal to ask): a write is asked, not
/// refused with "not in the allowed list", and `y` writes the file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fresh_chat_asks_before_a_write_instead_of_refusing_it() {
    let workspace = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_write",
            "write_file",
            r#"{"path":"out.txt","content":"hello"}"#,
        ),
        Reply::text("Written."),
    ])
    .await;

    let mut command = agcore(workspace.path());
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--tools", "builtin", "--workspace"]);
    command.arg(workspace.path());
    let status = tokio::task::block_in_place(move || {
        let mut session = spawn_chat(command);
        expect(&mut session, "you> ");
        session.send_line("write hello to out.txt").unwrap();
        expect(&mut session, "write_file wants to run: Write out.txt");
        expect(&mut session, "allow?");
        session.send_line("y").unwrap();
        expect(&mut session, "Written.");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.get_process().wait().unwrap()
    });
    assert!(
        matches!(status, WaitStatus::Exited(_, 0)),
        "chat exited with {status:?}"
    );
    assert_eq!(
        std::fs::read_to_string(workspace.path().join("out.txt")).unwrap(),
        "hello"
    );
}
