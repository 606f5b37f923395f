//! The official MCP conformance suite (`@modelcontextprotocol/conformance@0.1.13`, client side)
//! against `examples/mcp_conformance_client.rs`, which is built on `McpClient`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod mcp_support;

use mcp_support::{conformance_client, npm_script};

fn run_scenario(scenario: &str) {
    let Some(suite) = npm_script("@modelcontextprotocol/conformance", "dist/index.js") else {
        return;
    };
    let client = conformance_client();
    let output = std::process::Command::new("node")
        .arg(&suite)
        .args([
            "client",
            "--timeout",
            "30000",
            "--scenario",
            scenario,
            "--command",
        ])
        .arg(&client)
        .output()
        .expect("run the conformance suite");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success()
            && (stdout.contains("OVERALL: PASSED") || stderr.contains("OVERALL: PASSED")),
        "scenario {scenario} failed ({}):\n{stdout}\n{stderr}",
        output.status
    );
}

#[test]
fn conformance_initialize() {
    run_scenario("initialize");
}

#[test]
fn conformance_tools_call() {
    run_scenario("tools_call");
}

#[test]
fn conformance_sse_retry() {
    run_scenario("sse-retry");
}

#[test]
fn conformance_elicitation_sep1034_client_defaults() {
    run_scenario("elicitation-sep1034-client-defaults");
}
