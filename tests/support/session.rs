//! Helpers for the session-store tests: a fresh PostgreSQL database per test on the server
//! `scripts/with-postgres.sh` starts (`AGCORE_TEST_POSTGRES_URL`), and a private cluster for
//! the test that stops its server. Without the URL a test skips with a notice, or fails on CI.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

/// The env var naming the test server.
pub const URL_VAR: &str = "AGCORE_TEST_POSTGRES_URL";

use super::require as require_support;

/// `Some(value)` of the env var, or — when absent — fail on CI, else skip with the notice
/// (the shared [`require_support::require`]).
pub fn required_env(var: &str, how: &str) -> Option<String> {
    require_support::require_env(var, how)
}

/// Replaces the database name of a `postgres://…/db` URL.
pub fn with_db(url: &str, db: &str) -> String {
    let base = url.rsplit_once('/').map_or(url, |(b, _)| b);
    format!("{base}/{db}")
}

/// A new, empty database on the test server, as a URL; `None` when skipping.
pub async fn fresh_db(tag: &str) -> Option<String> {
    static N: AtomicU32 = AtomicU32::new(0);
    let url = required_env(URL_VAR, "run the tests through scripts/with-postgres.sh")?;
    let db = format!(
        "agcore_t_{tag}_{}_{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    );
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to the test server");
    tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .await
        .expect("create database");
    Some(with_db(&url, &db))
}

/// Runs a SQL batch on `url`.
pub async fn psql(url: &str, sql: &str) {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client.batch_execute(sql).await.expect("sql batch");
}

/// The PostgreSQL server binaries (initdb, pg_ctl).
pub fn pg_bin() -> Option<PathBuf> {
    if let Some(d) = std::env::var_os("AGCORE_TEST_PG_BIN") {
        return Some(PathBuf::from(d));
    }
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("initdb").exists())
        .collect();
    found.sort();
    found.pop()
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// A private PostgreSQL cluster in a temp dir (run as `postgres` when we are root, since the
/// server refuses root), on a free loopback port. Stopped and removed on drop.
pub struct Cluster {
    pub dir: tempfile::TempDir,
    pub port: u16,
    bin: PathBuf,
    root: bool,
}

impl Cluster {
    /// initdb + start; `None` (skip) when no server binaries are installed and CI is unset.
    pub fn start() -> Option<Self> {
        let bin = require_support::require(
            "the PostgreSQL server binaries (initdb, pg_ctl)",
            "install postgresql or use scripts/with-postgres.sh (it sets AGCORE_TEST_PG_BIN)",
            pg_bin(),
        )?;
        let dir = tempfile::Builder::new()
            .prefix("agcore-pgc")
            .tempdir_in("/tmp")
            .unwrap();
        let root = is_root();
        if root {
            let ok = Command::new("chown")
                .arg("postgres")
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(ok.success());
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let c = Self {
            dir,
            port,
            bin,
            root,
        };
        let data = c.data();
        let out = c
            .cmd("initdb")
            .args(["-D", &data, "-U", "agcore", "--auth=trust", "-E", "UTF8"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "initdb: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        c.ctl_start();
        Some(c)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn cmd(&self, tool: &str) -> Command {
        let exe = self.bin.join(tool);
        if self.root {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(exe);
            c
        } else {
            Command::new(exe)
        }
    }

    /// `pg_ctl start` (waits until it accepts connections).
    pub fn ctl_start(&self) {
        let log = self.dir.path().join("server.log").display().to_string();
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        let out = self
            .cmd("pg_ctl")
            .args([
                "-D",
                &self.data(),
                "-l",
                &log,
                "-w",
                "-t",
                "30",
                "-o",
                &opts,
                "start",
            ])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl start: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `pg_ctl stop -m fast` (waits until it is down).
    pub fn ctl_stop(&self) {
        let out = self
            .cmd("pg_ctl")
            .args(["-D", &self.data(), "-m", "fast", "-w", "-t", "30", "stop"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "pg_ctl stop: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// The server's processes: the postmaster (the first line of `postmaster.pid`) and its
    /// children (backends, checkpointer, walwriter…), found by their parent in `/proc`.
    pub fn server_pids(&self) -> Vec<u32> {
        let pidfile = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).unwrap();
        let postmaster: u32 = pidfile.lines().next().unwrap().trim().parse().unwrap();
        let mut pids = vec![postmaster];
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
                continue;
            };
            // "pid (comm) state ppid …": the command may hold spaces and parentheses.
            let after = &stat[stat.rfind(')').unwrap() + 1..];
            let ppid: u32 = after.split_whitespace().nth(1).unwrap().parse().unwrap();
            if ppid == postmaster {
                pids.push(pid);
            }
        }
        pids
    }

    /// Sends `signal` (`"STOP"`, `"CONT"`) to every server process.
    pub fn signal(&self, signal: &str) {
        let pids: Vec<String> = self.server_pids().iter().map(u32::to_string).collect();
        let status = Command::new("kill")
            .arg(format!("-{signal}"))
            .args(&pids)
            .status()
            .unwrap();
        assert!(status.success(), "kill -{signal} {pids:?}");
    }

    /// The cluster's `postgres` database.
    pub fn url(&self) -> String {
        format!("postgres://agcore@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .cmd("pg_ctl")
            .args(["-D", &self.data(), "-m", "immediate", "stop"])
            .output();
    }
}

/// Waits up to `limit` for `path` to exist (a bounded poll).
pub fn wait_for(path: &Path, limit: Duration) -> bool {
    let end = std::time::Instant::now() + limit;
    while std::time::Instant::now() < end {
        if path.exists() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}
