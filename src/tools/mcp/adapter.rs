//! [`McpToolAdapter`]: one MCP server tool as a [`BaseTool`].

use async_trait::async_trait;
use rmcp::model::Tool;
use serde_json::Value;

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::media::media_of;
use crate::tools::mcp::naming::{McpToolNaming, qualified_tool_name, sanitize_tool_name};
use crate::tools::mcp::permissions::PermissionRule;
use crate::tools::mcp::result::content_to_model_text;
use crate::tools::media::ToolMedia;
use crate::tools::permission::Permission;

/// An MCP server's tool, registered in a [`ToolRegistry`](crate::tools::ToolRegistry) like a
/// local one. Calls go through the client's shared connection.
///
/// Permissions come from the tool's annotations, read with the MCP spec's defaults for absent
/// hints (`readOnlyHint: false`, `destructiveHint: true`, `openWorldHint: true`), so MCP tools
/// obey the same [`PermissionChecker`](crate::tools::PermissionChecker) as local tools:
///
/// | annotations (absent = the spec's default) | permissions | kind |
/// |---|---|---|
/// | `readOnlyHint: true` | `Read` | `Read` |
/// | not read-only, `destructiveHint: true` (also: no annotations at all) | `Write`, `Delete` | `Delete` |
/// | not read-only, `destructiveHint: false` | `Write` | `Edit` |
/// | `openWorldHint: true` or absent | adds `Network` | |
///
/// An unannotated tool therefore counts as writing, destructive and open-world: the default
/// [`PermissionConfig`](crate::tools::PermissionConfig) (Delete denied) refuses it, unless the
/// registry's [`ApprovalPolicy`](crate::tools::ApprovalPolicy) says
/// [`UnannotatedTools::Ask`](crate::tools::UnannotatedTools::Ask): then it is offered and each
/// call is asked ([`BaseTool::permissions_assumed`] is true for it). The user
/// says otherwise per server or per tool ([`McpClient::with_tool_permissions`],
/// [`McpClient::with_default_permissions`], [`McpClient::with_trusted_annotations`]; in an
/// `mcpServers` file `toolPermissions`, `defaultPermissions`, `trustAnnotations`).
///
/// [`McpClient::with_tool_permissions`]: crate::tools::mcp::McpClient::with_tool_permissions
/// [`McpClient::with_default_permissions`]: crate::tools::mcp::McpClient::with_default_permissions
/// [`McpClient::with_trusted_annotations`]: crate::tools::mcp::McpClient::with_trusted_annotations
#[derive(Debug, Clone)]
pub struct McpToolAdapter {
    name: String,
    tool_name: String,
    server: String,
    description: String,
    title: Option<String>,
    schema: Value,
    permissions: Vec<Permission>,
    /// The permissions are the spec's worst case: the tool says nothing about what it does.
    assumed: bool,
    kind: ToolKind,
    handle: McpHandle,
}

impl McpToolAdapter {
    pub(crate) fn new(
        handle: McpHandle,
        tool: &Tool,
        naming: McpToolNaming,
        rule: &PermissionRule,
    ) -> Self {
        let server = handle.server_name().to_owned();
        let name = match naming {
            McpToolNaming::Raw => sanitize_tool_name(&tool.name),
            McpToolNaming::Qualified => qualified_tool_name(&server, &tool.name),
        };
        let (permissions, kind) = rule.permissions(&tool.name, tool.annotations.as_ref());
        let assumed = rule.assumed(&tool.name, tool.annotations.as_ref());
        McpToolAdapter {
            name,
            tool_name: tool.name.to_string(),
            server,
            description: tool.description.as_deref().unwrap_or("").to_owned(),
            title: tool
                .annotations
                .as_ref()
                .and_then(|a| a.title.clone())
                .or_else(|| tool.title.clone()),
            schema: Value::Object(tool.input_schema.as_ref().clone()),
            permissions,
            assumed,
            kind,
            handle,
        }
    }

    /// The same adapter under another name (the name the model sees).
    pub fn with_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// The tool's name on the server.
    pub fn tool_name(&self) -> &str {
        &self.tool_name
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.server
    }

    pub(crate) fn name_str(&self) -> &str {
        &self.name
    }
}

#[async_trait]
impl BaseTool for McpToolAdapter {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    /// The description — the current one when the server has changed its tool list since.
    fn current_description(&self) -> std::borrow::Cow<'_, str> {
        match self.handle.cached_description(&self.tool_name) {
            Some(description) => std::borrow::Cow::Owned(description),
            None => std::borrow::Cow::Borrowed(&self.description),
        }
    }

    /// The input schema — the current one when the server has changed its tool list since.
    fn parameters(&self) -> Value {
        match self.handle.cached_tool(&self.tool_name) {
            Some(tool) => Value::Object(tool.input_schema.as_ref().clone()),
            None => self.schema.clone(),
        }
    }

    fn required_permissions(&self) -> Vec<Permission> {
        self.permissions.clone()
    }

    /// True when the server says nothing about what the tool does (and the user did not
    /// either): its permissions are the spec's worst case.
    fn permissions_assumed(&self) -> bool {
        self.assumed
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.handle
            .call_tool(&self.tool_name, args)
            .await
            .map_err(|error| match error {
                ToolError::ExecutionFailed(_, text) => {
                    ToolError::ExecutionFailed(self.name.clone(), text)
                }
                ToolError::InvalidArguments(_, text) => {
                    ToolError::InvalidArguments(self.name.clone(), text)
                }
                other => other,
            })
    }

    fn kind(&self) -> ToolKind {
        self.kind
    }

    fn title(&self, _input: &Value) -> String {
        self.title.clone().unwrap_or_else(|| self.name.clone())
    }

    fn model_content(&self, output: &Value) -> String {
        content_to_model_text(output)
    }

    fn media(&self, output: &Value) -> Vec<ToolMedia> {
        media_of(output)
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }
}
