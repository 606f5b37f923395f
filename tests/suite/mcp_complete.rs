//! MCP against `@modelcontextprotocol/server-everything` (stdio): per-server tool filters,
//! resources and prompts for the model, resource subscriptions, images for the model.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use agcore::tools::exposure::HiddenBecause;
use agcore::tools::mcp::{McpServersConfig, McpSkipReason, register_mcp_tools_with_report};
use agcore::tools::{ToolRegistry, ToolSource};
use support::mcp::npm_script;

const EVERYTHING: &str = "@modelcontextprotocol/server-everything";

/// An `mcpServers` entry for server-everything with `extra` fields, or `None` when it is not
/// installed.
fn everything_config(extra: serde_json::Value) -> Option<McpServersConfig> {
    let script = npm_script(EVERYTHING, "dist/index.js")?;
    let mut entry = serde_json::json!({
        "command": "node",
        "args": [script.to_string_lossy(), "stdio"],
    });
    entry
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let json = serde_json::json!({"mcpServers": {"everything": entry}});
    Some(McpServersConfig::parse(&json.to_string()).unwrap())
}

#[tokio::test]
async fn include_and_exclude_lists_leave_tools_out_and_say_why() {
    let Some(config) = everything_config(serde_json::json!({
        "include": ["echo", "get-*"],
        "exclude": ["get-env"],
    })) else {
        return;
    };
    let mut connected = config.connect_all().await;
    let (_, client) = connected.remove(0);
    let mut client = client.unwrap();
    let names: Vec<String> = client
        .list_tools()
        .await
        .unwrap()
        .into_iter()
        .map(|d| d.name().to_owned())
        .collect();
    assert!(names.contains(&"echo".to_owned()), "{names:?}");
    assert!(names.contains(&"get-sum".to_owned()), "{names:?}");
    assert!(!names.contains(&"get-env".to_owned()), "{names:?}");
    assert!(
        names.iter().all(|n| n == "echo" || n.starts_with("get-")),
        "{names:?}"
    );

    let skipped = client.skipped_tools();
    let env = skipped.iter().find(|s| s.tool == "get-env").unwrap();
    assert_eq!(
        env.reason,
        McpSkipReason::Excluded {
            pattern: "get-env".into()
        }
    );
    let not_included = skipped
        .iter()
        .find(|s| s.tool == "trigger-long-running-operation" || s.tool == "add")
        .unwrap_or_else(|| panic!("{skipped:?}"));
    assert!(matches!(
        &not_included.reason,
        McpSkipReason::NotIncluded { include } if include.len() == 2
    ));

    // Registered: only what the filter lets through; the report lists the rest as hidden.
    let mut registry = ToolRegistry::new();
    let registration = register_mcp_tools_with_report(&mut registry, vec![client]);
    assert!(registration.skipped.iter().any(|s| s.tool == "get-env"));
    assert!(registry.get("get-env").is_none() && registry.get("echo").is_some());
    let report = registry
        .explain("openai", "m")
        .with_skipped_mcp_tools(registration.skipped);
    let row = report.tool("get-env").unwrap();
    assert!(!row.exposed);
    assert!(matches!(
        &row.hidden_because[..],
        [HiddenBecause::NotRegistered { source: ToolSource::Mcp { server }, .. }] if server == "everything"
    ));
    let text = report.to_string();
    let line = text.lines().find(|l| l.contains("get-env")).unwrap();
    assert!(line.starts_with("hidden"), "{line}");
    assert!(
        line.contains("excluded by the server's `exclude` entry 'get-env'"),
        "{line}"
    );
}

fn everything_client() -> Option<agcore::tools::mcp::McpClient> {
    let script = npm_script(EVERYTHING, "dist/index.js")?;
    Some(agcore::tools::mcp::McpClient::new(
        "everything",
        agcore::tools::mcp::McpTransport::Stdio {
            command: "node".into(),
            args: vec![script.to_string_lossy().into_owned(), "stdio".into()],
        },
    ))
}

#[tokio::test]
async fn the_model_lists_and_reads_resources_through_read_only_tools() {
    use agcore::tools::{Permission, PermissionChecker, PermissionConfig, ToolKind};
    let Some(mut client) = everything_client() else {
        return;
    };
    client.connect().await.unwrap();
    // Read-only: the default permission checker (Delete denied, Read allowed) lets them run.
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(client.resource_tools()).unwrap();
    let list = registry.get("everything__list_resources").unwrap();
    assert_eq!(list.required_permissions(), vec![Permission::Read]);
    assert_eq!(list.kind(), ToolKind::Read);
    assert!(registry.get("everything__read_resource").is_some());
    assert_eq!(
        registry.explain("openai", "m").exposed().len(),
        2,
        "both are offered under the default permissions"
    );

    let listed = registry
        .invoke("everything__list_resources", serde_json::json!({}))
        .await
        .unwrap();
    let listed = listed.output.unwrap();
    let listed = listed.as_str().unwrap();
    let uri = listed
        .lines()
        .find_map(|l| {
            l.split(" — ")
                .next()
                .filter(|u| u.starts_with("demo://resource/static/document/"))
        })
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        listed.contains("templates (fill in the {placeholders}):"),
        "{listed}"
    );
    assert!(
        listed.contains("demo://resource/dynamic/text/{"),
        "{listed}"
    );

    let read = registry
        .invoke("everything__read_resource", serde_json::json!({"uri": uri}))
        .await
        .unwrap();
    let text = read.output.unwrap();
    let expected = client.read_resource(uri).await.unwrap()[0]
        .text
        .clone()
        .unwrap();
    let text = text.as_str().unwrap();
    if expected.len() <= agcore::tools::mcp::MAX_RESOURCE_OUTPUT_BYTES {
        assert_eq!(text, expected);
    } else {
        assert!(text.contains("call again with offset"), "{text}");
    }

    // A template filled in; a missing resource is a tool error the model reads.
    let dynamic = registry
        .invoke(
            "everything__read_resource",
            serde_json::json!({"uri": "demo://resource/dynamic/text/3"}),
        )
        .await
        .unwrap();
    assert!(!dynamic.output.unwrap().as_str().unwrap().is_empty());
    let missing = registry
        .invoke(
            "everything__read_resource",
            serde_json::json!({"uri": "demo://nothing/here"}),
        )
        .await
        .unwrap();
    assert!(missing.output.is_err(), "{missing:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_model_lists_and_renders_prompts_when_asked_for() {
    use agcore::tools::{Permission, PermissionChecker, PermissionConfig};
    let Some(mut client) = everything_client() else {
        return;
    };
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(client.prompt_tools()).unwrap();
    let get = registry.get("everything__get_prompt").unwrap();
    assert_eq!(get.required_permissions(), vec![Permission::Read]);

    let listed = registry
        .invoke("everything__list_prompts", serde_json::json!({}))
        .await
        .unwrap();
    let listed = listed.output.unwrap();
    let listed = listed.as_str().unwrap().to_owned();
    let args_line = listed
        .lines()
        .find(|line| line.starts_with("args-prompt"))
        .unwrap_or_else(|| panic!("{listed}"));
    assert!(
        args_line.ends_with("(arguments: city (required), state)"),
        "{args_line}"
    );

    let rendered = registry
        .invoke(
            "everything__get_prompt",
            serde_json::json!({"name": "args-prompt", "arguments": {"city": "Lyon"}}),
        )
        .await
        .unwrap();
    assert_eq!(
        rendered.output.unwrap(),
        serde_json::json!("[user]\nWhat's weather in Lyon?")
    );

    // Arguments are strings (the schema says so, and the registry checks it first); a prompt
    // the server does not have is a tool error the model reads.
    let typed = registry
        .invoke(
            "everything__get_prompt",
            serde_json::json!({"name": "args-prompt", "arguments": {"city": 3}}),
        )
        .await;
    assert!(
        matches!(&typed, Err(agcore::tools::ToolError::InvalidArguments(_, why)) if why.contains("arguments.city")),
        "{typed:?}"
    );
    let missing = registry
        .invoke(
            "everything__get_prompt",
            serde_json::json!({"name": "no-such-prompt"}),
        )
        .await
        .unwrap();
    assert!(missing.output.is_err(), "{missing:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_subscribed_resource_announces_its_updates() {
    use agcore::tools::mcp::McpResourceUpdate;
    let Some(mut client) = everything_client() else {
        return;
    };
    client.connect().await.unwrap();
    assert!(client.server_info().unwrap().can_subscribe);
    let mut updates = client.resource_updates();
    let uri = "demo://resource/dynamic/text/1";
    client.subscribe_resource(uri).await.unwrap();
    assert_eq!(client.handle().subscribed_resources(), vec![uri.to_owned()]);
    // server-everything sends updates for subscribed resources once this tool is on (one at
    // once, then every 5 s).
    client
        .call_tool("toggle-subscriber-updates", serde_json::json!({}))
        .await
        .unwrap();
    let update = tokio::time::timeout(std::time::Duration::from_secs(10), updates.recv())
        .await
        .expect("an update within 10 s")
        .unwrap();
    assert_eq!(
        update,
        McpResourceUpdate::Updated {
            server: "everything".into(),
            uri: uri.into()
        }
    );
    client.unsubscribe_resource(uri).await.unwrap();
    assert!(client.handle().subscribed_resources().is_empty());
    client.close().await.unwrap();
}

/// A fake OpenAI server: the first request gets a call of `get-tiny-image`, the next a text
/// reply; every request body is kept.
struct ImageScript {
    bodies: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl wiremock::Respond for ImageScript {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let mut bodies = self.bodies.lock().unwrap();
        bodies.push(body);
        let message = if bodies.len() == 1 {
            serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": "call_img", "type": "function",
                "function": {"name": "get-tiny-image", "arguments": "{}"}}]})
        } else {
            serde_json::json!({"role": "assistant", "content": "a tiny image"})
        };
        let finish = if bodies.len() == 1 {
            "tool_calls"
        } else {
            "stop"
        };
        wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]
        }))
    }
}

/// The second request's messages of a run where the model calls `get-tiny-image`.
async fn run_image_tool(accepts_images: bool) -> Option<Vec<serde_json::Value>> {
    use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
    let mut client = everything_client()?;
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    register_mcp_tools_with_report(&mut registry, vec![client]);
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let script = ImageScript {
        bodies: bodies.clone(),
    };
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(script)
        .mount(&server)
        .await;
    let model = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut config = CycleConfig::new("m");
    config.accepts_images = accepts_images;
    let mut cycle = LlmCycle::new(model, config);
    let reply = cycle
        .submit_with_tools("show me".into(), &registry)
        .await
        .unwrap();
    assert_eq!(
        serde_json::to_value(&reply.message).unwrap()["content"],
        "a tiny image"
    );
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    // The history the cycle kept is what the second request sent.
    assert_eq!(
        serde_json::to_value(cycle.messages())
            .unwrap()
            .as_array()
            .unwrap()[..bodies[1]["messages"].as_array().unwrap().len()],
        bodies[1]["messages"].as_array().unwrap()[..]
    );
    Some(bodies[1]["messages"].as_array().unwrap().clone())
}

#[tokio::test]
async fn an_image_from_an_mcp_tool_reaches_a_model_that_accepts_images() {
    let Some(messages) = run_image_tool(true).await else {
        return;
    };
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"], "{messages:?}");
    let tool = messages[2]["content"].as_str().unwrap();
    assert!(tool.contains("[image: image/png"), "{tool}");
    assert!(
        tool.ends_with("they follow in the next user message]"),
        "{tool}"
    );
    let parts = messages[3]["content"].as_array().unwrap();
    assert!(
        parts[0]["text"].as_str().unwrap().contains("call_img"),
        "{parts:?}"
    );
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,"),
        "{parts:?}"
    );
}

#[tokio::test]
async fn a_model_that_does_not_accept_images_reads_that_one_was_not_shown() {
    let Some(messages) = run_image_tool(false).await else {
        return;
    };
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool"], "{messages:?}");
    let tool = messages[2]["content"].as_str().unwrap();
    assert!(
        tool.ends_with("not shown: this model is not set to accept images]"),
        "{tool}"
    );
    assert!(
        !tool.contains("base64,"),
        "no image data in the text: {tool}"
    );
}

/// A fake OpenAI server: the first request gets a call of `demo__read_resource` on the demo
/// server's PNG resource, the next a text reply; every request body is kept.
struct ReadPixelScript {
    bodies: std::sync::Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

impl wiremock::Respond for ReadPixelScript {
    fn respond(&self, request: &wiremock::Request) -> wiremock::ResponseTemplate {
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let mut bodies = self.bodies.lock().unwrap();
        bodies.push(body);
        let (message, finish) = if bodies.len() == 1 {
            (
                serde_json::json!({"role": "assistant", "content": null, "tool_calls": [{
                    "id": "call_res", "type": "function",
                    "function": {"name": "demo__read_resource",
                                 "arguments": "{\"uri\":\"demo://pixel.png\"}"}}]}),
                "tool_calls",
            )
        } else {
            (
                serde_json::json!({"role": "assistant", "content": "one pixel"}),
                "stop",
            )
        };
        wiremock::ResponseTemplate::new(200).set_body_json(serde_json::json!({
            "id": "x", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}]
        }))
    }
}

/// The second request's messages of a run where the model reads the demo server's PNG
/// resource.
async fn run_image_resource(accepts_images: bool) -> Vec<serde_json::Value> {
    use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
    let mut client =
        agcore::tools::mcp::McpClient::new("demo", support::mcp::demo(&["--image-resource"]));
    client.connect().await.unwrap();
    let mut registry = ToolRegistry::new();
    for tool in client.resource_tools() {
        registry.register(tool).unwrap();
    }
    let bodies = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let server = wiremock::MockServer::start().await;
    wiremock::Mock::given(wiremock::matchers::method("POST"))
        .respond_with(ReadPixelScript {
            bodies: bodies.clone(),
        })
        .mount(&server)
        .await;
    let model = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", server.uri()))).unwrap();
    let mut config = CycleConfig::new("m");
    config.accepts_images = accepts_images;
    let mut cycle = LlmCycle::new(model, config);
    cycle
        .submit_with_tools("what is in the picture?".into(), &registry)
        .await
        .unwrap();
    let bodies = bodies.lock().unwrap().clone();
    assert_eq!(bodies.len(), 2);
    bodies[1]["messages"].as_array().unwrap().clone()
}

#[tokio::test]
async fn an_image_resource_read_by_the_model_reaches_it_as_an_image() {
    let messages = run_image_resource(true).await;
    let roles: Vec<&str> = messages
        .iter()
        .map(|m| m["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["user", "assistant", "tool", "user"], "{messages:?}");
    let tool = messages[2]["content"].as_str().unwrap();
    assert!(
        tool.contains("image/png") && tool.ends_with("they follow in the next user message]"),
        "{tool}"
    );
    assert!(
        !tool.contains("base64,"),
        "no image data in the text: {tool}"
    );
    let parts = messages[3]["content"].as_array().unwrap();
    assert!(
        parts[1]["image_url"]["url"]
            .as_str()
            .unwrap()
            .starts_with("data:image/png;base64,iVBOR"),
        "{parts:?}"
    );

    let messages = run_image_resource(false).await;
    assert_eq!(messages.len(), 3, "no image message: {messages:?}");
    let tool = messages[2]["content"].as_str().unwrap();
    assert!(
        tool.ends_with("not shown: this model is not set to accept images]"),
        "{tool}"
    );
}
