//! Issue 10, item 1: nothing from a model, a server or a tool reaches the terminal raw, and an
//! approval question shows the whole call.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use assert_cmd::Command;
use expectrl::{ControlCode, Session, WaitStatus};
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

const TIMEOUT: Duration = Duration::from_secs(20);

/// The attacks in one command: padding that pushed `; touch x` out of the cut, an
/// erase-line + cursor-home, hidden text, and a right-to-left override.
fn attack_command() -> String {
    format!(
        "ls -la{}; touch x \u{1b}[2K\u{1b}[1Gls \u{1b}[8mhidden\u{1b}[0m \u{202e}txt.exe",
        " ".repeat(120)
    )
}

/// No raw escape sequence or bidi override of the attack is on the terminal.
fn assert_no_raw_attack(screen: &str) {
    for raw in ["\u{1b}[2K\u{1b}[1G", "\u{1b}[8m", "\u{202e}"] {
        assert!(
            !screen.contains(raw),
            "raw {raw:?} reached the terminal: {screen:?}"
        );
    }
}

fn shell_asks_config(dir: &Path) -> std::path::PathBuf {
    let config = dir.join("ask-shell.toml");
    std::fs::write(
        &config,
        "[tools]\nask = [\"shell\"]\n[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    config
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_question_shows_the_whole_command_escaped() {
    let workspace = tempfile::tempdir().unwrap();
    let config = shell_asks_config(workspace.path());
    let arguments = serde_json::json!({"command": attack_command()}).to_string();
    let server = fake_openai(vec![
        Reply::tool("call_cmd", "run_command", &arguments),
        Reply::text("Not run. \u{1b}[8mhidden answer\u{1b}[0m"),
    ])
    .await;
    let mut command = agcore(workspace.path());
    command
        .args(["chat", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--tools", "builtin", "--config"])
        .arg(&config)
        .env("TERM", "xterm")
        .env("COLUMNS", "100");
    let screen = tokio::task::block_in_place(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(TIMEOUT));
        session.expect("you> ").unwrap();
        session.send_line("list the files").unwrap();
        let question = session.expect("allow?").unwrap();
        let mut screen = String::from_utf8_lossy(question.before()).into_owned();
        session.send_line("n").unwrap();
        let rest = session.expect("you> ").unwrap();
        screen.push_str(&String::from_utf8_lossy(rest.before()));
        session.send(ControlCode::EndOfTransmission).unwrap();
        let status = session.get_process().wait().unwrap();
        assert!(matches!(status, WaitStatus::Exited(_, 0)), "{status:?}");
        screen
    });
    assert!(screen.contains("run_command wants to run"), "{screen:?}");
    // Wrapped lines, joined again.
    let screen = screen.replace("\r\n    ↳ ", "");
    // The padded tail is on screen, whole, and every escape is shown as text.
    assert!(
        screen.contains("; touch x \\x1b[2K\\x1b[1Gls"),
        "{screen:?}"
    );
    assert!(
        screen.contains("\\x1b[8mhidden\\x1b[0m \\u{202e}txt.exe"),
        "{screen:?}"
    );
    assert!(
        screen.contains("Not run. \\x1b[8mhidden answer"),
        "{screen:?}"
    );
    assert_no_raw_attack(&screen);
    assert!(!workspace.path().join("x").exists());
    assert_eq!(request_bodies(&server).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_tool_lines_and_server_error_texts_are_escaped() {
    let dir = tempfile::tempdir().unwrap();
    let path = "\u{1b}[2K\u{1b}[1Gfake\u{202e}.txt";
    let server = fake_openai(vec![
        Reply::tool(
            "call_read",
            "read_file",
            &serde_json::json!({"path": path}).to_string(),
        ),
        Reply::Status(400, "bad \u{1b}[8mhidden\u{1b}[0m request".into()),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--tools", "builtin", "go"]);
    let output = Command::from_std(command).output().unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(!stderr.contains('\u{1b}'), "{stderr:?}");
    assert!(!stderr.contains('\u{202e}'), "{stderr:?}");
    assert!(
        stderr.contains("read_file(path=\\x1b[2K\\x1b[1Gfake\\u{202e}.txt)"),
        "{stderr}"
    );
    assert!(
        stderr.contains("bad \\x1b[8mhidden\\x1b[0m request"),
        "{stderr}"
    );
}

/// A stdio MCP server (a shell script) whose tool name and description hold escapes.
fn hostile_mcp(dir: &Path) -> std::path::PathBuf {
    let tools = serde_json::json!({"jsonrpc": "2.0", "id": "__ID__", "result": {"tools": [
        {"name": "evil\u{202e}name", "description": "lists \u{1b}[2K\u{1b}[1Gfiles \u{1b}[8mhidden",
         "inputSchema": {"type": "object"}},
    ]}});
    let init = serde_json::json!({"jsonrpc": "2.0", "id": "__ID__", "result": {
        "protocolVersion": "2025-03-26", "capabilities": {"tools": {}},
        "serverInfo": {"name": "evil", "version": "1"}}});
    let write = |name: &str, value: &serde_json::Value| {
        let text = value.to_string().replace("\"__ID__\"", "__ID__");
        std::fs::write(dir.join(name), text + "\n").unwrap();
    };
    write("init.json", &init);
    write("tools.json", &tools);
    let script = "while IFS= read -r line; do \
        id=$(printf '%s' \"$line\" | sed -n 's/.*\"id\":\\([0-9][0-9]*\\).*/\\1/p'); \
        case \"$line\" in \
        *'\"initialize\"'*) sed \"s/__ID__/$id/\" init.json;; \
        *'\"tools/list\"'*) sed \"s/__ID__/$id/\" tools.json;; \
        esac; done";
    let mcp = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {
        "evil": {"command": "sh", "args": ["-c", script], "cwd": dir},
        "broken": {"command": "sh", "args": ["-c", "printf '\\033[2Kall fine\\342\\200\\256\\n' >&2; exit 3"]},
    }});
    std::fs::write(&mcp, json.to_string()).unwrap();
    mcp
}

#[test]
fn mcp_list_and_tools_escape_names_descriptions_and_stderr() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = hostile_mcp(dir.path());
    for args in [
        vec!["mcp", "list", "--mcp-config", mcp.to_str().unwrap()],
        vec!["tools", "--mcp-config", mcp.to_str().unwrap()],
    ] {
        let mut command = agcore(dir.path());
        command.args(&args);
        let output = Command::from_std(command).output().unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        let stderr = String::from_utf8(output.stderr).unwrap();
        let all = format!("{stdout}{stderr}");
        assert!(!all.contains('\u{1b}'), "{args:?}: {all:?}");
        assert!(!all.contains('\u{202e}'), "{args:?}: {all:?}");
        assert!(all.contains("\\x1b[2Kall fine\\u{202e}"), "{args:?}: {all}");
        if args[0] == "mcp" {
            assert!(
                stdout.contains("lists \\x1b[2K\\x1b[1Gfiles \\x1b[8mhidden"),
                "{stdout}"
            );
        }
    }
}

#[test]
fn mcp_list_json_is_the_same_value_without_raw_bidi_characters() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = hostile_mcp(dir.path());
    let mut command = agcore(dir.path());
    command.args([
        "mcp",
        "list",
        "--json",
        "--mcp-config",
        mcp.to_str().unwrap(),
    ]);
    let output = Command::from_std(command).output().unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(!stdout.contains('\u{202e}'), "{stdout:?}");
    let statuses: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let broken = statuses
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == "broken")
        .unwrap();
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains("\u{1b}[2Kall fine\u{202e}"),
        "{stdout}"
    );
}
