//! How the write tools change a file: one writer per path at a time, never through a hard link,
//! and atomically — the new content goes to a temporary file in the same directory, which is
//! then renamed over the old one (readers see the old or the new file, never a half-written
//! one, and a failed write leaves the old file as it was).

use std::collections::HashMap;
use std::fs::{File, Metadata};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, Weak};

use tokio::sync::OwnedMutexGuard;

use crate::tools::builtin::workspace::open_resolved;

/// The per-path write locks of this process: weak, so a path nobody writes costs nothing.
type LockMap = HashMap<PathBuf, Weak<tokio::sync::Mutex<()>>>;

static LOCKS: LazyLock<Mutex<LockMap>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// Hold the write lock of `path` (a resolved, symlink-free path): edits of one file are
/// serialised process-wide, so two parallel edits cannot both read the old content and one of
/// them be lost. Move the guard into the blocking work, so it is held until the work ends even
/// when the tool call is dropped.
pub(crate) async fn lock_path(path: &Path) -> OwnedMutexGuard<()> {
    let lock = {
        let mut locks = LOCKS
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match locks.get(path).and_then(Weak::upgrade) {
            Some(lock) => lock,
            None => {
                if locks.len() >= 64 {
                    locks.retain(|_, lock| lock.strong_count() > 0);
                }
                let lock = Arc::new(tokio::sync::Mutex::new(()));
                locks.insert(path.to_path_buf(), Arc::downgrade(&lock));
                lock
            }
        }
    };
    lock.lock_owned().await
}

/// Why a file could not be read or replaced.
#[derive(Debug)]
pub(crate) enum WriteFailure {
    /// An I/O error, with what was being done.
    Io(&'static str, io::Error),
    /// A directory, where a file was expected.
    Directory,
    /// Not a regular file (FIFO, socket, device).
    NotRegular,
    /// The file has this many hard links: another name, maybe outside the workspace, shares it.
    HardLinked(u64),
}

/// The number of hard links of a file.
pub(crate) fn link_count(meta: &Metadata) -> u64 {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        meta.nlink()
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        1
    }
}

/// What stands at `path` before a replace: `None` when nothing does.
fn existing(path: &Path) -> Result<Option<Metadata>, WriteFailure> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => Err(WriteFailure::Directory),
        // A symlink here was swapped in after the path was resolved: never write through it.
        Ok(meta) if !meta.is_file() => Err(WriteFailure::NotRegular),
        Ok(meta) if link_count(&meta) > 1 => Err(WriteFailure::HardLinked(link_count(&meta))),
        // Renaming over a read-only file would succeed where writing it would not: refuse.
        Ok(meta) if meta.permissions().readonly() => Err(WriteFailure::Io(
            "write",
            io::Error::new(io::ErrorKind::PermissionDenied, "the file is read-only"),
        )),
        Ok(meta) => Ok(Some(meta)),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(WriteFailure::Io("inspect", error)),
    }
}

/// The content of the regular, singly-linked file at `path` (opened with [`open_resolved`]).
pub(crate) fn read_for_edit(path: &Path) -> Result<Vec<u8>, WriteFailure> {
    let mut file = open_resolved(path, std::fs::OpenOptions::new().read(true))
        .map_err(|error| WriteFailure::Io("read", error))?;
    let meta = file
        .metadata()
        .map_err(|error| WriteFailure::Io("read", error))?;
    if meta.is_dir() {
        return Err(WriteFailure::Directory);
    }
    if !meta.is_file() {
        return Err(WriteFailure::NotRegular);
    }
    if link_count(&meta) > 1 {
        return Err(WriteFailure::HardLinked(link_count(&meta)));
    }
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|error| WriteFailure::Io("read", error))?;
    Ok(bytes)
}

/// Replace (or create) the file at `path` with `bytes`, atomically: write a temporary file in
/// the same directory with the old file's permissions, then rename it over `path`. Refuses a
/// multiply-linked file (writing it would change the other names' content, or, renamed over,
/// silently split them). Returns whether the file was created.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> Result<bool, WriteFailure> {
    let before = existing(path)?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".agcore-tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // A new file gets the usual 0o666 less the umask, as `File::create` would give it.
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut temp = builder
        .tempfile_in(dir)
        .map_err(|error| WriteFailure::Io("create a temporary file for", error))?;
    let write = |file: &mut File| -> io::Result<()> {
        if let Some(meta) = &before {
            file.set_permissions(meta.permissions())?;
        }
        file.write_all(bytes)?;
        file.sync_data()
    };
    write(temp.as_file_mut()).map_err(|error| WriteFailure::Io("write", error))?;
    // Checked again just before the rename: a link made meanwhile is refused as well.
    existing(path)?;
    // On failure the temporary file is removed when `temp` drops.
    temp.persist(path)
        .map_err(|error| WriteFailure::Io("replace", error.error))?;
    Ok(before.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_replace_leaves_no_temporary_file() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("sub");
        std::fs::create_dir(&target).unwrap();
        assert!(matches!(
            replace_file(&target, b"x"),
            Err(WriteFailure::Directory)
        ));
        let readonly = dir.path().join("ro");
        std::fs::write(&readonly, "keep").unwrap();
        let mut permissions = std::fs::metadata(&readonly).unwrap().permissions();
        permissions.set_readonly(true);
        std::fs::set_permissions(&readonly, permissions).unwrap();
        assert!(matches!(
            replace_file(&readonly, b"x"),
            Err(WriteFailure::Io(..))
        ));
        assert_eq!(std::fs::read_to_string(&readonly).unwrap(), "keep");
        std::fs::remove_file(&readonly).unwrap();
        let created = replace_file(&dir.path().join("f"), b"x").unwrap();
        assert!(created);
        assert!(!replace_file(&dir.path().join("f"), b"y").unwrap());
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        names.sort();
        assert_eq!(names, ["f", "sub"]);
    }

    #[tokio::test]
    async fn one_path_one_lock() {
        let path = Path::new("/nonexistent/agcore-lock-test");
        let held = lock_path(path).await;
        let second = tokio::time::timeout(std::time::Duration::from_millis(50), lock_path(path));
        assert!(second.await.is_err(), "a second writer got the lock");
        drop(held);
        let _again = lock_path(path).await;
    }
}
