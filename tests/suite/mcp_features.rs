//! MCP client features against `@modelcontextprotocol/server-everything` (stdio): elicitation
//! through an `Elicitor` (schema defaults, validation, decline without one) and roots.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::tools::mcp::{
    ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor, McpClient, McpTransport,
};
use serde_json::{Map, Value, json};
use support::mcp::npm_script;

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

fn everything() -> Option<McpTransport> {
    let script = npm_script(EVERYTHING, "dist/index.js")?;
    Some(McpTransport::Stdio {
        command: "node".into(),
        args: vec![script.to_string_lossy().into_owned(), "stdio".into()],
    })
}

/// Answers with fixed content and remembers what it was asked.
struct Scripted {
    answer: ElicitationResponse,
    asked: Mutex<Vec<ElicitationRequest>>,
}

#[async_trait::async_trait]
impl Elicitor for Scripted {
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse {
        self.asked.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

fn scripted(answer: ElicitationResponse) -> Arc<Scripted> {
    Arc::new(Scripted {
        answer,
        asked: Mutex::new(Vec::new()),
    })
}

async fn elicit_with(elicitor: Arc<Scripted>) -> String {
    let transport = everything().unwrap();
    let mut client = McpClient::new("everything", transport).with_elicitor(elicitor);
    tokio::time::timeout(Duration::from_secs(60), client.connect())
        .await
        .unwrap()
        .unwrap();
    let call = client.call_tool("trigger-elicitation-request", json!({}));
    let result = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap()
        .unwrap();
    client.close().await.unwrap();
    match result {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

#[tokio::test]
async fn an_accepted_form_gets_the_schema_defaults() {
    if everything().is_none() {
        return;
    }
    let mut content = Map::new();
    content.insert("name".into(), json!("Ada"));
    let elicitor = scripted(ElicitationResponse::Accept { content });
    let text = elicit_with(elicitor.clone()).await;
    assert!(
        text.contains("User provided the requested information"),
        "{text}"
    );
    assert!(text.contains("- Name: Ada"), "{text}");
    // Not answered, filled in from the schema's defaults (SEP-1034).
    assert!(text.contains("- Favorite Integer: 42"), "{text}");
    assert!(text.contains("- Favorite Number: 3.14"), "{text}");
    let asked = elicitor.asked.lock().unwrap();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].server, "everything");
    let ElicitationMode::Form { schema } = &asked[0].mode else {
        panic!("expected a form: {:?}", asked[0].mode)
    };
    assert_eq!(schema["required"], json!(["name"]));
}

#[tokio::test]
async fn an_answer_that_breaks_the_schema_is_declined_not_sent() {
    if everything().is_none() {
        return;
    }
    // "name" is required and has no default.
    let elicitor = scripted(ElicitationResponse::Accept {
        content: Map::new(),
    });
    let text = elicit_with(elicitor).await;
    assert!(text.contains("User declined"), "{text}");
}

#[tokio::test]
async fn cancel_reaches_the_server() {
    if everything().is_none() {
        return;
    }
    let text = elicit_with(scripted(ElicitationResponse::Cancel)).await;
    assert!(text.contains("User cancelled"), "{text}");
}

#[tokio::test]
async fn without_an_elicitor_elicitation_is_not_offered() {
    let Some(transport) = everything() else {
        return;
    };
    let mut client = McpClient::new("everything", transport);
    client.connect().await.unwrap();
    let tools = client.list_tools().await.unwrap();
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    assert!(names.contains(&"echo"), "{names:?}");
    assert!(!names.contains(&"trigger-elicitation-request"), "{names:?}");
    assert!(!names.contains(&"get-roots-list"), "{names:?}");
    assert!(!names.contains(&"trigger-sampling-request"), "{names:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn roots_are_listed_and_changes_are_announced() {
    let Some(transport) = everything() else {
        return;
    };
    let mut client =
        McpClient::new("everything", transport).with_roots(vec![PathBuf::from("/tmp/agcore root")]);
    client.connect().await.unwrap();
    let text = client
        .call_tool("get-roots-list", json!({}))
        .await
        .unwrap()
        .to_string();
    assert!(text.contains("file:///tmp/agcore%20root"), "{text}");

    client
        .set_roots(vec![PathBuf::from("/tmp/other")])
        .await
        .unwrap();
    // The server asks for the new list when told it changed; poll (bounded) until it has.
    let mut seen = String::new();
    for _ in 0..50 {
        seen = client
            .call_tool("get-roots-list", json!({}))
            .await
            .unwrap()
            .to_string();
        if seen.contains("file:///tmp/other") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(seen.contains("file:///tmp/other"), "{seen}");
    client.close().await.unwrap();
}

/// Answers every sampling request with a fixed text, remembering the request.
struct Echoing {
    asked: Mutex<Vec<agcore::tools::mcp::SamplingRequest>>,
    refuse: bool,
}

#[async_trait::async_trait]
impl agcore::tools::mcp::Sampler for Echoing {
    async fn sample(
        &self,
        request: &agcore::tools::mcp::SamplingRequest,
    ) -> Result<agcore::tools::mcp::SamplingReply, String> {
        self.asked.lock().unwrap().push(request.clone());
        if self.refuse {
            return Err("the user refused".to_owned());
        }
        Ok(agcore::tools::mcp::SamplingReply {
            model: "test-model".to_owned(),
            text: format!("sampled: {}", request.messages[0].text),
            stop_reason: Some("endTurn".to_owned()),
        })
    }
}

#[tokio::test]
async fn sampling_goes_to_the_sampler() {
    let Some(transport) = everything() else {
        return;
    };
    let sampler = Arc::new(Echoing {
        asked: Mutex::new(Vec::new()),
        refuse: false,
    });
    let mut client = McpClient::new("everything", transport).with_sampler(sampler.clone());
    client.connect().await.unwrap();
    let call = client.call_tool(
        "trigger-sampling-request",
        json!({"prompt": "hello", "maxTokens": 7}),
    );
    let text = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap()
        .unwrap()
        .to_string();
    assert!(
        text.contains("sampled: Resource trigger-sampling-request context: hello"),
        "{text}"
    );
    assert!(text.contains("test-model"), "{text}");
    let asked = sampler.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].max_tokens, 7);
    assert_eq!(
        asked[0].system_prompt.as_deref(),
        Some("You are a helpful test server.")
    );
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_refused_sampling_fails_the_servers_request() {
    let Some(transport) = everything() else {
        return;
    };
    let sampler = Arc::new(Echoing {
        asked: Mutex::new(Vec::new()),
        refuse: true,
    });
    let mut client = McpClient::new("everything", transport).with_sampler(sampler);
    client.connect().await.unwrap();
    let call = client.call_tool("trigger-sampling-request", json!({"prompt": "hello"}));
    let result = tokio::time::timeout(Duration::from_secs(30), call)
        .await
        .unwrap();
    let text = format!("{result:?}");
    assert!(text.contains("the user refused"), "{text}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn resources_templates_and_prompts_are_listed_read_and_rendered() {
    let Some(transport) = everything() else {
        return;
    };
    let mut client = McpClient::new("everything", transport);
    client.connect().await.unwrap();
    let resources = client.list_resources().await.unwrap();
    let document = resources
        .iter()
        .find(|r| r.uri.starts_with("demo://resource/static/document/"))
        .unwrap_or_else(|| panic!("no static document in {resources:?}"));
    let contents = client.read_resource(&document.uri).await.unwrap();
    assert_eq!(contents[0].uri, document.uri);
    assert!(
        contents[0].text.as_deref().is_some_and(|t| !t.is_empty()),
        "{contents:?}"
    );

    let templates = client.list_resource_templates().await.unwrap();
    assert!(
        templates
            .iter()
            .any(|t| t.uri_template.starts_with("demo://resource/dynamic/text/")),
        "{templates:?}"
    );
    let text = client
        .read_resource("demo://resource/dynamic/text/1")
        .await
        .unwrap();
    assert!(text[0].text.is_some(), "{text:?}");

    let prompts = client.list_prompts().await.unwrap();
    let args = prompts.iter().find(|p| p.name == "args-prompt").unwrap();
    assert_eq!(args.arguments[0].name, "city");
    assert_eq!(args.arguments[0].required, Some(true));
    let mut arguments = Map::new();
    arguments.insert("city".into(), json!("Paris"));
    let messages = client.get_prompt("args-prompt", arguments).await.unwrap();
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].role, "user");
    assert_eq!(messages[0].text, "What's weather in Paris?");
    let missing = client.read_resource("demo://nothing/here").await;
    assert!(missing.is_err(), "{missing:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_tool_image_becomes_an_image_part_for_the_model() {
    let Some(transport) = everything() else {
        return;
    };
    let mut client = McpClient::new("everything", transport);
    client.connect().await.unwrap();
    let output = client.call_tool("get-tiny-image", json!({})).await.unwrap();
    client.close().await.unwrap();
    let message = agcore::tools::mcp::media_message(
        "get-tiny-image",
        "call_7",
        &output,
        agcore::tools::mcp::MAX_MEDIA_BYTES,
    )
    .unwrap();
    let wire = serde_json::to_value(&message).unwrap();
    assert_eq!(wire["role"], "user");
    let parts = wire["content"].as_array().unwrap();
    assert_eq!(parts[0]["type"], "text");
    assert!(
        parts[0]["text"].as_str().unwrap().contains("call_7"),
        "{wire}"
    );
    assert_eq!(parts[1]["type"], "image_url");
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"),
        "{wire}"
    );
    // Over a tiny budget the image is named, not sent.
    let small = agcore::tools::mcp::media_message("get-tiny-image", "call_7", &output, 10).unwrap();
    let wire = serde_json::to_value(&small).unwrap();
    assert_eq!(wire["content"].as_array().unwrap().len(), 1, "{wire}");
}

/// A streamable-HTTP server whose first session expires (HTTP 404) at the first `tools/call`.
struct ExpiringSessions {
    sessions: std::sync::atomic::AtomicUsize,
    initializes: std::sync::atomic::AtomicUsize,
}

impl wiremock::Respond for ExpiringSessions {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        use std::sync::atomic::Ordering;
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let session = request
            .headers
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_owned();
        let id = body.get("id").cloned();
        let json = |result: Value, session: &str| {
            wiremock::ResponseTemplate::new(200)
                .insert_header("content-type", "application/json")
                .insert_header("mcp-session-id", session)
                .set_body_json(json!({"jsonrpc": "2.0", "id": id, "result": result}))
        };
        match body.get("method").and_then(Value::as_str) {
            Some("initialize") => {
                self.initializes.fetch_add(1, Ordering::SeqCst);
                let n = self.sessions.fetch_add(1, Ordering::SeqCst) + 1;
                json(
                    json!({"protocolVersion": "2025-11-25", "capabilities": {"tools": {}},
                        "serverInfo": {"name": "expiring", "version": "1"}}),
                    &format!("s{n}"),
                )
            }
            Some("tools/list") => json(
                json!({"tools": [{"name": "ping", "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": true}}]}),
                &session,
            ),
            Some("tools/call") if session == "s1" => wiremock::ResponseTemplate::new(404),
            Some("tools/call") => json(
                json!({"content": [{"type": "text", "text": format!("pong from {session}")}]}),
                &session,
            ),
            _ => wiremock::ResponseTemplate::new(202),
        }
    }
}

#[tokio::test]
async fn an_expired_http_session_is_reinitialised_and_the_call_retried_once() {
    use std::sync::atomic::Ordering;
    let server = wiremock::MockServer::start().await;
    let responder = Arc::new(ExpiringSessions {
        sessions: Default::default(),
        initializes: Default::default(),
    });
    struct Shared(Arc<ExpiringSessions>);
    impl wiremock::Respond for Shared {
        fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
            self.0.respond(request)
        }
    }
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(Shared(responder.clone()))
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::method("GET"))
        .respond_with(wiremock::ResponseTemplate::new(405))
        .mount(&server)
        .await;
    wiremock::Mock::given(wiremock::matchers::method("DELETE"))
        .respond_with(wiremock::ResponseTemplate::new(200))
        .mount(&server)
        .await;
    let url = format!("{}/mcp", server.uri());
    let mut client = McpClient::new("expiring", McpTransport::http(url)).with_timeout(10);
    tokio::time::timeout(Duration::from_secs(20), client.connect())
        .await
        .unwrap()
        .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(20), client.call_tool("ping", json!({})))
        .await
        .unwrap();
    assert_eq!(result.unwrap(), json!("pong from s2"));
    assert_eq!(responder.initializes.load(Ordering::SeqCst), 2);
    let _ = tokio::time::timeout(Duration::from_secs(10), client.close()).await;
}
