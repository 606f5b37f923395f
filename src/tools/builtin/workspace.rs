//! [`Workspace`]: the directory the built-in tools are confined to, and the path resolution
//! that keeps them inside it.
//!
//! Every path a tool receives is resolved *physically*, one component at a time, the way the
//! kernel would: symlinks are followed (at any component, the final one included), `..` steps
//! to the parent of what a component really is, and components that do not exist yet are
//! appended as they are. Only when the fully resolved path lies under the (canonical) root is it
//! accepted, and the tool then works on that resolved, symlink-free path.
//!
//! Between the check and the use, the last component is opened with [`open_resolved`]
//! (`O_NOFOLLOW`), so a file swapped for a symlink in between is refused rather than followed.
//! Limit: a process racing the tool inside the workspace that swaps a *directory* on the way
//! for a symlink in between is out of scope (that needs `openat2(RESOLVE_BENEATH)`).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use crate::tools::error::ToolError;

/// How many symlinks one resolution may follow (Linux's own limit is 40 as well).
const MAX_SYMLINKS: usize = 40;

/// The root directory built-in tools work in.
///
/// The root is canonicalised once, in [`Workspace::new`]; cloning is cheap.
///
/// ```
/// use agcore::tools::builtin::Workspace;
///
/// # fn main() -> Result<(), agcore::tools::builtin::PathError> {
/// let workspace = Workspace::new(std::env::temp_dir())?;
/// let path = workspace.resolve("notes/today.md")?; // need not exist yet
/// assert!(path.starts_with(workspace.root()));
/// assert!(workspace.resolve("../etc/passwd").unwrap_err().is_escape());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: Arc<Path>,
}

/// Why a path was refused or could not be resolved.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The workspace root could not be canonicalised (it does not exist, or is unreadable).
    #[error("workspace root '{path}' is not usable: {source}")]
    InvalidRoot {
        /// The root as given.
        path: PathBuf,
        /// The I/O error.
        source: io::Error,
    },

    /// The workspace root is not a directory.
    #[error("workspace root '{0}' is not a directory")]
    RootNotADirectory(PathBuf),

    /// The path leads outside the workspace root (through `..`, as an absolute path, or
    /// through a symlink).
    #[error(
        "'{path}' is outside the workspace root '{root}': it resolves to '{resolved}'{}",
        via_symlink_text(.via_symlink)
    )]
    OutsideRoot {
        /// The path as requested.
        path: String,
        /// The workspace root.
        root: PathBuf,
        /// Where the path really leads.
        resolved: PathBuf,
        /// The last symlink followed on the way, if any.
        via_symlink: Option<PathBuf>,
    },

    /// Resolving the path followed more than 40 symlinks (a loop, most likely).
    #[error("'{path}': too many levels of symbolic links (more than {MAX_SYMLINKS})")]
    TooManySymlinks {
        /// The path as requested.
        path: String,
    },

    /// The path is empty or contains a NUL byte.
    #[error("the path {0:?} is not a valid path")]
    Invalid(String),

    /// A component of the path could not be inspected.
    #[error("'{path}' could not be resolved: {source}")]
    Io {
        /// The path as requested.
        path: String,
        /// The I/O error.
        source: io::Error,
    },
}

fn via_symlink_text(via: &Option<PathBuf>) -> String {
    match via {
        Some(link) => format!(" through the symlink '{}'", link.display()),
        None => String::new(),
    }
}

impl PathError {
    /// The error a tool returns for this path error.
    ///
    /// Escapes ([`PathError::OutsideRoot`], and symlink loops, which may hide one) become
    /// [`ToolError::PermissionDenied`]: the path is well-formed, but the workspace confinement
    /// refuses it — the model should pick a path inside the workspace. Malformed paths become
    /// [`ToolError::InvalidArguments`]; I/O failures [`ToolError::ExecutionFailed`].
    pub fn into_tool_error(self, tool: &str) -> ToolError {
        match self {
            PathError::OutsideRoot { .. } | PathError::TooManySymlinks { .. } => {
                ToolError::PermissionDenied(
                    tool.to_owned(),
                    format!("a path inside the workspace, but {self}"),
                )
            }
            PathError::Invalid(_) => ToolError::InvalidArguments(tool.to_owned(), self.to_string()),
            _ => ToolError::ExecutionFailed(tool.to_owned(), self.to_string()),
        }
    }

    /// Whether the path was refused for leading outside the workspace.
    pub fn is_escape(&self) -> bool {
        matches!(
            self,
            PathError::OutsideRoot { .. } | PathError::TooManySymlinks { .. }
        )
    }
}

impl Workspace {
    /// A workspace rooted at `root`, which must be an existing directory. The root is
    /// canonicalised (symlinks in it resolved) once, here.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, PathError> {
        let given = root.as_ref();
        let canonical = std::fs::canonicalize(given).map_err(|source| PathError::InvalidRoot {
            path: given.to_path_buf(),
            source,
        })?;
        if !canonical.is_dir() {
            return Err(PathError::RootNotADirectory(canonical));
        }
        Ok(Workspace {
            root: Arc::from(canonical),
        })
    }

    /// The canonical root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Resolve `path` (relative to the root, or absolute) to a symlink-free absolute path
    /// inside the root. The path need not exist yet; its existing part is resolved physically.
    ///
    /// # Errors
    /// [`PathError::OutsideRoot`] when it leads outside the root, [`PathError::TooManySymlinks`]
    /// on a symlink loop, [`PathError::Invalid`] for an empty path or one with a NUL byte,
    /// [`PathError::Io`] when a component cannot be inspected (e.g. a file used as a directory).
    pub fn resolve(&self, path: &str) -> Result<PathBuf, PathError> {
        self.resolve_traced(path).map(|(resolved, _)| resolved)
    }

    /// [`Workspace::resolve`], also returning every symlink followed on the way (each as the
    /// path of the link itself), for checks that must hold for every name a path goes by.
    pub(crate) fn resolve_traced(&self, path: &str) -> Result<(PathBuf, Vec<PathBuf>), PathError> {
        if path.is_empty() || path.contains('\0') {
            return Err(PathError::Invalid(path.to_owned()));
        }
        let requested = Path::new(path);
        let start = if requested.is_absolute() {
            requested.to_path_buf()
        } else {
            self.root.join(requested)
        };
        let (resolved, followed) = resolve_physically(&start).map_err(|error| match error {
            Walk::TooManySymlinks => PathError::TooManySymlinks {
                path: path.to_owned(),
            },
            Walk::Io(source) => PathError::Io {
                path: path.to_owned(),
                source,
            },
        })?;
        if resolved.starts_with(&self.root) {
            Ok((resolved, followed))
        } else {
            Err(PathError::OutsideRoot {
                path: path.to_owned(),
                root: self.root.to_path_buf(),
                resolved,
                via_symlink: followed.last().map(|link| self.display_path(link)),
            })
        }
    }

    /// [`Workspace::resolve`] with the error converted for `tool` (see
    /// [`PathError::into_tool_error`]).
    pub fn resolve_for(&self, tool: &str, path: &str) -> Result<PathBuf, ToolError> {
        self.resolve(path)
            .map_err(|error| error.into_tool_error(tool))
    }

    /// `path` relative to the root with `/` separators (`.` for the root itself); paths outside
    /// the root are returned unchanged.
    pub fn relative(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rest) if rest.as_os_str().is_empty() => ".".to_owned(),
            Ok(rest) => rest
                .components()
                .map(|c| c.as_os_str().to_string_lossy())
                .collect::<Vec<_>>()
                .join("/"),
            Err(_) => path.display().to_string(),
        }
    }

    /// A path argument as the built-in tools act on it, for rules on arguments: resolved
    /// (symlinks followed) and relative to the root; `None` when it does not resolve inside
    /// the root (the tool refuses it anyway).
    pub(crate) fn rule_path(&self, value: &serde_json::Value) -> Option<String> {
        let path = self.resolve(value.as_str()?).ok()?;
        Some(self.relative(&path))
    }

    fn display_path(&self, path: &Path) -> PathBuf {
        if path.starts_with(&self.root) {
            PathBuf::from(self.relative(path))
        } else {
            path.to_path_buf()
        }
    }
}

/// Open a path [`Workspace::resolve`] returned, without following a symlink at its last
/// component (`O_NOFOLLOW`: a file replaced by a link since the check fails with `ELOOP`
/// instead of leading out of the workspace) and without blocking on a FIFO (`O_NONBLOCK`,
/// which changes nothing for regular files). Check the kind of file on the handle
/// (`file.metadata()`), not on the path.
pub(crate) fn open_resolved(path: &Path, options: &mut OpenOptions) -> io::Result<File> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    options.open(path)
}

/// One step of a path still to be resolved.
enum Part {
    Root(OsString),
    Parent,
    Name(OsString),
}

enum Walk {
    TooManySymlinks,
    Io(io::Error),
}

fn parts_of(path: &Path) -> Vec<Part> {
    path.components()
        .filter_map(|component| match component {
            Component::Prefix(prefix) => Some(Part::Root(prefix.as_os_str().to_owned())),
            Component::RootDir => Some(Part::Root(OsString::from(std::path::MAIN_SEPARATOR_STR))),
            Component::CurDir => None,
            Component::ParentDir => Some(Part::Parent),
            Component::Normal(name) => Some(Part::Name(name.to_owned())),
        })
        .collect()
}

/// Resolve an absolute path like `realpath -m`: follow every symlink, apply `..` to what each
/// component really is, and append components that do not exist. Returns the resolved path and
/// the symlinks followed, in order.
fn resolve_physically(start: &Path) -> Result<(PathBuf, Vec<PathBuf>), Walk> {
    let mut pending: VecDeque<Part> = parts_of(start).into();
    let mut resolved = PathBuf::new();
    // How many trailing components of `resolved` do not exist (none of them is a symlink).
    let mut missing = 0usize;
    let mut symlinks = 0usize;
    let mut followed = Vec::new();
    while let Some(part) = pending.pop_front() {
        match part {
            Part::Root(root) => {
                resolved = PathBuf::from(root);
                missing = 0;
            }
            Part::Parent => {
                resolved.pop();
                missing = missing.saturating_sub(1);
            }
            Part::Name(name) => {
                let next = resolved.join(&name);
                if missing > 0 {
                    resolved = next;
                    missing += 1;
                    continue;
                }
                match std::fs::symlink_metadata(&next) {
                    Ok(meta) if meta.file_type().is_symlink() => {
                        symlinks += 1;
                        if symlinks > MAX_SYMLINKS {
                            return Err(Walk::TooManySymlinks);
                        }
                        let target = std::fs::read_link(&next).map_err(Walk::Io)?;
                        // A relative target continues from the link's directory (`resolved`),
                        // an absolute one restarts at its root.
                        for part in parts_of(&target).into_iter().rev() {
                            pending.push_front(part);
                        }
                        followed.push(next);
                    }
                    Ok(_) => resolved = next,
                    Err(error) if error.kind() == io::ErrorKind::NotFound => {
                        resolved = next;
                        missing = 1;
                    }
                    Err(error) => return Err(Walk::Io(error)),
                }
            }
        }
    }
    Ok((resolved, followed))
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn setup() -> (tempfile::TempDir, tempfile::TempDir, Workspace) {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(root.path()).unwrap();
        (root, outside, workspace)
    }

    #[test]
    fn plain_and_missing_paths_resolve_inside() {
        let (root, _outside, ws) = setup();
        std::fs::create_dir(root.path().join("src")).unwrap();
        assert_eq!(ws.resolve("src").unwrap(), ws.root().join("src"));
        assert_eq!(
            ws.resolve("./src/../new/deep/file.txt").unwrap(),
            ws.root().join("new/deep/file.txt")
        );
        assert_eq!(ws.resolve(".").unwrap(), ws.root());
    }

    #[test]
    fn dot_dot_escape_is_refused() {
        let (_root, _outside, ws) = setup();
        let error = ws.resolve("../x").unwrap_err();
        assert!(error.is_escape(), "{error}");
        assert!(ws.resolve("src/../../x").unwrap_err().is_escape());
        assert!(ws.resolve("missing/../../x").unwrap_err().is_escape());
    }

    #[test]
    fn a_sibling_sharing_the_root_name_prefix_is_outside() {
        let (root, _outside, ws) = setup();
        let name = root
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_owned();
        let error = ws.resolve(&format!("../{name}-evil/x")).unwrap_err();
        assert!(error.is_escape(), "{error}");
    }

    #[test]
    fn absolute_paths_inside_pass_and_outside_are_refused() {
        let (_root, outside, ws) = setup();
        let inside = ws.root().join("a.txt");
        assert_eq!(ws.resolve(inside.to_str().unwrap()).unwrap(), inside);
        assert!(
            ws.resolve(outside.path().to_str().unwrap())
                .unwrap_err()
                .is_escape()
        );
    }

    #[test]
    fn symlinks_out_are_refused_at_every_position() {
        let (root, outside, ws) = setup();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        symlink(outside.path(), root.path().join("dirlink")).unwrap();
        symlink(outside.path().join("secret"), root.path().join("filelink")).unwrap();
        symlink(outside.path().join("nothing"), root.path().join("dangling")).unwrap();
        for path in [
            "dirlink",
            "dirlink/secret",
            "dirlink/new.txt",
            "filelink",
            "dangling",
        ] {
            let error = ws.resolve(path).unwrap_err();
            assert!(error.is_escape(), "{path}: {error}");
            assert!(error.to_string().contains("through the symlink"), "{error}");
        }
    }

    #[test]
    fn symlinks_that_stay_inside_are_followed() {
        let (root, _outside, ws) = setup();
        std::fs::create_dir(root.path().join("real")).unwrap();
        symlink("real", root.path().join("alias")).unwrap();
        assert_eq!(
            ws.resolve("alias/f.txt").unwrap(),
            ws.root().join("real/f.txt")
        );
    }

    #[test]
    fn symlink_loops_are_refused() {
        let (root, _outside, ws) = setup();
        symlink("b", root.path().join("a")).unwrap();
        symlink("a", root.path().join("b")).unwrap();
        assert!(matches!(
            ws.resolve("a/x").unwrap_err(),
            PathError::TooManySymlinks { .. }
        ));
    }

    #[test]
    fn a_file_swapped_for_a_symlink_after_the_check_is_not_followed() {
        let (root, outside, ws) = setup();
        let secret = outside.path().join("secret");
        std::fs::write(&secret, "secret").unwrap();
        std::fs::write(root.path().join("a.txt"), "a").unwrap();
        let checked = ws.resolve("a.txt").unwrap();
        // The race: between the check and the open, the file becomes a link out.
        std::fs::remove_file(&checked).unwrap();
        symlink(&secret, &checked).unwrap();
        assert!(open_resolved(&checked, OpenOptions::new().read(true)).is_err());
        assert!(open_resolved(&checked, OpenOptions::new().write(true).truncate(true)).is_err());
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "secret");
    }

    #[test]
    fn opening_a_fifo_does_not_block() {
        let (root, _outside, ws) = setup();
        let fifo = root.path().join("pipe");
        let status = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(status.success());
        let file =
            open_resolved(&ws.resolve("pipe").unwrap(), OpenOptions::new().read(true)).unwrap();
        assert!(!file.metadata().unwrap().is_file());
    }

    #[test]
    fn empty_paths_are_invalid_arguments() {
        let (_root, _outside, ws) = setup();
        assert!(matches!(
            ws.resolve_for("t", "").unwrap_err(),
            ToolError::InvalidArguments(..)
        ));
    }
}
