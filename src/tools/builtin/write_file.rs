//! `write_file`: create or overwrite a file, creating its parent directories inside the root.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::base::ToolSource;
use crate::tools::builtin::workspace::Workspace;
use crate::tools::builtin::{blocking, io_failure, path_of, write_resolved};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::typed::Tool;

/// Write a file in the workspace: create it (and its missing parent directories) or replace its
/// whole content. To change part of an existing file, use edit_file instead.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct WriteFileInput {
    /// The file, relative to the workspace root (an absolute path must lie inside it).
    pub path: String,
    /// The complete new content.
    pub content: String,
}

/// What `write_file` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteFileOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// How many bytes were written.
    pub bytes: usize,
    /// Whether the file was created (false: an existing file was replaced).
    pub created: bool,
}

/// The `write_file` tool.
#[derive(Debug, Clone)]
pub struct WriteFile {
    workspace: Workspace,
}

impl WriteFile {
    /// Write files in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        WriteFile { workspace }
    }
}

impl Tool for WriteFile {
    type Input = WriteFileInput;
    type Output = WriteFileOutput;
    const NAME: &'static str = "write_file";

    fn kind() -> ToolKind {
        ToolKind::Edit
    }

    fn source() -> ToolSource {
        ToolSource::Builtin
    }

    fn title(&self, input: Result<&WriteFileInput, &Value>) -> String {
        match input {
            Ok(input) => format!("Write {}", input.path),
            Err(raw) => format!("Write {}", path_of(raw).unwrap_or("file")),
        }
    }

    fn model_content(output: &WriteFileOutput) -> String {
        let what = if output.created {
            "Created"
        } else {
            "Overwrote"
        };
        format!("{what} {} ({} bytes).", output.path, output.bytes)
    }

    async fn run(&self, input: WriteFileInput) -> Result<WriteFileOutput, ToolError> {
        let path = self.workspace.resolve_for(Self::NAME, &input.path)?;
        let display = self.workspace.relative(&path);
        let fail = |action: &str, error| io_failure(Self::NAME, action, &display, error);
        let created = match tokio::fs::metadata(&path).await {
            Ok(meta) if meta.is_dir() => {
                return Err(ToolError::ExecutionFailed(
                    Self::NAME.to_owned(),
                    format!("'{display}' is a directory"),
                ));
            }
            Ok(meta) if !meta.is_file() => {
                return Err(ToolError::ExecutionFailed(
                    Self::NAME.to_owned(),
                    format!("'{display}' is not a regular file"),
                ));
            }
            Ok(_) => false,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => true,
            Err(error) => return Err(fail("inspect", error)),
        };
        // The resolved path is symlink-free and inside the root, so its missing parents are too.
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent)
                .await
                .map_err(|error| fail("create the parent directories of", error))?;
        }
        let bytes = input.content.len();
        blocking(Self::NAME, move || {
            write_resolved(&path, input.content.as_bytes())
        })
        .await?
        .map_err(|error| fail("write", error))?;
        Ok(WriteFileOutput {
            path: display,
            bytes,
            created,
        })
    }
}
