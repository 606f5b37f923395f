//! `agcore demo`, `agcore tools`, `agcore mcp list/call` and config-file errors, end to end.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use agcore::llm::StreamEvent;
use assert_cmd::Command;
use serde_json::Value;
use support::{agcore, trust};

fn output(dir: &Path, args: &[&str]) -> std::process::Output {
    let mut command = agcore(dir);
    command.args(args);
    Command::from_std(command).output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[test]
fn demo_runs_to_completion_with_the_final_answer_and_the_denial() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(dir.path(), &["demo"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(stdout.contains("MODEL IS SCRIPTED"), "{stdout}");
    assert!(
        stdout.contains("Project Aurora ships on **2026-12-15**"),
        "{stdout}"
    );
    assert!(stdout.contains("sunny, 21.5 °C"), "{stdout}");
    assert!(
        stderr.contains("✗ run_command(command=rm -rf build) failed"),
        "{stderr}"
    );
    assert!(stderr.contains("permission denied"), "{stderr}");
    assert!(
        stdout.contains("The build directory is still there: true"),
        "{stdout}"
    );
}

#[test]
fn demo_json_prints_events_only() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(dir.path(), &["demo", "--json"]);
    assert!(out.status.success(), "{out:?}");
    let events: Vec<StreamEvent> = text(&out.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let denied = events.iter().any(|e| {
        matches!(e, StreamEvent::ToolExecutionCompleted { tool_name, is_error: true, output, .. }
            if tool_name == "run_command" && output.as_str().unwrap_or_default().contains("permission denied"))
    });
    assert!(denied, "no denial among {events:?}");
    let mcp_ok = events.iter().any(|e| {
        matches!(e, StreamEvent::ToolExecutionCompleted { tool_name, is_error: false, .. }
            if tool_name == "get_weather")
    });
    assert!(mcp_ok, "the MCP tool did not run");
    let answer: String = events
        .iter()
        .filter_map(|e| match e {
            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    assert!(answer.contains("Project Aurora ships on"), "{answer}");
    assert!(matches!(
        events.last(),
        Some(StreamEvent::TurnComplete { .. })
    ));
}

#[test]
fn tools_json_in_restricted_mode_hides_run_command_and_fetch_url_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(
        dir.path(),
        &["tools", "--tools", "builtin", "--restricted", "--json"],
    );
    assert!(out.status.success(), "{out:?}");
    let json: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["report"]["restricted"], true);
    let tools = json["report"]["tools"].as_array().unwrap();
    for name in ["run_command", "fetch_url"] {
        let tool = tools.iter().find(|t| t["name"] == name).unwrap();
        assert_eq!(tool["exposed"], false, "{tool}");
        let gates: Vec<&str> = tool["hidden_because"]
            .as_array()
            .unwrap()
            .iter()
            .map(|reason| reason["gate"].as_str().unwrap())
            .collect();
        assert!(gates.contains(&"restricted_mode"), "{name}: {gates:?}");
    }
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["exposed"], true);
}

#[test]
fn tools_human_report() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(
        dir.path(),
        &["tools", "--tools", "builtin", "--workspace", "."],
    );
    assert!(out.status.success(), "{out:?}");
    insta::assert_snapshot!(text(&out.stdout));
}

#[test]
fn an_unknown_profile_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(
        dir.path(),
        &["tools", "--tools", "builtin", "--profile", "nosuch"],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: unknown profile 'nosuch'; profiles are: ask, write, minimal"
    );
}

fn demo_mcp_config(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server"],
    }}});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

#[test]
fn mcp_list_shows_the_demo_servers_tools() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_mcp_config(dir.path());
    let out = output(
        dir.path(),
        &["mcp", "list", "--mcp-config", config.to_str().unwrap()],
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    // A stdio server keeps the handshake: the version it negotiated is shown.
    assert!(
        stdout.starts_with("demo: connected, 3 tool(s) — MCP 2025-11-25\n"),
        "{stdout}"
    );
    for tool in ["get_weather", "echo", "add"] {
        assert!(
            stdout.lines().any(|l| l.trim_start().starts_with(tool)),
            "{stdout}"
        );
    }
}

/// The demo server over streamable HTTP (rmcp's server), killed on drop.
struct HttpDemo(std::process::Child, String);

impl HttpDemo {
    fn start(args: &[&str]) -> Self {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_agcore"))
            .args(["mcp-demo-server", "--http", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap()
            .to_owned();
        HttpDemo(child, url)
    }
}

impl Drop for HttpDemo {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn mcp_list_shows_each_servers_protocol_generation_and_cache_hint() {
    let dir = tempfile::tempdir().unwrap();
    let modern = HttpDemo::start(&["--ttl-ms", "60000"]);
    let legacy = HttpDemo::start(&["--max-protocol", "2025-11-25"]);
    let file = dir.path().join("mcp.json");
    let json = serde_json::json!({"mcpServers": {
        "new": {"type": "http", "url": modern.1},
        "old": {"type": "http", "url": legacy.1},
    }});
    std::fs::write(&file, json.to_string()).unwrap();
    let config = file.to_str().unwrap();
    let out = output(dir.path(), &["mcp", "list", "--mcp-config", config]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains(
            "new: connected, 3 tool(s) — MCP 2026-07-28 (stateless); list fresh for 60.000s (shared)\n"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("old: connected, 3 tool(s) — MCP 2025-11-25\n"),
        "{stdout}"
    );
    let out = output(
        dir.path(),
        &["mcp", "list", "--json", "--mcp-config", config],
    );
    assert!(out.status.success(), "{out:?}");
    let listed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let by_name = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|server| server["name"] == name)
            .cloned()
            .unwrap()
    };
    let new = by_name("new");
    assert_eq!(new["info"]["protocol_version"], "2026-07-28");
    assert_eq!(new["info"]["stateless"], true);
    assert_eq!(
        new["tools_cache"],
        serde_json::json!({"ttl_ms": 60000, "shared": true})
    );
    let old = by_name("old");
    assert_eq!(old["info"]["protocol_version"], "2025-11-25");
    assert_eq!(old["info"]["stateless"], false);
    assert!(old.get("tools_cache").is_none(), "{old}");
}

#[test]
fn mcp_call_prints_the_tools_text() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_mcp_config(dir.path());
    let config = config.to_str().unwrap();
    let out = output(
        dir.path(),
        &[
            "mcp",
            "call",
            "--mcp-config",
            config,
            "demo",
            "echo",
            r#"{"message":"hi"}"#,
        ],
    );
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout), "Echo: hi\n");

    let out = output(
        dir.path(),
        &["mcp", "call", "--mcp-config", config, "demo", "nosuch"],
    );
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("unknown tool 'nosuch'"));
}

#[test]
fn an_unknown_config_key_names_the_key_and_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("agcore.toml");
    std::fs::write(&file, "[model]\nmodle = \"gpt\"\n").unwrap();
    for args in [
        vec!["tools", "--config", file.to_str().unwrap()],
        vec![
            "run",
            "--config",
            file.to_str().unwrap(),
            "--model",
            "m",
            "hi",
        ],
        // `agcore trust` refuses it too: it reads and checks the file first.
        vec!["trust"],
    ] {
        let out = output(dir.path(), &args);
        assert!(!out.status.success(), "{args:?}");
        let stderr = text(&out.stderr);
        assert!(
            stderr.starts_with("error: invalid config file "),
            "{stderr}"
        );
        assert!(stderr.contains("agcore.toml"), "{stderr}");
        assert!(stderr.contains("unknown field `modle`"), "{stderr}");
    }
}

#[test]
fn a_missing_config_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(
        dir.path(),
        &["tools", "--config", "missing.toml", "--tools", "builtin"],
    );
    assert!(!out.status.success());
    let stderr = text(&out.stderr);
    assert_eq!(
        stderr.trim(),
        "error: could not read config file missing.toml: No such file or directory (os error 2)"
    );
}

#[test]
fn chat_without_a_model_says_how_to_set_one() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(dir.path(), &["chat"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("no model: pass --model NAME"));
}

#[test]
fn an_unknown_tool_set_is_an_error_not_silently_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let out = output(dir.path(), &["tools", "--tools", "biultin"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = text(&out.stderr);
    assert!(stderr.contains("invalid value 'biultin'"), "{stderr}");
    assert!(stderr.contains("builtin"), "{stderr}");
}

#[test]
fn tools_none_offers_no_tools_and_starts_no_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_mcp_config(dir.path());
    std::fs::write(
        dir.path().join("agcore.toml"),
        "[builtin]\nenabled = true\n",
    )
    .unwrap();
    trust(dir.path());
    let out = output(
        dir.path(),
        &[
            "tools",
            "--tools",
            "none",
            "--mcp-config",
            config.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("no tools"), "{stdout}");
    assert!(!stdout.contains("mcp server demo"), "{stdout}");
}

#[test]
fn restricted_mode_does_not_load_the_workspaces_own_config() {
    let dir = tempfile::tempdir().unwrap();
    // An untrusted checkout's agcore.toml that would start a program and allow the shell.
    let toml = format!(
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n\
         [mcp.servers.demo]\ncommand = {:?}\nargs = [\"mcp-demo-server\"]\n",
        env!("CARGO_BIN_EXE_agcore")
    );
    std::fs::write(dir.path().join("agcore.toml"), toml).unwrap();
    let out = output(dir.path(), &["tools", "--restricted"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert!(!stdout.contains("mcp server demo"), "{stdout}");
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("restricted mode: ./agcore.toml was not loaded"),
        "{stderr}"
    );
    // Named explicitly, it is the user's choice and is loaded.
    let out = output(
        dir.path(),
        &["tools", "--restricted", "--config", "agcore.toml"],
    );
    assert!(
        text(&out.stdout).contains("mcp server demo: 3 tool(s)"),
        "{out:?}"
    );
}

/// An `mcpServers` file running the demo server with its test tools (among them `env`).
fn demo_test_tools_config(dir: &Path) -> std::path::PathBuf {
    let file = dir.join("mcp-test.json");
    let json = serde_json::json!({"mcpServers": {"demo": {
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server", "--test-tools"],
    }}});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

#[test]
fn stdio_mcp_servers_do_not_see_the_model_api_key_variables() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_test_tools_config(dir.path());
    std::fs::write(
        dir.path().join("agcore.toml"),
        "[model]\napi_key_env = \"MY_MODEL_KEY\"\n",
    )
    .unwrap();
    trust(dir.path());
    let seen = |name: &str| -> serde_json::Value {
        let mut command = agcore(dir.path());
        command
            .env("OPENAI_API_KEY", "sk-openai-secret")
            .env("MY_MODEL_KEY", "sk-config-secret")
            .env("AGCORE_VISIBLE", "visible")
            .args(["mcp", "call", "--mcp-config", config.to_str().unwrap()])
            .args([
                "demo",
                "env",
                &serde_json::json!({"name": name}).to_string(),
            ])
            .arg("--json");
        let out = Command::from_std(command).output().unwrap();
        assert!(out.status.success(), "{out:?}");
        let value: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        value["value"].clone()
    };
    assert_eq!(seen("OPENAI_API_KEY"), serde_json::Value::Null);
    assert_eq!(seen("MY_MODEL_KEY"), serde_json::Value::Null);
    assert_eq!(seen("AGCORE_VISIBLE"), "visible");
}

/// `agcore mcp call` ends at its bound (`--timeout`, else the entry's, else 30 s) however long
/// the server takes, and says so; before, a call whose task never ended was polled for an hour.
#[test]
fn mcp_call_ends_at_its_timeout_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_test_tools_config(dir.path());
    let mut command = agcore(dir.path());
    command
        .args(["mcp", "call", "--mcp-config", config.to_str().unwrap()])
        .args(["demo", "slow", r#"{"ms": 60000}"#, "--timeout", "1"]);
    let out = Command::from_std(command).output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Before: the request's own 30 s timeout, with another message, or for a task an hour.
    assert!(stderr.contains("did not finish within 1 s"), "{stderr}");
}
