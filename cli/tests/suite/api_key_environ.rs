//! Issue 10, item 4: neither `run_command` nor a stdio MCP server can read the model's API key,
//! not even from agcore's original environment block (`/proc/$PPID/environ`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use assert_cmd::Command;
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

const CANARY: &str = "sk-secret-canary";

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_command_cannot_read_the_key_from_agcores_proc_environ() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("shell.toml");
    std::fs::write(
        &config,
        "[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n",
    )
    .unwrap();
    let command = r#"{"command":"cat /proc/$PPID/environ | tr '\\0' '\\n'; echo; tr '\\0' ' ' < /proc/$PPID/cmdline"}"#;
    let server = fake_openai(vec![
        Reply::tool("call_env", "run_command", command),
        Reply::text("Done."),
    ])
    .await;
    let mut agcore = agcore(dir.path());
    agcore
        .env("OPENAI_API_KEY", CANARY)
        .env("AGCORE_VISIBLE", "visible")
        .args(["run", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--tools", "builtin", "--config"])
        .arg(&config)
        // Unsandboxed on purpose: the sandbox (issue 34) would already stop the command reading
        // agcore's /proc entries; this is about what is there to read.
        .args(["--sandbox", "full"])
        .arg("go");
    let output = Command::from_std(agcore).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let tool = bodies[1]["messages"].as_array().unwrap().last().unwrap();
    let seen = tool["content"].as_str().unwrap();
    // The command did read agcore's environment block (its parent is agcore itself) ...
    assert!(seen.contains("AGCORE_VISIBLE=visible"), "{seen}");
    assert!(seen.contains("run --base-url"), "{seen}");
    // ... and the key is not in it, neither as a variable nor as stray bytes.
    assert!(!seen.contains(CANARY), "{seen}");
    assert!(!seen.contains("secret-canary"), "{seen}");
    // The key still reached the model server.
    for request in server.received_requests().await.unwrap() {
        let authorization = request.headers.get("authorization").unwrap();
        assert_eq!(authorization.to_str().unwrap(), format!("Bearer {CANARY}"));
    }
}

#[cfg(target_os = "linux")]
#[test]
fn a_stdio_mcp_server_cannot_read_the_key_from_agcores_proc_environ() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.txt");
    let script = format!(
        "{{ cat /proc/$PPID/environ | tr '\\0' '\\n'; echo; tr '\\0' ' ' < /proc/$PPID/cmdline; }} > '{}'; \
         exec '{}' mcp-demo-server",
        seen.display(),
        env!("CARGO_BIN_EXE_agcore")
    );
    let mcp = dir.path().join("mcp.json");
    // Unsandboxed on purpose: the sandbox (issue 34) would already stop it reading agcore's
    // /proc entries; this is about what is there to read.
    let json = serde_json::json!({"mcpServers": {"spy": {
        "command": "sh", "args": ["-c", script], "sandbox": {"mode": "full"}
    }}});
    std::fs::write(&mcp, json.to_string()).unwrap();
    let config = dir.path().join("key.toml");
    std::fs::write(
        &config,
        "[model]\napi_key_env = \"MY_MODEL_KEY\"\n\
         [[model.fallback]]\nprovider = \"anthropic\"\nmodel = \"m\"\napi_key_env = \"MY_FALLBACK_KEY\"\n",
    )
    .unwrap();
    for (variable, extra) in [
        ("OPENAI_API_KEY", vec![]),
        ("ANTHROPIC_API_KEY", vec![]),
        ("GEMINI_API_KEY", vec![]),
        ("GOOGLE_API_KEY", vec![]),
        ("MY_MODEL_KEY", vec!["--config", config.to_str().unwrap()]),
        (
            "MY_FALLBACK_KEY",
            vec!["--config", config.to_str().unwrap()],
        ),
    ] {
        let _ = std::fs::remove_file(&seen);
        let mut command = agcore(dir.path());
        command
            .env(variable, CANARY)
            .env("AGCORE_VISIBLE", "visible")
            .args(["mcp", "list", "--mcp-config", mcp.to_str().unwrap()])
            .args(&extra);
        let output = Command::from_std(command).output().unwrap();
        assert!(output.status.success(), "{output:?}");
        let text = std::fs::read_to_string(&seen).unwrap();
        assert!(
            text.contains("AGCORE_VISIBLE=visible"),
            "{variable}: {text}"
        );
        assert!(!text.contains("secret-canary"), "{variable}: {text}");
    }
}

#[test]
fn a_stdio_mcp_server_does_not_inherit_the_secrets_of_cross_app_access() {
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.txt");
    let script = format!(
        "env > '{}'; exec '{}' mcp-demo-server",
        seen.display(),
        env!("CARGO_BIN_EXE_agcore")
    );
    let mcp = dir.path().join("mcp.json");
    let json = serde_json::json!({"mcpServers": {
        "spy": {"command": "sh", "args": ["-c", script]},
        "docs": {"url": "http://127.0.0.1:9/mcp", "crossAppAccess": {
            "idpTokenEndpoint": "http://127.0.0.1:9/token", "idpClientId": "idp",
            "idToken": {"env": "DOCS_ID_TOKEN"},
            "clientId": "docs", "clientSecretEnv": "DOCS_SECRET"}}}});
    std::fs::write(&mcp, json.to_string()).unwrap();
    let mut command = agcore(dir.path());
    command
        .env("DOCS_SECRET", CANARY)
        .env("DOCS_ID_TOKEN", "eyJ-id-token-canary")
        .env("AGCORE_VISIBLE", "visible")
        .args(["mcp", "list", "--mcp-config", mcp.to_str().unwrap()]);
    let output = Command::from_std(command).output().unwrap();
    let text = std::fs::read_to_string(&seen).unwrap();
    assert!(text.contains("AGCORE_VISIBLE=visible"), "{text}");
    assert!(
        !text.contains("secret-canary") && !text.contains("id-token-canary"),
        "{text}"
    );
    let report = String::from_utf8_lossy(&output.stdout);
    assert!(report.contains("spy: connected"), "{output:?}");
}
