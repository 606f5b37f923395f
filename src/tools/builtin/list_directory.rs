//! `list_directory`: the entries of one directory, sorted, capped.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::limits::MODEL_OUTPUT_BUDGET;
use crate::tools::builtin::workspace::Workspace;
use crate::tools::builtin::{blocking, io_failure, path_of};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::typed::Tool;

/// List the entries of a directory in the workspace (not recursive). Directories end with `/`,
/// symlinks with `@`; files show their size in bytes.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ListDirectoryInput {
    /// The directory, relative to the workspace root (default: the root itself).
    #[serde(default)]
    pub path: Option<String>,
}

/// What an entry is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EntryKind {
    /// A regular file.
    File,
    /// A directory.
    Directory,
    /// A symbolic link (not followed).
    Symlink,
    /// Anything else (socket, device, FIFO).
    Other,
}

/// One entry of a directory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DirectoryEntry {
    /// The entry's file name.
    pub name: String,
    /// What it is.
    pub kind: EntryKind,
    /// Its size in bytes (files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
}

/// What `list_directory` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListDirectoryOutput {
    /// The directory, relative to the workspace root.
    pub path: String,
    /// The entries, directories first, then by name.
    pub entries: Vec<DirectoryEntry>,
    /// How many further entries were cut by the cap.
    pub cut_entries: usize,
}

/// The `list_directory` tool. Default cap: 1,000 entries, and no more than
/// [`MODEL_OUTPUT_BUDGET`] bytes of them for the model.
#[derive(Debug, Clone)]
pub struct ListDirectory {
    workspace: Workspace,
    max_entries: usize,
}

impl ListDirectory {
    /// List directories in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        ListDirectory {
            workspace,
            max_entries: 1000,
        }
    }

    /// Return at most `max_entries` entries per call.
    pub fn with_max_entries(mut self, max_entries: usize) -> Self {
        self.max_entries = max_entries.max(1);
        self
    }
}

impl Tool for ListDirectory {
    type Input = ListDirectoryInput;
    type Output = ListDirectoryOutput;
    const NAME: &'static str = "list_directory";

    fn kind() -> ToolKind {
        ToolKind::Read
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

    /// It only reads.
    fn idempotent(&self) -> bool {
        true
    }

    fn title(&self, input: Result<&ListDirectoryInput, &Value>) -> String {
        let path = match input {
            Ok(input) => input.path.as_deref(),
            Err(raw) => path_of(raw),
        };
        format!("List {}", path.unwrap_or("."))
    }

    fn model_content(output: &ListDirectoryOutput) -> String {
        if output.entries.is_empty() {
            return format!("{} is empty.", output.path);
        }
        let mut text = String::new();
        for entry in &output.entries {
            match (entry.kind, entry.size) {
                (EntryKind::Directory, _) => text.push_str(&format!("{}/\n", entry.name)),
                (EntryKind::Symlink, _) => text.push_str(&format!("{}@\n", entry.name)),
                (_, Some(size)) => text.push_str(&format!("{}  ({size} bytes)\n", entry.name)),
                (_, None) => text.push_str(&format!("{}\n", entry.name)),
            }
        }
        if output.cut_entries > 0 {
            text.push_str(&format!(
                "[... {} more entries cut ...]\n",
                output.cut_entries
            ));
        }
        text
    }

    async fn run(&self, input: ListDirectoryInput) -> Result<ListDirectoryOutput, ToolError> {
        let requested = input.path.unwrap_or_else(|| ".".to_owned());
        let path = self.workspace.resolve_for(Self::NAME, &requested)?;
        let display = self.workspace.relative(&path);
        let mut entries = blocking(Self::NAME, move || read_entries(path))
            .await?
            .map_err(|error| io_failure(Self::NAME, "list", &display, error))?;
        entries.sort_by(|a, b| {
            (a.kind != EntryKind::Directory, &a.name)
                .cmp(&(b.kind != EntryKind::Directory, &b.name))
        });
        // Within the entry cap and the model's byte budget (names can be 255 bytes long).
        let mut room = MODEL_OUTPUT_BUDGET - 256;
        let fit = entries
            .iter()
            .take(self.max_entries)
            .take_while(|entry| match room.checked_sub(rendered_len(entry)) {
                Some(left) => {
                    room = left;
                    true
                }
                None => false,
            })
            .count();
        let cut_entries = entries.len() - fit;
        entries.truncate(fit);
        Ok(ListDirectoryOutput {
            path: display,
            entries,
            cut_entries,
        })
    }
}

/// The bytes `model_content` writes for `entry`.
fn rendered_len(entry: &DirectoryEntry) -> usize {
    match (entry.kind, entry.size) {
        (_, Some(size)) => entry.name.len() + size.to_string().len() + 10,
        _ => entry.name.len() + 2,
    }
}

fn read_entries(path: PathBuf) -> std::io::Result<Vec<DirectoryEntry>> {
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(path)? {
        let entry = entry?;
        // `file_type` does not follow symlinks, so a link out of the workspace is only named.
        let file_type = entry.file_type()?;
        let (kind, size) = if file_type.is_symlink() {
            (EntryKind::Symlink, None)
        } else if file_type.is_dir() {
            (EntryKind::Directory, None)
        } else if file_type.is_file() {
            (EntryKind::File, entry.metadata().ok().map(|m| m.len()))
        } else {
            (EntryKind::Other, None)
        };
        entries.push(DirectoryEntry {
            name: entry.file_name().to_string_lossy().into_owned(),
            kind,
            size,
        });
    }
    Ok(entries)
}
