//! The editor's file system: when the client offers `fs/read_text_file` and
//! `fs/write_text_file`, `read_file`, `edit_file` and `write_file` work on the editor's buffers,
//! so the model sees unsaved text as the user sees it and its edits land in the editor (which
//! shows and saves them).
//!
//! Each tool keeps the built-in's name, schema, kind, permissions and output shape
//! ([`super::delegate`]), so every gate (exposure, permissions, rules, approvals, restricted
//! mode) applies exactly as before; only the I/O changes hands. Paths are confined before the
//! editor is asked: reads by the built-ins' [`Workspace`], writes by
//! [`BuiltinOptions::resolve_writable`] (inside the workspace, not agcore's own configuration,
//! no hard-linked file). What comes back from the editor is bounded.

use std::path::{Path, PathBuf};

use agcore::tools::ToolCallUpdate;
use agcore::tools::builtin::{
    BuiltinOptions, EditFileInput, EditFileOutput, Workspace, WriteFileInput, WriteFileOutput,
    replace_exact,
};
use agcore::tools::context;
use agcore::tools::prelude::*;
use agcore::tools::{StreamingInput, ToolLocation};
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;

use super::delegate::delegate_to_builtin;
use super::requests::ask;

/// The most lines one read asks the editor for (the built-in's cap).
const MAX_LINES: u32 = 2000;

/// The most bytes of a buffer given to the model in one read.
const MAX_READ_BYTES: usize = 256 * 1024;

/// The largest buffer an edit reads, changes and writes back.
const MAX_EDIT_BYTES: usize = 8 * 1024 * 1024;

/// The editor's file system for one session, with the built-ins' confinement.
#[derive(Clone)]
pub struct EditorFs {
    connection: ConnectionTo<Client>,
    session: acp::SessionId,
    workspace: Workspace,
    options: BuiltinOptions,
    /// Edits are read-change-write on the editor's side: one at a time, so two parallel edits
    /// of a file cannot both start from the old text.
    edits: Arc<tokio::sync::Mutex<()>>,
}

impl EditorFs {
    /// The editor's files of `session`, confined to `workspace` and judged by `options`.
    pub fn new(
        connection: ConnectionTo<Client>,
        session: acp::SessionId,
        workspace: Workspace,
        options: BuiltinOptions,
    ) -> Self {
        Self {
            connection,
            session,
            workspace,
            options,
            edits: Arc::new(tokio::sync::Mutex::new(())),
        }
    }

    /// The text of `path` (absolute, confined) as the editor has it; `line`/`limit` as ACP's.
    async fn read(
        &self,
        tool: &str,
        path: &Path,
        line: Option<u32>,
        limit: Option<u32>,
    ) -> Result<String, ToolError> {
        let mut request = acp::ReadTextFileRequest::new(self.session.clone(), path.to_owned());
        request.line = line;
        request.limit = limit;
        let response = ask(&self.connection, request).await.map_err(|error| {
            ToolError::ExecutionFailed(
                tool.to_owned(),
                format!(
                    "the editor could not read {}: {}",
                    self.workspace.relative(path),
                    error.message
                ),
            )
        })?;
        Ok(response.content)
    }

    /// Replace `path`'s text in the editor.
    async fn write(&self, tool: &str, path: &Path, content: String) -> Result<(), ToolError> {
        let request =
            acp::WriteTextFileRequest::new(self.session.clone(), path.to_owned(), content);
        ask(&self.connection, request)
            .await
            .map(drop)
            .map_err(|error| {
                ToolError::ExecutionFailed(
                    tool.to_owned(),
                    format!(
                        "the editor could not write {}: {}",
                        self.workspace.relative(path),
                        error.message
                    ),
                )
            })
    }

    /// Where `tool` may write `requested`, as the built-in write tools decide it, and whether
    /// a file is there now. A file with other hard links is refused as the built-ins refuse it.
    fn writable(&self, tool: &str, requested: &str) -> Result<(PathBuf, bool), ToolError> {
        let path = self
            .options
            .resolve_writable(&self.workspace, tool, requested)?;
        let display = self.workspace.relative(&path);
        match std::fs::symlink_metadata(&path) {
            Ok(meta) if meta.is_dir() => Err(ToolError::ExecutionFailed(
                tool.to_owned(),
                format!("'{display}' is a directory"),
            )),
            Ok(meta) if !meta.is_file() => Err(ToolError::ExecutionFailed(
                tool.to_owned(),
                format!("'{display}' is not a regular file"),
            )),
            Ok(meta) if links(&meta) > 1 => Err(ToolError::PermissionDenied(
                tool.to_owned(),
                format!(
                    "a file with one name, but '{display}' has {} hard links (another name may \
                     lie outside the workspace)",
                    links(&meta)
                ),
            )),
            Ok(_) => Ok((path, true)),
            Err(_) => Ok((path, false)),
        }
    }
}

#[cfg(unix)]
fn links(meta: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    meta.nlink()
}

#[cfg(not(unix))]
fn links(_meta: &std::fs::Metadata) -> u64 {
    1
}

fn invalid(tool: &str, error: serde_json::Error) -> ToolError {
    ToolError::InvalidArguments(tool.to_owned(), error.to_string())
}

fn output_of<T: Serialize>(tool: &str, output: &T) -> Result<Value, ToolError> {
    serde_json::to_value(output)
        .map_err(|error| ToolError::ExecutionFailed(tool.to_owned(), error.to_string()))
}

/// `text` cut to at most `limit` bytes, at the end of a line where one falls in it.
fn whole_lines(mut text: String, limit: usize) -> (String, bool) {
    if text.len() <= limit {
        return (text, false);
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end = text[..end].rfind('\n').map_or(end, |newline| newline + 1);
    text.truncate(end);
    (text, true)
}

/// `read_file`, reading the editor's buffer.
pub struct EditorReadFile {
    builtin: Arc<dyn BaseTool>,
    files: EditorFs,
}

impl EditorReadFile {
    /// The built-in `read_file`, reading through `files`.
    pub fn new(builtin: Arc<dyn BaseTool>, files: EditorFs) -> Self {
        Self { builtin, files }
    }
}

#[async_trait]
impl BaseTool for EditorReadFile {
    delegate_to_builtin!();

    async fn watch_input(&self, input: StreamingInput) {
        self.builtin.watch_input(input).await;
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        const TOOL: &str = "read_file";
        let path = args.get("path").and_then(Value::as_str).ok_or_else(|| {
            ToolError::InvalidArguments(TOOL.to_owned(), "path must be a string".to_owned())
        })?;
        let number = |name: &str| args.get(name).and_then(Value::as_u64);
        let start = number("offset").unwrap_or(1).max(1);
        let limit = number("limit").map_or(MAX_LINES, |limit| {
            u32::try_from(limit.clamp(1, u64::from(MAX_LINES))).unwrap_or(MAX_LINES)
        });
        // Confined exactly as the built-in confines it: no `..`, no link out of the workspace.
        let absolute = self.files.workspace.resolve_for(TOOL, path)?;
        let line = u32::try_from(start).unwrap_or(u32::MAX);
        let content = self
            .files
            .read(TOOL, &absolute, Some(line), Some(limit))
            .await?;
        // Whole lines only, so the next read's offset continues where this one stopped.
        let (content, cut) = whole_lines(content, MAX_READ_BYTES);
        let lines = content.split_inclusive('\n').count();
        let start = usize::try_from(start).unwrap_or(usize::MAX);
        Ok(json!({
            "path": self.files.workspace.relative(&absolute),
            "content": content,
            "start_line": start,
            "lines": lines,
            "total_lines": (start + lines).saturating_sub(1),
            "truncated": cut || lines as u64 >= u64::from(limit),
        }))
    }
}

/// `write_file`, writing the editor's buffer (the editor creates or replaces the file).
pub struct EditorWriteFile {
    builtin: Arc<dyn BaseTool>,
    files: EditorFs,
}

impl EditorWriteFile {
    /// The built-in `write_file`, writing through `files`.
    pub fn new(builtin: Arc<dyn BaseTool>, files: EditorFs) -> Self {
        Self { builtin, files }
    }
}

#[async_trait]
impl BaseTool for EditorWriteFile {
    delegate_to_builtin!();

    async fn watch_input(&self, input: StreamingInput) {
        self.builtin.watch_input(input).await;
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        const TOOL: &str = "write_file";
        let input: WriteFileInput = serde_json::from_value(args).map_err(|e| invalid(TOOL, e))?;
        let (path, exists) = self.files.writable(TOOL, &input.path)?;
        let display = self.files.workspace.relative(&path);
        // The editor may not make directories; they are made here, inside the workspace (the
        // resolved path is free of links and inside the root, so are its parents).
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|error| {
                ToolError::ExecutionFailed(
                    TOOL.to_owned(),
                    format!("could not create the parent directories of {display}: {error}"),
                )
            })?;
        }
        let _edit = self.files.edits.lock().await;
        let old = if exists && context::listening() {
            Some(self.files.read(TOOL, &path, None, None).await?)
        } else {
            None
        };
        let bytes = input.content.len();
        self.files.write(TOOL, &path, input.content.clone()).await?;
        if context::listening() {
            context::report(
                ToolCallUpdate::diff(display.clone(), old, input.content)
                    .with_locations(vec![ToolLocation::file(display.clone())]),
            );
        }
        output_of(
            TOOL,
            &WriteFileOutput {
                path: display,
                bytes,
                created: !exists,
            },
        )
    }
}

/// `edit_file`, changing the editor's buffer: read from the editor, replaced exactly as the
/// built-in replaces, written back to the editor.
pub struct EditorEditFile {
    builtin: Arc<dyn BaseTool>,
    files: EditorFs,
}

impl EditorEditFile {
    /// The built-in `edit_file`, editing through `files`.
    pub fn new(builtin: Arc<dyn BaseTool>, files: EditorFs) -> Self {
        Self { builtin, files }
    }
}

#[async_trait]
impl BaseTool for EditorEditFile {
    delegate_to_builtin!();

    async fn watch_input(&self, input: StreamingInput) {
        self.builtin.watch_input(input).await;
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        const TOOL: &str = "edit_file";
        let input: EditFileInput = serde_json::from_value(args).map_err(|e| invalid(TOOL, e))?;
        let (path, exists) = self.files.writable(TOOL, &input.path)?;
        let display = self.files.workspace.relative(&path);
        if !exists {
            return Err(ToolError::ExecutionFailed(
                TOOL.to_owned(),
                format!("'{display}' does not exist; create it with write_file"),
            ));
        }
        let _edit = self.files.edits.lock().await;
        let text = self.files.read(TOOL, &path, None, None).await?;
        if text.len() > MAX_EDIT_BYTES {
            return Err(ToolError::ExecutionFailed(
                TOOL.to_owned(),
                format!(
                    "'{display}' is {} bytes in the editor, more than the {MAX_EDIT_BYTES} an edit \
                     handles",
                    text.len()
                ),
            ));
        }
        let (edited, replacements) = replace_exact(
            &display,
            &text,
            &input.old_string,
            &input.new_string,
            input.replace_all,
        )
        .map_err(|error| error.into_tool_error())?;
        self.files.write(TOOL, &path, edited.clone()).await?;
        if context::listening() {
            let line = text
                .find(&input.old_string)
                .map_or(1, |at| text[..at].matches('\n').count() + 1);
            let line = u32::try_from(line).unwrap_or(u32::MAX);
            context::report(
                ToolCallUpdate::diff(display.clone(), Some(text), edited)
                    .with_locations(vec![ToolLocation::line(display.clone(), line)]),
            );
        }
        output_of(
            TOOL,
            &EditFileOutput {
                path: display,
                replacements,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_buffer_is_cut_at_a_line_end() {
        let (cut, was_cut) = whole_lines("one\ntwo\nthree\n".to_owned(), 9);
        assert_eq!(cut, "one\ntwo\n");
        assert!(was_cut);
        let (kept, was_cut) = whole_lines("short\n".to_owned(), 9);
        assert_eq!(kept, "short\n");
        assert!(!was_cut);
    }
}
