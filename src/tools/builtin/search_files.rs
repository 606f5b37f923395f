//! `search_files`: a regex over the workspace tree, respecting `.gitignore`, with ripgrep's
//! walker (`ignore`) and searcher (`grep-searcher`, `grep-regex`).

use std::path::PathBuf;

use globset::{GlobBuilder, GlobMatcher};
use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use ignore::WalkBuilder;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::blocking;
use crate::tools::builtin::file_write::link_count;
use crate::tools::builtin::limits::{MODEL_OUTPUT_BUDGET, truncate_line};
use crate::tools::builtin::workspace::Workspace;
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::typed::Tool;

/// Files larger than this are not searched.
const MAX_FILE_SIZE: u64 = 10 * 1024 * 1024;
/// Matched lines longer than this are cut (minified files).
const MAX_LINE_BYTES: usize = 300;

/// Search file contents in the workspace with a regular expression (Rust regex syntax). Files
/// ignored by `.gitignore`/`.ignore`, hidden files and binary files are skipped. Returns
/// `path:line: text` for each matching line.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct SearchFilesInput {
    /// The regular expression, e.g. `fn\s+main` or `TODO|FIXME`.
    pub pattern: String,
    /// The directory (or file) to search, relative to the workspace root (default: the root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files matching this glob: `*.rs` matches file names at any depth,
    /// `src/**/*.rs` matches paths relative to `path`.
    #[serde(default)]
    pub glob: Option<String>,
    /// Match case-insensitively (default: false).
    #[serde(default)]
    pub case_insensitive: bool,
    /// Return at most this many matching lines (default: 100, maximum: 1000).
    #[serde(default)]
    pub max_results: Option<usize>,
}

/// One matching line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchMatch {
    /// The file, relative to the workspace root.
    pub path: String,
    /// The line number (1-based).
    pub line_number: u64,
    /// The line, without its line ending (long lines cut with a marker).
    pub line: String,
}

/// What `search_files` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchFilesOutput {
    /// The matching lines, by file path, then line number.
    pub matches: Vec<SearchMatch>,
    /// How many matching lines exist in total (more than `matches.len()` when cut).
    pub total_matches: usize,
    /// How many files were searched.
    pub files_searched: usize,
    /// Whether the search stopped at its time limit before the whole tree was searched.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub stopped_early: bool,
}

/// The `search_files` tool. Default: 100 results per call, at most 1,000, and no more than
/// [`MODEL_OUTPUT_BUDGET`] bytes of them for the model (the rest are counted, not listed).
#[derive(Debug, Clone)]
pub struct SearchFiles {
    workspace: Workspace,
    max_results: usize,
    refuse_hard_links: bool,
    time_limit: std::time::Duration,
}

/// How long one search walks the tree before it answers with what it found.
const DEFAULT_TIME_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

impl SearchFiles {
    /// Search in `workspace`.
    pub fn new(workspace: Workspace) -> Self {
        SearchFiles {
            workspace,
            max_results: 100,
            refuse_hard_links: false,
            time_limit: DEFAULT_TIME_LIMIT,
        }
    }

    /// Stop walking after `limit` and answer with what was found (default: 30 s, below the
    /// tool's own timeout, so a huge tree gives partial results rather than a timeout).
    pub fn with_time_limit(mut self, limit: std::time::Duration) -> Self {
        self.time_limit = limit;
        self
    }

    /// Skip files with more than one hard link (default: search them; see
    /// [`crate::tools::builtin::ReadFile::refuse_hard_linked_reads`]).
    pub fn refuse_hard_linked_reads(mut self, refuse: bool) -> Self {
        self.refuse_hard_links = refuse;
        self
    }

    /// Return `max_results` lines unless the input asks for fewer.
    pub fn with_max_results(mut self, max_results: usize) -> Self {
        self.max_results = max_results.max(1);
        self
    }
}

/// The most results one call may ask for.
const RESULTS_CEILING: usize = 1000;

impl Tool for SearchFiles {
    type Input = SearchFilesInput;
    type Output = SearchFilesOutput;
    const NAME: &'static str = "search_files";

    fn kind() -> ToolKind {
        ToolKind::Search
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

    fn title(&self, input: Result<&SearchFilesInput, &Value>) -> String {
        match input {
            Ok(input) => {
                let mut title = format!("Search /{}/", input.pattern);
                if let Some(path) = &input.path {
                    title.push_str(&format!(" in {path}"));
                }
                if let Some(glob) = &input.glob {
                    title.push_str(&format!(" ({glob})"));
                }
                title
            }
            Err(raw) => match raw.get("pattern").and_then(Value::as_str) {
                Some(pattern) => format!("Search /{pattern}/"),
                None => "Search files".to_owned(),
            },
        }
    }

    fn model_content(output: &SearchFilesOutput) -> String {
        let stopped = if output.stopped_early {
            "[... the search stopped at its time limit; narrow the path or glob to search the rest ...]\n"
        } else {
            ""
        };
        if output.matches.is_empty() {
            return format!(
                "No matches ({} files searched).\n{stopped}",
                output.files_searched
            )
            .trim_end()
            .to_owned();
        }
        let mut text = String::new();
        for found in &output.matches {
            text.push_str(&format!(
                "{}:{}: {}\n",
                found.path, found.line_number, found.line
            ));
        }
        let cut = output.total_matches - output.matches.len();
        if cut > 0 {
            text.push_str(&format!(
                "[... {cut} more matches cut; narrow the pattern, path or glob ...]\n"
            ));
        }
        text.push_str(stopped);
        text
    }

    async fn run(&self, input: SearchFilesInput) -> Result<SearchFilesOutput, ToolError> {
        let invalid = |what: String| ToolError::InvalidArguments(Self::NAME.to_owned(), what);
        let matcher = RegexMatcherBuilder::new()
            .case_insensitive(input.case_insensitive)
            .build(&input.pattern)
            .map_err(|error| invalid(format!("'pattern' is not a valid regex: {error}")))?;
        let glob = input
            .glob
            .as_deref()
            .map(|glob| {
                GlobBuilder::new(glob)
                    .literal_separator(true)
                    .build()
                    .map(|compiled| GlobFilter {
                        by_name: !glob.contains('/'),
                        matcher: compiled.compile_matcher(),
                    })
                    .map_err(|error| invalid(format!("'glob' is not a valid glob: {error}")))
            })
            .transpose()?;
        let root = self
            .workspace
            .resolve_for(Self::NAME, input.path.as_deref().unwrap_or("."))?;
        let max_results = input
            .max_results
            .unwrap_or(self.max_results)
            .clamp(1, RESULTS_CEILING);
        let workspace = self.workspace.clone();
        let refuse_hard_links = self.refuse_hard_links;
        let deadline = std::time::Instant::now() + self.time_limit;
        blocking(Self::NAME, move || {
            let limits = SearchLimits {
                max_results,
                refuse_hard_links,
                deadline,
            };
            search(&workspace, root, &matcher, glob.as_ref(), limits)
        })
        .await
    }
}

struct GlobFilter {
    /// A glob without `/` matches file names; one with `/` matches paths below the search root.
    by_name: bool,
    matcher: GlobMatcher,
}

struct SearchLimits {
    max_results: usize,
    refuse_hard_links: bool,
    deadline: std::time::Instant,
}

/// The bytes `model_content` writes for one match: `path:line: text\n`.
fn rendered_len(found: &SearchMatch) -> usize {
    found.path.len() + found.line.len() + found.line_number.to_string().len() + 4
}

fn search(
    workspace: &Workspace,
    root: PathBuf,
    matcher: &grep_regex::RegexMatcher,
    glob: Option<&GlobFilter>,
    limits: SearchLimits,
) -> SearchFilesOutput {
    let SearchLimits {
        max_results,
        refuse_hard_links,
        deadline,
    } = limits;
    // Room for the listed matches, leaving some for the closing marker.
    let mut room = MODEL_OUTPUT_BUDGET - 256;
    let mut searcher = SearcherBuilder::new()
        .line_number(true)
        .binary_detection(BinaryDetection::quit(0))
        .build();
    let walker = WalkBuilder::new(&root)
        // Honour .gitignore even when the workspace is not a git repository.
        .require_git(false)
        // Never follow symlinks: a link pointing out of the workspace is not searched.
        .follow_links(false)
        .max_filesize(Some(MAX_FILE_SIZE))
        .sort_by_file_name(|a, b| a.cmp(b))
        .build();
    let mut output = SearchFilesOutput {
        matches: Vec::new(),
        total_matches: 0,
        files_searched: 0,
        stopped_early: false,
    };
    for entry in walker.flatten() {
        if std::time::Instant::now() >= deadline {
            output.stopped_early = true;
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let path = entry.path();
        if let Some(glob) = glob {
            let subject = if glob.by_name {
                path.file_name().map(PathBuf::from)
            } else {
                path.strip_prefix(&root).ok().map(PathBuf::from)
            };
            if !subject.is_some_and(|subject| glob.matcher.is_match(subject)) {
                continue;
            }
        }
        if refuse_hard_links && entry.metadata().is_ok_and(|meta| link_count(&meta) > 1) {
            continue;
        }
        output.files_searched += 1;
        let display = workspace.relative(path);
        // Unreadable files are skipped, like ripgrep does with a warning.
        let _ = searcher.search_path(
            matcher,
            path,
            Lossy(|line_number, line| {
                output.total_matches += 1;
                if output.matches.len() < max_results && room > 0 {
                    let found = SearchMatch {
                        path: display.clone(),
                        line_number,
                        line: truncate_line(line.trim_end_matches(['\n', '\r']), MAX_LINE_BYTES),
                    };
                    match room.checked_sub(rendered_len(&found)) {
                        Some(left) => {
                            room = left;
                            output.matches.push(found);
                        }
                        // Full: later matches are only counted.
                        None => room = 0,
                    }
                }
                Ok(true)
            }),
        );
    }
    output
}
