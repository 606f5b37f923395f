//! An editor session's workspace: its `cwd`, and the config read there by the CLI's trust rule.
//! A `cwd` whose `agcore.toml` is not trusted (`agcore trust`) runs in restricted mode, as the
//! CLI treats an untrusted workspace: that file is not loaded, and no tool needing Network or
//! Shell is offered or run.

use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

use crate::cli::ToolArgs;
use crate::config::DEFAULT_CONFIG_FILE;
use crate::layers::{ConfigFile, Loaded};
use crate::trust::{TrustStore, Verdict};

/// A session's workspace and configuration.
pub struct SessionWorkspace {
    /// The canonical `cwd`.
    pub root: PathBuf,
    /// The config by the trust rule, with the session's restricted mode applied.
    pub loaded: Loaded,
    /// Whether the session runs in restricted mode.
    pub restricted: bool,
}

/// The workspace of a session at `cwd` (absolute, an existing directory).
pub fn open(tools: &ToolArgs, cwd: &Path) -> anyhow::Result<SessionWorkspace> {
    if !cwd.is_absolute() {
        bail!("cwd must be an absolute path");
    }
    let root = std::fs::canonicalize(cwd)
        .ok()
        .filter(|root| root.is_dir())
        .context("cwd is not a directory")?;
    let untrusted = tools.config.is_none() && !workspace_trusted(&root)?;
    let restricted = tools.restricted || untrusted;
    if untrusted {
        tracing::warn!(
            workspace = %root.display(),
            "this workspace's agcore.toml is not trusted: the session runs in restricted mode"
        );
    }
    let mut loaded = crate::layers::load_in(tools.config.as_deref(), restricted, &root)?;
    loaded.config.tools.restricted |= restricted;
    loaded.config.builtin.root = Some(root.clone());
    Ok(SessionWorkspace {
        root,
        loaded,
        restricted,
    })
}

/// Whether `root` has no `agcore.toml`, or one that a trust record matches.
fn workspace_trusted(root: &Path) -> anyhow::Result<bool> {
    let path = root.join(DEFAULT_CONFIG_FILE);
    if !path.is_file() {
        return Ok(true);
    }
    let Ok(file) = ConfigFile::read(&path) else {
        return Ok(false);
    };
    Ok(TrustStore::load()?.verdict(&file)? == Verdict::Trusted)
}
