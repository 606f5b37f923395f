//! `read_file`: a text file's lines, numbered, paged with `offset` and `limit`.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::file_write::link_count;
use crate::tools::builtin::limits::{MODEL_OUTPUT_BUDGET, OutputLimits};
use crate::tools::builtin::workspace::{Workspace, open_resolved};
use crate::tools::builtin::{blocking, hard_linked, io_failure, path_of};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::typed::Tool;

/// How many bytes at the start of a file are checked for NUL bytes (binary detection).
const BINARY_PROBE: usize = 8 * 1024;
/// The most bytes one call scans to reach `offset`: work stays bounded on huge files (a
/// 20 GiB sparse file is one 20 GiB line of NULs past its text).
const SKIP_BUDGET: u64 = 256 * 1024 * 1024;
/// The most bytes one call scans after its window to count the lines left.
const COUNT_BUDGET: u64 = 16 * 1024 * 1024;

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
    /// How many lines the file has. When the rest of the file was too large to count in one
    /// call (`size_bytes` is set), only the lines up to the returned ones and those counted
    /// after them.
    pub total_lines: usize,
    /// Whether lines after the returned ones exist (cut by `limit` or the byte cap).
    pub truncated: bool,
    /// The file's size in bytes, set when its lines were not all counted (a huge file):
    /// `total_lines` is then a lower bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
}

/// The `read_file` tool. Default caps: 2,000 lines and [`MODEL_OUTPUT_BUDGET`] bytes of what
/// the model reads (line-number prefixes included), so the tool loop never cuts a page and
/// paging with `offset` sees every line. One call scans at most 256 MiB to reach `offset` and
/// 16 MiB after its window to count the lines left, however large the file.
#[derive(Debug, Clone)]
pub struct ReadFile {
    workspace: Workspace,
    limits: OutputLimits,
    refuse_hard_links: bool,
}

impl ReadFile {
    /// Read files in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        ReadFile {
            workspace,
            limits: OutputLimits::new(2000, MODEL_OUTPUT_BUDGET),
            refuse_hard_links: false,
        }
    }

    /// Cap each call at these limits (`limit` in the input cannot exceed `max_lines`;
    /// `max_bytes` counts the text the model reads, line-number prefixes included).
    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }

    /// Refuse files with more than one hard link (default: read them). A hard link in the
    /// workspace may name a file outside it; the write tools always refuse such files.
    pub fn refuse_hard_linked_reads(mut self, refuse: bool) -> Self {
        self.refuse_hard_links = refuse;
        self
    }
}

/// The prefix `model_content` puts before line `number`: `{:>6}→`.
fn prefix_len(number: usize) -> usize {
    let digits = number.checked_ilog10().map_or(1, |log| log as usize + 1);
    digits.max(6) + '→'.len_utf8()
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

    fn title(&self, input: Result<&ReadFileInput, &Value>) -> String {
        match input {
            Ok(ReadFileInput {
                path,
                offset: Some(offset),
                limit,
            }) => match limit {
                Some(limit) => format!(
                    "Read {path} (lines {offset}-{})",
                    offset.saturating_add(limit.saturating_sub(1))
                ),
                None => format!("Read {path} (from line {offset})"),
            },
            Ok(input) => format!("Read {}", input.path),
            Err(raw) => format!("Read {}", path_of(raw).unwrap_or("file")),
        }
    }

    fn model_content(output: &ReadFileOutput) -> String {
        if output.total_lines == 0 && output.lines == 0 {
            return format!("{} is empty.", output.path);
        }
        let mut text = String::with_capacity(output.content.len() + output.lines * 9 + 128);
        for (index, line) in output.content.split_inclusive('\n').enumerate() {
            text.push_str(&format!("{:>6}→{}", output.start_line + index, line));
        }
        if !text.ends_with('\n') {
            text.push('\n');
        }
        let next = output.start_line + output.lines;
        if let Some(size) = output.size_bytes.filter(|_| output.truncated) {
            text.push_str(&format!(
                "[... the file continues after line {}; it has {size} bytes, too many to count \
                 its lines; read on with offset={next} ...]\n",
                next - 1
            ));
        } else if output.truncated && next <= output.total_lines {
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
        let refuse_hard_links = self.refuse_hard_links;
        let window = blocking(Self::NAME, move || {
            read_window(path, offset, limit, max_bytes, refuse_hard_links)
        })
        .await?
        .map_err(|failure| {
            let failed = |why: String| ToolError::ExecutionFailed(Self::NAME.to_owned(), why);
            match failure {
                ReadFailure::Io(error) => io_failure(Self::NAME, "read", &display, error),
                ReadFailure::Directory => failed(format!(
                    "'{display}' is a directory; use list_directory to see its entries"
                )),
                ReadFailure::NotRegular => failed(format!("'{display}' is not a regular file")),
                ReadFailure::Binary => failed(format!(
                    "'{display}' is a binary file; read_file only reads text"
                )),
                ReadFailure::HardLinked(links) => hard_linked(Self::NAME, &display, links),
                ReadFailure::PastEnd { lines } => ToolError::InvalidArguments(
                    Self::NAME.to_owned(),
                    format!(
                        "offset {offset} is past the end of '{display}', which has {lines} lines"
                    ),
                ),
                ReadFailure::TooFar { size } => failed(format!(
                    "line {offset} of '{display}' starts beyond the first {} MiB, which is as \
                     far as read_file scans in one call (the file has {size} bytes); use \
                     search_files, or run_command with sed -n or tail",
                    SKIP_BUDGET / (1024 * 1024)
                )),
            }
        })?;
        Ok(ReadFileOutput {
            path: display,
            content: window.content,
            start_line: offset,
            lines: window.lines,
            total_lines: window.total_lines,
            truncated: window.more,
            size_bytes: window.size_if_uncounted,
        })
    }
}

enum ReadFailure {
    Io(std::io::Error),
    Directory,
    NotRegular,
    Binary,
    HardLinked(u64),
    /// The file ends before `offset`; it has `lines` lines.
    PastEnd {
        lines: usize,
    },
    /// `offset` lies beyond [`SKIP_BUDGET`].
    TooFar {
        size: u64,
    },
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
    /// Whether anything follows the returned content.
    more: bool,
    /// The file size when the lines after the window were not all counted.
    size_if_uncounted: Option<u64>,
}

/// How a bounded skip over one line ended.
enum Skipped {
    /// At the end of the line (its `\n` consumed).
    Line,
    /// At the end of the file; `bytes` of an unterminated line were consumed.
    Eof { bytes: bool },
    /// The budget ran out inside the line.
    OutOfBudget,
}

/// Skip to just past the next `\n`, consuming at most `budget` bytes (decremented).
fn skip_line(reader: &mut impl BufRead, budget: &mut u64) -> std::io::Result<Skipped> {
    let mut consumed = false;
    loop {
        let buffer = reader.fill_buf()?;
        if buffer.is_empty() {
            return Ok(Skipped::Eof { bytes: consumed });
        }
        let (take, ends) = match memchr::memchr(b'\n', buffer) {
            Some(at) => (at + 1, true),
            None => (buffer.len(), false),
        };
        let take64 = u64::try_from(take).unwrap_or(u64::MAX);
        if take64 > *budget {
            let rest = usize::try_from(*budget).unwrap_or(usize::MAX);
            reader.consume(rest);
            *budget = 0;
            return Ok(Skipped::OutOfBudget);
        }
        reader.consume(take);
        *budget -= take64;
        consumed = true;
        if ends {
            return Ok(Skipped::Line);
        }
    }
}

/// Read the window of `limit` lines from line `offset`, within `max_bytes` of rendered text.
/// The work is bounded whatever the file: at most [`SKIP_BUDGET`] bytes scanned to reach
/// `offset`, the window itself, and at most [`COUNT_BUDGET`] bytes after it to count the rest.
fn read_window(
    path: PathBuf,
    offset: usize,
    limit: usize,
    max_bytes: usize,
    refuse_hard_links: bool,
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
    if refuse_hard_links && link_count(&meta) > 1 {
        return Err(ReadFailure::HardLinked(link_count(&meta)));
    }
    let mut reader = BufReader::with_capacity(64 * 1024, file);
    let probe = reader.fill_buf()?;
    if probe[..probe.len().min(BINARY_PROBE)].contains(&0) {
        return Err(ReadFailure::Binary);
    }

    // Skip to `offset`.
    let mut budget = SKIP_BUDGET;
    for before in 1..offset {
        match skip_line(&mut reader, &mut budget)? {
            Skipped::Line => {}
            Skipped::Eof { bytes } => {
                return Err(ReadFailure::PastEnd {
                    lines: before - 1 + usize::from(bytes),
                });
            }
            Skipped::OutOfBudget => return Err(ReadFailure::TooFar { size: meta.len() }),
        }
    }

    // The window: whole lines while they fit; a first line that does not fit is cut.
    let cap = u64::try_from(max_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let mut content = String::new();
    let mut rendered = 0usize;
    let mut lines = 0usize;
    let mut line = Vec::new();
    // Whether part of the line after the returned content was already consumed.
    let mut inside_next = false;
    let mut first_cut = false;
    // Whether the last line read was read to its end.
    let mut complete = false;
    while lines < limit {
        line.clear();
        let read = reader.by_ref().take(cap).read_until(b'\n', &mut line)?;
        if read == 0 {
            // The end of the file within the window: everything is counted.
            if offset > 1 && lines == 0 {
                return Err(ReadFailure::PastEnd { lines: offset - 1 });
            }
            return Ok(Window {
                content,
                lines,
                total_lines: offset - 1 + lines,
                more: false,
                size_if_uncounted: None,
            });
        }
        complete = line.ends_with(b"\n") || (read as u64) < cap;
        let text = String::from_utf8_lossy(&line);
        let prefix = prefix_len(offset + lines);
        if rendered + prefix + text.len() > max_bytes {
            if lines == 0 {
                // A single line longer than the cap: return its beginning.
                let room = max_bytes.saturating_sub(prefix);
                content.push_str(&text[..text.floor_char_boundary(room)]);
                lines = 1;
                first_cut = true;
            }
            inside_next = true;
            break;
        }
        rendered += prefix + text.len();
        content.push_str(&text);
        lines += 1;
    }

    // Count what is left, within the budget.
    let mut budget = COUNT_BUDGET;
    let mut counted = 0usize;
    let mut more = first_cut || inside_next;
    if inside_next && complete {
        // The whole line was read: it is the only one left unless more follow.
        counted += usize::from(!first_cut);
    } else if inside_next {
        match skip_line(&mut reader, &mut budget)? {
            Skipped::Line | Skipped::Eof { .. } => counted += usize::from(!first_cut),
            Skipped::OutOfBudget => {
                return Ok(Window {
                    content,
                    lines,
                    total_lines: offset - 1 + lines,
                    more: true,
                    size_if_uncounted: Some(meta.len()),
                });
            }
        }
    }
    loop {
        match skip_line(&mut reader, &mut budget)? {
            Skipped::Line => counted += 1,
            Skipped::Eof { bytes } => {
                counted += usize::from(bytes);
                more |= counted > 0;
                return Ok(Window {
                    content,
                    lines,
                    total_lines: offset - 1 + lines + counted,
                    more,
                    size_if_uncounted: None,
                });
            }
            Skipped::OutOfBudget => {
                return Ok(Window {
                    content,
                    lines,
                    total_lines: offset - 1 + lines + counted,
                    more: true,
                    size_if_uncounted: Some(meta.len()),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_are_as_wide_as_model_content_writes_them() {
        for number in [1, 9, 10, 999_999, 1_000_000, 12_345_678] {
            assert_eq!(
                prefix_len(number),
                format!("{number:>6}→").len(),
                "{number}"
            );
        }
    }

    #[test]
    fn paging_with_small_caps_returns_the_whole_file_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.txt");
        // Lines of 1..40 bytes, the last without a newline.
        let mut text: String = (0..500)
            .map(|i| format!("{}\n", "x".repeat(i % 40)))
            .collect();
        text.push_str("end");
        std::fs::write(&path, &text).unwrap();
        for (limit, max_bytes) in [(1, 1000), (7, 1000), (2000, 100), (3, 60)] {
            let mut seen = String::new();
            let mut offset = 1;
            loop {
                let window = read_window(path.clone(), offset, limit, max_bytes, false)
                    .unwrap_or_else(|_| panic!("offset {offset}"));
                assert_eq!(window.total_lines, 501, "({limit}, {max_bytes})");
                assert!(window.size_if_uncounted.is_none());
                seen.push_str(&window.content);
                offset += window.lines;
                if !window.more {
                    break;
                }
            }
            assert_eq!(seen, text, "({limit}, {max_bytes})");
            assert!(matches!(
                read_window(path.clone(), 502, limit, max_bytes, false),
                Err(ReadFailure::PastEnd { lines: 501 })
            ));
        }
    }

    #[test]
    fn skipping_is_bounded_by_the_budget() {
        let text = format!("a\n{}\nb\n", "x".repeat(1000));
        let mut reader = std::io::Cursor::new(text.into_bytes());
        let mut budget = 100;
        assert!(matches!(
            skip_line(&mut reader, &mut budget).unwrap(),
            Skipped::Line
        ));
        assert!(matches!(
            skip_line(&mut reader, &mut budget).unwrap(),
            Skipped::OutOfBudget
        ));
        assert_eq!(budget, 0);
        let mut budget = 10_000;
        assert!(matches!(
            skip_line(&mut reader, &mut budget).unwrap(),
            Skipped::Line
        ));
        assert!(matches!(
            skip_line(&mut reader, &mut budget).unwrap(),
            Skipped::Line
        ));
        assert!(matches!(
            skip_line(&mut reader, &mut budget).unwrap(),
            Skipped::Eof { bytes: false }
        ));
    }
}
