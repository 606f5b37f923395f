//! The editor's file system: when the client offers `fs/read_text_file`, `read_file` reads
//! through the editor, so the model sees unsaved buffers as the user sees them.
//!
//! The tool keeps the built-in's name, schema, kind, permissions and output shape, so every gate
//! (exposure, permissions, rules, approvals, restricted mode) applies exactly as before; only the
//! read itself changes hands. The path is confined to the workspace by the built-ins' own
//! [`Workspace`] before the editor is asked, and what comes back is bounded.

use agcore::tools::builtin::Workspace;
use agcore::tools::prelude::*;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;

/// The most lines one read asks the editor for (the built-in's cap).
const MAX_LINES: u32 = 2000;

/// The most bytes of a buffer given to the model in one read.
const MAX_BYTES: usize = 256 * 1024;

/// `read_file`, reading through the editor.
pub struct EditorReadFile {
    builtin: Arc<dyn BaseTool>,
    workspace: Workspace,
    connection: ConnectionTo<Client>,
    session: acp::SessionId,
}

impl EditorReadFile {
    /// Wrap the built-in `read_file` of `workspace`.
    pub fn new(
        builtin: Arc<dyn BaseTool>,
        workspace: Workspace,
        connection: ConnectionTo<Client>,
        session: acp::SessionId,
    ) -> Self {
        Self {
            builtin,
            workspace,
            connection,
            session,
        }
    }
}

fn invalid(message: impl Into<String>) -> ToolError {
    ToolError::InvalidArguments("read_file".to_owned(), message.into())
}

#[async_trait]
impl BaseTool for EditorReadFile {
    fn name(&self) -> &str {
        self.builtin.name()
    }

    fn description(&self) -> &str {
        self.builtin.description()
    }

    fn parameters(&self) -> Value {
        self.builtin.parameters()
    }

    fn required_permissions(&self) -> Vec<agcore::tools::Permission> {
        self.builtin.required_permissions()
    }

    fn kind(&self) -> agcore::tools::ToolKind {
        self.builtin.kind()
    }

    fn title(&self, input: &Value) -> String {
        self.builtin.title(input)
    }

    fn model_content(&self, output: &Value) -> String {
        self.builtin.model_content(output)
    }

    fn source(&self) -> agcore::tools::ToolSource {
        self.builtin.source()
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        self.builtin.timeout()
    }

    fn current_description(&self) -> std::borrow::Cow<'_, str> {
        self.builtin.current_description()
    }

    fn permissions_assumed(&self) -> bool {
        self.builtin.permissions_assumed()
    }

    fn required_flags(&self) -> Vec<String> {
        self.builtin.required_flags()
    }

    fn supports_provider(&self, provider: &str, model: &str) -> bool {
        self.builtin.supports_provider(provider, model)
    }

    fn allow_in_restricted_mode(&self) -> bool {
        self.builtin.allow_in_restricted_mode()
    }

    fn idempotent(&self) -> bool {
        self.builtin.idempotent()
    }

    fn argument_kind(&self, argument: &str) -> agcore::tools::ArgumentKind {
        self.builtin.argument_kind(argument)
    }

    fn normalize_argument(&self, argument: &str, value: &Value) -> Option<String> {
        self.builtin.normalize_argument(argument, value)
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let path = args
            .get("path")
            .and_then(Value::as_str)
            .ok_or_else(|| invalid("path must be a string"))?;
        let number = |name: &str| args.get(name).and_then(Value::as_u64);
        let start = number("offset").unwrap_or(1).max(1);
        let limit = number("limit").map_or(MAX_LINES, |limit| {
            limit.clamp(1, u64::from(MAX_LINES)) as u32
        });
        // Confined exactly as the built-in confines it: no `..`, no link out of the workspace.
        let absolute = self.workspace.resolve_for("read_file", path)?;
        let request = acp::ReadTextFileRequest::new(self.session.clone(), absolute.clone())
            .line(u32::try_from(start).unwrap_or(u32::MAX))
            .limit(limit);
        let response = self
            .connection
            .send_request(request)
            .block_task()
            .await
            .map_err(|error| {
                ToolError::ExecutionFailed(
                    "read_file".to_owned(),
                    format!("the editor could not read {path}: {error}"),
                )
            })?;
        let mut content = response.content;
        let mut truncated = false;
        if content.len() > MAX_BYTES {
            let mut end = MAX_BYTES;
            while !content.is_char_boundary(end) {
                end -= 1;
            }
            // Whole lines only, so the next read's offset continues where this one stopped.
            end = content[..end]
                .rfind('\n')
                .map_or(end, |newline| newline + 1);
            content.truncate(end);
            truncated = true;
        }
        let lines = content.split_inclusive('\n').count();
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        Ok(json!({
            "path": self.workspace.relative(&absolute),
            "content": content,
            "start_line": start,
            "lines": lines,
            "total_lines": (start + lines).saturating_sub(1),
            "truncated": truncated || lines as u64 >= u64::from(limit),
        }))
    }
}
