//! Helpers of the CLI's team tests (`suite::agents_cli`, `suite::agents_durable`): the team
//! config they start from, `agcore run` against a [`super::team_model::TeamModel`], and what
//! to read in its output and in the requests the fake saw.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

use super::agcore;
use super::team_model::TeamModel;

/// The team every test starts from: `main` delegates to `researcher` and hands off to
/// `billing`, which can hand back. Each agent's instructions hold its marker. Each agent's
/// tool list is its own: `main` cannot read files, the researcher it calls can.
pub fn team(researcher_tools: &[&str]) -> String {
    let list = researcher_tools
        .iter()
        .map(|tool| format!("{tool:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        r#"
[agents.researcher]
description = "Finds facts in the workspace and cites the file."
instructions = "[role:researcher] You are a careful researcher. Cite the file."
tools = [{list}]
max_turns = 6
model = "m-small"

[agents.main]
instructions = "[role:main] You lead the {{{{ team }}}} team. Delegate research to the researcher."
tools = ["list_directory"]
agents = ["researcher"]
handoffs = ["billing"]

[agents.billing]
description = "Answers questions about invoices."
instructions = "[role:billing] You handle billing."
tools = []
handoffs = ["main"]
"#
    )
}

/// What `main` is offered: its tool, its sub-agent and its handoff (whatever the researcher's
/// tools are).
pub const MAIN_OFFERED: &[&str] = &["list_directory", "researcher", "transfer_to_billing"];
/// The researcher's tools in most tests.
pub const RESEARCHER_TOOLS: &[&str] = &["read_file", "search_files"];
/// What billing is offered: its handoff back.
pub const BILLING_TOOLS: &[&str] = &["transfer_to_main"];

/// The PostgreSQL test server, or `None` (skipping) — a failure on CI.
pub fn postgres_url() -> Option<String> {
    super::mcp::require_env(
        "AGCORE_TEST_POSTGRES_URL",
        "run the tests through scripts/with-postgres.sh",
    )
}

/// A session name no other test (or earlier run on the shared PostgreSQL) uses.
pub fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("{tag}-{}-{nanos}", std::process::id())
}

/// A workspace with `notes.txt` and the config `extra` + [`team`] as `team.toml`.
pub fn workspace(extra: &str, researcher_tools: &[&str]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello from the notes\n").unwrap();
    let config = dir.path().join("team.toml");
    std::fs::write(&config, format!("{extra}\n{}", team(researcher_tools))).unwrap();
    (dir, config)
}

/// `agcore run` against `model` with the built-in tools, `config` and `--var team=Blue`.
pub fn command(
    dir: &Path,
    model: &TeamModel,
    config: &Path,
    extra: &[&str],
) -> std::process::Command {
    let mut command = agcore(dir);
    command
        .args(["run", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--tools", "builtin", "--workspace"])
        .arg(dir)
        .arg("--config")
        .arg(config)
        .args(["--var", "team=Blue"])
        .args(extra);
    command
}

/// [`command`] run to its end.
pub fn run(dir: &Path, model: &TeamModel, config: &Path, extra: &[&str]) -> Output {
    Command::from_std(command(dir, model, config, extra))
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

/// stdout as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// stderr as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// The `--json` events, one per line.
pub fn events(output: &Output) -> Vec<Value> {
    stdout(output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The text `agent` (`None`: the run's own agent) streamed, from `--json` events.
pub fn text_of(events: &[Value], agent: Option<&str>) -> String {
    events
        .iter()
        .filter(|e| e["type"] == "assistant_text_delta" && e["agent"].as_str() == agent)
        .map(|e| e["text"].as_str().unwrap())
        .collect()
}

/// The messages of a request after its system prompt.
pub fn conversation(body: &Value) -> Vec<Value> {
    let messages = body["messages"].as_array().unwrap();
    assert_eq!(messages[0]["role"], "system", "{messages:?}");
    messages[1..].to_vec()
}

/// The roles of `messages`.
pub fn roles(messages: &[Value]) -> Vec<&str> {
    messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect()
}

/// The tool message answering `id` in a request.
pub fn answer_to(body: &Value, id: &str) -> String {
    conversation(body)
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .and_then(|m| m["content"].as_str().map(str::to_owned))
        .unwrap_or_else(|| panic!("no answer to {id} in {body}"))
}
