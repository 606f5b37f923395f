//! A server's prompts as tools for the model: `<server>__list_prompts` and
//! `<server>__get_prompt {name, arguments?}` — read-only (`Read` permission, kind `Read`), their
//! output bounded like the resource tools'.
//!
//! MCP calls prompts *user-controlled*: a server offers them for the user to pick. So these tools
//! are never offered on their own — an application asks for them with
//! [`McpClient::prompt_tools`] (the CLI: `"promptTools": true` in the server's entry), and the
//! user's own way in stays `/prompt` in `agcore chat`.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::catalog::{McpPrompt, McpPromptMessage};
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::naming::qualified_tool_name;
use crate::tools::mcp::resource_tools::{MAX_RESOURCE_OUTPUT_BYTES, cut};
use crate::tools::permission::Permission;

/// The most prompts `list_prompts` shows.
const MAX_LISTED: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    List,
    Get,
}

/// `<server>__list_prompts` or `<server>__get_prompt`: one server's prompts for the model
/// ([`McpClient::prompt_tools`]).
#[derive(Debug, Clone)]
pub struct McpPromptTool {
    name: String,
    description: String,
    server: String,
    op: Op,
    handle: McpHandle,
}

impl McpClient {
    /// The model-facing prompt tools of this server — `<server>__list_prompts` and
    /// `<server>__get_prompt` — or none when it offers no prompts. MCP means prompts for the
    /// user to choose, so register these only when the user asked for them. They need only
    /// `Read`. The client's [tool filter](McpClient::with_tool_filter) applies to them by the
    /// names `list_prompts` and `get_prompt`.
    pub fn prompt_tools(&self) -> Vec<Arc<dyn BaseTool>> {
        self.handle().prompt_tools()
    }
}

impl McpHandle {
    /// See [`McpClient::prompt_tools`].
    pub fn prompt_tools(&self) -> Vec<Arc<dyn BaseTool>> {
        let offers = self.server_info().is_some_and(|info| info.has_prompts);
        if !offers {
            return Vec::new();
        }
        let server = self.server_name().to_owned();
        let filter = self.tool_filter();
        let tool = |op: Op, suffix: &str, description: String| {
            filter.allows(suffix).then(|| {
                Arc::new(McpPromptTool {
                    name: qualified_tool_name(&server, suffix),
                    description,
                    server: server.clone(),
                    op,
                    handle: self.clone(),
                }) as Arc<dyn BaseTool>
            })
        };
        [
            tool(
                Op::List,
                "list_prompts",
                format!(
                    "List the prompts (names, what they are for, their arguments) of the MCP \
                     server '{server}'. Render one with {}.",
                    qualified_tool_name(&server, "get_prompt")
                ),
            ),
            tool(
                Op::Get,
                "get_prompt",
                format!(
                    "Render a prompt of the MCP server '{server}' by name (from {}) with its \
                     arguments; the answer is the prompt's messages.",
                    qualified_tool_name(&server, "list_prompts")
                ),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[async_trait]
impl BaseTool for McpPromptTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        match self.op {
            Op::List => json!({"type": "object", "properties": {}, "additionalProperties": false}),
            Op::Get => json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "The prompt's name"},
                    "arguments": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "The prompt's arguments by name (string values)"
                    }
                },
                "required": ["name"],
                "additionalProperties": false
            }),
        }
    }

    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Read]
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, input: &Value) -> String {
        match (self.op, input.get("name").and_then(Value::as_str)) {
            (Op::Get, Some(name)) => format!("Get the prompt {name} of {}", self.server),
            (Op::Get, None) => format!("Get a prompt of {}", self.server),
            (Op::List, _) => format!("List the prompts of {}", self.server),
        }
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let text = match self.op {
            Op::List => render_prompts(&self.handle.list_prompts().await?),
            Op::Get => {
                let invalid =
                    |why: &str| ToolError::InvalidArguments(self.name.clone(), why.into());
                let name = args
                    .get("name")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("`name` is required"))?;
                let arguments = match args.get("arguments") {
                    None | Some(Value::Null) => Map::new(),
                    Some(Value::Object(map)) if map.values().all(Value::is_string) => map.clone(),
                    Some(_) => return Err(invalid("`arguments` must map names to strings")),
                };
                render_messages(&self.handle.get_prompt(name, arguments).await?)
            }
        };
        Ok(Value::String(cut(&text, 0, MAX_RESOURCE_OUTPUT_BYTES)))
    }
}

/// One line per prompt: `name — title: description (arguments: city (required), state)`.
fn render_prompts(prompts: &[McpPrompt]) -> String {
    if prompts.is_empty() {
        return "the server lists no prompts".to_owned();
    }
    let mut out = String::new();
    for prompt in prompts.iter().take(MAX_LISTED) {
        out.push_str(&prompt.name);
        if let Some(title) = &prompt.title {
            out.push_str(&format!(" — {title}"));
        }
        if let Some(description) = &prompt.description {
            out.push_str(&format!(": {}", description.lines().next().unwrap_or("")));
        }
        if !prompt.arguments.is_empty() {
            let arguments: Vec<String> = prompt
                .arguments
                .iter()
                .map(|argument| match argument.required {
                    Some(true) => format!("{} (required)", argument.name),
                    _ => argument.name.clone(),
                })
                .collect();
            out.push_str(&format!(" (arguments: {})", arguments.join(", ")));
        }
        out.push('\n');
    }
    if prompts.len() > MAX_LISTED {
        out.push_str(&format!(
            "… and {} more prompts\n",
            prompts.len() - MAX_LISTED
        ));
    }
    out
}

/// The rendered prompt, each message under its role: `[user]\nWhat's the weather in Paris?`.
fn render_messages(messages: &[McpPromptMessage]) -> String {
    if messages.is_empty() {
        return "the prompt has no messages".to_owned();
    }
    let parts: Vec<String> = messages
        .iter()
        .map(|message| format!("[{}]\n{}", message.role, message.text))
        .collect();
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::mcp::catalog::McpPromptArgument;

    #[test]
    fn prompts_are_listed_with_their_arguments() {
        let prompt = McpPrompt {
            name: "args-prompt".into(),
            title: Some("Arguments Prompt".into()),
            description: Some("Two arguments\nsecond line".into()),
            arguments: vec![
                McpPromptArgument {
                    name: "city".into(),
                    description: None,
                    required: Some(true),
                },
                McpPromptArgument {
                    name: "state".into(),
                    description: None,
                    required: None,
                },
            ],
        };
        assert_eq!(
            render_prompts(&[prompt]),
            "args-prompt — Arguments Prompt: Two arguments (arguments: city (required), state)\n"
        );
        assert_eq!(render_prompts(&[]), "the server lists no prompts");
    }

    #[test]
    fn messages_are_shown_under_their_roles() {
        let messages = [
            McpPromptMessage {
                role: "user".into(),
                text: "hi".into(),
            },
            McpPromptMessage {
                role: "assistant".into(),
                text: "hello".into(),
            },
        ];
        assert_eq!(render_messages(&messages), "[user]\nhi\n[assistant]\nhello");
    }
}
