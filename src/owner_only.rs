//! Owner-only files and folders. What agcore keeps on disk — session databases and their lock
//! files, large tool outputs, tokens — holds conversations and secrets, so it is created `0700`
//! (folders) and `0600` (files) whatever the umask, and a file or folder found open to other
//! users is tightened and reported as a [`Tightened`], once: after that it is owner-only.
//!
//! Only what agcore owns is touched: the folders it creates and the files it names; an existing
//! parent such as `/tmp` is left alone. A file or folder owned by another user is refused
//! ([`OwnerOnlyError::NotOwned`]): another user could read what is written there, or hold its
//! locks.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Permission bits of an owner-only folder.
pub const DIR_MODE: u32 = 0o700;
/// Permission bits of an owner-only file.
pub const FILE_MODE: u32 = 0o600;

/// A file or folder that other users could use, made owner-only.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tightened {
    /// The file or folder.
    pub path: PathBuf,
    /// Its permission bits before (e.g. `0o644`).
    pub was: u32,
    /// Its permission bits now (`0o600` or `0o700`).
    pub now: u32,
}

impl std::fmt::Display for Tightened {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} (was {:04o}, now {:04o})",
            self.path.display(),
            self.was,
            self.now
        )
    }
}

/// Why a file or folder could not be made or kept owner-only.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OwnerOnlyError {
    /// It belongs to another user: what agcore writes there would not be private to this one.
    #[error(
        "{} belongs to user {owner}, not to this user ({me}); agcore keeps its data only in files and folders of its own user",
        path.display()
    )]
    NotOwned {
        /// The file or folder.
        path: PathBuf,
        /// Its owner's user id.
        owner: u32,
        /// This process's effective user id.
        me: u32,
    },
    /// It is not what it should be (a symbolic link where a file is expected, a file where a
    /// folder is).
    #[error("{} is not a {expected}", path.display())]
    NotA {
        /// The file or folder.
        path: PathBuf,
        /// "folder" or "regular file".
        expected: &'static str,
    },
    /// Creating, inspecting or changing it failed.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl From<OwnerOnlyError> for std::io::Error {
    fn from(error: OwnerOnlyError) -> Self {
        match error {
            OwnerOnlyError::Io { source, .. } => source,
            other => std::io::Error::new(std::io::ErrorKind::PermissionDenied, other),
        }
    }
}

fn io(path: &Path) -> impl Fn(std::io::Error) -> OwnerOnlyError + '_ {
    move |source| OwnerOnlyError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Creates `dir` and its missing parents, each new one `0700`; an existing `dir` must be a
/// folder of this user (symbolic links are followed: a data folder may live elsewhere), and is
/// made `0700` if others could use it — `Some` then.
///
/// # Errors
/// [`OwnerOnlyError`].
pub fn ensure_dir(dir: &Path) -> Result<Option<Tightened>, OwnerOnlyError> {
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => return restrict(dir, &meta, DIR_MODE),
        Ok(_) => {
            return Err(OwnerOnlyError::NotA {
                path: dir.to_path_buf(),
                expected: "folder",
            });
        }
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => {}
        Err(error) => return Err(io(dir)(error)),
    }
    if let Some(parent) = dir.parent() {
        create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    match builder.create(dir) {
        Ok(()) => {}
        // Another process made it in between: check it like an existing one.
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
            return ensure_dir(dir);
        }
        Err(error) => return Err(io(dir)(error)),
    }
    // The umask may have taken bits away (never added any): set them exactly.
    set_mode(dir, DIR_MODE)?;
    Ok(None)
}

/// Creates `dir` and its missing parents, each new one `0700`; what exists already is left as
/// it is (a folder the caller names, such as the one a database file is put in, may be shared
/// on purpose).
///
/// # Errors
/// [`OwnerOnlyError`].
pub fn create_dir_all(dir: &Path) -> Result<(), OwnerOnlyError> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        create_dir_all(parent)?;
    }
    let mut builder = std::fs::DirBuilder::new();
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, DIR_MODE);
    match builder.create(dir) {
        Ok(()) => set_mode(dir, DIR_MODE),
        Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(()),
        Err(error) => Err(io(dir)(error)),
    }
}

/// Makes the existing file or folder `path` owner-only (`0600` / `0700`); `None` when it does
/// not exist or already is. A symbolic link is followed (a database may be linked from
/// elsewhere); its target must be this user's.
///
/// # Errors
/// [`OwnerOnlyError`].
pub fn tighten(path: &Path) -> Result<Option<Tightened>, OwnerOnlyError> {
    let meta = match std::fs::metadata(path) {
        Ok(meta) => meta,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(io(path)(error)),
    };
    if meta.is_dir() {
        restrict(path, &meta, DIR_MODE)
    } else if meta.is_file() {
        restrict(path, &meta, FILE_MODE)
    } else {
        Err(OwnerOnlyError::NotA {
            path: path.to_path_buf(),
            expected: "regular file",
        })
    }
}

/// Opens `path` for reading and writing, creating it `0600`; never through a symbolic link. An
/// existing file must be a regular file of this user, and is made `0600` if others could use
/// it (the second value).
///
/// # Errors
/// [`OwnerOnlyError`].
pub fn open_file(path: &Path) -> Result<(File, Option<Tightened>), OwnerOnlyError> {
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options
            .mode(FILE_MODE)
            .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC);
    }
    let file = options.open(path).map_err(|error| {
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return OwnerOnlyError::NotA {
                path: path.to_path_buf(),
                expected: "regular file",
            };
        }
        io(path)(error)
    })?;
    let meta = file.metadata().map_err(io(path))?;
    if !meta.is_file() {
        return Err(OwnerOnlyError::NotA {
            path: path.to_path_buf(),
            expected: "regular file",
        });
    }
    owned(path, &meta)?;
    let tightened = match loose_bits(&meta, FILE_MODE) {
        Some(was) => {
            // Through the descriptor: the file we checked is the file we change.
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt;
                file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
                    .map_err(io(path))?;
            }
            Some(Tightened {
                path: path.to_path_buf(),
                was,
                now: FILE_MODE,
            })
        }
        None => None,
    };
    Ok((file, tightened))
}

/// Writes `content` to `path` (replacing what it held), an owner-only file as by
/// [`open_file`].
///
/// # Errors
/// [`OwnerOnlyError`].
pub fn write_file(path: &Path, content: &[u8]) -> Result<Option<Tightened>, OwnerOnlyError> {
    let (mut file, tightened) = open_file(path)?;
    file.set_len(0)
        .and_then(|()| file.write_all(content))
        .map_err(io(path))?;
    Ok(tightened)
}

/// This process's effective user id.
#[cfg(unix)]
fn me() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Checks that the existing `path` (a symbolic link is followed) belongs to this user.
///
/// # Errors
/// [`OwnerOnlyError::NotOwned`], or `Io` when it cannot be inspected.
pub fn check_owner(path: &Path) -> Result<(), OwnerOnlyError> {
    let meta = std::fs::metadata(path).map_err(io(path))?;
    owned(path, &meta)
}

#[cfg(unix)]
fn owned(path: &Path, meta: &std::fs::Metadata) -> Result<(), OwnerOnlyError> {
    use std::os::unix::fs::MetadataExt;
    let me = me();
    if meta.uid() != me {
        return Err(OwnerOnlyError::NotOwned {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    Ok(())
}

#[cfg(not(unix))]
fn owned(_path: &Path, _meta: &std::fs::Metadata) -> Result<(), OwnerOnlyError> {
    Ok(())
}

/// The permission bits when the group or others have any (then it becomes exactly `want`).
#[cfg(unix)]
fn loose_bits(meta: &std::fs::Metadata, want: u32) -> Option<u32> {
    use std::os::unix::fs::PermissionsExt;
    let bits = meta.permissions().mode() & 0o7777;
    (bits & 0o077 != 0 && bits != want).then_some(bits)
}

#[cfg(not(unix))]
fn loose_bits(_meta: &std::fs::Metadata, _want: u32) -> Option<u32> {
    None
}

fn restrict(
    path: &Path,
    meta: &std::fs::Metadata,
    want: u32,
) -> Result<Option<Tightened>, OwnerOnlyError> {
    owned(path, meta)?;
    let Some(was) = loose_bits(meta, want) else {
        return Ok(None);
    };
    set_mode(path, want)?;
    Ok(Some(Tightened {
        path: path.to_path_buf(),
        was,
        now: want,
    }))
}

fn set_mode(path: &Path, mode: u32) -> Result<(), OwnerOnlyError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).map_err(io(path))
    }
    #[cfg(not(unix))]
    {
        let _ = (path, mode);
        Ok(())
    }
}

/// Whether others (the group, other users) have any permission bit on it.
pub(crate) fn is_loose(meta: &std::fs::Metadata) -> bool {
    loose_bits(meta, FILE_MODE).is_some()
}

/// Whether `path` still names the file `file` has open (a lock file may have been replaced
/// between the open and the lock).
#[cfg(unix)]
pub(crate) fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(open), Ok(named)) => open.dev() == named.dev() && open.ino() == named.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
pub(crate) fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}
