//! Rules on `fetch_url.url` hold for every redirect hop, not only the URL the model wrote: a
//! redirect from 127.0.0.1 to `localhost` is refused by a `host_in = ["localhost"]` deny, and
//! a hop leaving the hosts an allow rule let through without asking is refused too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agcore::tools::builtin::{FetchUrl, LoopbackOnly};
use agcore::tools::{
    ApprovalDecision, ApprovalRequest, Approver, ArgumentRule, RuleAction, Tool, ToolError,
    ToolRegistry, ToolsConfig,
};
use async_trait::async_trait;
use serde_json::json;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// Declines everything it is asked about.
struct Decline;

#[async_trait]
impl Approver for Decline {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalDecision {
        ApprovalDecision::Deny { message: None }
    }
}

fn host_in(hosts: &[&str], action: RuleAction) -> ArgumentRule {
    ArgumentRule {
        tool: "fetch_url".into(),
        argument: "url".into(),
        matches: None,
        contains: None,
        host_in: hosts.iter().map(|h| (*h).to_owned()).collect(),
        action,
    }
}

/// `fetch_url` (local addresses allowed, nothing beyond loopback), `Network` as ask.
fn registry(rules: Vec<ArgumentRule>, dials: Arc<LoopbackOnly>) -> ToolRegistry {
    let mut config: ToolsConfig = toml::from_str(
        r#"
        ask = ["network"]
        [permissions]
        allowed = ["network"]
        denied = []
        "#,
    )
    .unwrap();
    config.rules = rules;
    let mut registry = config
        .apply(ToolRegistry::new())
        .unwrap()
        .with_approver(Arc::new(Decline));
    registry
        .register(
            FetchUrl::new()
                .allow_private_network(true)
                .with_dial_check(dials)
                .erase(),
        )
        .unwrap();
    registry.check_exposure().unwrap();
    registry
}

/// A server whose `/start` redirects to `/end` on `localhost`, and `/end` answers.
async fn redirecting_to_localhost() -> (MockServer, String) {
    let server = MockServer::start().await;
    let port = server.address().port();
    Mock::given(method("GET"))
        .and(path("/start"))
        .respond_with(
            ResponseTemplate::new(302)
                .insert_header("location", format!("http://localhost:{port}/end")),
        )
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(path("/end"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("reached", "text/plain"))
        .mount(&server)
        .await;
    let start = format!("http://127.0.0.1:{port}/start");
    (server, start)
}

/// The call's output or error (refused before it ran, or failed while running).
async fn fetch(registry: &ToolRegistry, url: &str) -> Result<serde_json::Value, ToolError> {
    registry
        .invoke("fetch_url", json!({ "url": url }))
        .await
        .and_then(|call| call.output)
}

async fn hits(server: &MockServer, at: &str) -> usize {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|request| request.url.path() == at)
        .count()
}

#[tokio::test]
async fn a_deny_on_a_host_holds_for_a_redirect_hop() {
    let (server, start) = redirecting_to_localhost().await;
    let dials = LoopbackOnly::new();
    let registry = registry(
        vec![
            host_in(&["127.0.0.1"], RuleAction::Allow),
            host_in(&["localhost"], RuleAction::Deny),
        ],
        dials.clone(),
    );
    let error = fetch(&registry, &start).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::DeniedByRule { because, .. } if because.contains("localhost")),
        "{error:?}"
    );
    assert_eq!(hits(&server, "/start").await, 1);
    assert_eq!(
        hits(&server, "/end").await,
        0,
        "the denied hop was requested"
    );
    assert!(dials.refused().is_empty(), "{:?}", dials.refused());
}

#[tokio::test]
async fn a_hop_leaving_what_an_allow_rule_let_through_is_refused() {
    let (server, start) = redirecting_to_localhost().await;
    let dials = LoopbackOnly::new();
    let registry = registry(
        vec![host_in(&["127.0.0.1"], RuleAction::Allow)],
        dials.clone(),
    );
    let error = fetch(&registry, &start).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::DeniedByRule { because, .. } if because.contains("localhost")),
        "{error:?}"
    );
    assert_eq!(hits(&server, "/end").await, 0, "the hop was requested");
    // Asked for directly, the same URL is asked about (and declined), not run.
    let port = server.address().port();
    let error = fetch(&registry, &format!("http://localhost:{port}/end"))
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ToolError::ApprovalDenied { .. }),
        "{error:?}"
    );
}

#[tokio::test]
async fn a_redirect_within_the_rules_is_followed() {
    let (server, start) = redirecting_to_localhost().await;
    let dials = LoopbackOnly::new();
    let registry = registry(
        vec![host_in(&["127.0.0.1", "localhost"], RuleAction::Allow)],
        dials.clone(),
    );
    let output = fetch(&registry, &start).await.unwrap();
    assert_eq!(output["content"], "reached");
    assert_eq!(hits(&server, "/end").await, 1);
}
