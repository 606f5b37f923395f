//! Blocks of the tools Anthropic runs itself (issue 36, item 2's bug): a reply with a
//! `server_tool_use` and its `web_search_tool_result` goes back to the API byte-exact and in
//! place on the next request of the tool loop — the Anthropic fake compares every assistant
//! message it receives with the reply it served, and the fixture
//! (`tests/fixtures/providers/anthropic/web_search_then_call.json`) is parsed by the official
//! `anthropic` SDK in `suite::provider_anthropic::every_fixture_parses_with_the_anthropic_sdk`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::anthropic_fake::{AnthropicFake, Reply, fixture};

use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig};
use agcore::llm::{CycleConfig, LlmCycle};
use agcore::run::{RunOutcome, RunRequest};
use agcore::tools::prelude::*;
use serde_json::{Value, json};

struct SaveNote;

#[async_trait]
impl BaseTool for SaveNote {
    fn name(&self) -> &str {
        "save_note"
    }
    fn description(&self) -> &str {
        "Save a note"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("saved"))
    }
}

#[tokio::test]
async fn a_web_search_reply_goes_back_byte_exact_on_the_next_request() {
    let fake = AnthropicFake::start(vec![
        Reply::Fixture("web_search_then_call"),
        Reply::Status(
            200,
            Vec::new(),
            json!({"id": "msg_2", "type": "message", "role": "assistant",
                "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Noted."}],
                "stop_reason": "end_turn", "stop_sequence": null,
                "usage": {"input_tokens": 10, "output_tokens": 2}})
            .to_string(),
        ),
    ])
    .await;
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(SaveNote)).unwrap();
    let client =
        AnthropicClient::new(AnthropicConfig::new(fake.base_url()).with_api_key("test-key"))
            .unwrap();
    let mut cycle = LlmCycle::new(client, CycleConfig::new("claude-sonnet-4-5"));
    let outcome = cycle
        .run_with(
            RunRequest::prompt("When was Claude Shannon born? Note it.").with_tools(&registry),
        )
        .await
        .unwrap();
    fake.assert_no_rejections();
    assert!(matches!(outcome, RunOutcome::Finished(ref reply) if reply.text() == "Noted."));
    let received = fake.received();
    assert_eq!(received.len(), 2);
    // The assistant message sent back is the served content, block for block.
    let served: Value = serde_json::from_str(&fixture("web_search_then_call.json")).unwrap();
    let messages = received[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    assert_eq!(assistant["content"], served["content"]);
}
