//! Roots: the directories agcore tells a server it may work in (`roots/list`), e.g. the
//! workspace root. Declared only when some are configured; changing them sends
//! `notifications/roots/list_changed`.

use std::path::{Path, PathBuf};
use std::sync::{PoisonError, RwLock};

/// The roots of one client, shared with its session handler.
#[derive(Debug, Default)]
pub(crate) struct Roots {
    paths: RwLock<Option<Vec<PathBuf>>>,
}

impl Roots {
    /// Whether roots were configured (the capability is declared).
    pub(crate) fn is_enabled(&self) -> bool {
        self.paths
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Replace the roots.
    pub(crate) fn set(&self, paths: Vec<PathBuf>) {
        *self.paths.write().unwrap_or_else(PoisonError::into_inner) = Some(paths);
    }

    /// The roots as `(file:// URI, name)` pairs.
    pub(crate) fn listed(&self) -> Vec<(String, Option<String>)> {
        let paths = self.paths.read().unwrap_or_else(PoisonError::into_inner);
        paths
            .iter()
            .flatten()
            .map(|path| (file_uri(path), name_of(path)))
            .collect()
    }
}

fn name_of(path: &Path) -> Option<String> {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
}

/// `file://` + the absolute path, percent-encoding what a URI path may not hold.
pub(crate) fn file_uri(path: &Path) -> String {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut uri = String::from("file://");
    for byte in absolute.to_string_lossy().bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'/' | b'-' | b'_' | b'.' | b'~' => {
                uri.push(char::from(byte));
            }
            other => uri.push_str(&format!("%{other:02X}")),
        }
    }
    uri
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uris_are_absolute_and_encoded() {
        assert_eq!(file_uri(Path::new("/tmp/a b")), "file:///tmp/a%20b");
        let roots = Roots::default();
        assert!(!roots.is_enabled());
        roots.set(vec![PathBuf::from("/work/x")]);
        assert_eq!(
            roots.listed(),
            vec![("file:///work/x".to_owned(), Some("x".to_owned()))]
        );
    }
}
