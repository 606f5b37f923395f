//! Resources and prompts of a server: `resources/list`, `resources/templates/list`,
//! `resources/read`, `prompts/list`, `prompts/get` — each bounded by the request timeout, the
//! listings by [`MAX_LIST_PAGES`](crate::tools::mcp::MAX_LIST_PAGES) pages and
//! [`MAX_LISTED_TOOLS`](crate::tools::mcp::MAX_LISTED_TOOLS) entries.

use std::collections::HashSet;

use rmcp::model::{GetPromptRequestParams, PaginatedRequestParams, ReadResourceRequestParams};
use rmcp::service::ServiceError;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tools::error::ToolError;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::connection::Connection;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::{MAX_LIST_PAGES, MAX_LISTED_TOOLS};

/// A resource a server offers (`resources/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpResource {
    /// Its URI.
    pub uri: String,
    /// Its name.
    pub name: String,
    /// A human title.
    #[serde(default)]
    pub title: Option<String>,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// Its MIME type.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// A family of resources by URI template (`resources/templates/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceTemplate {
    /// The RFC 6570 URI template.
    pub uri_template: String,
    /// Its name.
    pub name: String,
    /// What it is.
    #[serde(default)]
    pub description: Option<String>,
    /// The MIME type of its resources.
    #[serde(default)]
    pub mime_type: Option<String>,
}

/// One part of a read resource (`resources/read`): text, or base64 `blob`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpResourceContent {
    /// The URI of this part.
    pub uri: String,
    /// Its MIME type.
    #[serde(default)]
    pub mime_type: Option<String>,
    /// The text, for a text resource.
    #[serde(default)]
    pub text: Option<String>,
    /// The base64 data, for a binary resource.
    #[serde(default)]
    pub blob: Option<String>,
}

/// A prompt template a server offers (`prompts/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpPrompt {
    /// Its name.
    pub name: String,
    /// A human title.
    #[serde(default)]
    pub title: Option<String>,
    /// What it is for.
    #[serde(default)]
    pub description: Option<String>,
    /// The arguments it takes.
    #[serde(default)]
    pub arguments: Vec<McpPromptArgument>,
}

/// One argument of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McpPromptArgument {
    /// Its name.
    pub name: String,
    /// What it means.
    #[serde(default)]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default)]
    pub required: Option<bool>,
}

/// One message of a rendered prompt (`prompts/get`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct McpPromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The text (an embedded resource's text inline; other content described in words).
    pub text: String,
}

impl McpClient {
    /// Every resource the server lists.
    pub async fn list_resources(&self) -> Result<Vec<McpResource>, ToolError> {
        self.handle().list_resources().await
    }

    /// Every resource template the server lists.
    pub async fn list_resource_templates(&self) -> Result<Vec<McpResourceTemplate>, ToolError> {
        self.handle().list_resource_templates().await
    }

    /// Read one resource.
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<McpResourceContent>, ToolError> {
        self.handle().read_resource(uri).await
    }

    /// Every prompt the server lists.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, ToolError> {
        self.handle().list_prompts().await
    }

    /// Render a prompt with `arguments` (string values).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Vec<McpPromptMessage>, ToolError> {
        self.handle().get_prompt(name, arguments).await
    }
}

impl McpHandle {
    /// Every resource the server lists.
    pub async fn list_resources(&self) -> Result<Vec<McpResource>, ToolError> {
        let conn = self.live().await?;
        list_all(&conn, "resources/list", "resources", |params| {
            let peer = conn.peer.clone();
            async move { to_value(peer.list_resources(params).await) }
        })
        .await
    }

    /// Every resource template the server lists.
    pub async fn list_resource_templates(&self) -> Result<Vec<McpResourceTemplate>, ToolError> {
        let conn = self.live().await?;
        list_all(
            &conn,
            "resources/templates/list",
            "resourceTemplates",
            |params| {
                let peer = conn.peer.clone();
                async move { to_value(peer.list_resource_templates(params).await) }
            },
        )
        .await
    }

    /// Read one resource.
    pub async fn read_resource(&self, uri: &str) -> Result<Vec<McpResourceContent>, ToolError> {
        let conn = self.live().await?;
        let span = conn.span("resources/read", uri);
        let mut params = ReadResourceRequestParams::new(uri);
        params.meta = crate::tools::mcp::trace::meta(&span);
        let result = conn
            .request_in(span, "resources/read", uri, conn.peer.read_resource(params))
            .await?;
        let value = serde_json::to_value(result).unwrap_or_default();
        parse(&conn, "resources/read", value.get("contents"))
    }

    /// Every prompt the server lists.
    pub async fn list_prompts(&self) -> Result<Vec<McpPrompt>, ToolError> {
        let conn = self.live().await?;
        list_all(&conn, "prompts/list", "prompts", |params| {
            let peer = conn.peer.clone();
            async move { to_value(peer.list_prompts(params).await) }
        })
        .await
    }

    /// Render a prompt with `arguments` (string values).
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Map<String, Value>,
    ) -> Result<Vec<McpPromptMessage>, ToolError> {
        let conn = self.live().await?;
        let mut params = GetPromptRequestParams::new(name);
        params.arguments = Some(arguments);
        let result = conn
            .request("prompts/get", name, conn.peer.get_prompt(params))
            .await?;
        let value = serde_json::to_value(result).unwrap_or_default();
        let messages = value
            .get("messages")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        Ok(messages
            .iter()
            .map(|message| McpPromptMessage {
                role: message
                    .get("role")
                    .and_then(Value::as_str)
                    .unwrap_or("user")
                    .to_owned(),
                text: content_text(message.get("content").unwrap_or(&Value::Null)),
            })
            .collect())
    }
}

/// A prompt message's content in words.
fn content_text(content: &Value) -> String {
    match content.get("type").and_then(Value::as_str) {
        Some("text") => content
            .get("text")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        Some("resource") => {
            let resource = content.get("resource").unwrap_or(&Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[binary resource {uri}]"),
            }
        }
        Some(other) => {
            let mime = content
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("");
            format!("[{other} {mime}]")
        }
        None => String::new(),
    }
}

fn to_value<T: Serialize>(result: Result<T, ServiceError>) -> Result<Value, ServiceError> {
    result.map(|value| serde_json::to_value(value).unwrap_or_default())
}

fn parse<T: DeserializeOwned>(
    conn: &Connection,
    method: &str,
    items: Option<&Value>,
) -> Result<Vec<T>, ToolError> {
    serde_json::from_value(items.cloned().unwrap_or(Value::Array(Vec::new()))).map_err(|error| {
        ToolError::McpError(format!(
            "MCP server '{}': {method} answered something agcore cannot read: {error}",
            conn.server
        ))
    })
}

/// Every page of a listing, within the page and entry bounds; a repeated cursor ends it.
async fn list_all<T, F, Fut>(
    conn: &Connection,
    method: &str,
    key: &str,
    mut page: F,
) -> Result<Vec<T>, ToolError>
where
    T: DeserializeOwned,
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: Future<Output = Result<Value, ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursors = HashSet::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = PaginatedRequestParams::default().with_cursor(cursor.take());
        let value = conn.request(method, "", page(Some(params))).await?;
        items.extend(parse::<T>(conn, method, value.get(key))?);
        if items.len() > MAX_LISTED_TOOLS {
            return Err(ToolError::McpError(format!(
                "MCP server '{}': {method} listed more than {MAX_LISTED_TOOLS} entries",
                conn.server
            )));
        }
        match value.get("nextCursor").and_then(Value::as_str) {
            Some(next) if cursors.insert(next.to_owned()) => cursor = Some(next.to_owned()),
            _ => return Ok(items),
        }
    }
    Err(ToolError::McpError(format!(
        "MCP server '{}': {method} did not end after {MAX_LIST_PAGES} pages; agcore stops there",
        conn.server
    )))
}
