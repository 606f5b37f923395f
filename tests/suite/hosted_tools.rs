//! Hosted tools (issue 36, item 2): for each API, the tool turned on goes out in the API's own
//! shape, its call and result blocks stream to the caller as hosted tool events with a kind
//! and come back byte-exact on the next request (the fakes compare them with what they
//! served), web searches are counted in the usage and priced, restricted mode keeps them off,
//! and another model gets the blocks dropped. The fixtures are parsed by the vendors' SDKs in
//! `provider_anthropic`, `provider_responses` and `provider_gemini` (every fixture of each
//! folder), and the Gemini requests by `check_gemini.py --request`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::anthropic_fake::{self, AnthropicFake, Reply};
use crate::support::gemini_fake::{self, GeminiFake};
use crate::support::responses_fake::{Answer, ResponsesFake};

use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig};
use agcore::llm::hosted::HostedTool;
use agcore::llm::{
    CycleConfig, GeminiClient, GeminiConfig, LlmCycle, LlmError, OpenAiResponsesClient,
    OpenAiResponsesConfig, Prices, StreamEvent,
};
use agcore::tools::exposure::ExposurePolicy;
use agcore::tools::prelude::*;
use agcore::tools::{HiddenBecause, PermissionChecker, PermissionConfig, ToolKind};
use futures::StreamExt;
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

/// A registry with `save_note`, Shell allowed (code execution), restricted or not.
fn registry(restricted: bool) -> ToolRegistry {
    let permissions = PermissionConfig {
        allowed: vec![Permission::Read, Permission::Network, Permission::Shell],
        denied: vec![Permission::Delete],
        allow_unspecified: true,
    };
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(permissions))
        .with_exposure(ExposurePolicy::default().with_restricted_mode(restricted));
    registry.register(Arc::new(SaveNote)).unwrap();
    registry
}

fn web_search() -> HostedTool {
    HostedTool::WebSearch {
        max_uses: Some(2),
        allowed_domains: vec!["wikipedia.org".into()],
        blocked_domains: Vec::new(),
    }
}

fn noted_reply() -> Reply {
    Reply::Status(
        200,
        Vec::new(),
        json!({"id": "msg_2", "type": "message", "role": "assistant",
            "model": "claude-sonnet-4-5", "content": [{"type": "text", "text": "Noted."}],
            "stop_reason": "end_turn", "stop_sequence": null,
            "usage": {"input_tokens": 10, "output_tokens": 2}})
        .to_string(),
    )
}

fn anthropic(fake: &AnthropicFake) -> AnthropicClient {
    AnthropicClient::new(AnthropicConfig::new(fake.base_url()).with_api_key("test-key")).unwrap()
}

async fn events_of(cycle: &mut LlmCycle, prompt: &str, tools: &ToolRegistry) -> Vec<StreamEvent> {
    cycle
        .run_stream(Some(prompt.into()), Some(tools))
        .await
        .unwrap()
        .collect()
        .await
}

#[test]
fn the_anthropic_fake_refuses_a_server_tool_without_its_beta() {
    let body = json!({"tools": [{"type": "web_fetch_20250910", "name": "web_fetch"}]});
    let error = anthropic_fake::check_hosted_tools("", &body).unwrap_err();
    assert!(error.contains("web-fetch-2025-09-10"), "{error}");
    assert!(anthropic_fake::check_hosted_tools("other,web-fetch-2025-09-10", &body).is_ok());
    let unknown = json!({"tools": [{"type": "web_search_2099", "name": "web_search"}]});
    assert!(anthropic_fake::check_hosted_tools("", &unknown).is_err());
}

#[tokio::test]
async fn anthropic_server_tools_go_out_with_their_betas_and_come_back_byte_exact() {
    let fake =
        AnthropicFake::start(vec![Reply::Fixture("web_search_then_call"), noted_reply()]).await;
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    config.options.hosted_tools = vec![
        web_search(),
        HostedTool::from_name("web_fetch").unwrap(),
        HostedTool::CodeExecution,
    ];
    config.prices = Some(Prices {
        input: 3.0,
        output: 15.0,
        web_searches_per_thousand: 10.0,
        ..Prices::default()
    });
    let registry = registry(false);
    let mut cycle = LlmCycle::new(anthropic(&fake), config);
    let reply = cycle
        .run(
            Some("When was Claude Shannon born?".into()),
            Some(&registry),
        )
        .await
        .unwrap();
    // The fake refuses web_fetch / code_execution without their `anthropic-beta`, and server
    // blocks that do not come back byte for byte.
    fake.assert_no_rejections();
    assert_eq!(reply.text(), "Noted.");
    let received = fake.received();
    assert_eq!(received.len(), 2);
    // The tools as the request fixture has them (which the SDK parses as MessageCreateParams).
    let expected: Value =
        serde_json::from_str(&anthropic_fake::fixture("hosted_tools.request.json")).unwrap();
    assert_eq!(received[0].body["tools"], expected["tools"]);
    // The server blocks went back as served, in place, byte for byte.
    let served: Value =
        serde_json::from_str(&anthropic_fake::fixture("web_search_then_call.json")).unwrap();
    let messages = received[1].body["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    for (sent, served) in assistant["content"]
        .as_array()
        .unwrap()
        .iter()
        .zip(served["content"].as_array().unwrap())
        .take(2)
    {
        assert_eq!(sent.to_string(), served.to_string());
    }
    // One web search, counted and priced.
    let usage = cycle.usage();
    assert_eq!(usage.web_search_requests(), 1);
    assert!(usage.to_string().contains(", 1 web search"), "{usage}");
    let prices = cycle.config().prices.unwrap();
    let tokens_only = Prices {
        web_searches_per_thousand: 0.0,
        ..prices
    };
    assert!((usage.cost(&prices) - usage.cost(&tokens_only) - 0.01).abs() < 1e-12);
}

#[tokio::test]
async fn anthropic_hosted_calls_results_and_citations_stream_with_a_kind() {
    let fake = AnthropicFake::start(vec![Reply::Fixture("web_search_cited")]).await;
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    config.options.hosted_tools = vec![web_search()];
    let registry = registry(false);
    let mut cycle = LlmCycle::new(anthropic(&fake), config);
    let events = events_of(&mut cycle, "When was Claude Shannon born?", &registry).await;
    fake.assert_no_rejections();
    let call = events
        .iter()
        .find_map(|event| match event {
            StreamEvent::HostedToolCall {
                id,
                tool_name,
                kind,
                input,
            } => Some((id.clone(), tool_name.clone(), *kind, input.clone())),
            _ => None,
        })
        .expect("a hosted call event");
    assert_eq!(
        call,
        (
            "srvtoolu_01A8FqvLyx3GZ3eb8Zrk2S1t".to_owned(),
            "web_search".to_owned(),
            ToolKind::Search,
            json!({"query": "claude shannon birth date"})
        )
    );
    assert!(events.iter().any(|event| matches!(event,
        StreamEvent::HostedToolResult { id, kind: ToolKind::Search, is_error: false, output, .. }
            if id == "srvtoolu_01A8FqvLyx3GZ3eb8Zrk2S1t" && output["type"] == "web_search_tool_result")));
    // The citation spans the text block it belongs to.
    let text = cycle.messages().last().unwrap().text().unwrap();
    let citation = events
        .iter()
        .find_map(|event| match event {
            StreamEvent::Citation { citation } => Some(citation.clone()),
            _ => None,
        })
        .expect("a citation event");
    assert_eq!(citation.url, "https://en.wikipedia.org/wiki/Claude_Shannon");
    assert_eq!(
        &text[citation.start.unwrap()..citation.end.unwrap()],
        "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan"
    );
    assert_eq!(cycle.usage().web_search_requests(), 1);
}

#[tokio::test]
async fn restricted_mode_keeps_web_search_and_code_execution_off_and_says_why() {
    let fake = AnthropicFake::start(vec![noted_reply()]).await;
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    config.options.hosted_tools = vec![web_search(), HostedTool::CodeExecution];
    let registry = registry(true);
    let mut cycle = LlmCycle::new(anthropic(&fake), config.clone());
    cycle
        .run(Some("Search the web.".into()), Some(&registry))
        .await
        .unwrap();
    fake.assert_no_rejections();
    let tools = &fake.received()[0].body["tools"];
    assert_eq!(tools.as_array().unwrap().len(), 1, "{tools}");
    assert_eq!(tools[0]["name"], "save_note");
    let report = registry.hosted_exposure(
        &config.options.hosted_tools,
        "anthropic",
        "claude-sonnet-4-5",
    );
    assert!(report.iter().all(|row| !row.exposed));
    assert_eq!(
        report[0].hidden_because,
        vec![HiddenBecause::RestrictedMode {
            permissions: vec![Permission::Network]
        }]
    );
    assert_eq!(
        report[0].hidden_because[0].to_string(),
        "restricted mode: needs Network"
    );
}

#[tokio::test]
async fn another_model_gets_the_server_blocks_dropped() {
    let fake = AnthropicFake::start(vec![
        Reply::Fixture("web_search_then_call"),
        noted_reply(),
        noted_reply(),
    ])
    .await;
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    config.options.hosted_tools = vec![web_search()];
    let registry = registry(false);
    let mut cycle = LlmCycle::new(anthropic(&fake), config.clone());
    cycle
        .run(
            Some("When was Claude Shannon born?".into()),
            Some(&registry),
        )
        .await
        .unwrap();
    let history = cycle.messages().to_vec();
    config.model = "claude-opus-4-1".into();
    let mut other = LlmCycle::from_history(anthropic(&fake), config, history);
    other
        .run(Some("And now?".into()), Some(&registry))
        .await
        .unwrap();
    fake.assert_no_rejections();
    let body = &fake.received()[2].body;
    let text = body["messages"].to_string();
    assert!(!text.contains("server_tool_use"), "{text}");
    assert!(!text.contains("web_search_tool_result"), "{text}");
    // The text and the call are still there.
    assert!(text.contains("toolu_01NRLabsLyVHZPKxbKvkfSMn"), "{text}");
}

#[tokio::test]
async fn an_api_without_the_tool_fails_the_request_naming_each_apis_tools() {
    let fake = GeminiFake::start(Vec::new()).await;
    let client =
        GeminiClient::new(GeminiConfig::new(&fake.base_url).with_api_key(gemini_fake::API_KEY))
            .unwrap();
    let mut config = CycleConfig::new("gemini-2.5-flash");
    config.options.hosted_tools = vec![web_search()];
    let mut cycle = LlmCycle::new(client, config);
    let error = cycle
        .run(Some("Search.".into()), Some(&registry(false)))
        .await
        .unwrap_err();
    assert!(
        matches!(error, LlmError::UnsupportedHostedTool(_)),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("gemini: google_search, code_execution, url_context"),
        "{text}"
    );
    assert!(fake.received().is_empty());
}

#[tokio::test]
async fn responses_web_search_items_come_back_byte_exact_and_are_counted() {
    let fake = ResponsesFake::start(|_, n| match n {
        0 => Answer::Reply {
            stream: "response_web_search_call.json",
            whole: "response_web_search_call.json",
        },
        _ => Answer::Reply {
            stream: "stream_reasoning_text.sse",
            whole: "response_reasoning_text.json",
        },
    })
    .await;
    let client = OpenAiResponsesClient::new(
        OpenAiResponsesConfig::new(fake.base_url()).with_api_key("sk-test"),
    )
    .unwrap();
    let mut config = CycleConfig::new("gpt-5");
    config.options.hosted_tools = vec![
        HostedTool::from_name("web_search").unwrap(),
        HostedTool::CodeInterpreter,
        HostedTool::FileSearch {
            vector_store_ids: vec!["vs_1".into()],
            max_num_results: Some(4),
        },
    ];
    let registry = registry(false);
    let mut cycle = LlmCycle::new(client, config);
    cycle
        .run(
            Some("When was Claude Shannon born?".into()),
            Some(&registry),
        )
        .await
        .unwrap();
    // The fake refuses a web_search_call item that is not the one it issued, byte for byte.
    assert!(fake.rejected().is_empty(), "{:?}", fake.rejected());
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let tools = requests[0]["tools"].as_array().unwrap();
    assert_eq!(
        tools[1..],
        [
            json!({"type": "web_search"}),
            json!({"type": "code_interpreter", "container": {"type": "auto"}}),
            json!({"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 4}),
        ]
    );
    let served: Value = serde_json::from_str(&crate::support::responses_fake::fixture(
        "response_web_search_call.json",
    ))
    .unwrap();
    let input = requests[1]["input"].as_array().unwrap();
    let sent = input
        .iter()
        .find(|item| item["type"] == "web_search_call")
        .unwrap();
    assert_eq!(sent.to_string(), served["output"][0].to_string());
    // In place: before the message and the call that followed it.
    let position = |kind: &str| input.iter().position(|item| item["type"] == kind).unwrap();
    assert!(position("web_search_call") < position("function_call"));
    assert_eq!(cycle.usage().web_search_requests(), 1);
}

#[tokio::test]
async fn gemini_code_execution_and_search_are_sent_kept_and_counted() {
    let fake = GeminiFake::start(vec![
        gemini_fake::Reply::json(200, "generate_content_hosted_tools.json"),
        gemini_fake::Reply::json(200, "generate_content_answer_signed_text.json"),
    ])
    .await;
    let client =
        GeminiClient::new(GeminiConfig::new(&fake.base_url).with_api_key(gemini_fake::API_KEY))
            .unwrap();
    let mut config = CycleConfig::new("gemini-2.5-flash");
    config.options.hosted_tools = vec![
        HostedTool::GoogleSearch,
        HostedTool::CodeExecution,
        HostedTool::UrlContext,
    ];
    let registry = registry(false);
    let mut cycle = LlmCycle::new(client, config);
    let events = events_of(&mut cycle, "When was Shannon born?", &registry).await;
    let received = fake.received();
    assert!(
        received.iter().all(|r| r.violation.is_none()),
        "{received:?}"
    );
    assert_eq!(received.len(), 2);
    let tools = received[0].body["tools"].as_array().unwrap();
    assert_eq!(
        tools[1..],
        [
            json!({"googleSearch": {}}),
            json!({"codeExecution": {}}),
            json!({"urlContext": {}})
        ]
    );
    // The official SDK's request types accept both bodies.
    crate::suite::provider_gemini::sdk_accepts_requests(&fake);
    // The code parts go back as served, in place.
    let served: Value =
        serde_json::from_str(&gemini_fake::fixture("generate_content_hosted_tools.json")).unwrap();
    let model_turn = received[1].body["contents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|content| content["role"] == "model")
        .unwrap()
        .clone();
    let parts = model_turn["parts"].as_array().unwrap();
    let served_parts = served["candidates"][0]["content"]["parts"]
        .as_array()
        .unwrap();
    assert_eq!(parts[1].to_string(), served_parts[1].to_string());
    assert_eq!(parts[2].to_string(), served_parts[2].to_string());
    assert!(events.iter().any(|event| matches!(event,
        StreamEvent::HostedToolCall { tool_name, kind: ToolKind::Execute, .. } if tool_name == "code_execution")));
    assert!(events.iter().any(|event| matches!(
        event,
        StreamEvent::HostedToolResult {
            is_error: false,
            kind: ToolKind::Execute,
            ..
        }
    )));
    assert!(events.iter().any(|event| matches!(event,
        StreamEvent::Citation { citation } if citation.start == Some(0) && citation.end == Some(35))));
    assert_eq!(cycle.usage().web_search_requests(), 1);
}
