//! A client for the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! built on agcore's `McpClient`. The suite runs it with the server URL as the last argument
//! and the scenario in `MCP_CONFORMANCE_SCENARIO`:
//!
//! ```text
//! npx @modelcontextprotocol/conformance@0.1.13 client \
//!     --command "target/debug/examples/mcp_conformance_client" --scenario tools_call
//! ```
//!
//! Scenarios handled: `initialize` (handshake, list, close), `tools_call` and `sse-retry` (list
//! the tools and call each one with arguments made from its schema),
//! `elicitation-sep1034-client-defaults` (the same, with an elicitor that accepts every form
//! empty, so agcore fills in the schema's defaults). Anything else runs the `tools_call` flow. Exit status 0 on success, 1 with the error on stderr otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agcore::tools::mcp::{
    ElicitationRequest, ElicitationResponse, Elicitor, McpClient, McpTransport,
};
use serde_json::{Map, Value, json};

/// Arguments for a tool from its input schema: numbers 5, 3, 1, ...; strings "test"; booleans
/// true; other types null.
fn arguments_for(schema: &Value) -> Value {
    let mut numbers = [5, 3].into_iter().chain(std::iter::repeat(1));
    let mut args = Map::new();
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, property) in properties {
            let value = match property.get("type").and_then(Value::as_str) {
                Some("number" | "integer") => json!(numbers.next().unwrap_or(1)),
                Some("string") => json!("test"),
                Some("boolean") => json!(true),
                Some("array") => json!([]),
                Some("object") => json!({}),
                _ => Value::Null,
            };
            args.insert(name.clone(), value);
        }
    }
    Value::Object(args)
}

/// Accepts every form without values of its own: the schema's defaults fill it (SEP-1034).
struct AcceptDefaults;

#[async_trait::async_trait]
impl Elicitor for AcceptDefaults {
    async fn elicit(&self, _request: &ElicitationRequest) -> ElicitationResponse {
        ElicitationResponse::Accept {
            content: Map::new(),
        }
    }
}

async fn run(url: String, scenario: &str) -> Result<(), agcore::tools::ToolError> {
    let client = McpClient::new("conformance", McpTransport::http(url)).with_timeout(20);
    let mut client = match scenario {
        "elicitation-sep1034-client-defaults" => client.with_elicitor(Arc::new(AcceptDefaults)),
        _ => client,
    };
    client.connect().await?;
    let tools = client.list_tools().await?;
    eprintln!("scenario {scenario}: {} tool(s)", tools.len());
    if scenario != "initialize" {
        for tool in &tools {
            let args = arguments_for(&tool.function.parameters);
            let result = client.call_tool(tool.name(), args).await;
            eprintln!("{} -> {result:?}", tool.name());
            result?;
        }
    }
    client.close().await
}

#[tokio::main]
async fn main() {
    let Some(url) = std::env::args().skip(1).last() else {
        eprintln!(
            "usage: mcp_conformance_client SERVER_URL (scenario in MCP_CONFORMANCE_SCENARIO)"
        );
        std::process::exit(2);
    };
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    if let Err(error) = run(url, &scenario).await {
        eprintln!("{error}");
        std::process::exit(1);
    }
}
