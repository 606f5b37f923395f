//! `BedrockClient` against a local fake Bedrock runtime (`tests/support/bedrock_fake.rs`) that
//! verifies every request's SigV4 signature with AWS's signer and the Converse rules, and
//! streams real AWS event-stream frames: a tool loop with reasoning kept byte-exact through a
//! save and restore, throttling retried, validation not, credentials refreshed once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use agcore::llm::bedrock::{BedrockClient, BedrockConfig};
use agcore::llm::{CycleConfig, LlmCycle, LlmError, OpenaiChatMessage, RetryPolicy, StreamEvent};
use agcore::tools::prelude::*;
use agcore::vocab::{ArtifactPlace, ArtifactProvider, ReasoningEffort};
use aws_credential_types::Credentials;
use aws_credential_types::provider::{ProvideCredentials, SharedCredentialsProvider, future};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::support::bedrock_fake::{
    ACCESS_KEY, BedrockFake, REGION, Reply, SECRET_KEY, SESSION_TOKEN,
};

const MODEL: &str = "us.anthropic.claude-sonnet-4-5-20250929-v1:0";

/// Hands out credentials from a list (the last one again when the list runs out) and counts
/// the calls.
#[derive(Debug)]
struct Keys {
    list: Vec<Credentials>,
    calls: AtomicUsize,
}

impl ProvideCredentials for Keys {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let credentials = self.list[call.min(self.list.len() - 1)].clone();
        future::ProvideCredentials::ready(Ok(credentials))
    }
}

fn keys(list: Vec<Credentials>) -> Arc<Keys> {
    Arc::new(Keys {
        list,
        calls: AtomicUsize::new(0),
    })
}

fn valid(expires_in: Option<Duration>) -> Credentials {
    Credentials::new(
        ACCESS_KEY,
        SECRET_KEY,
        Some(SESSION_TOKEN.into()),
        expires_in.map(|after| SystemTime::now() + after),
        "test",
    )
}

#[derive(Debug, Clone)]
struct Shared(Arc<Keys>);

impl ProvideCredentials for Shared {
    fn provide_credentials<'a>(&'a self) -> future::ProvideCredentials<'a>
    where
        Self: 'a,
    {
        self.0.provide_credentials()
    }
}

fn client_with(fake: &BedrockFake, keys: &Arc<Keys>) -> BedrockClient {
    BedrockClient::new(
        BedrockConfig::new(REGION)
            .with_base_url(fake.base_url())
            .with_credentials_provider(SharedCredentialsProvider::new(Shared(keys.clone()))),
    )
    .unwrap()
}

fn client(fake: &BedrockFake) -> BedrockClient {
    client_with(fake, &keys(vec![valid(None)]))
}

fn config(model: &str) -> CycleConfig {
    let mut config = CycleConfig::new(model);
    config.options.reasoning_effort = Some(ReasoningEffort::Low);
    config.retry = RetryPolicy {
        max_retries: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
    };
    config
}

struct Weather;

#[async_trait]
impl BaseTool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        match args["city"].as_str() {
            Some("Paris") => Ok(json!({"city": "Paris", "temperature": 22})),
            other => Err(ToolError::ExecutionFailed(
                "get_weather".into(),
                format!("no such city: {other:?}"),
            )),
        }
    }
}

fn registry() -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather)).unwrap();
    registry
}

async fn run(cycle: &mut LlmCycle, prompt: &str, stream: bool) -> Result<String, LlmError> {
    let registry = registry();
    if !stream {
        return cycle
            .submit_with_tools(prompt.into(), &registry)
            .await
            .map(|reply| reply.text());
    }
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools(prompt.into(), &registry)
        .await?
        .collect()
        .await;
    match events.last() {
        Some(StreamEvent::Error { kind, message, .. }) => {
            Err(LlmError::Other(format!("{kind}: {message}")))
        }
        _ => Ok(cycle
            .messages()
            .last()
            .and_then(|m| m.text())
            .unwrap_or_default()),
    }
}

/// The signed reasoning block of the tool turn, with non-ASCII text and a signature with
/// `+`, `/` and `=` that must come back exactly.
fn reasoning_block() -> Value {
    json!({"reasoningContent": {"reasoningText": {
        "text": "Two cities: Paris and Tōkyō (東京). Check both.",
        "signature": "EqQBCkgIARABGAIiQL+/sig=="
    }}})
}

fn tool_turn() -> Value {
    json!({
        "output": {"message": {"role": "assistant", "content": [
            reasoning_block(),
            {"reasoningContent": {"redactedContent": "EmwKAhgBEgz+redacted/=="}},
            {"text": "Checking both."},
            {"toolUse": {"toolUseId": "tooluse_Paris01", "name": "get_weather", "input": {"city": "Paris"}}},
            {"toolUse": {"toolUseId": "tooluse_Tokyo02", "name": "get_weather", "input": {"city": "Tokyo"}}}
        ]}},
        "stopReason": "tool_use",
        "usage": {"inputTokens": 400, "outputTokens": 120, "totalTokens": 2056, "cacheReadInputTokens": 0, "cacheWriteInputTokens": 1536},
        "metrics": {"latencyMs": 900}
    })
}

fn answer(text: &str) -> Value {
    json!({
        "output": {"message": {"role": "assistant", "content": [
            {"reasoningContent": {"reasoningText": {"text": "Summarise.", "signature": "c2lnLWFuc3dlcg=="}}},
            {"text": text}
        ]}},
        "stopReason": "end_turn",
        "usage": {"inputTokens": 90, "outputTokens": 30, "totalTokens": 1656, "cacheReadInputTokens": 1536, "cacheWriteInputTokens": 0},
        "metrics": {"latencyMs": 300}
    })
}

#[tokio::test]
async fn a_signed_tool_loop_keeps_reasoning_byte_exact_through_a_resume() {
    for stream in [false, true] {
        let fake = BedrockFake::start(vec![
            Reply::Converse(tool_turn()),
            Reply::Converse(answer("Paris: 22 °C. Tokyo: no data.")),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL)).with_system_prompt("Be brief.");
        let text = run(&mut cycle, "Weather in Paris and Tokyo?", stream).await;
        fake.assert_no_rejections();
        assert_eq!(
            text.unwrap(),
            "Paris: 22 °C. Tokyo: no data.",
            "stream {stream}"
        );
        let received = fake.received();
        assert_eq!(received.len(), 2);
        let expected_path = format!(
            "/model/{}/{}",
            MODEL,
            if stream {
                "converse-stream"
            } else {
                "converse"
            }
        );
        assert_eq!(received[0].path, expected_path);
        assert_eq!(received[0].access_key.as_deref(), Some(ACCESS_KEY));
        let second = &received[1].body;
        // Reasoning stays on in the loop: the reply's reasoning block leads it.
        assert_eq!(
            second["additionalModelRequestFields"]["thinking"],
            json!({"type": "enabled", "budget_tokens": 2048})
        );
        let results = &second["messages"][2]["content"];
        assert_eq!(results[0]["toolResult"]["toolUseId"], "tooluse_Paris01");
        assert!(results[0]["toolResult"].get("status").is_none());
        assert_eq!(results[1]["toolResult"]["toolUseId"], "tooluse_Tokyo02");
        assert_eq!(results[1]["toolResult"]["status"], "error");
        let reply = &cycle.messages()[2];
        let artifacts = reply.artifacts();
        assert_eq!(artifacts.len(), 2);
        assert!(
            artifacts
                .iter()
                .all(|a| a.provider == ArtifactProvider::Bedrock
                    && a.model.as_deref() == Some(MODEL)
                    && a.place == ArtifactPlace::Before(0))
        );
        let usage = cycle.usage().tokens;
        assert_eq!(usage.prompt_tokens, (400 + 1536) + (90 + 1536));
        assert_eq!(usage.cached_tokens, Some(1536));

        // Saved and restored: the same model gets every block back byte-exact.
        let saved = serde_json::to_string(cycle.messages()).unwrap();
        let restored: Vec<OpenaiChatMessage> = serde_json::from_str(&saved).unwrap();
        fake.push(Reply::Converse(answer("Tomorrow: rain.")));
        let mut resumed = LlmCycle::from_history(client(&fake), config(MODEL), restored);
        assert_eq!(
            run(&mut resumed, "And tomorrow?", stream).await.unwrap(),
            "Tomorrow: rain."
        );
        fake.assert_no_rejections();
        let resumed_text = &fake.received()[2].text;
        assert!(
            resumed_text.contains(&reasoning_block().to_string()),
            "{resumed_text}"
        );

        // Another model: none of the signed blocks go there.
        fake.push(Reply::Converse(answer("Done.")));
        let mut other = LlmCycle::from_history(
            client(&fake),
            config("anthropic.claude-opus-4-1-20250805-v1:0"),
            cycle.messages().to_vec(),
        );
        assert_eq!(run(&mut other, "Thanks.", stream).await.unwrap(), "Done.");
        fake.assert_no_rejections();
        assert!(!fake.received()[3].text.contains("reasoningContent"));
    }
}

#[tokio::test]
async fn a_bad_signature_is_refused_by_the_checking_fake() {
    let fake = BedrockFake::start(vec![Reply::Converse(answer("never"))]).await;
    let wrong = Credentials::new(
        ACCESS_KEY,
        "not-the-secret",
        Some(SESSION_TOKEN.into()),
        None,
        "test",
    );
    let mut cycle = LlmCycle::new(client_with(&fake, &keys(vec![wrong])), config(MODEL));
    let error = run(&mut cycle, "Hi", false).await.unwrap_err();
    assert!(
        format!("{error:?}").contains("signature we calculated does not match"),
        "{error:?}"
    );
    let received = fake.received();
    assert_eq!(received.len(), 1, "an authentication error is not retried");
    assert!(received[0].rejection.is_some());
}

#[tokio::test]
async fn throttling_is_retried_signed_anew_and_validation_is_not() {
    for stream in [false, true] {
        // A stream's second attempt fails with an exception frame; a whole reply's with a 503.
        let second = if stream {
            Reply::StreamException("throttlingException", "Too many tokens, please wait.")
        } else {
            Reply::Status(503, "ServiceUnavailableException", "Service unavailable.")
        };
        let fake = BedrockFake::start(vec![
            Reply::Status(
                429,
                "ThrottlingException",
                "Too many requests, please wait before trying again.",
            ),
            second,
            Reply::Converse(answer("Hello.")),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        assert_eq!(run(&mut cycle, "Hi", stream).await.unwrap(), "Hello.");
        assert_eq!(fake.received().len(), 3);
        fake.assert_no_rejections();
        let received = fake.received();
        assert_eq!(
            received[0].text, received[1].text,
            "the retry sends the same body"
        );

        let fake = BedrockFake::start(vec![
            Reply::Status(
                400,
                "ValidationException",
                "The model returned the following errors: bad",
            ),
            Reply::Converse(answer("never")),
        ])
        .await;
        let mut cycle = LlmCycle::new(client(&fake), config(MODEL));
        let error = run(&mut cycle, "Hi", stream).await.unwrap_err();
        assert!(
            format!("{error:?}").contains("ValidationException"),
            "{error:?}"
        );
        assert_eq!(
            fake.received().len(),
            1,
            "a validation error is not retried"
        );
    }
}

#[tokio::test]
async fn expiring_credentials_are_refreshed_once_not_per_request() {
    let fake = BedrockFake::start(vec![
        Reply::Converse(answer("1")),
        Reply::Converse(answer("2")),
        Reply::Converse(answer("3")),
    ])
    .await;
    // The first credentials expire within the refresh margin; the next last an hour.
    let keys = keys(vec![
        valid(Some(Duration::from_secs(60))),
        valid(Some(Duration::from_secs(3600))),
    ]);
    let client = client_with(&fake, &keys);
    for (turn, expected) in ["1", "2", "3"].into_iter().enumerate() {
        let mut cycle = LlmCycle::new(client.clone(), config(MODEL));
        assert_eq!(
            run(&mut cycle, "Hi", turn % 2 == 0).await.unwrap(),
            expected
        );
    }
    fake.assert_no_rejections();
    // Fetched for the first request, then once more because they were about to expire.
    assert_eq!(keys.calls.load(Ordering::SeqCst), 2);
}

#[test]
fn the_checking_fake_refuses_edited_reasoning_and_unanswered_calls() {
    use crate::support::bedrock_fake::check_shape;
    let served = vec![(
        MODEL.to_owned(),
        tool_turn()["output"]["message"]["content"]
            .as_array()
            .unwrap()
            .clone(),
    )];
    let mut content = served[0].1.clone();
    let request = |content: &Vec<Value>, results: Value| {
        json!({"messages": [
            {"role": "user", "content": [{"text": "Weather?"}]},
            {"role": "assistant", "content": content},
            {"role": "user", "content": results}
        ]})
    };
    let results = json!([
        {"toolResult": {"toolUseId": "tooluse_Paris01", "content": [{"text": "22"}]}},
        {"toolResult": {"toolUseId": "tooluse_Tokyo02", "content": [{"text": "?"}]}}
    ]);
    assert_eq!(
        check_shape(&request(&content, results.clone()), "", MODEL, &served),
        Ok(())
    );
    content[0]["reasoningContent"]["reasoningText"]["text"] = json!("Two cities: Paris and Tokyo.");
    assert!(check_shape(&request(&content, results.clone()), "", MODEL, &served).is_err());
    let unanswered =
        json!([{"toolResult": {"toolUseId": "tooluse_Paris01", "content": [{"text": "22"}]}}]);
    assert!(check_shape(&request(&served[0].1, unanswered), "", MODEL, &served).is_err());
    assert!(check_shape(&request(&served[0].1, results), "", "other-model", &served).is_err());
}
