//! Large tool outputs kept whole outside the context: an output over its tool's limit is
//! kept in the run's session store when the run has one (its journal takes outputs:
//! `crate::session::SessionJournal`), else written to a spill file (under
//! `ContextConfig::spill_dir`), and the model reads its head and
//! tail with a marker that says agcore cut it, how much, and how to read the rest — the
//! built-in `read_output` tool ([`ReadOutput`]), from exactly the byte the marker names, page by
//! page at line boundaries, so no line is skipped or read twice.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::context::config::EngineConfig;
use crate::tools::base::BaseTool;
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::vocab::{ToolAnswer, text};

/// The most bytes one `read_output` page returns.
pub const MAX_PAGE_BYTES: usize = 16 * 1024;

/// Spill files: one `<id>.txt` per output in a directory.
#[derive(Debug, Clone)]
pub struct OutputStore {
    dir: PathBuf,
}

/// Why an output could not be read back.
#[derive(Debug, thiserror::Error)]
pub enum SpillError {
    /// Not an id this store makes (`out_` and letters or digits).
    #[error("'{id}' is not an output id (they look like out_…, as the cut marker says)")]
    BadId {
        /// The id.
        id: String,
    },
    /// No such output, or it cannot be read.
    #[error("output '{id}' cannot be read: {source}")]
    Io {
        /// The id.
        id: String,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The offset is past the end.
    #[error("offset {offset} is past the end of output '{id}' ({total} bytes)")]
    PastEnd {
        /// The id.
        id: String,
        /// The offset asked for.
        offset: usize,
        /// The output's length.
        total: usize,
    },
}

/// One page of a spilled output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    /// The text, `[offset, end)` of the output.
    pub text: String,
    /// Its first byte.
    pub offset: usize,
    /// One past its last byte.
    pub end: usize,
    /// The output's length.
    pub total: usize,
}

impl OutputStore {
    /// Spill files in `dir` (created on the first save).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        OutputStore { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Keep `content`; its id. With `tail_start`, the model already has the output from that
    /// byte on (the tail after the cut marker): a page never runs past it.
    pub fn save(&self, content: &str, tail_start: Option<usize>) -> std::io::Result<String> {
        let id = new_output_id();
        self.save_as(&id, content, tail_start)?;
        Ok(id)
    }

    /// Keep `content` as output `id` (one [`new_output_id`] made).
    pub fn save_as(
        &self,
        id: &str,
        content: &str,
        tail_start: Option<usize>,
    ) -> std::io::Result<()> {
        // Outputs can hold anything a tool read: owner-only, whatever the umask. An existing
        // folder is the caller's to keep (it may be shared, like /tmp); the files are 0600.
        use crate::owner_only::{create_dir_all, write_file};
        create_dir_all(&self.dir)?;
        write_file(&self.dir.join(format!("{id}.txt")), content.as_bytes())?;
        if let Some(tail_start) = tail_start {
            write_file(
                &self.dir.join(format!("{id}.cut")),
                tail_start.to_string().as_bytes(),
            )?;
        }
        Ok(())
    }

    /// The page of output `id` from byte `offset`: at most `max` bytes, ending at a line end
    /// when one is in reach (a longer line goes on in the next page).
    pub fn read(&self, id: &str, offset: usize, max: usize) -> Result<Page, SpillError> {
        let kept = self.load_file(id)?;
        page(&kept, id, offset, max)
    }

    fn load_file(&self, id: &str) -> Result<KeptOutput, SpillError> {
        check_id(id)?;
        let content =
            std::fs::read_to_string(self.dir.join(format!("{id}.txt"))).map_err(|source| {
                SpillError::Io {
                    id: id.to_owned(),
                    source,
                }
            })?;
        let tail_start = std::fs::read_to_string(self.dir.join(format!("{id}.cut")))
            .ok()
            .and_then(|text| text.trim().parse::<usize>().ok());
        Ok(KeptOutput {
            content,
            tail_start,
        })
    }
}

/// A kept output: the whole text, and where the tail the model already has starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptOutput {
    /// The whole output.
    pub content: String,
    /// The first byte of the tail after the cut marker (pages stop there).
    pub tail_start: Option<usize>,
}

/// Where `read_output` finds kept outputs: spill files ([`OutputStore`]) or a session store
/// (`crate::session::SessionOutputs`).
#[async_trait]
pub trait OutputSource: Send + Sync {
    /// Output `id`, or `None` when this source does not have it.
    async fn load(&self, id: &str) -> Result<Option<KeptOutput>, SpillError>;
}

#[async_trait]
impl OutputSource for OutputStore {
    async fn load(&self, id: &str) -> Result<Option<KeptOutput>, SpillError> {
        match self.load_file(id) {
            Ok(kept) => Ok(Some(kept)),
            Err(SpillError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }
}

/// A new output id: `out_` and 16 letters or digits.
pub fn new_output_id() -> String {
    let mut id = String::from("out_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(16));
    id
}

/// Whether `id` is one this module makes (nothing else is looked up: no path from the model).
pub fn check_id(id: &str) -> Result<(), SpillError> {
    let valid = id
        .strip_prefix("out_")
        .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_alphanumeric()));
    if valid {
        Ok(())
    } else {
        Err(SpillError::BadId { id: id.to_owned() })
    }
}

/// The page of `kept` (output `id`) from byte `offset`: at most `max` bytes, ending at a line
/// end when one is in reach (a longer line goes on in the next page), never past the tail the
/// model already has.
pub fn page(kept: &KeptOutput, id: &str, offset: usize, max: usize) -> Result<Page, SpillError> {
    let content = &kept.content;
    let total = content.len();
    if offset > total {
        return Err(SpillError::PastEnd {
            id: id.to_owned(),
            offset,
            total,
        });
    }
    let offset = content.floor_char_boundary(offset);
    // A page stops where the tail the model already has starts.
    let limit = kept
        .tail_start
        .filter(|&tail| tail > offset && tail <= total && content.is_char_boundary(tail))
        .unwrap_or(total);
    // At a character boundary before anything is sliced (a page may end inside a character).
    let mut end = content.floor_char_boundary((offset + max.max(1)).min(limit));
    if end < limit {
        match content[offset..end].rfind('\n') {
            Some(newline) => end = offset + newline + 1,
            None => {
                if end == offset {
                    end = content[offset..]
                        .chars()
                        .next()
                        .map_or(total, |c| offset + c.len_utf8());
                }
            }
        }
    }
    Ok(Page {
        text: content[offset..end].to_owned(),
        offset,
        end,
        total,
    })
}

/// Where `content` is cut for `limit`: the head ends and the tail starts (at line starts when
/// lines are short, [`text::cut_middle_lines`]): about half the limit before, a quarter after.
pub fn cut_points(content: &str, limit: usize) -> (usize, usize) {
    let cut = text::cut_middle_lines(content, limit / 2, limit / 4);
    (cut.head_end(), cut.tail_start())
}

/// `content` cut at [`cut_points`] for the model, with a marker naming the cut bytes and lines
/// and how to read them.
pub fn cut_with_marker(content: &str, limit: usize, id: &str) -> String {
    let cut = text::cut_middle_lines(content, limit / 2, limit / 4);
    let (head_end, tail_start) = (cut.head_end(), cut.tail_start());
    let first_line = cut.head().matches('\n').count() + 1;
    let cut_lines = cut.removed().matches('\n').count();
    let lines = match cut_lines {
        0 => format!("part of line {first_line}"),
        1 => format!("line {first_line}"),
        n => format!("lines {first_line}-{}", first_line + n - 1),
    };
    format!(
        "{}[... agcore cut {} bytes here (bytes {head_end}-{tail_start} of {}, {lines}); the whole output is kept as {id}: \
         call read_output with {{\"id\": \"{id}\", \"offset\": {head_end}}} to read on from here; the pages stop where the rest below starts ...]\n{}",
        cut.head(),
        cut.cut_bytes(),
        content.len(),
        cut.tail(),
    )
}

/// The limit for `tool`'s outputs: its own (`ContextConfig::tool_output_limits`), else the
/// cycle's.
pub fn limit_for(config: &EngineConfig<'_>, tool: &str) -> usize {
    config
        .context
        .tool_output_limits
        .get(tool)
        .copied()
        .unwrap_or(config.tool_output_limit)
}

/// `answer` for the model: when it is over `tool`'s limit and a spill directory is set, kept
/// whole in a spill file and cut with a `read_output` marker; otherwise as it is (the run cuts
/// it at the cycle's limit).
pub fn keep_large(config: &EngineConfig<'_>, tool: &str, answer: ToolAnswer) -> ToolAnswer {
    let limit = limit_for(config, tool);
    let Some(dir) = config.context.spill_dir.as_ref() else {
        return answer;
    };
    if answer.content.len() <= limit || !config.context.enabled {
        return answer;
    }
    let (_, tail_start) = cut_points(&answer.content, limit);
    match OutputStore::new(dir).save(&answer.content, Some(tail_start)) {
        Ok(id) => ToolAnswer {
            content: cut_with_marker(&answer.content, limit, &id),
            is_error: answer.is_error,
        },
        Err(error) => {
            tracing::warn!(%error, dir = %dir.display(), "could not keep a large tool output; it is cut instead");
            answer
        }
    }
}

/// The built-in `read_output` tool: reads on in an output agcore cut (`id` and `offset` as its
/// marker says).
pub struct ReadOutput {
    sources: Vec<Arc<dyn OutputSource>>,
}

impl ReadOutput {
    /// Reading the spill files in `dir` (the same as `ContextConfig::spill_dir`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        ReadOutput {
            sources: vec![Arc::new(OutputStore::new(dir))],
        }
    }

    /// Reading `source` (e.g. the run's session store, `crate::session::SessionOutputs`)
    /// before the sources already set.
    pub fn with_source(mut self, source: Arc<dyn OutputSource>) -> Self {
        self.sources.insert(0, source);
        self
    }

    /// Reading `source` only.
    pub fn from_source(source: Arc<dyn OutputSource>) -> Self {
        ReadOutput {
            sources: vec![source],
        }
    }

    /// The page of output `id` from `offset` (at most [`MAX_PAGE_BYTES`]), from the first
    /// source that has it.
    pub async fn read(&self, id: &str, offset: usize) -> Result<Page, SpillError> {
        check_id(id)?;
        for source in &self.sources {
            if let Some(kept) = source.load(id).await? {
                return page(&kept, id, offset, MAX_PAGE_BYTES);
            }
        }
        Err(SpillError::Io {
            id: id.to_owned(),
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "no such output"),
        })
    }
}

#[async_trait]
impl BaseTool for ReadOutput {
    fn name(&self) -> &str {
        "read_output"
    }

    fn description(&self) -> &str {
        "Read on in a tool output that agcore cut because it was too long: give the id and offset its marker names; \
         each page says where the next one starts."
    }

    fn parameters(&self) -> Value {
        json!({
            "type": "object",
            "properties": {
                "id": {"type": "string", "description": "The output's id (out_...)"},
                "offset": {"type": "integer", "minimum": 0, "description": "The byte to start at"}
            },
            "required": ["id", "offset"]
        })
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let id = args["id"].as_str().unwrap_or_default();
        let offset = args["offset"]
            .as_u64()
            .and_then(|o| usize::try_from(o).ok())
            .unwrap_or(0);
        let page = self
            .read(id, offset)
            .await
            .map_err(|error| ToolError::ExecutionFailed("read_output".into(), error.to_string()))?;
        let next = if page.end < page.total {
            format!(
                "next: read_output with {{\"id\": \"{id}\", \"offset\": {}}}",
                page.end
            )
        } else {
            "this is the end of the output".to_owned()
        };
        Ok(Value::String(format!(
            "[bytes {}-{} of {} of output {id}; {next}]\n{}",
            page.offset, page.end, page.total, page.text
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::CycleConfig;

    fn output() -> String {
        (1..=2_000)
            .map(|i| format!("line {i:04} {}\n", "x".repeat(i % 40)))
            .collect()
    }

    #[test]
    fn the_marker_and_the_pages_agree_line_for_line() {
        let dir = tempfile::tempdir().unwrap();
        let store = OutputStore::new(dir.path());
        let content = output();
        let (_, tail) = cut_points(&content, 8_000);
        let id = store.save(&content, Some(tail)).unwrap();
        let cut = cut_with_marker(&content, 8_000, &id);
        assert!(cut.len() < 8_000);
        let marker = cut
            .lines()
            .find(|l| l.starts_with("[... agcore cut "))
            .unwrap();
        let offset: usize = marker
            .split("\"offset\": ")
            .nth(1)
            .unwrap()
            .split('}')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        let tail_start: usize = marker
            .split(&format!("bytes {offset}-"))
            .nth(1)
            .unwrap()
            .split(' ')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        // Head, then the pages up to the tail, then the tail: every line exactly once.
        let mut seen = cut.split(marker).next().unwrap().to_owned();
        let mut at = offset;
        while at < tail_start {
            let page = store.read(&id, at, 1_000).unwrap();
            assert_eq!(page.offset, at);
            seen.push_str(&page.text);
            at = page.end;
        }
        assert_eq!(at, tail_start, "a page ends where the tail starts");
        seen.push_str(&content[tail_start..]);
        assert_eq!(seen, content);
        // The marker's lines are the cut lines.
        let first = content[..offset].matches('\n').count() + 1;
        assert!(marker.contains(&format!("lines {first}-")), "{marker}");
    }

    #[test]
    fn ids_cannot_leave_the_directory() {
        let store = OutputStore::new("/tmp/nowhere");
        assert!(matches!(
            store.read("../etc/passwd", 0, 10),
            Err(SpillError::BadId { .. })
        ));
        assert!(matches!(
            store.read("out_", 0, 10),
            Err(SpillError::BadId { .. })
        ));
    }

    #[test]
    fn a_large_answer_is_kept_only_with_a_spill_dir() {
        let dir = tempfile::tempdir().unwrap();
        let mut config = CycleConfig::new("m");
        config
            .context
            .tool_output_limits
            .insert("big".into(), 1_000);
        let answer = ToolAnswer::ok(output());
        assert_eq!(keep_large(&config.engine(), "big", answer.clone()), answer);
        config.context.spill_dir = Some(dir.path().to_owned());
        let kept = keep_large(&config.engine(), "big", answer.clone());
        assert!(kept.content.len() < 1_000 && kept.content.contains("read_output"));
        // Another tool keeps the cycle's limit.
        let short = ToolAnswer::ok("x".repeat(2_000));
        assert_eq!(keep_large(&config.engine(), "small", short.clone()), short);
        // One output and its cut point.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
