//! agcore's own configuration and trust files, which the write tools refuse to change: a model
//! allowed to write must not be able to write the `agcore.toml` (MCP servers, hooks,
//! permissions) that the next `agcore` run in that directory reads.
//!
//! Protected, compared case-insensitively (case-insensitive file systems exist): a file named
//! `agcore.toml`; anything under a directory named `.agcore`; anything under the user's agcore
//! config and data directories (`$XDG_CONFIG_HOME/agcore`, `$XDG_DATA_HOME/agcore`,
//! `~/.config/agcore`, `~/.local/share/agcore`) when the workspace contains them. The rule holds
//! for every name a path goes by: as requested, as resolved, and each symlink on the way.

use std::path::{Component, Path, PathBuf};

use crate::tools::error::ToolError;

/// The file name of agcore's workspace config.
const CONFIG_FILE: &str = "agcore.toml";
/// The directory name agcore keeps per-workspace state (trust records) in.
const STATE_DIR: &str = ".agcore";

/// The protected locations, with the user's directories read from the environment once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ProtectedPaths {
    /// The user's agcore directories, lower-cased, as given and canonicalised.
    dirs: Vec<Vec<String>>,
    /// Further files a trusted config reads (an agent's instructions and output schema),
    /// lower-cased, as given and canonicalised.
    files: Vec<Vec<String>>,
}

impl ProtectedPaths {
    /// The protected locations for the user of this process.
    pub(crate) fn from_env() -> Self {
        Self::from_lookup(|name| std::env::var_os(name).map(PathBuf::from))
    }

    /// The protected locations with the environment read through `lookup`.
    fn from_lookup(lookup: impl Fn(&str) -> Option<PathBuf>) -> Self {
        let absolute = |name: &str| lookup(name).filter(|path| path.is_absolute());
        let mut dirs = Vec::new();
        let home = absolute("HOME");
        for base in [
            absolute("XDG_CONFIG_HOME"),
            absolute("XDG_DATA_HOME"),
            home.as_ref().map(|home| home.join(".config")),
            home.as_ref().map(|home| home.join(".local/share")),
        ]
        .into_iter()
        .flatten()
        {
            let dir = base.join("agcore");
            if let Ok(canonical) = std::fs::canonicalize(&dir) {
                dirs.push(lowered(&canonical));
            }
            dirs.push(lowered(&dir));
        }
        dirs.sort();
        dirs.dedup();
        ProtectedPaths {
            dirs,
            files: Vec::new(),
        }
    }

    /// Also protect `files` (each by its name as given and its canonical name).
    pub(crate) fn with_files<'a>(mut self, files: impl IntoIterator<Item = &'a Path>) -> Self {
        for file in files {
            if let Ok(canonical) = std::fs::canonicalize(file) {
                self.files.push(lowered(&canonical));
            }
            self.files.push(lowered(file));
        }
        self.files.sort();
        self.files.dedup();
        self
    }

    /// Refuse `tool`'s write when any of `names` (the paths one request goes by) is protected.
    pub(crate) fn check<'a>(
        &self,
        tool: &str,
        display: &str,
        names: impl IntoIterator<Item = &'a Path>,
    ) -> Result<(), ToolError> {
        match names.into_iter().find_map(|path| self.why(path)) {
            None => Ok(()),
            Some(why) => Err(ToolError::PermissionDenied(
                tool.to_owned(),
                format!(
                    "a path outside agcore's own configuration, but '{display}' {why}; agcore's \
                     config and trust files are changed by the user, not by tools"
                ),
            )),
        }
    }

    /// Why `path` is protected, if it is.
    fn why(&self, path: &Path) -> Option<String> {
        let names = lowered(path);
        if names.last().is_some_and(|name| name == CONFIG_FILE) {
            return Some(format!("is agcore's own configuration ({CONFIG_FILE})"));
        }
        if names.iter().any(|name| name == STATE_DIR) {
            return Some(format!(
                "is agcore's own configuration (under a {STATE_DIR} directory)"
            ));
        }
        if self.files.contains(&names) {
            return Some(
                "is a file agcore's configuration reads (an agent's instructions or output schema)"
                    .to_owned(),
            );
        }
        self.dirs
            .iter()
            .any(|dir| names.starts_with(dir))
            .then(|| "is agcore's own configuration (the user's agcore directory)".to_owned())
    }
}

/// The normal components of `path`, lower-cased (`..` and `.` kept out: resolved paths have
/// none, and a requested path is also checked resolved).
fn lowered(path: &Path) -> Vec<String> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(name) => Some(name.to_string_lossy().to_lowercase()),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user() -> ProtectedPaths {
        ProtectedPaths::from_lookup(|name| match name {
            "HOME" => Some(PathBuf::from("/home/u")),
            "XDG_CONFIG_HOME" => Some(PathBuf::from("/cfg")),
            "XDG_DATA_HOME" => Some(PathBuf::from("relative/ignored")),
            _ => None,
        })
    }

    #[test]
    fn config_files_state_dirs_and_user_dirs_are_protected_in_any_case() {
        let paths = user();
        for protected in [
            "/w/agcore.toml",
            "/w/sub/AgCore.TOML",
            "/w/.agcore/trust.toml",
            "/w/.AGCORE/x/y",
            "/cfg/agcore/config.toml",
            "/CFG/AGCORE/new.txt",
            "/home/u/.config/agcore/config.toml",
            "/home/u/.local/share/agcore/trust/1.toml",
        ] {
            assert!(paths.why(Path::new(protected)).is_some(), "{protected}");
        }
        for free in [
            "/w/agcore.toml.bak",
            "/w/agcore.toml.d/x",
            "/w/src/main.rs",
            "/w/agcore/config.toml",
            "/home/u/.config/other/agcore.txt",
            "/relative/ignored/agcore/x",
        ] {
            assert!(paths.why(Path::new(free)).is_none(), "{free}");
        }
    }

    #[test]
    fn the_error_names_the_path_and_the_rule() {
        let error = user()
            .check("write_file", "agcore.toml", [Path::new("/w/agcore.toml")])
            .unwrap_err();
        let text = error.to_string();
        assert!(matches!(error, ToolError::PermissionDenied(..)));
        assert!(
            text.contains("'agcore.toml' is agcore's own configuration"),
            "{text}"
        );
    }
}
