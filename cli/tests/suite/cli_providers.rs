//! The provider settings of `agcore run`, exactly as scripts spell them: `--provider`
//! (`[model] provider`, `AGCORE_PROVIDER`), the `--model PROVIDER:NAME` shorthand, `--reasoning`,
//! `[[model.fallback]]`; the context engine's discovery probes never reach a native provider's
//! host. Against local servers on 127.0.0.1 (OpenAI-compatible fakes, and a recorder that
//! answers every request 404).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::time::Duration;

use assert_cmd::Command;
use serde_json::{Value, json};
use support::{Reply, agcore, base_url, fake_openai, request_bodies};
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A server that records every request and answers each 404.
async fn recorder() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    server
}

/// The paths `server` was asked for.
async fn paths(server: &MockServer) -> Vec<String> {
    server
        .received_requests()
        .await
        .unwrap_or_default()
        .iter()
        .map(|request| request.url.path().to_owned())
        .collect()
}

fn output(command: std::process::Command) -> std::process::Output {
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

const PROBES: [&str; 4] = ["/props", "/tokenize", "/v1/models", "/api/show"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_native_provider_s_host_never_gets_a_discovery_probe() {
    // The control: an OpenAI-compatible server with an unknown model is probed.
    let server = recorder().await;
    let dir = tempfile::tempdir().unwrap();
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--base-url",
        &base_url(&server),
        "--model",
        "local-model",
        "hi",
    ]);
    let _ = output(command);
    let asked = paths(&server).await;
    assert!(
        PROBES
            .iter()
            .any(|probe| asked.iter().any(|path| path == probe)),
        "the control run sent no probe: {asked:?}"
    );
    for (flags, key) in [
        (
            vec!["--provider", "anthropic", "--model", "local-model"],
            "ANTHROPIC_API_KEY",
        ),
        (vec!["--model", "gemini:local-model"], "GEMINI_API_KEY"),
        (
            vec!["--provider", "openai-responses", "--model", "local-model"],
            "OPENAI_API_KEY",
        ),
    ] {
        let server = recorder().await;
        let mut command = agcore(dir.path());
        command
            .env(key, "sk-canary")
            .args(["run", "--base-url", &base_url(&server)])
            .args(&flags)
            .arg("hi");
        let _ = output(command);
        let asked = paths(&server).await;
        for probe in PROBES {
            assert!(
                !asked.iter().any(|path| path == probe),
                "{flags:?}: {probe} was probed: {asked:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provider_names_are_exact_and_contradictions_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    for (args, env, expected) in [
        (
            vec!["--provider", "antropic", "--model", "m"],
            None,
            "antropic",
        ),
        (
            vec!["--provider", "gemini", "--model", "anthropic:claude"],
            None,
            "different providers",
        ),
        (vec!["--model", "m"], Some("bogus"), "AGCORE_PROVIDER"),
        (
            vec!["--model", "m", "--reasoning", "lots"],
            None,
            "--reasoning",
        ),
    ] {
        let mut command = agcore(dir.path());
        command.args(["run", "--base-url", "http://127.0.0.1:9/v1"]);
        command.args(&args).arg("hi");
        if let Some(value) = env {
            command.env("AGCORE_PROVIDER", value);
        }
        let output = output(command);
        assert!(!output.status.success(), "{args:?}: {output:?}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_openai_prefix_and_reasoning_reach_the_request() {
    let server = fake_openai(vec![Reply::text("ok")]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("reasoning.toml");
    std::fs::write(&config, "[model]\nreasoning = \"medium\"\n").unwrap();
    for (extra, effort) in [
        (vec!["--reasoning", "high"], json!("high")),
        (vec!["--reasoning", "off"], json!("none")),
        // A budget: chat completions have none, so the nearest effort goes.
        (vec!["--reasoning", "2000"], json!("low")),
        (vec!["--config", config.to_str().unwrap()], json!("medium")),
        (vec![], Value::Null),
    ] {
        let mut command = agcore(dir.path());
        command
            .args(["run", "--base-url", &base_url(&server)])
            .args(["--model", "openai:qwen3:8b", "--no-stream"])
            .args(&extra)
            .arg("hi");
        let output = output(command);
        assert!(output.status.success(), "{extra:?}: {output:?}");
        let body = request_bodies(&server).await.pop().unwrap();
        assert_eq!(body["model"], "qwen3:8b", "the prefix is not sent");
        assert_ne!(body["stream"], json!(true), "--no-stream: {body}");
        assert_eq!(body["reasoning_effort"], effort, "{extra:?}: {body}");
        assert!(body.get("reasoning_budget_tokens").is_none(), "{body}");
    }
}

/// A server answering every chat request 503 (retryable), as an overloaded one does.
async fn overloaded() -> MockServer {
    let server = MockServer::start().await;
    Mock::given(any())
        .respond_with(ResponseTemplate::new(503).set_body_raw(
            json!({"error": {"message": "overloaded", "type": "server_error"}}).to_string(),
            "application/json",
        ))
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fallback_entry_answers_when_the_model_fails_and_the_switch_is_an_event() {
    let failing = overloaded().await;
    let backup = fake_openai(vec![Reply::text("from the backup")]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fallback.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\nbase_url = \"{}\"\nmodel = \"primary-model\"\ncontext_window = 8192\n\
             [[model.fallback]]\nprovider = \"openai\"\nmodel = \"backup-model\"\nbase_url = \"{}\"\n\
             api_key_env = \"BACKUP_KEY\"\n",
            base_url(&failing),
            base_url(&backup)
        ),
    )
    .unwrap();
    let mut command = agcore(dir.path());
    command
        .env("BACKUP_KEY", "sk-backup")
        .env("OPENAI_API_KEY", "sk-primary")
        .args(["run", "--json", "--config", config.to_str().unwrap(), "hi"]);
    let output = output(command);
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = String::from_utf8(output.stdout)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let switch = events
        .iter()
        .find(|event| event["type"] == "model_switch")
        .unwrap_or_else(|| panic!("no model_switch: {events:?}"));
    assert_eq!(switch["from"], "primary-model");
    assert_eq!(switch["to"], "backup-model");
    assert!(
        switch["reason"].as_str().unwrap().contains("503"),
        "{switch}"
    );
    assert_eq!(
        events.last().unwrap()["type"],
        "turn_complete",
        "{events:?}"
    );
    // Each model got its own name and its own key.
    let body = request_bodies(&backup).await.pop().unwrap();
    assert_eq!(body["model"], "backup-model");
    let authorization = |requests: Vec<wiremock::Request>| {
        let chat = requests
            .into_iter()
            .find(|request| request.url.path() == "/v1/chat/completions")
            .expect("a chat request");
        chat.headers
            .get("authorization")
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned()
    };
    assert_eq!(
        authorization(backup.received_requests().await.unwrap()),
        "Bearer sk-backup"
    );
    assert_eq!(
        authorization(failing.received_requests().await.unwrap()),
        "Bearer sk-primary"
    );
}

/// The (path, key header value) of the first request `server` got, reading `header`.
async fn first_request(server: &MockServer, header: &str) -> (String, Option<String>) {
    let requests = server.received_requests().await.unwrap_or_default();
    let request = requests.first().expect("a request");
    (
        request.url.path().to_owned(),
        request
            .headers
            .get(header)
            .map(|value| value.to_str().unwrap().to_owned()),
    )
}

/// Flags, base path, key variables set, the key's header, the expected path and header value.
type Case = (
    &'static [&'static str],
    &'static str,
    &'static [(&'static str, &'static str)],
    &'static str,
    &'static str,
    &'static str,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_gets_its_resource_path_and_its_key_header() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [Case; 6] = [
        (
            &["--model", "anthropic:claude-sonnet-4-5"],
            "/v1",
            &[
                ("ANTHROPIC_API_KEY", "anthropic-canary"),
                ("OPENAI_API_KEY", "sk-other"),
            ],
            "x-api-key",
            "/v1/messages",
            "anthropic-canary",
        ),
        (
            &["--model", "gemini:m"],
            "/v1beta",
            &[
                ("GOOGLE_API_KEY", "google-canary"),
                ("OPENAI_API_KEY", "sk-other"),
            ],
            "x-goog-api-key",
            "/v1beta/models/m:streamGenerateContent",
            "google-canary",
        ),
        (
            &["--model", "gemini:m"],
            "/v1beta",
            &[
                ("GEMINI_API_KEY", "gemini-canary"),
                ("GOOGLE_API_KEY", "google-canary"),
            ],
            "x-goog-api-key",
            "/v1beta/models/m:streamGenerateContent",
            "gemini-canary",
        ),
        (
            &["--model", "gemini:m", "--no-stream"],
            "/v1beta",
            &[("GEMINI_API_KEY", "gemini-canary")],
            "x-goog-api-key",
            "/v1beta/models/m:generateContent",
            "gemini-canary",
        ),
        (
            &["--provider", "openai-responses", "--model", "m"],
            "/v1",
            &[
                ("OPENAI_API_KEY", "sk-canary"),
                ("GEMINI_API_KEY", "gemini-other"),
            ],
            "authorization",
            "/v1/responses",
            "Bearer sk-canary",
        ),
        (
            &["--model", "gemini:m", "--api-key-env", "MY_KEY"],
            "/v1beta",
            &[("MY_KEY", "my-canary"), ("GEMINI_API_KEY", "gemini-other")],
            "x-goog-api-key",
            "/v1beta/models/m:streamGenerateContent",
            "my-canary",
        ),
    ];
    for (flags, base, keys, header, expected_path, expected_key) in cases {
        let server = recorder().await;
        let mut command = agcore(dir.path());
        command
            .args(["run", "--base-url", &format!("{}{base}", server.uri())])
            .args(flags)
            .arg("hi");
        for (name, value) in keys {
            command.env(name, value);
        }
        let output = output(command);
        // The recorder answers 404: a failed run, after exactly one request.
        assert!(!output.status.success(), "{flags:?}: {output:?}");
        let (path, key) = first_request(&server, header).await;
        assert_eq!(path, expected_path, "{flags:?}");
        assert_eq!(key.as_deref(), Some(expected_key), "{flags:?}");
    }
}

/// `agcore` for Bedrock: no AWS settings of the machine's own, no instance metadata.
fn bedrock_command(dir: &std::path::Path) -> std::process::Command {
    let mut command = agcore(dir);
    for name in [
        "AWS_PROFILE",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_BEARER_TOKEN_BEDROCK",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME",
    ] {
        command.env_remove(name);
    }
    command.env("AWS_EC2_METADATA_DISABLED", "true");
    command
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bedrock_signs_with_the_environment_s_keys_or_sends_its_api_key() {
    let dir = tempfile::tempdir().unwrap();
    let model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";
    // SigV4 with the keys of the environment, the endpoint from AWS_ENDPOINT_URL_BEDROCK_RUNTIME.
    let server = recorder().await;
    let mut command = bedrock_command(dir.path());
    command
        .env("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", server.uri())
        .env("AWS_REGION", "eu-central-1")
        .env("AWS_ACCESS_KEY_ID", "AKIDCANARY")
        .env("AWS_SECRET_ACCESS_KEY", "secret-canary")
        .env("AWS_SESSION_TOKEN", "token-canary")
        .args(["run", "--model", &format!("bedrock:{model}"), "hi"]);
    let out = output(command);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains("secret-canary") && !stderr.contains("token-canary"),
        "{stderr}"
    );
    let (path, authorization) = first_request(&server, "authorization").await;
    assert_eq!(path, format!("/model/{model}/converse-stream"));
    let authorization = authorization.unwrap();
    assert!(
        authorization.starts_with("AWS4-HMAC-SHA256 Credential=AKIDCANARY/")
            && authorization.contains("/eu-central-1/bedrock/aws4_request"),
        "{authorization}"
    );
    let (_, token) = first_request(&server, "x-amz-security-token").await;
    assert_eq!(token.as_deref(), Some("token-canary"));

    // A Bedrock API key is a bearer token; the region comes from the config.
    let server = recorder().await;
    std::fs::write(
        dir.path().join("bedrock.toml"),
        "[model]\nprovider = \"bedrock\"\nregion = \"us-west-2\"\n",
    )
    .unwrap();
    let mut command = bedrock_command(dir.path());
    command
        .env("AWS_BEARER_TOKEN_BEDROCK", "bedrock-canary")
        .args([
            "run",
            "--config",
            "bedrock.toml",
            "--base-url",
            &server.uri(),
        ])
        .args(["--model", model, "--no-stream", "hi"]);
    let _ = output(command);
    let (path, authorization) = first_request(&server, "authorization").await;
    assert_eq!(path, format!("/model/{model}/converse"));
    assert_eq!(authorization.as_deref(), Some("Bearer bedrock-canary"));

    // Without a region the error says where to set one.
    let mut command = bedrock_command(dir.path());
    command.args(["run", "--provider", "bedrock", "--model", model, "hi"]);
    let out = output(command);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("AWS_REGION"), "{stderr}");
}
