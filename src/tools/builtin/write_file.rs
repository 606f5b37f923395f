//! `write_file`: create or overwrite a file, creating its parent directories inside the root.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::file_write::{lock_path, replace_file};
use crate::tools::builtin::protected::ProtectedPaths;
use crate::tools::builtin::workspace::Workspace;
use crate::tools::builtin::{blocking, io_failure, path_of, resolve_writable, write_failure};
use crate::tools::context;
use crate::tools::error::ToolError;
use crate::tools::event::{ToolCallUpdate, ToolLocation};
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

/// The `write_file` tool. It refuses agcore's own configuration and trust files (see
/// [`WriteFile::allow_writing_agcore_config`]) and files with more than one hard link; it
/// replaces a file atomically (a temporary file renamed over it, permissions kept), one writer
/// per path at a time.
#[derive(Debug, Clone)]
pub struct WriteFile {
    workspace: Workspace,
    protected: Option<ProtectedPaths>,
}

impl WriteFile {
    /// Write files in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        WriteFile {
            workspace,
            protected: Some(ProtectedPaths::from_env()),
        }
    }

    /// Let the tool write agcore's own configuration and trust files: any `agcore.toml`,
    /// anything under a `.agcore` directory or the user's agcore config and data directories
    /// (default: refused, so a model allowed to write cannot configure the next agcore run).
    pub fn allow_writing_agcore_config(mut self, allow: bool) -> Self {
        self.protected = (!allow).then(ProtectedPaths::from_env);
        self
    }

    /// Also refuse to change `files` (files a trusted config reads, such as an agent's
    /// instructions), unless writing agcore's configuration is allowed.
    pub fn protecting_files(mut self, files: &[std::path::PathBuf]) -> Self {
        self.protected = self
            .protected
            .map(|protected| protected.with_files(files.iter().map(|file| file.as_path())));
        self
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

    fn argument_kind(argument: &str) -> ArgumentKind {
        match argument {
            "path" => ArgumentKind::Path,
            _ => ArgumentKind::Text,
        }
    }

    fn normalize_argument(&self, argument: &str, value: &Value) -> Option<String> {
        (argument == "path")
            .then(|| self.workspace.rule_path(value))
            .flatten()
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(crate::tools::builtin::FILE_TOOL_TIMEOUT)
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
        let path = resolve_writable(
            &self.workspace,
            self.protected.as_ref(),
            Self::NAME,
            &input.path,
        )?;
        let display = self.workspace.relative(&path);
        // The resolved path is symlink-free and inside the root, so its missing parents are too.
        if let Some(parent) = path.parent() {
            tokio::fs::create_dir_all(parent).await.map_err(|error| {
                io_failure(
                    Self::NAME,
                    "create the parent directories of",
                    &display,
                    error,
                )
            })?;
        }
        let bytes = input.content.len();
        let guard = lock_path(&path).await;
        // A diff for the call's card, only when someone listens (it reads the old file).
        let listening = context::listening();
        let (created, diff) = blocking(Self::NAME, move || {
            let _guard = guard;
            let old = if listening {
                std::fs::read_to_string(&path).ok()
            } else {
                None
            };
            let created = replace_file(&path, input.content.as_bytes())?;
            Ok((created, listening.then_some((old, input.content))))
        })
        .await?
        .map_err(|failure| write_failure(Self::NAME, &display, failure))?;
        if let Some((old, new)) = diff {
            context::report(
                ToolCallUpdate::diff(display.clone(), old, new)
                    .with_locations(vec![ToolLocation::file(display.clone())]),
            );
        }
        Ok(WriteFileOutput {
            path: display,
            bytes,
            created,
        })
    }
}
