//! [`McpToolAdapter`]: one MCP server tool as a [`BaseTool`].

use async_trait::async_trait;
use rmcp::model::{Tool, ToolAnnotations};
use serde_json::Value;

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::client::McpHandle;
use crate::tools::mcp::naming::{McpToolNaming, qualified_tool_name, sanitize_tool_name};
use crate::tools::mcp::result::content_to_model_text;
use crate::tools::permission::Permission;

/// An MCP server's tool, registered in a [`ToolRegistry`](crate::tools::ToolRegistry) like a
/// local one. Calls go through the client's shared connection.
///
/// Permissions come from the tool's annotations, so MCP tools obey the same
/// [`PermissionChecker`](crate::tools::PermissionChecker) as local tools:
///
/// | annotations | permissions | kind |
/// |---|---|---|
/// | `readOnlyHint: true` | `Read` | `Read` |
/// | `destructiveHint: true` (not read-only) | `Delete` | `Delete` |
/// | `readOnlyHint: false, destructiveHint: false` | `Write` | `Edit` |
/// | none of these | the client's default permissions | `Other` |
/// | `openWorldHint` absent or `true` | adds `Network` | `Fetch` if `true` and nothing else |
/// | `openWorldHint: false` | adds nothing | |
///
/// The MCP spec says `openWorldHint` defaults to `true`: a tool that does not explicitly say
/// `openWorldHint: false` may reach the outside world, so it requires `Network` on top of the
/// rest. Under the default [`PermissionConfig`](crate::tools::PermissionConfig) Network is
/// allowed, so such tools run as before; restricted mode hides them. An unannotated tool thus
/// needs the client's default permissions plus `Network`.
#[derive(Debug, Clone)]
pub struct McpToolAdapter {
    name: String,
    tool_name: String,
    server: String,
    description: String,
    title: Option<String>,
    schema: Value,
    permissions: Vec<Permission>,
    kind: ToolKind,
    handle: McpHandle,
}

impl McpToolAdapter {
    pub(crate) fn new(
        handle: McpHandle,
        tool: &Tool,
        naming: McpToolNaming,
        default_permissions: Vec<Permission>,
    ) -> Self {
        let server = handle.server_name().to_owned();
        let name = match naming {
            McpToolNaming::Raw => sanitize_tool_name(&tool.name),
            McpToolNaming::Qualified => qualified_tool_name(&server, &tool.name),
        };
        let (permissions, kind) =
            permissions_from_annotations(tool.annotations.as_ref(), default_permissions);
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

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }
}

/// Permissions and kind from annotations (see [`McpToolAdapter`]): explicit read-only and
/// destructive hints (else `default`), plus `Network` unless `openWorldHint` is explicitly false.
pub(crate) fn permissions_from_annotations(
    annotations: Option<&ToolAnnotations>,
    default: Vec<Permission>,
) -> (Vec<Permission>, ToolKind) {
    let none = ToolAnnotations::default();
    let hints = annotations.unwrap_or(&none);
    let mut permissions = Vec::new();
    let mut kind = ToolKind::Other;
    match (hints.read_only_hint, hints.destructive_hint) {
        (Some(true), _) => {
            permissions.push(Permission::Read);
            kind = ToolKind::Read;
        }
        (_, Some(true)) => {
            permissions.push(Permission::Delete);
            kind = ToolKind::Delete;
        }
        (Some(false), Some(false)) => {
            permissions.push(Permission::Write);
            kind = ToolKind::Edit;
        }
        _ => {}
    }
    if permissions.is_empty() {
        permissions = default;
    }
    // The spec's default for an absent openWorldHint is true.
    if hints.open_world_hint != Some(false) && !permissions.contains(&Permission::Network) {
        permissions.push(Permission::Network);
    }
    if hints.open_world_hint == Some(true) && kind == ToolKind::Other {
        kind = ToolKind::Fetch;
    }
    (permissions, kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn annotations_map_to_permissions() {
        let read = ToolAnnotations::new().read_only(true).open_world(false);
        assert_eq!(
            permissions_from_annotations(Some(&read), vec![]),
            (vec![Permission::Read], ToolKind::Read)
        );
        let destroy = ToolAnnotations::new().destructive(true).open_world(true);
        assert_eq!(
            permissions_from_annotations(Some(&destroy), vec![]),
            (
                vec![Permission::Delete, Permission::Network],
                ToolKind::Delete
            )
        );
        let web = ToolAnnotations::new().open_world(true);
        assert_eq!(
            permissions_from_annotations(Some(&web), vec![]),
            (vec![Permission::Network], ToolKind::Fetch)
        );
        let closed = ToolAnnotations::new()
            .read_only(false)
            .destructive(false)
            .open_world(false);
        assert_eq!(
            permissions_from_annotations(Some(&closed), vec![]),
            (vec![Permission::Write], ToolKind::Edit)
        );
    }

    #[test]
    fn an_absent_open_world_hint_means_network_as_the_spec_defaults_it_to_true() {
        assert_eq!(
            permissions_from_annotations(None, vec![Permission::Write]),
            (
                vec![Permission::Write, Permission::Network],
                ToolKind::Other
            )
        );
        assert_eq!(
            permissions_from_annotations(None, vec![]),
            (vec![Permission::Network], ToolKind::Other)
        );
        let read = ToolAnnotations::new().read_only(true);
        assert_eq!(
            permissions_from_annotations(Some(&read), vec![]),
            (vec![Permission::Read, Permission::Network], ToolKind::Read)
        );
        let titled = ToolAnnotations::with_title("Only a title");
        assert_eq!(
            permissions_from_annotations(Some(&titled), vec![Permission::Read]),
            (vec![Permission::Read, Permission::Network], ToolKind::Other)
        );
        // Network is not listed twice when the default already has it.
        assert_eq!(
            permissions_from_annotations(None, vec![Permission::Network]),
            (vec![Permission::Network], ToolKind::Other)
        );
    }
}
