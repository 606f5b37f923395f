//! `agcore mcp login` when the authorization goes wrong, against a fake OAuth authorization
//! server and protected MCP endpoint on 127.0.0.1 (`fixtures/fake_oauth_server.py`): a redirect
//! with the wrong `state`, or a token endpoint that refuses the code. Login fails at once with
//! the reason — it does not start the authorization again and wait for a browser that will not
//! come back — and the authorization code never reaches stderr, not even with `-vv`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use support::agcore;

/// The code the fake server puts in its redirect.
const CODE: &str = "SECRETCODE4711";

/// The fake server in `mode`, and its port.
struct FakeServer(Child, u16);

impl Drop for FakeServer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn fake_server(mode: &str) -> FakeServer {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fake_oauth_server.py");
    let mut child = Command::new("python3")
        .arg(script)
        .arg(mode)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("python3 runs the fake OAuth server");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let port = line.trim().parse().unwrap();
    FakeServer(child, port)
}

/// A fake browser that, like a person, follows the first authorization URL it is shown and
/// ignores the rest (each one is counted in `opened`).
fn browser(dir: &Path) -> std::path::PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let opened = dir.join("opened");
    let script = format!(
        "#!/bin/sh\necho x >> '{opened}'\n[ \"$(wc -l < '{opened}')\" -gt 1 ] && exit 0\n\
         exec curl --noproxy '*' -s -L -m 20 -o /dev/null \"$1\"\n",
        opened = opened.display()
    );
    let path = bin.join("xdg-open");
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// `agcore -vv mcp login remote` against the fake server in `mode`: its output, and how often
/// the browser was asked to open a URL. The command gets 60 s (login itself would wait 300 s
/// for a redirect): a run that is still waiting then fails the test.
fn login(mode: &str) -> (std::process::Output, usize) {
    let server = fake_server(mode);
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    std::fs::write(
        &config,
        format!(
            r#"{{"mcpServers":{{"remote":{{"type":"http","url":"http://127.0.0.1:{}/mcp"}}}}}}"#,
            server.1
        ),
    )
    .unwrap();
    let bin = browser(dir.path());
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut child = agcore(dir.path())
        .env("PATH", path)
        .args(["-vv", "mcp", "login", "remote", "--mcp-config"])
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "mcp login still waiting after 60 s: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let output = child.wait_with_output().unwrap();
    let opened = std::fs::read_to_string(dir.path().join("opened"))
        .unwrap_or_default()
        .lines()
        .count();
    (output, opened)
}

fn assert_failed_at_once(mode: &str, reason: &str) {
    let (output, opened) = login(mode);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(opened, 1, "the authorization started again: {stderr}");
    let error = stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .unwrap_or_else(|| panic!("{stderr}"));
    assert!(
        error.contains("MCP server 'remote': authorization failed"),
        "{error}"
    );
    assert!(error.contains(reason), "{error}");
    assert!(!stderr.contains(CODE), "the code reached stderr: {stderr}");
}

#[test]
fn a_redirect_with_the_wrong_state_fails_login_at_once() {
    assert_failed_at_once("wrong-state", "Authorization state not found");
}

#[test]
fn a_refused_token_request_fails_login_at_once() {
    assert_failed_at_once("token-error", "invalid_grant");
}
