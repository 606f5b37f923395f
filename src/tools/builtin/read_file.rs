//! `read_file`: a text file's lines, numbered, paged with `offset` and `limit`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::base::ToolSource;
use crate::tools::builtin::limits::OutputLimits;
use crate::tools::builtin::workspace::{Workspace, open_resolved};
use crate::tools::builtin::{blocking, io_failure, path_of};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::typed::Tool;

/// How many bytes at the start of a file are checked for NUL bytes (binary detection).
const BINARY_PROBE: usize = 8 * 1024;

/// Read a text file in the workspace. Returns its lines prefixed with their line numbers
/// (`   12→text`). Long files are cut with a marker saying how many lines are left; read on
/// with `offset`. Binary files are refused.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct ReadFileInput {
    /// The file, relative to the workspace root (an absolute path must lie inside it).
    pub path: String,
    /// The first line to return, counting from 1 (default: 1).
    #[serde(default)]
    pub offset: Option<usize>,
    /// How many lines to return at most (default and maximum: 2000).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// What `read_file` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadFileOutput {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The returned lines, as in the file (line endings kept).
    pub content: String,
    /// The number of the first returned line (1-based).
    pub start_line: usize,
    /// How many lines were returned.
    pub lines: usize,
    /// How many lines the file has.
    pub total_lines: usize,
    /// Whether lines after the returned ones exist (cut by `limit` or the byte cap).
    pub truncated: bool,
}

/// The `read_file` tool. Default caps: 2,000 lines and 128 KiB per call.
#[derive(Debug, Clone)]
pub struct ReadFile {
    workspace: Workspace,
    limits: OutputLimits,
}

impl ReadFile {
    /// Read files in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        ReadFile {
            workspace,
            limits: OutputLimits::new(2000, 128 * 1024),
        }
    }

    /// Cap each call at these limits (`limit` in the input cannot exceed `max_lines`).
    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }
}

impl Tool for ReadFile {
    type Input = ReadFileInput;
    type Output = ReadFileOutput;
    const NAME: &'static str = "read_file";

    fn kind() -> ToolKind {
        ToolKind::Read
    }

    fn source() -> ToolSource {
        ToolSource::Builtin
    }

    fn title(&self, input: Result<&ReadFileInput, &Value>) -> String {
        match input {
            Ok(ReadFileInput {
                path,
                offset: Some(offset),
                limit,
            }) => match limit {
                Some(limit) => format!(
                    "Read {path} (lines {offset}-{})",
                    offset + limit.saturating_sub(1)
                ),
                None => format!("Read {path} (from line {offset})"),
            },
            Ok(input) => format!("Read {}", input.path),
            Err(raw) => format!("Read {}", path_of(raw).unwrap_or("file")),
        }
    }

    fn model_content(output: &ReadFileOutput) -> String {
        let mut text = String::with_capacity(output.content.len() + output.lines * 8);
        if output.total_lines == 0 {
            return format!("{} is empty.", output.path);
        }
        for (index, line) in output.content.split_inclusive('\n').enumerate() {
            text.push_str(&format!("{:>6}→{}", output.start_line + index, line));
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let next = output.start_line + output.lines;
        if output.truncated && next <= output.total_lines {
            let left = output.total_lines + 1 - next;
            let lines = if left == 1 { "line" } else { "lines" };
            text.push_str(&format!(
                "[... {left} more {lines} cut; read on with offset={next} ...]\n"
            ));
        } else if output.truncated {
            text.push_str("[... the rest of the last line was cut ...]\n");
        }
        text
    }

    async fn run(&self, input: ReadFileInput) -> Result<ReadFileOutput, ToolError> {
        let path = self.workspace.resolve_for(Self::NAME, &input.path)?;
        let display = self.workspace.relative(&path);
        let offset = input.offset.unwrap_or(1).max(1);
        let limit = input
            .limit
            .unwrap_or(self.limits.max_lines)
            .clamp(1, self.limits.max_lines);
        let max_bytes = self.limits.max_bytes;
        let window = blocking(Self::NAME, move || {
            read_window(path, offset, limit, max_bytes)
        })
        .await?
        .map_err(|failure| match failure {
            ReadFailure::Io(error) => io_failure(Self::NAME, "read", &display, error),
            ReadFailure::Directory => ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                format!("'{display}' is a directory; use list_directory to see its entries"),
            ),
            ReadFailure::NotRegular => ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                format!("'{display}' is not a regular file"),
            ),
            ReadFailure::Binary => ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                format!("'{display}' is a binary file; read_file only reads text"),
            ),
        })?;
        if offset > 1 && offset > window.total_lines {
            return Err(ToolError::InvalidArguments(
                Self::NAME.to_owned(),
                format!(
                    "offset {offset} is past the end of '{display}', which has {} lines",
                    window.total_lines
                ),
            ));
        }
        let truncated = window.partial || offset + window.lines <= window.total_lines;
        Ok(ReadFileOutput {
            path: display,
            content: window.content,
            start_line: offset,
            lines: window.lines,
            total_lines: window.total_lines,
            truncated,
        })
    }
}

enum ReadFailure {
    Io(std::io::Error),
    Directory,
    NotRegular,
    Binary,
}

impl From<std::io::Error> for ReadFailure {
    fn from(error: std::io::Error) -> Self {
        ReadFailure::Io(error)
    }
}

struct Window {
    content: String,
    lines: usize,
    total_lines: usize,
    /// Whether the last returned line was cut by the byte cap.
    partial: bool,
}

/// Stream the file once: keep the lines of the window (within the byte cap), count them all.
/// Memory stays within the cap: lines outside the window are skipped, not read into memory,
/// and no line is read beyond `max_bytes + 1` bytes.
fn read_window(
    path: PathBuf,
    offset: usize,
    limit: usize,
    max_bytes: usize,
) -> Result<Window, ReadFailure> {
    // Checked on the handle: the path may have changed since it was resolved.
    let file = open_resolved(&path, std::fs::OpenOptions::new().read(true))?;
    let meta = file.metadata()?;
    if meta.is_dir() {
        return Err(ReadFailure::Directory);
    }
    if !meta.is_file() {
        return Err(ReadFailure::NotRegular);
    }
    let mut reader = BufReader::new(file);
    let probe = reader.fill_buf()?;
    if probe[..probe.len().min(BINARY_PROBE)].contains(&0) {
        return Err(ReadFailure::Binary);
    }
    let cap = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut content = String::new();
    let mut lines = 0usize;
    let mut total = 0usize;
    let mut full = false;
    let mut partial = false;
    let mut line = Vec::new();
    loop {
        if full || total + 1 < offset {
            if reader.skip_until(b'\n')? == 0 {
                break;
            }
            total += 1;
            continue;
        }
        line.clear();
        let read = reader.by_ref().take(cap).read_until(b'\n', &mut line)?;
        if read == 0 {
            break;
        }
        if !line.ends_with(b"\n") && read as u64 == cap {
            // Longer than the whole cap: skip the rest of the line.
            reader.skip_until(b'\n')?;
        }
        total += 1;
        let text = String::from_utf8_lossy(&line);
        if lines == limit || content.len() + text.len() > max_bytes {
            if lines == 0 {
                // A single line longer than the cap: return its beginning.
                content.push_str(&text[..text.floor_char_boundary(max_bytes)]);
                lines = 1;
                partial = true;
            }
            full = true;
            continue;
        }
        content.push_str(&text);
        lines += 1;
    }
    Ok(Window {
        content,
        lines,
        total_lines: total,
        partial,
    })
}
