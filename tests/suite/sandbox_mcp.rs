//! The OS sandbox of stdio MCP servers (issue 34): a server runs under its entry's policy
//! (default `workspace-write` in its `cwd`, network on). A wrapper shell tries to write the
//! server's directory before it executes the real (demo) server, which must still serve.
//!
//! Fails with the sandbox off: `AGCORE_DISABLE_SANDBOX_IN_TESTS=1` (see `super::sandbox::sandbox`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use agcore::tools::mcp::{McpClient, McpServersConfig, McpTransport};
use agcore::tools::sandbox::SandboxPolicy;

use crate::support::mcp::demo_server;

/// The demo server behind a shell that first tries to write `probe.txt` in its directory.
fn wrapped_demo() -> McpTransport {
    McpTransport::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            format!(
                "echo x > probe.txt 2>/dev/null; exec '{}'",
                demo_server().display()
            ),
        ],
    }
}

#[tokio::test]
async fn a_read_only_server_cannot_write_its_directory_but_still_serves() {
    let dir = tempfile::tempdir().unwrap();
    let home = tempfile::tempdir().unwrap();
    let mut client = McpClient::new("demo", wrapped_demo())
        .with_cwd(dir.path())
        .with_sandbox(super::sandbox::sandbox(
            SandboxPolicy::read_only(),
            home.path(),
        ));
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    assert!(!tools.is_empty());
    assert!(
        !dir.path().join("probe.txt").exists(),
        "the read-only server wrote its directory"
    );
}

#[tokio::test]
async fn the_entry_s_sandbox_key_sets_the_policy_and_the_default_writes_its_directory() {
    let read_only_dir = tempfile::tempdir().unwrap();
    let default_dir = tempfile::tempdir().unwrap();
    let config: McpServersConfig = serde_json::from_value(serde_json::json!({
        "mcpServers": {
            "locked": {"command": "sh", "cwd": read_only_dir.path(), "sandbox": {"mode": "read-only"},
                       "args": ["-c", format!("echo x > probe.txt; exec '{}'", demo_server().display())]},
            "default": {"command": "sh", "cwd": default_dir.path(),
                        "args": ["-c", format!("echo x > probe.txt; exec '{}'", demo_server().display())]}
        }
    }))
    .unwrap();
    for (name, dir, writes) in [
        ("locked", &read_only_dir, false),
        ("default", &default_dir, true),
    ] {
        let mut client = config.client(name).unwrap();
        client.connect().await.unwrap();
        assert!(!client.list_tools().await.unwrap().is_empty());
        assert_eq!(dir.path().join("probe.txt").exists(), writes, "{name}");
    }
}

#[tokio::test]
async fn a_library_client_sandboxes_its_server_by_default() {
    // No `with_sandbox`: the library's default is the CLI's (workspace-write in its
    // directory, network on), so a write beside its directory is refused.
    let dir = tempfile::tempdir().unwrap();
    let beside = tempfile::tempdir().unwrap();
    let probe = beside.path().join("probe.txt");
    let transport = McpTransport::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            format!(
                "echo x > '{}' 2>/dev/null; echo y > mine.txt; exec '{}'",
                probe.display(),
                demo_server().display()
            ),
        ],
    };
    let mut client = McpClient::new("demo", transport.clone()).with_cwd(dir.path());
    assert_eq!(client.sandbox().policy(), &SandboxPolicy::for_mcp_servers());
    client.connect().await.unwrap();
    assert!(!client.list_tools().await.unwrap().is_empty());
    assert!(
        !probe.exists(),
        "the default server wrote outside its directory"
    );
    assert!(
        dir.path().join("mine.txt").exists(),
        "its own directory is writable"
    );
    client.close().await.unwrap();
    // `full` by explicit choice: the same server writes there.
    let mut client = McpClient::new("demo", transport)
        .with_cwd(dir.path())
        .with_sandbox_policy(SandboxPolicy::full());
    client.connect().await.unwrap();
    assert!(!client.list_tools().await.unwrap().is_empty());
    assert!(probe.exists(), "full is no sandbox");
}

#[tokio::test]
async fn restricted_mode_makes_a_servers_sandbox_read_only_whatever_its_policy() {
    // Restricted mode cuts writes and network physically for MCP servers too, even one
    // configured `full`: the same server that writes its own directory under `full` writes
    // nothing once restricted, and still starts and answers.
    let dir = tempfile::tempdir().unwrap();
    let transport = McpTransport::Stdio {
        command: "sh".to_owned(),
        args: vec![
            "-c".to_owned(),
            format!(
                "echo y > mine.txt 2>/dev/null; exec '{}'",
                demo_server().display()
            ),
        ],
    };
    let mut client = McpClient::new("demo", transport.clone())
        .with_cwd(dir.path())
        .with_sandbox_policy(SandboxPolicy::full())
        .with_restricted_sandbox(true);
    assert!(client.sandbox().policy().restricted);
    client.connect().await.unwrap();
    assert!(!client.list_tools().await.unwrap().is_empty());
    assert!(
        !dir.path().join("mine.txt").exists(),
        "a restricted server wrote in its directory"
    );
    client.close().await.unwrap();
    // Not restricted: the same `full` server writes there.
    let mut client = McpClient::new("demo", transport)
        .with_cwd(dir.path())
        .with_sandbox_policy(SandboxPolicy::full())
        .with_restricted_sandbox(false);
    client.connect().await.unwrap();
    assert!(dir.path().join("mine.txt").exists());
}
