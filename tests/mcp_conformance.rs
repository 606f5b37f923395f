//! The official MCP conformance suite (`@modelcontextprotocol/conformance@0.1.13`, client side)
//! against `examples/mcp_conformance_client.rs`, which is built on `McpClient` (`auth/*`: with
//! `McpClient::with_auth`).
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

/// One test per `auth/*` scenario the client passes (OAuth through `McpClient::with_auth`).
macro_rules! auth_scenarios {
    ($($test:ident => $scenario:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_scenario($scenario);
            }
        )*
    };
}

auth_scenarios! {
    conformance_auth_metadata_default => "auth/metadata-default",
    conformance_auth_metadata_var1 => "auth/metadata-var1",
    conformance_auth_basic_cimd => "auth/basic-cimd",
    conformance_auth_scope_from_www_authenticate => "auth/scope-from-www-authenticate",
    conformance_auth_scope_from_scopes_supported => "auth/scope-from-scopes-supported",
    conformance_auth_scope_omitted_when_undefined => "auth/scope-omitted-when-undefined",
    conformance_auth_scope_step_up => "auth/scope-step-up",
    conformance_auth_scope_retry_limit => "auth/scope-retry-limit",
    conformance_auth_token_endpoint_auth_basic => "auth/token-endpoint-auth-basic",
    conformance_auth_token_endpoint_auth_post => "auth/token-endpoint-auth-post",
    conformance_auth_token_endpoint_auth_none => "auth/token-endpoint-auth-none",
    conformance_auth_resource_mismatch => "auth/resource-mismatch",
    conformance_auth_pre_registration => "auth/pre-registration",
    conformance_auth_2025_03_26_oauth_metadata_backcompat => "auth/2025-03-26-oauth-metadata-backcompat",
    conformance_auth_2025_03_26_oauth_endpoint_fallback => "auth/2025-03-26-oauth-endpoint-fallback",
    conformance_auth_client_credentials_jwt => "auth/client-credentials-jwt",
    conformance_auth_client_credentials_basic => "auth/client-credentials-basic",
}

/// `auth/metadata-var2` and `-var3` serve authorization-server metadata at
/// `<issuer>/tenant1`'s well-known URL whose `issuer` is the bare origin. RFC 8414 §3.3
/// requires the client to reject that (mix-up defence) and rmcp does; the suite (0.1.13)
/// expects it to be accepted. This pins the deliberate refusal.
#[test]
fn conformance_auth_metadata_var2_var3_reject_a_mismatched_issuer() {
    let Some(suite) = npm_script("@modelcontextprotocol/conformance", "dist/index.js") else {
        return;
    };
    let client = conformance_client();
    for scenario in ["auth/metadata-var2", "auth/metadata-var3"] {
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
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(
            text.contains("issuer mismatch") && !text.contains("Sent 200 response for POST /token"),
            "{scenario}: expected the client to refuse the mismatched issuer before any token request:\n{text}"
        );
    }
}

#[test]
fn conformance_elicitation_sep1034_client_defaults() {
    run_scenario("elicitation-sep1034-client-defaults");
}
