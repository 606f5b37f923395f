//! `edit_file`: exact string replacement in one file.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::file_write::{lock_path, read_for_edit, replace_file};
use crate::tools::builtin::protected::ProtectedPaths;
use crate::tools::builtin::workspace::Workspace;
use crate::tools::builtin::{blocking, path_of, resolve_writable, write_failure};
use crate::tools::context;
use crate::tools::error::ToolError;
use crate::tools::event::{ToolCallUpdate, ToolLocation};
use crate::tools::kind::ToolKind;
use crate::tools::streaming::StreamingInput;
use crate::tools::typed::Tool;

/// Edit a file in the workspace by exact string replacement. `old_string` must occur exactly
/// once in the file (copy it from read_file output without the line-number prefix, with its
/// whitespace and indentation) unless `replace_all` is true.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct EditFileInput {
    /// The file, relative to the workspace root (an absolute path must lie inside it).
    pub path: String,
    /// The exact text to replace. Include enough surrounding lines to make it unique.
    pub old_string: String,
    /// The text to put in its place (may be empty, to delete).
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default: false).
    #[serde(default)]
    pub replace_all: bool,
}

/// What `edit_file` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EditFileOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// How many occurrences were replaced.
    pub replacements: usize,
}

/// Why an edit was not applied.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EditError {
    /// `old_string` does not occur in the file.
    #[error(
        "old_string was not found in '{path}' (0 matches); read the file and copy the text exactly, including whitespace and indentation"
    )]
    NotFound {
        /// The file.
        path: String,
    },
    /// `old_string` occurs more than once and `replace_all` is false.
    #[error(
        "old_string occurs {count} times in '{path}'; include more surrounding text to make it unique, or set replace_all to replace all {count}"
    )]
    Ambiguous {
        /// The file.
        path: String,
        /// How many times it occurs.
        count: usize,
    },
    /// `old_string` is empty.
    #[error("old_string is empty; to create or overwrite a file use write_file")]
    EmptyOldString,
    /// `old_string` and `new_string` are the same.
    #[error("old_string and new_string are identical; the edit would change nothing")]
    NoChange,
    /// The file is not UTF-8 text.
    #[error("'{path}' is not UTF-8 text; edit_file only edits text files")]
    NotText {
        /// The file.
        path: String,
    },
}

impl EditError {
    /// The tool error: [`ToolError::InvalidArguments`] for arguments that can never work
    /// (empty or unchanged), [`ToolError::ExecutionFailed`] for a mismatch with the file.
    pub fn into_tool_error(self) -> ToolError {
        match self {
            EditError::EmptyOldString | EditError::NoChange => {
                ToolError::InvalidArguments(EditFile::NAME.to_owned(), self.to_string())
            }
            _ => ToolError::ExecutionFailed(EditFile::NAME.to_owned(), self.to_string()),
        }
    }
}

/// Replace `old` in `text`: exactly once, or everywhere with `replace_all`. Returns the new text
/// and the number of replacements.
pub fn replace_exact(
    path: &str,
    text: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), EditError> {
    if old.is_empty() {
        return Err(EditError::EmptyOldString);
    }
    if old == new {
        return Err(EditError::NoChange);
    }
    let count = text.matches(old).count();
    match count {
        0 => Err(EditError::NotFound {
            path: path.to_owned(),
        }),
        1 => Ok((text.replacen(old, new, 1), 1)),
        _ if replace_all => Ok((text.replace(old, new), count)),
        _ => Err(EditError::Ambiguous {
            path: path.to_owned(),
            count,
        }),
    }
}

/// The `edit_file` tool. Like [`crate::tools::builtin::WriteFile`], it refuses agcore's own
/// configuration and multiply-linked files, and replaces the file atomically; edits of one file
/// are serialised (read, replace and write happen under the file's lock), so parallel edits
/// each apply or fail, none is lost.
#[derive(Debug, Clone)]
pub struct EditFile {
    workspace: Workspace,
    protected: Option<ProtectedPaths>,
}

impl EditFile {
    /// Edit files in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        EditFile {
            workspace,
            protected: Some(ProtectedPaths::from_env()),
        }
    }

    /// Let the tool edit agcore's own configuration and trust files (default: refused; see
    /// [`crate::tools::builtin::WriteFile::allow_writing_agcore_config`]).
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

/// Why an edit did not happen: the file, or the arguments.
enum Failed {
    File(crate::tools::builtin::file_write::WriteFailure),
    Edit(ToolError),
}

impl Tool for EditFile {
    type Input = EditFileInput;
    type Output = EditFileOutput;
    const NAME: &'static str = "edit_file";

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

    fn title(&self, input: Result<&EditFileInput, &Value>) -> String {
        match input {
            Ok(input) => format!("Edit {}", input.path),
            Err(raw) => format!("Edit {}", path_of(raw).unwrap_or("file")),
        }
    }

    fn model_content(output: &EditFileOutput) -> String {
        let times = if output.replacements == 1 {
            "occurrence"
        } else {
            "occurrences"
        };
        format!(
            "Edited {}: replaced {} {times}.",
            output.path, output.replacements
        )
    }

    async fn run(&self, input: EditFileInput) -> Result<EditFileOutput, ToolError> {
        let path = resolve_writable(
            &self.workspace,
            self.protected.as_ref(),
            Self::NAME,
            &input.path,
        )?;
        let display = self.workspace.relative(&path);
        let shown = display.clone();
        // Read, replace and write under the file's lock: a parallel edit waits for this one.
        let guard = lock_path(&path).await;
        // A diff for the call's card, only when someone listens (it copies the file).
        let listening = context::listening();
        let (replacements, diff) = blocking(Self::NAME, move || {
            let _guard = guard;
            let bytes = read_for_edit(&path).map_err(Failed::File)?;
            let text = String::from_utf8(bytes).map_err(|_| {
                Failed::Edit(
                    EditError::NotText {
                        path: shown.clone(),
                    }
                    .into_tool_error(),
                )
            })?;
            let (edited, replacements) = replace_exact(
                &shown,
                &text,
                &input.old_string,
                &input.new_string,
                input.replace_all,
            )
            .map_err(|error| Failed::Edit(error.into_tool_error()))?;
            replace_file(&path, edited.as_bytes()).map_err(Failed::File)?;
            let diff = listening.then(|| {
                let line = text
                    .find(&input.old_string)
                    .map_or(1, |at| text[..at].matches('\n').count() + 1);
                (text, edited, line)
            });
            Ok((replacements, diff))
        })
        .await?
        .map_err(|failed| match failed {
            Failed::File(failure) => write_failure(Self::NAME, &display, failure),
            Failed::Edit(error) => error,
        })?;
        if let Some((old, new, line)) = diff {
            let line = u32::try_from(line).unwrap_or(u32::MAX);
            context::report(
                ToolCallUpdate::diff(display.clone(), Some(old), new)
                    .with_locations(vec![ToolLocation::line(display.clone(), line)]),
            );
        }
        Ok(EditFileOutput {
            path: display,
            replacements,
        })
    }

    fn supports_input_streaming() -> bool {
        true
    }

    /// The edit as it streams: the replaced text and its replacement, growing; the file is
    /// neither read nor written here (that waits for the approved input, in `run`).
    async fn watch_input(&self, mut input: StreamingInput) {
        while let Some(partial) = input.next_partial().await {
            let (Some(path), Some(old)) = (path_of(&partial), partial["old_string"].as_str())
            else {
                continue;
            };
            let new = partial["new_string"].as_str().unwrap_or_default();
            context::report(ToolCallUpdate::diff(path, Some(old.to_owned()), new));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_match_is_replaced() {
        let (text, n) = replace_exact("f", "a b c", "b", "B", false).unwrap();
        assert_eq!((text.as_str(), n), ("a B c", 1));
    }

    #[test]
    fn zero_and_many_matches_are_refused_with_counts() {
        assert_eq!(
            replace_exact("f", "a b c", "x", "y", false).unwrap_err(),
            EditError::NotFound { path: "f".into() }
        );
        assert_eq!(
            replace_exact("f", "b b b", "b", "y", false).unwrap_err(),
            EditError::Ambiguous {
                path: "f".into(),
                count: 3
            }
        );
        assert_eq!(
            replace_exact("f", "b b b", "b", "y", true).unwrap(),
            ("y y y".to_owned(), 3)
        );
    }

    #[test]
    fn empty_or_unchanged_old_string_is_invalid() {
        assert_eq!(
            replace_exact("f", "a", "", "y", false).unwrap_err(),
            EditError::EmptyOldString
        );
        assert_eq!(
            replace_exact("f", "a", "a", "a", false).unwrap_err(),
            EditError::NoChange
        );
    }
}
