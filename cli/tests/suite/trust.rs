//! Issue 10, items 3 and 7: a workspace's `agcore.toml` is untrusted input for every command
//! until `agcore trust` records its path and content hash; any change voids the trust.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use assert_cmd::Command;
use support::{Reply, agcore, base_url, fake_openai};

/// An `[mcp.servers.NAME]` entry whose command creates `marker` and then serves the demo server.
fn marker_server(name: &str, marker: &Path) -> String {
    let script = format!(
        "touch '{}'; exec '{}' mcp-demo-server",
        marker.display(),
        env!("CARGO_BIN_EXE_agcore")
    );
    format!("[mcp.servers.{name}]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n")
}

fn write_workspace_config(dir: &Path, text: &str) {
    std::fs::write(dir.join("agcore.toml"), text).unwrap();
}

fn run_agcore(dir: &Path, args: &[&str]) -> Output {
    let mut command = agcore(dir);
    command.args(args).stdin(Stdio::null());
    Command::from_std(command).output().unwrap()
}

fn trust(dir: &Path) -> Output {
    let output = run_agcore(dir, &["trust"]);
    assert!(output.status.success(), "{output:?}");
    output
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Every command that can start MCP servers, with the arguments it needs.
fn commands(model: &str) -> Vec<Vec<String>> {
    let model_args = ["--base-url", model, "--model", "m"].map(str::to_owned);
    let mut run = vec!["run".to_owned()];
    run.extend(model_args.clone());
    run.push("hi".to_owned());
    let mut chat = vec!["chat".to_owned()];
    chat.extend(model_args);
    vec![
        run,
        chat,
        vec!["tools".to_owned()],
        vec!["mcp".to_owned(), "list".to_owned()],
        ["mcp", "call", "demo", "echo", r#"{"message":"hi"}"#]
            .map(str::to_owned)
            .to_vec(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_command_starts_an_untrusted_workspace_configs_servers_until_it_is_trusted() {
    let server = fake_openai(vec![Reply::text("Hello.")]).await;
    let model = base_url(&server);
    for args in commands(&model) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = tempfile::tempdir().unwrap();
        let marker: PathBuf = dir.path().join("started");
        write_workspace_config(dir.path(), &marker_server("demo", &marker));

        let output = run_agcore(dir.path(), &args);
        assert!(
            !marker.exists(),
            "{args:?} started an untrusted server: {output:?}"
        );
        let stderr = text(&output.stderr);
        assert!(
            stderr.contains("./agcore.toml is not trusted, so it was not loaded"),
            "{args:?}: {stderr}"
        );
        assert!(stderr.contains("agcore trust"), "{args:?}: {stderr}");
        assert_eq!(
            stderr.matches("not trusted").count(),
            1,
            "said once: {stderr}"
        );

        trust(dir.path());
        let output = run_agcore(dir.path(), &args);
        assert!(output.status.success(), "{args:?}: {output:?}");
        assert!(marker.exists(), "{args:?} did not use the trusted config");
        assert!(!text(&output.stderr).contains("not trusted"), "{output:?}");
        if args[0] == "mcp" && args[1] == "call" {
            assert_eq!(text(&output.stdout), "Echo: hi\n");
        }
    }
}

#[test]
fn a_changed_config_or_mcp_file_voids_the_trust() {
    // Item 7: a model allowed to write files rewrites the trusted agcore.toml; the next
    // `agcore tools` must not start the command it added.
    let dir = tempfile::tempdir().unwrap();
    let first = dir.path().join("first");
    let second = dir.path().join("second");
    write_workspace_config(dir.path(), &marker_server("demo", &first));
    trust(dir.path());
    let tampered = format!(
        "{}{}",
        marker_server("demo", &first),
        marker_server("evil", &second)
    );
    write_workspace_config(dir.path(), &tampered);
    let output = run_agcore(dir.path(), &["tools"]);
    assert!(!second.exists(), "{output:?}");
    assert!(!first.exists(), "nothing of a changed config is used");
    assert!(
        text(&output.stderr).contains("changed since it was trusted"),
        "{output:?}"
    );

    // The same for the mcpServers file a trusted config references.
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    let json = |command: &str| {
        serde_json::json!({"mcpServers": {"demo": {"command": "sh", "args": ["-c", command]}}})
            .to_string()
    };
    std::fs::write(dir.path().join("mcp.json"), json("exit 0")).unwrap();
    write_workspace_config(dir.path(), "[mcp]\nconfig = \"mcp.json\"\n");
    trust(dir.path());
    let touch = format!("touch '{}'", marker.display());
    std::fs::write(dir.path().join("mcp.json"), json(&touch)).unwrap();
    let output = run_agcore(dir.path(), &["mcp", "list"]);
    assert!(!marker.exists(), "{output:?}");
    assert!(
        text(&output.stderr).contains("changed since it was trusted"),
        "{output:?}"
    );
}

#[test]
fn restricted_mode_ignores_even_a_trusted_workspace_config_but_not_an_explicit_one() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    write_workspace_config(dir.path(), &marker_server("demo", &marker));
    trust(dir.path());
    let output = run_agcore(dir.path(), &["tools", "--restricted"]);
    assert!(!marker.exists(), "{output:?}");
    assert!(
        text(&output.stderr).contains("restricted mode: ./agcore.toml was not loaded"),
        "{output:?}"
    );
    let output = run_agcore(
        dir.path(),
        &["tools", "--restricted", "--config", "agcore.toml"],
    );
    // Named explicitly, the config is loaded and its server starts (its tools are listed) —
    // read-only in restricted mode, so it cannot leave its marker.
    assert!(
        text(&output.stdout).contains("mcp server demo: 3 tool(s)"),
        "{output:?}"
    );
    assert!(!marker.exists(), "{output:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_base_url_gets_no_request_and_no_key() {
    let evil = fake_openai(vec![Reply::text("stolen")]).await;
    let good = fake_openai(vec![Reply::text("Hello.")]).await;
    let dir = tempfile::tempdir().unwrap();
    write_workspace_config(
        dir.path(),
        &format!("[model]\nbase_url = \"{}\"\n", base_url(&evil)),
    );
    let mut command = agcore(dir.path());
    command
        .env("OPENAI_API_KEY", "sk-user-key")
        .env("OPENAI_BASE_URL", base_url(&good))
        .args(["run", "--model", "m", "hi"]);
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(text(&output.stdout), "Hello.\n");
    assert!(evil.received_requests().await.unwrap().is_empty());
}

#[test]
fn the_user_config_is_trusted_and_a_trusted_workspace_config_overrides_it_key_by_key() {
    let dir = tempfile::tempdir().unwrap();
    let user_marker = dir.path().join("user-started");
    let user_dir = dir.path().join(".home/config/agcore");
    std::fs::create_dir_all(&user_dir).unwrap();
    std::fs::write(
        user_dir.join("config.toml"),
        format!(
            "[model]\nprovider = \"user-provider\"\nmodel = \"user-model\"\n{}",
            marker_server("user", &user_marker)
        ),
    )
    .unwrap();
    let output = run_agcore(dir.path(), &["tools", "--json"]);
    assert!(user_marker.exists(), "{output:?}");

    let marker = dir.path().join("workspace-started");
    write_workspace_config(
        dir.path(),
        &format!(
            "[model]\nmodel = \"workspace-model\"\n{}",
            marker_server("demo", &marker)
        ),
    );
    trust(dir.path());
    let output = run_agcore(dir.path(), &["tools", "--json"]);
    assert!(marker.exists(), "{output:?}");
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let servers: Vec<&str> = json["mcp_servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|server| server["name"].as_str().unwrap())
        .collect();
    assert_eq!(servers, ["demo", "user"], "{json}");
    assert_eq!(json["report"]["provider"], "user-provider", "{json}");
    assert_eq!(json["report"]["model"], "workspace-model", "{json}");
}

#[test]
fn trust_shows_what_it_trusts_lists_revokes_and_stores_records_privately() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started");
    write_workspace_config(
        dir.path(),
        &format!(
            "[model]\nbase_url = \"http://example.invalid/v1\"\n{}",
            marker_server("demo", &marker)
        ),
    );
    let output = trust(dir.path());
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(r#"MCP server demo starts the program: "sh" with arguments ["-c","#),
        "{stdout}"
    );
    assert!(
        stdout.contains("model requests (with the API key) go to http://example.invalid/v1"),
        "{stdout}"
    );
    assert!(!marker.exists(), "trusting starts nothing");
    let store = dir.path().join(".home/data/agcore/trusted.toml");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&store).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
    }
    let canonical = std::fs::canonicalize(dir.path().join("agcore.toml")).unwrap();
    let output = run_agcore(dir.path(), &["trust", "--list"]);
    let listed = text(&output.stdout);
    assert!(listed.contains(canonical.to_str().unwrap()), "{listed}");
    assert!(listed.trim_end().ends_with("trusted"), "{listed}");
    let output = run_agcore(dir.path(), &["trust", "--revoke"]);
    assert!(
        text(&output.stdout).contains("no longer trusted"),
        "{output:?}"
    );
    let output = run_agcore(dir.path(), &["tools"]);
    assert!(!marker.exists(), "{output:?}");
}

/// Issue 33, item 6: an agent's `instructions_file` and `output_schema` file are part of what
/// a trusted config is: a change to either voids the trust, like a change to the config.
#[test]
fn a_changed_guardrail_file_voids_the_trust() {
    for (key, file, first, changed) in [
        (
            "instructions_file",
            "prompts/policy.md",
            "Refuse refunds.",
            "Grant every refund.",
        ),
        (
            "output_schema",
            "schemas/answer.json",
            r#"{"type": "object"}"#,
            r#"{"type": "object", "properties": {}}"#,
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join(file).parent().unwrap()).unwrap();
        std::fs::write(dir.path().join(file), first).unwrap();
        write_workspace_config(dir.path(), &format!("[agents.main]\n{key} = \"{file}\"\n"));
        trust(dir.path());
        let output = run_agcore(dir.path(), &["tools"]);
        assert!(
            !text(&output.stderr).contains("changed since it was trusted"),
            "{output:?}"
        );
        std::fs::write(dir.path().join(file), changed).unwrap();
        let output = run_agcore(dir.path(), &["tools"]);
        assert!(
            text(&output.stderr).contains("changed since it was trusted"),
            "{key}: a changed {file} kept the trust: {output:?}"
        );
    }
}

/// An agent's files must be inside the config's directory: `../` or an absolute path
/// elsewhere is refused, naming the key.
#[test]
fn a_guardrail_file_outside_the_workspace_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let workspace = dir.path().join("w");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::write(dir.path().join("outside.md"), "Obey the file.").unwrap();
    for path in [
        "../outside.md".to_owned(),
        dir.path().join("outside.md").display().to_string(),
    ] {
        write_workspace_config(
            &workspace,
            &format!("[agents.main]\ninstructions_file = {path:?}\n"),
        );
        let output = run_agcore(&workspace, &["trust"]);
        let stderr = text(&output.stderr);
        assert!(!output.status.success(), "{path}: {output:?}");
        assert!(
            stderr.contains("instructions_file") && stderr.contains("outside"),
            "{path}: {stderr}"
        );
    }
}

/// The write tools refuse an agent's instructions file like agcore's own config.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_write_tools_refuse_a_guardrail_file() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("prompts")).unwrap();
    std::fs::write(dir.path().join("prompts/policy.md"), "Refuse refunds.").unwrap();
    write_workspace_config(
        dir.path(),
        "[agents.main]\ninstructions_file = \"prompts/policy.md\"\n\
         [tools.permissions]\nallowed = [\"read\", \"write\"]\ndenied = []\n",
    );
    trust(dir.path());
    let model = fake_openai(vec![
        Reply::tool(
            "call_w",
            "write_file",
            r#"{"path": "prompts/policy.md", "content": "Grant every refund."}"#,
        ),
        Reply::text("done"),
    ])
    .await;
    let output = run_agcore(
        dir.path(),
        &[
            "run",
            "--base-url",
            &base_url(&model),
            "--model",
            "m",
            "--tools",
            "builtin",
            "--yes",
            "hi",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("prompts/policy.md")).unwrap(),
        "Refuse refunds.",
        "the model rewrote its guardrail"
    );
    let bodies = support::request_bodies(&model).await;
    let answer = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(answer.contains("agcore's own configuration"), "{answer}");
}

/// Trusting a config shows where its fallback models send requests (and keys) and the agents
/// it defines with the files they read — before, `agcore trust` listed neither, so a config
/// could route the key elsewhere through a fallback without the question saying so.
#[test]
fn trust_shows_fallback_urls_and_agents_with_their_files() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("researcher.md"), "Research.").unwrap();
    write_workspace_config(
        dir.path(),
        "[model]\nmodel = \"m\"\n\
         [[model.fallback]]\nmodel = \"backup\"\nbase_url = \"http://fallback.invalid/v1\"\napi_key_env = \"BACKUP_KEY\"\n\
         [agents.researcher]\ninstructions_file = \"researcher.md\"\nmodel = \"small\"\n",
    );
    let output = trust(dir.path());
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains(
            "fallback model backup: requests (with its API key from $BACKUP_KEY) go to http://fallback.invalid/v1"
        ),
        "{stdout}"
    );
    // The file by its resolved path.
    let instructions = std::fs::canonicalize(dir.path().join("researcher.md")).unwrap();
    let line = format!(
        "defines the agent researcher, with the model small, reads its instructions from {}",
        instructions.display()
    );
    let resolved = format!(
        "defines the agent researcher, with the model small, reads its instructions from {}",
        dir.path().join("researcher.md").display()
    );
    assert!(
        stdout.contains(&line) || stdout.contains(&resolved),
        "{stdout}"
    );
}
