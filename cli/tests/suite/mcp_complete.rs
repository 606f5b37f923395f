//! MCP in the CLI: per-server `include` / `exclude` in `agcore tools`, server restarts and
//! startup retries as the user sees them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;

use assert_cmd::Command;
use support::agcore;

fn run(dir: &Path, args: &[&str]) -> (bool, String) {
    let mut command = agcore(dir);
    command.args(args);
    let out = Command::from_std(command).output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn demo_config(dir: &Path, extra: serde_json::Value) -> String {
    let mut entry = serde_json::json!({
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server"],
    });
    entry
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"demo": entry}});
    std::fs::write(&file, json.to_string()).unwrap();
    file.to_string_lossy().into_owned()
}

#[test]
fn tools_shows_an_excluded_mcp_tool_as_hidden_with_the_rule() {
    let dir = tempfile::tempdir().unwrap();
    let config = demo_config(dir.path(), serde_json::json!({"exclude": ["add"]}));
    let (ok, out) = run(dir.path(), &["tools", "--mcp-config", &config]);
    assert!(ok, "{out}");
    assert!(out.contains("mcp server demo: 2 tool(s)"), "{out}");
    let add = out.lines().find(|l| l.contains(" add ")).unwrap();
    assert!(add.starts_with("hidden"), "{add}");
    assert!(
        add.ends_with(
            "not registered (mcp server 'demo'): excluded by the server's `exclude` entry 'add'"
        ),
        "{add}"
    );
    let echo = out.lines().find(|l| l.contains(" echo ")).unwrap();
    assert!(!echo.contains("not registered"), "{echo}");

    let config = demo_config(dir.path(), serde_json::json!({"include": ["echo"]}));
    let (_, out) = run(dir.path(), &["tools", "--mcp-config", &config, "--json"]);
    let json: serde_json::Value =
        serde_json::from_str(&out[..out.rfind('}').unwrap() + 1]).unwrap();
    let tools = json["report"]["tools"].as_array().unwrap();
    let weather = tools.iter().find(|t| t["name"] == "get_weather").unwrap();
    assert_eq!(weather["exposed"], false);
    assert_eq!(weather["hidden_because"][0]["gate"], "not_registered");
    assert_eq!(weather["hidden_because"][0]["source"]["server"], "demo");
    assert_eq!(
        weather["hidden_because"][0]["reason"]["kind"],
        "not_included"
    );
}

#[test]
fn mcp_list_says_a_server_took_several_attempts_to_start() {
    let dir = tempfile::tempdir().unwrap();
    let starts = dir.path().join("starts");
    let fault = format!("fail-starts=1@{}", starts.display());
    let config = demo_config(
        dir.path(),
        serde_json::json!({"args": ["mcp-demo-server", "--fault", fault], "startupBackoffMs": 10}),
    );
    let (ok, out) = run(dir.path(), &["mcp", "list", "--mcp-config", &config]);
    assert!(ok, "{out}");
    assert!(
        out.starts_with("demo: connected (after 2 attempts), 3 tool(s)"),
        "{out}"
    );
    let (_, json) = run(
        dir.path(),
        &["mcp", "list", "--mcp-config", &config, "--json"],
    );
    let json: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(
        json[0]["connect_attempts"], 1,
        "the third start serves at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_closes_its_mcp_servers_gracefully_on_exit() {
    let dir = tempfile::tempdir().unwrap();
    let ended = dir.path().join("ended");
    let config = demo_config(
        dir.path(),
        serde_json::json!({"args": ["mcp-demo-server", "--ended-file", ended.to_string_lossy()]}),
    );
    let server = support::fake_openai(vec![support::Reply::text("done")]).await;
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--base-url",
        &support::base_url(&server),
        "--model",
        "fake-model",
        "--mcp-config",
        &config,
        "hello",
    ]);
    let out = Command::from_std(command).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    // The server saw its stdin close and exited on its own (a killed one writes nothing).
    assert_eq!(
        std::fs::read_to_string(&ended).unwrap_or_default(),
        "stdin closed",
        "{out:?}"
    );
}
