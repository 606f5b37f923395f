//! Built-in tools: read, list, search, write and edit files, run commands, fetch URLs — all
//! confined to a [`Workspace`] root. Opt-in: nothing is registered unless you ask for it.
//!
//! | tool | kind | permission | restricted mode |
//! |---|---|---|---|
//! | [`ReadFile`] `read_file` | Read | Read | offered |
//! | [`ListDirectory`] `list_directory` | Read | Read | offered |
//! | [`SearchFiles`] `search_files` | Search | Read | offered |
//! | [`WriteFile`] `write_file` | Edit | Write | offered |
//! | [`EditFile`] `edit_file` | Edit | Write | offered |
//! | [`RunCommand`] `run_command` | Execute | Shell | hidden |
//! | [`FetchUrl`] `fetch_url` | Fetch | Network | hidden |
//!
//! Under the default [`crate::tools::PermissionConfig`] (allow Read and Network, deny Delete and
//! Shell) the read tools and `fetch_url` run, `run_command` is denied, and `write_file` and
//! `edit_file` are refused because Write is not in the allowed list — add it to allow editing.
//!
//! **No private networks.** `fetch_url` refuses loopback, private (RFC 1918), link-local (cloud
//! metadata at 169.254.169.254), unique-local and other non-public addresses — also behind a
//! redirect or a DNS name — unless [`FetchUrl::allow_private_network`] (or
//! [`BuiltinOptions::allow_private_network`]) says otherwise.
//!
//! **Confinement.** Every path argument goes through [`Workspace::resolve`]: `..`, absolute
//! paths elsewhere and symlinks pointing out (at any component) are refused with
//! [`crate::tools::ToolError::PermissionDenied`] ("requires a path inside the workspace, but
//! ..."). Files are then opened without following a symlink at the last component, so a file
//! swapped for a link after the check is refused rather than followed (a directory swapped on
//! the way in between is not caught; see [`Workspace`]). `run_command` runs in the root but is a
//! shell: it is not confined, which is why Shell is denied by default.
//!
//! **Hard links and agcore's own files.** A hard link in the workspace may name a file outside
//! it: `write_file` and `edit_file` refuse files with more than one link, and the read tools
//! read them unless [`BuiltinOptions::refuse_hard_linked_reads`] (reads are allowed by default:
//! package stores such as pnpm's and local git clones hard-link legitimately, no built-in tool
//! creates links, and with `fs.protected_hardlinks` a link's creator could read the file
//! anyway). The write tools also refuse agcore's own configuration and trust files — any
//! `agcore.toml`, anything under `.agcore/` or the user's agcore config and data directories,
//! and the files given as [`BuiltinOptions::protected_files`] (an agent's instructions), by
//! any name the path goes by — unless [`BuiltinOptions::allow_writing_agcore_config`]: a
//! model allowed to write must not configure the next agcore run. Writes go to a temporary file
//! renamed over the target (permissions kept), one writer per file at a time.
//!
//! **Bounded work.** Each tool has its own timeout ([`FILE_TOOL_TIMEOUT`]; `run_command` its
//! per-command timeout) and bounded work: `read_file` scans at most 256 MiB per call however
//! large the file, `run_command` runs at most [`RunCommand::DEFAULT_MAX_CONCURRENT`] commands
//! at once and kills every process a command started when it ends.
//!
//! **Bounded output.** Every output is capped in lines and bytes, below the tool loop's default
//! cut ([`limits::MODEL_OUTPUT_BUDGET`]), so paging never loses lines; what is cut is replaced
//! by a marker such as `[... 1234 more lines (56789 bytes) cut ...]` (see [`OutputLimits`]).
//!
//! ```
//! use agcore::tools::builtin::{Workspace, builtin_tools};
//! use agcore::tools::{PermissionChecker, PermissionConfig, ToolRegistry};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let workspace = Workspace::new(std::env::current_dir()?)?;
//! let mut registry = ToolRegistry::new()
//!     .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
//! registry.register_all(builtin_tools(&workspace))?;
//! assert!(registry.list_tools().contains(&"read_file".to_owned()));
//! # Ok(()) }
//! ```

use std::sync::Arc;

use serde_json::Value;

use crate::tools::base::BaseTool;
use crate::tools::error::ToolError;
use crate::tools::typed::Tool;

mod edit_file;
mod fetch_url;
mod file_write;
pub mod limits;
mod list_directory;
mod net_guard;
mod process_tree;
mod protected;
mod read_file;
mod run_command;
mod search_files;
mod workspace;
mod write_file;

pub use edit_file::{EditError, EditFile, EditFileInput, EditFileOutput, replace_exact};
pub use fetch_url::{DialCheck, FetchUrl, FetchUrlInput, FetchUrlOutput, HostLookup, LoopbackOnly};
pub use limits::OutputLimits;
pub use list_directory::{
    DirectoryEntry, EntryKind, ListDirectory, ListDirectoryInput, ListDirectoryOutput,
};
pub use read_file::{ReadFile, ReadFileInput, ReadFileOutput};
pub use run_command::{RunCommand, RunCommandInput, RunCommandOutput};
pub use search_files::{SearchFiles, SearchFilesInput, SearchFilesOutput, SearchMatch};
pub use workspace::{PathError, Workspace};
pub use write_file::{WriteFile, WriteFileInput, WriteFileOutput};

/// The timeout of one call of a file tool (`read_file`, `list_directory`, `search_files`,
/// `write_file`, `edit_file`); their work is bounded besides, so this is a backstop.
pub const FILE_TOOL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// The names of all built-in tools, in the order [`builtin_tools`] returns them.
pub const BUILTIN_TOOL_NAMES: [&str; 7] = [
    ReadFile::NAME,
    ListDirectory::NAME,
    SearchFiles::NAME,
    WriteFile::NAME,
    EditFile::NAME,
    RunCommand::NAME,
    FetchUrl::NAME,
];

/// Every built-in tool, confined to `workspace`, with default limits — ready for
/// [`crate::tools::ToolRegistry::register_all`]. The permission checker and restricted mode
/// decide which of them may run.
pub fn builtin_tools(workspace: &Workspace) -> Vec<Arc<dyn BaseTool>> {
    builtin_tools_withholding(workspace, &[])
}

/// Like [`builtin_tools`], but `run_command` does not pass the environment variables named in
/// `withheld_env` to its commands (e.g. the model's API key, so a command cannot leak it).
pub fn builtin_tools_withholding(
    workspace: &Workspace,
    withheld_env: &[String],
) -> Vec<Arc<dyn BaseTool>> {
    builtin_tools_with(
        workspace,
        &BuiltinOptions::default().withholding(withheld_env.iter().cloned()),
    )
}

/// Options for [`builtin_tools_with`]; the default is what [`builtin_tools`] uses.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct BuiltinOptions {
    /// Environment variables `run_command` does not pass on (e.g. the model's API key).
    pub withheld_env: Vec<String>,
    /// Let `fetch_url` reach loopback, private and link-local addresses (default: refused; see
    /// [`FetchUrl::allow_private_network`]).
    pub allow_private_network: bool,
    /// Let `write_file` and `edit_file` change agcore's own configuration and trust files
    /// (default: refused; see [`crate::tools::builtin::Workspace`]).
    pub allow_writing_agcore_config: bool,
    /// Refuse to read files with more than one hard link (default: read them; the write
    /// tools always refuse them). See [`ReadFile::refuse_hard_linked_reads`].
    pub refuse_hard_linked_reads: bool,
    /// How many `run_command` commands run at once (`None`: [`RunCommand::DEFAULT_MAX_CONCURRENT`]).
    pub max_concurrent_commands: Option<usize>,
    /// The sandbox `run_command`'s commands run under (default: `workspace-write`, network
    /// off; see [`crate::tools::sandbox`]).
    pub sandbox: crate::tools::sandbox::SandboxPolicy,
    /// The sandbox helper program (`None`: [`crate::tools::sandbox::SandboxHelper::discover`]).
    pub sandbox_helper: Option<crate::tools::sandbox::SandboxHelper>,
    /// Further files the write tools refuse like agcore's own configuration: files a trusted
    /// config reads (an agent's instructions file, its output schema file).
    pub protected_files: Vec<std::path::PathBuf>,
}

impl BuiltinOptions {
    /// Withhold these environment variables from `run_command`'s commands.
    pub fn withholding<I: IntoIterator<Item = String>>(mut self, names: I) -> Self {
        self.withheld_env.extend(names);
        self
    }

    /// Let `fetch_url` reach non-public addresses (see [`FetchUrl::allow_private_network`]).
    pub fn allow_private_network(mut self, allow: bool) -> Self {
        self.allow_private_network = allow;
        self
    }

    /// Let the write tools change agcore's own configuration and trust files.
    pub fn allow_writing_agcore_config(mut self, allow: bool) -> Self {
        self.allow_writing_agcore_config = allow;
        self
    }

    /// Refuse to read files with more than one hard link.
    pub fn refuse_hard_linked_reads(mut self, refuse: bool) -> Self {
        self.refuse_hard_linked_reads = refuse;
        self
    }

    /// Run `run_command`'s commands under `policy`.
    pub fn sandbox(mut self, policy: crate::tools::sandbox::SandboxPolicy) -> Self {
        self.sandbox = policy;
        self
    }

    /// Apply the sandbox with `helper` (e.g. the host program on a leading argument).
    pub fn sandbox_helper(mut self, helper: crate::tools::sandbox::SandboxHelper) -> Self {
        self.sandbox_helper = Some(helper);
        self
    }

    /// Refuse writes to `files` too, like agcore's own configuration.
    pub fn protecting_files<I: IntoIterator<Item = std::path::PathBuf>>(
        mut self,
        files: I,
    ) -> Self {
        self.protected_files.extend(files);
        self
    }

    /// Run at most `max` `run_command` commands at once.
    pub fn max_concurrent_commands(mut self, max: usize) -> Self {
        self.max_concurrent_commands = Some(max);
        self
    }

    /// Where `tool` may write `requested` under these options, exactly as `write_file` and
    /// `edit_file` decide it: inside `workspace` (no `..`, no link out of it) and — unless
    /// [`BuiltinOptions::allow_writing_agcore_config`] — not agcore's own configuration or a
    /// protected file, under any name the path goes by. For a tool that writes by other
    /// means (an editor's buffers over ACP) with the built-ins' confinement.
    ///
    /// # Errors
    /// [`ToolError::InvalidArguments`] or [`ToolError::PermissionDenied`], phrased for the model.
    pub fn resolve_writable(
        &self,
        workspace: &Workspace,
        tool: &str,
        requested: &str,
    ) -> Result<std::path::PathBuf, ToolError> {
        let protected = (!self.allow_writing_agcore_config).then(|| {
            protected::ProtectedPaths::from_env()
                .with_files(self.protected_files.iter().map(|file| file.as_path()))
        });
        resolve_writable(workspace, protected.as_ref(), tool, requested)
    }
}

/// Every built-in tool, confined to `workspace`, configured by `options`.
pub fn builtin_tools_with(
    workspace: &Workspace,
    options: &BuiltinOptions,
) -> Vec<Arc<dyn BaseTool>> {
    let mut sandbox = crate::tools::sandbox::Sandbox::new(options.sandbox.clone());
    if let Some(helper) = &options.sandbox_helper {
        sandbox = sandbox.with_helper(helper.clone());
    }
    let run_command = options.withheld_env.iter().fold(
        RunCommand::new(workspace.clone())
            .with_sandbox(sandbox)
            .with_max_concurrent(
                options
                    .max_concurrent_commands
                    .unwrap_or(RunCommand::DEFAULT_MAX_CONCURRENT),
            ),
        |tool, name| tool.without_env(name.clone()),
    );
    let mut tools = read_only_tools_with(workspace, options);
    tools.extend([
        WriteFile::new(workspace.clone())
            .allow_writing_agcore_config(options.allow_writing_agcore_config)
            .protecting_files(&options.protected_files)
            .erase(),
        EditFile::new(workspace.clone())
            .allow_writing_agcore_config(options.allow_writing_agcore_config)
            .protecting_files(&options.protected_files)
            .erase(),
        run_command.erase(),
        FetchUrl::new()
            .allow_private_network(options.allow_private_network)
            .erase(),
    ]);
    tools
}

/// The tools that only read the workspace: `read_file`, `list_directory`, `search_files`.
pub fn read_only_tools(workspace: &Workspace) -> Vec<Arc<dyn BaseTool>> {
    read_only_tools_with(workspace, &BuiltinOptions::default())
}

fn read_only_tools_with(workspace: &Workspace, options: &BuiltinOptions) -> Vec<Arc<dyn BaseTool>> {
    vec![
        ReadFile::new(workspace.clone())
            .refuse_hard_linked_reads(options.refuse_hard_linked_reads)
            .erase(),
        ListDirectory::new(workspace.clone()).erase(),
        SearchFiles::new(workspace.clone())
            .refuse_hard_linked_reads(options.refuse_hard_linked_reads)
            .erase(),
    ]
}

/// Resolve `requested` for a write by `tool`: inside the workspace, and — unless `protected`
/// is `None` — not agcore's own configuration under any name the path goes by.
fn resolve_writable(
    workspace: &Workspace,
    protected: Option<&protected::ProtectedPaths>,
    tool: &str,
    requested: &str,
) -> Result<std::path::PathBuf, ToolError> {
    let (path, followed) = workspace
        .resolve_traced(requested)
        .map_err(|error| error.into_tool_error(tool))?;
    if let Some(protected) = protected {
        let display = workspace.relative(&path);
        let lexical = workspace.root().join(requested);
        let names = [lexical.as_path(), path.as_path()]
            .into_iter()
            .chain(followed.iter().map(|link| link.as_path()));
        protected.check(tool, &display, names)?;
    }
    Ok(path)
}

/// A failed read or replace of `path` (workspace-relative), phrased for the model.
fn write_failure(tool: &str, path: &str, failure: file_write::WriteFailure) -> ToolError {
    use file_write::WriteFailure;
    match failure {
        WriteFailure::Io(action, error) => io_failure(tool, action, path, error),
        WriteFailure::Directory => {
            ToolError::ExecutionFailed(tool.to_owned(), format!("'{path}' is a directory"))
        }
        WriteFailure::NotRegular => {
            ToolError::ExecutionFailed(tool.to_owned(), format!("'{path}' is not a regular file"))
        }
        WriteFailure::HardLinked(links) => hard_linked(tool, path, links),
    }
}

/// The refusal of a file with `links` hard links.
fn hard_linked(tool: &str, path: &str, links: u64) -> ToolError {
    ToolError::PermissionDenied(
        tool.to_owned(),
        format!(
            "a file with a single name, but '{path}' has {links} hard links: another name, \
             possibly outside the workspace, shares its content"
        ),
    )
}

/// Run blocking file-system work off the async threads.
async fn blocking<T, F>(tool: &str, work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> T + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|error| {
        ToolError::ExecutionFailed(
            tool.to_owned(),
            format!("the worker thread failed: {error}"),
        )
    })
}

/// An I/O failure on `path` (workspace-relative), phrased for the model.
fn io_failure(tool: &str, action: &str, path: &str, error: std::io::Error) -> ToolError {
    let hint = match error.kind() {
        std::io::ErrorKind::NotFound => "; check the path with list_directory or search_files",
        _ => "",
    };
    ToolError::ExecutionFailed(
        tool.to_owned(),
        format!("could not {action} '{path}': {error}{hint}"),
    )
}

/// The `path` field of raw (possibly invalid) input, for titles.
fn path_of(raw: &Value) -> Option<&str> {
    raw.get("path").and_then(Value::as_str)
}
