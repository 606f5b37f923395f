//! The one way a test may skip: [`require`]. Every test that needs something outside the
//! repository (an npm or PyPI MCP server, PostgreSQL) gets it through here, so a skip is never
//! silent and never happens on CI:
//!
//! - the notice, starting with [`SKIP_MARKER`], goes straight to the process's stderr, past
//!   the test harness's output capture, so it shows in `cargo test`'s output even when the test
//!   passes (`.ci/run` fails when it finds the marker there);
//! - with `CI` set the test fails instead of skipping.
//!
//! Included by `tests/mcp_support`, `tests/session_support` and `cli/tests/support`
//! (`#[path]`), so the tests of both crates share it.
#![allow(dead_code, clippy::panic)]

use std::io::Write;

/// The fixed start of every skip notice (what `.ci/run` looks for).
pub const SKIP_MARKER: &str = "AGCORE-TEST-SKIPPED";

/// Whether the tests run on CI (`CI` set, to anything: a missing dependency is a failure).
pub fn on_ci() -> bool {
    std::env::var_os("CI").is_some()
}

/// `Some(value)`; or — when absent — print the skip notice and panic on CI, else return `None`
/// (the caller returns at once: the test skips).
pub fn require<T>(what: &str, how: &str, value: Option<T>) -> Option<T> {
    if value.is_none() {
        skip(&format!("{what} is not available"), how);
    }
    value
}

/// The value of the environment variable `var` when set and not empty; else as [`require`].
pub fn require_env(var: &str, how: &str) -> Option<String> {
    let value = std::env::var(var).ok().filter(|value| !value.is_empty());
    if value.is_none() {
        skip(&format!("{var} is not set"), how);
    }
    value
}

/// Announce a skip (why, and how to provide what is missing); on CI, fail instead.
fn skip(why: &str, how: &str) {
    let notice = format!("{SKIP_MARKER}: {why}; {how}");
    // Not `eprintln!`: the harness captures that and shows it only for a failing test.
    let _ = writeln!(std::io::stderr().lock(), "{notice}");
    if on_ci() {
        panic!("{notice} (CI is set, so this fails instead of skipping)");
    }
}
