//! A client for the official MCP conformance suite (`@modelcontextprotocol/conformance`),
//! built on agcore's `McpClient`. The suite runs it with the server URL as the last argument
//! and the scenario in `MCP_CONFORMANCE_SCENARIO`:
//!
//! ```text
//! npx @modelcontextprotocol/conformance@0.1.16 client \
//!     --command "target/debug/examples/mcp_conformance_client" --scenario tools_call
//! ```
//!
//! Scenarios handled: `initialize` (handshake, list, close), `tools_call` and `sse-retry` (list
//! the tools and call each one with arguments made from its schema), `auth/*` (the same flow
//! with [`McpAuth`]: client credentials when the scenario says so, else the authorization-code
//! flow, pre-registered when the context (`MCP_CONFORMANCE_CONTEXT`) gives a client ID),
//! cross-app access when the context names an IdP token endpoint and an ID token, workload
//! identity (`auth/wif-jwt-bearer`) when it gives a workload JWT (`valid_jwt`),
//! `elicitation-sep1034-client-defaults` (the same, with an elicitor that accepts every form
//! empty, so agcore fills in the schema's defaults). Anything else runs the `tools_call` flow.
//! Exit status 0 on success, 1 with the error on stderr otherwise.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;

use agcore::tools::mcp::auth::{
    ClientCredentials, ClientIdentity, CrossAppAccess, IdTokenSource, JwtAlgorithm, McpAuth,
    OAuthClient, WorkloadIdentity,
};
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

/// This client's ID metadata document (used when the authorization server supports them).
const CLIENT_METADATA_URL: &str = "https://conformance-test.local/client-metadata.json";

/// The OAuth settings for an `auth/*` scenario, from its name and context.
fn auth_for(scenario: &str) -> McpAuth {
    let context = context();
    let field = |name: &str| context.get(name).and_then(Value::as_str).map(str::to_owned);
    let client_id = field("client_id");
    // Cross-app access: the context names the enterprise IdP and the user's ID token.
    if let (Some(endpoint), Some(id_token), Some(client_id)) = (
        field("idp_token_endpoint"),
        field("idp_id_token"),
        client_id.clone(),
    ) {
        let idp_client = OAuthClient::public(field("idp_client_id").unwrap_or_default());
        let client = match field("client_secret") {
            Some(secret) => OAuthClient::confidential(client_id, secret),
            None => OAuthClient::public(client_id),
        };
        return McpAuth::cross_app_access(CrossAppAccess::new(
            endpoint,
            idp_client,
            IdTokenSource::Value(id_token),
            client,
        ));
    }
    // Workload identity: the context gives the workload's JWT.
    if let (Some(jwt), Some(client_id)) = (field("valid_jwt"), client_id.clone()) {
        return McpAuth::workload_identity(WorkloadIdentity::new(
            OAuthClient::public(client_id),
            IdTokenSource::Value(jwt),
        ));
    }
    match (scenario, client_id) {
        ("auth/client-credentials-jwt", Some(client_id)) => {
            McpAuth::client_credentials(ClientCredentials::PrivateKeyJwt {
                client_id,
                private_key_pem: field("private_key_pem").unwrap_or_default(),
                algorithm: field("signing_algorithm")
                    .and_then(|name| JwtAlgorithm::from_name(&name))
                    .unwrap_or(JwtAlgorithm::Es256),
            })
        }
        ("auth/client-credentials-basic", Some(client_id)) => {
            McpAuth::client_credentials(ClientCredentials::Secret {
                client_id,
                client_secret: field("client_secret").unwrap_or_default(),
            })
        }
        (_, Some(client_id)) => McpAuth::authorization_code("http://127.0.0.1:8765/callback")
            .with_identity(ClientIdentity::Preregistered {
                client_id,
                client_secret: field("client_secret"),
            }),
        (_, None) => McpAuth::authorization_code("http://127.0.0.1:8765/callback").with_identity(
            ClientIdentity::Dynamic {
                client_name: "agcore-conformance".into(),
                metadata_url: Some(CLIENT_METADATA_URL.into()),
            },
        ),
    }
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

/// The scenario's context (`MCP_CONFORMANCE_CONTEXT`), `null` when there is none.
fn context() -> Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or(Value::Null)
}

/// The calls the context prescribes (`toolCalls: [{name, arguments}]`), if any.
fn prescribed_calls(context: &Value) -> Option<Vec<(String, Value)>> {
    let calls = context.get("toolCalls")?.as_array()?;
    Some(
        calls
            .iter()
            .filter_map(|call| {
                let name = call.get("name")?.as_str()?.to_owned();
                Some((name, call.get("arguments").cloned().unwrap_or(json!({}))))
            })
            .collect(),
    )
}

/// The tool whose input schema `json-schema-2020-12-preservation` looks at, and the tool that
/// echoes a schema back to it.
const FOCAL_TOOL: &str = "json_schema_2020_12_tool";
const ECHO_TOOL: &str = "json_schema_echo";

async fn run(url: String, scenario: &str) -> Result<(), agcore::tools::ToolError> {
    let client = McpClient::new("conformance", McpTransport::http(url)).with_timeout(20);
    let mut client = match scenario {
        auth if auth.starts_with("auth/") => client.with_auth(auth_for(auth)),
        "elicitation-sep1034-client-defaults" => client.with_elicitor(Arc::new(AcceptDefaults)),
        _ => client,
    };
    client.connect().await?;
    let tools = client.list_tools().await?;
    eprintln!("scenario {scenario}: {} tool(s)", tools.len());
    let context = context();
    if let Some(calls) = prescribed_calls(&context) {
        for (name, args) in calls {
            let result = client.call_tool(&name, args).await;
            eprintln!("{name} -> {result:?}");
            result?;
        }
    } else if let Some(case) = scenario.strip_prefix("sep-2640-client-") {
        skills(&client, case).await?;
    } else if scenario == "json-schema-2020-12-preservation" {
        // The schema as agcore holds it goes back verbatim: anything agcore stripped shows.
        let focal = tools.iter().find(|tool| tool.name() == FOCAL_TOOL);
        let schema = focal.map(|tool| tool.function.parameters.clone());
        let result = client
            .call_tool(ECHO_TOOL, json!({ "schema": schema }))
            .await;
        eprintln!("{ECHO_TOOL} -> {result:?}");
        result?;
    } else if scenario != "initialize" && scenario != "json-schema-ref-no-deref" {
        for tool in &tools {
            let args = arguments_for(&tool.function.parameters);
            let result = client.call_tool(tool.name(), args).await;
            eprintln!("{} -> {result:?}", tool.name());
            result?;
        }
    }
    client.close().await
}

/// The skills scenarios (SEP-2640): list the skills (fetching nothing); then, except in
/// `no-prefetch`, load each one — its `SKILL.md` verified against the listing — and read its
/// other files as a model following it would. A skill that fails verification ends the run
/// before any of its files is read.
async fn skills(client: &McpClient, case: &str) -> Result<(), agcore::tools::ToolError> {
    let skills = client.list_skills().await?;
    eprintln!("skills/list: {} skill(s)", skills.len());
    if case == "no-prefetch" {
        return Ok(());
    }
    for skill in &skills {
        let loaded = client.load_skill(skill).await?;
        eprintln!("loaded {} ({} bytes)", skill.uri, loaded.text.len());
        for file in skill
            .files
            .iter()
            .flatten()
            .filter(|file| file.uri != skill.uri)
        {
            let bytes = client.read_skill_file(skill, &file.uri).await?;
            eprintln!("read {} ({} bytes)", file.uri, bytes.len());
        }
    }
    Ok(())
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
