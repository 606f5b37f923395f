//! Deferred tools in the CLI (issue 36): an MCP server with `"deferLoading": true` (the demo
//! server serving the 300-tool catalog of tests/fixtures/tool_search) is offered to the model
//! as `tool_search` alone; a found tool is offered and runs in the next request; `agcore tools`
//! lists the deferred tools and, with `--session`, the ones the session's searches loaded.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

fn catalog() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures/tool_search/catalog.json")
}

fn mcp_config(dir: &Path) -> PathBuf {
    let file = dir.join("mcp.json");
    let json = serde_json::json!({"mcpServers": {"saas": {
        "command": env!("CARGO_BIN_EXE_agcore"),
        "args": ["mcp-demo-server", "--tools-file", catalog().to_str().unwrap()],
        "exclude": ["get_weather", "echo", "add"],
        "deferLoading": true,
    }}});
    std::fs::write(&file, json.to_string()).unwrap();
    file
}

fn offered(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|tool| tool["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_servers_tools_are_searched_loaded_and_listed() {
    let dir = tempfile::tempdir().unwrap();
    let config = mcp_config(dir.path());
    let store = format!("sqlite:{}", dir.path().join("store/sessions.db").display());
    let server = fake_openai(vec![
        Reply::tool(
            "s1",
            "tool_search",
            r#"{"query":"kubernetes pod logs","limit":3}"#,
        ),
        Reply::tool(
            "l1",
            "k8s_get_pod_logs",
            r#"{"namespace":"prod","pod":"api-0"}"#,
        ),
        Reply::text("Done."),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--mcp-config", config.to_str().unwrap()])
        .args([
            "--session",
            "ops",
            "--store",
            &store,
            "why does the api crash?",
        ])
        .stdin(std::process::Stdio::null());
    let output = Command::from_std(command).output().unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    assert_eq!(offered(&bodies[0]), vec!["tool_search".to_owned()]);
    let second = offered(&bodies[1]);
    assert_eq!(second[0], "tool_search");
    assert!(
        second.contains(&"k8s_get_pod_logs".to_owned()),
        "{second:?}"
    );
    let answer = bodies[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_call_id"] == "l1")
        .unwrap()["content"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(answer.contains(r#""tool":"k8s_get_pod_logs""#), "{answer}");

    let mut command = agcore(dir.path());
    command
        .args(["tools", "--mcp-config", config.to_str().unwrap()])
        .args(["--session", "ops", "--store", &store])
        .stdin(std::process::Stdio::null());
    let output = Command::from_std(command).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    // Every exposed tool of the server is deferred; the hidden ones (here: those that write
    // or delete) are not searchable, so not counted.
    let exposed = stdout
        .lines()
        .filter(|line| line.starts_with("exposed "))
        .count();
    assert!(exposed > 100 && exposed < 300, "{stdout}");
    assert!(
        stdout.contains(&format!(
            "deferred: {exposed} tool(s) offered through tool_search"
        )),
        "{stdout}"
    );
    let loaded = stdout
        .lines()
        .find_map(|line| line.strip_prefix("loaded in session ops: "))
        .unwrap_or_else(|| panic!("no loaded line: {stdout}"));
    assert!(
        loaded.split(", ").any(|name| name == "k8s_get_pod_logs"),
        "{loaded}"
    );
}

/// The step kinds and payloads the store holds for a session.
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

/// SIGKILL while a call of the turn after the search blocks (`run_command` on a fifo): the
/// stored run keeps the loaded set, `agcore tools --session` shows it, and `--resume` in a new
/// process offers the same tools.
#[cfg(unix)]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loaded_set_survives_sigkill_and_resume() {
    use std::process::Stdio;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let mcp = mcp_config(dir.path());
    let config = dir.path().join("tools.toml");
    std::fs::write(
        &config,
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    let slow = dir.path().join("slow");
    let fifo = dir.path().join("fifo");
    assert!(
        std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let block = serde_json::json!({"command": format!(
        "echo run >> '{}'; cat '{}'", slow.display(), fifo.display())});
    let store = format!("sqlite:{}", dir.path().join("store/sessions.db").display());
    let server = fake_openai(vec![
        Reply::tool(
            "s1",
            "tool_search",
            r#"{"query":"kubernetes pod logs","limit":3}"#,
        ),
        Reply::Tools(vec![
            (
                "l1".to_owned(),
                "k8s_get_pod_logs".to_owned(),
                r#"{"namespace":"prod","pod":"api-0"}"#.to_owned(),
            ),
            ("b1".to_owned(), "run_command".to_owned(), block.to_string()),
        ]),
        Reply::text("Done."),
    ])
    .await;
    let args = |extra: &[&str]| -> Vec<String> {
        let mut args: Vec<String> = ["run", "--base-url", &base_url(&server), "--model", "m"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.extend(["--tools", "builtin", "--workspace"].map(str::to_owned));
        args.push(dir.path().display().to_string());
        args.extend(["--config".to_owned(), config.display().to_string()]);
        args.extend(["--mcp-config".to_owned(), mcp.display().to_string()]);
        args.extend(["--session", "ops", "--store", &store].map(str::to_owned));
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args
    };
    let mut child = agcore(dir.path())
        .args(args(&["why does the api crash?"]))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    // Until the found tool's answer is stored and the blocking command runs.
    loop {
        let steps = stored_steps(&store, "ops").await.join("\n");
        let blocked = std::fs::read_to_string(&slow).unwrap_or_default() == "run\n";
        if blocked && steps.contains("call_finished") && steps.contains("\"l1\"") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run never got there: {steps}"
        );
        if child.try_wait().unwrap().is_some() {
            panic!(
                "the run ended early: {:?}",
                child.wait_with_output().unwrap()
            );
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    child.kill().unwrap(); // SIGKILL: nothing more is written
    child.wait().unwrap();
    // The orphaned `cat` ends when the fifo gets a writer.
    let _ = std::fs::OpenOptions::new().write(true).open(&fifo);

    let bodies = request_bodies(&server).await;
    let second = offered(&bodies[1]);
    let loaded: Vec<String> = second
        .iter()
        .skip_while(|name| *name != "tool_search")
        .skip(1)
        .cloned()
        .collect();
    assert!(
        loaded.contains(&"k8s_get_pod_logs".to_owned()),
        "{second:?}"
    );

    // Another process shows the stored run's loaded set ...
    let mut command = agcore(dir.path());
    command
        .args(["tools", "--mcp-config", mcp.to_str().unwrap()])
        .args(["--session", "ops", "--store", &store])
        .stdin(Stdio::null());
    let output = Command::from_std(command).output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout.contains(&format!("loaded in session ops: {}", loaded.join(", "))),
        "{stdout}"
    );

    // ... and a third resumes the run with the same tools offered.
    let mut command = agcore(dir.path());
    command
        .args(args(&["--wait-session", "10", "--resume"]))
        .stdin(Stdio::null());
    let output = Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 3);
    let resumed = offered(&bodies[2]);
    assert_eq!(
        resumed[resumed.len() - loaded.len()..],
        loaded[..],
        "{resumed:?}"
    );
}
