//! Which config files are read, and how they combine.
//!
//! - The user's own file, `$XDG_CONFIG_HOME/agcore/config.toml` (else
//!   `~/.config/agcore/config.toml`), is trusted and read when it exists.
//! - `--config FILE` is trusted (the user named it) and takes the place of the workspace file.
//! - The workspace's `./agcore.toml` is untrusted input (a cloned repository wrote it): it is
//!   read only when a trust record (`agcore trust`) matches its canonical path and the SHA-256
//!   of its content and of the `mcpServers` file it references — and never under
//!   `--restricted`. Otherwise it is not loaded at all, and stderr says so once.
//!
//! The second file overrides the user's key by key: tables merge (so `[mcp.servers.x]` of both
//! files are kept, and `[model] model = ...` replaces only the model name), a scalar or a list
//! is replaced whole.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::config::{AgcoreConfig, ConfigError, DEFAULT_CONFIG_FILE};
use crate::trust::{TrustStore, Verdict};

/// One config file as read: its bytes (once), its table with the file's relative paths made
/// absolute, and the text of the `mcpServers` file it references (read once too).
#[derive(Debug, Clone)]
pub struct ConfigFile {
    /// The file as given.
    pub path: PathBuf,
    /// Its content.
    pub text: String,
    /// Its TOML, with `builtin.root` and `mcp.config` made relative to the file's directory.
    pub table: toml::Table,
    /// The parsed and validated config.
    pub config: AgcoreConfig,
    /// The referenced `mcpServers` file and its text, if any.
    pub referenced: Option<(PathBuf, String)>,
    /// The files its agents read (`instructions_file`, `output_schema`), absolute, with their
    /// content (`None`: unreadable; using the agent then fails).
    pub agent_files: Vec<(PathBuf, Option<Vec<u8>>)>,
}

impl ConfigFile {
    /// Read `path` and what it references; validate it (unknown keys are errors).
    pub fn read(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        let parse_error = |message: String| ConfigError::Parse {
            path: path.to_owned(),
            message,
        };
        // Parsed as the config first: its errors name the key, the line and the column.
        AgcoreConfig::parse(&text).map_err(parse_error)?;
        let mut table: toml::Table = toml::from_str(&text)
            .map_err(|error: toml::de::Error| parse_error(error.to_string()))?;
        let base = path.parent().unwrap_or(Path::new("."));
        let base = if base.as_os_str().is_empty() {
            Path::new(".")
        } else {
            base
        };
        let mut referenced = None;
        for (section, key) in [("builtin", "root"), ("mcp", "config")] {
            let Some(toml::Value::String(value)) = table
                .get_mut(section)
                .and_then(|section| section.get_mut(key))
            else {
                continue;
            };
            let absolute = base.join(&*value);
            *value = absolute.to_string_lossy().into_owned();
            if key == "config" {
                let text =
                    std::fs::read_to_string(&absolute).map_err(|source| ConfigError::Mcp {
                        path: path.to_owned(),
                        source: agcore::tools::mcp::McpConfigError::Io {
                            path: absolute.clone(),
                            source,
                        },
                    })?;
                referenced = Some((PathBuf::from(&*value), text));
            }
        }
        // An agent's instructions and schema files are the config file's, like `builtin.root`,
        // and inside its directory: they are part of what trusting the file trusts.
        let mut agent_files = Vec::new();
        if let Some(toml::Value::Table(agents)) = table.get_mut("agents") {
            for (name, agent) in agents.iter_mut() {
                for key in ["instructions_file", "output_schema"] {
                    if let Some(toml::Value::String(value)) = agent.get_mut(key) {
                        let absolute = base.join(value.as_str());
                        if !inside(base, &absolute) {
                            return Err(ConfigError::OutsideConfigDirectory {
                                path: path.to_owned(),
                                agent: name.clone(),
                                key,
                                file: absolute,
                            });
                        }
                        *value = absolute.to_string_lossy().into_owned();
                        let content = std::fs::read(&absolute).ok();
                        agent_files.push((absolute, content));
                    }
                }
            }
        }
        // A relative SQLite store is the file's too, like `builtin.root`.
        if let Some(toml::Value::String(value)) = table
            .get_mut("session")
            .and_then(|section| section.get_mut("store"))
        {
            let (scheme, rest) = match value.strip_prefix("sqlite://") {
                Some(rest) => ("sqlite://", rest),
                None => ("sqlite:", value.strip_prefix("sqlite:").unwrap_or_default()),
            };
            if !rest.is_empty() && Path::new(rest).is_relative() {
                *value = format!("{scheme}{}", base.join(rest).to_string_lossy());
            }
        }
        let config = into_config(table.clone()).map_err(parse_error)?;
        Ok(ConfigFile {
            path: path.to_owned(),
            text,
            table,
            config,
            referenced,
            agent_files,
        })
    }

    /// SHA-256 (hex) over the file's content, the referenced `mcpServers` file's path and
    /// content, and each agent file's path and content: any change to one voids a trust record.
    pub fn fingerprint(&self) -> String {
        let mut hash = Sha256::new();
        let mut agent_files: Vec<(&str, Option<&[u8]>)> = Vec::new();
        for (file, content) in &self.agent_files {
            agent_files.push(("agent-file-path", Some(file.as_os_str().as_encoded_bytes())));
            agent_files.push(("agent-file-text", content.as_deref()));
        }
        for (label, bytes) in [
            ("agcore.toml", Some(self.text.as_bytes())),
            (
                "mcp-path",
                self.referenced
                    .as_ref()
                    .map(|(path, _)| path.as_os_str().as_encoded_bytes()),
            ),
            (
                "mcp-text",
                self.referenced.as_ref().map(|(_, text)| text.as_bytes()),
            ),
        ]
        .into_iter()
        .chain(agent_files)
        {
            let bytes = bytes.unwrap_or_default();
            hash.update(label.as_bytes());
            hash.update((bytes.len() as u64).to_le_bytes());
            hash.update(bytes);
        }
        hash.finalize()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }
}

/// Whether `file` is inside `dir`: lexically (no `..` climbing out), and — where both exist —
/// by their canonical paths (no symlink leading out).
fn inside(dir: &Path, file: &Path) -> bool {
    let Ok(relative) = file.strip_prefix(dir) else {
        return false;
    };
    let mut depth = 0usize;
    for component in relative.components() {
        match component {
            std::path::Component::Normal(_) => depth += 1,
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir if depth > 0 => depth -= 1,
            _ => return false,
        }
    }
    match (std::fs::canonicalize(dir), std::fs::canonicalize(file)) {
        (Ok(dir), Ok(file)) => file.starts_with(dir),
        _ => true,
    }
}

fn into_config(table: toml::Table) -> Result<AgcoreConfig, String> {
    toml::Value::Table(table)
        .try_into()
        .map_err(|error: toml::de::Error| error.to_string().trim().to_owned())
}

/// `$XDG_CONFIG_HOME/agcore/config.toml`, else `~/.config/agcore/config.toml`.
pub fn user_config_path() -> Option<PathBuf> {
    base_dir("XDG_CONFIG_HOME", ".config").map(|dir| dir.join("agcore").join("config.toml"))
}

/// `$VAR` when set to an absolute path (the XDG rule), else `$HOME/<fallback>`.
pub fn base_dir(variable: &str, fallback: &str) -> Option<PathBuf> {
    std::env::var_os(variable)
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute())
        .or_else(|| {
            std::env::var_os("HOME")
                .filter(|home| !home.is_empty())
                .map(|home| PathBuf::from(home).join(fallback))
        })
}

/// The combined config and where it came from.
#[derive(Debug, Default)]
pub struct Loaded {
    /// The config (defaults when no file was read).
    pub config: AgcoreConfig,
    /// The file that was read last (`--config`, the trusted workspace file, else the user's).
    pub path: Option<PathBuf>,
    /// Referenced `mcpServers` files' texts, by (absolute) path.
    pub mcp_files: BTreeMap<PathBuf, String>,
}

/// Read the config by the rule of this module: the user's file, then `explicit`, else the
/// workspace's `./agcore.toml` if it is trusted and not `restricted`.
pub fn load(explicit: Option<&Path>, restricted: bool) -> anyhow::Result<Loaded> {
    load_in(explicit, restricted, Path::new("."))
}

/// [`load`] with the workspace file looked for in `dir` (an editor session's `cwd`).
pub fn load_in(explicit: Option<&Path>, restricted: bool, dir: &Path) -> anyhow::Result<Loaded> {
    let mut files = Vec::new();
    if let Some(user) = user_config_path().filter(|path| path.is_file()) {
        files.push(ConfigFile::read(&user)?);
    }
    match explicit {
        Some(path) => files.push(ConfigFile::read(path)?),
        None => files.extend(workspace_file(restricted, dir)?),
    }
    let mut table = toml::Table::new();
    let mut mcp_files = BTreeMap::new();
    for file in &files {
        merge(&mut table, file.table.clone());
        mcp_files.extend(file.referenced.clone());
    }
    let config = match files.as_slice() {
        [] => AgcoreConfig::default(),
        [only] => only.config.clone(),
        [.., last] => into_config(table).map_err(|message| ConfigError::Parse {
            path: last.path.clone(),
            message,
        })?,
    };
    Ok(Loaded {
        config,
        path: files.last().map(|file| file.path.clone()),
        mcp_files,
    })
}

/// The workspace's `./agcore.toml` when it exists and is trusted; otherwise `None`, and stderr
/// says why and how to trust it.
fn workspace_file(restricted: bool, dir: &Path) -> anyhow::Result<Option<ConfigFile>> {
    let path = &dir.join(DEFAULT_CONFIG_FILE);
    if !path.is_file() {
        return Ok(None);
    }
    if restricted {
        eprintln!(
            "warning: restricted mode: ./{DEFAULT_CONFIG_FILE} was not loaded, trusted or not \
             (a workspace's config can start programs and loosen permissions); pass \
             --config {DEFAULT_CONFIG_FILE} to use it anyway"
        );
        return Ok(None);
    }
    // Read by its canonical path, as `agcore trust` does: the fingerprint covers the absolute
    // path of the referenced mcpServers file.
    let read = std::fs::canonicalize(path)
        .map_err(anyhow::Error::from)
        .and_then(|path| Ok(ConfigFile::read(&path)?));
    let verdict = match read {
        Ok(file) => match TrustStore::load()?.verdict(&file)? {
            Verdict::Trusted => return Ok(Some(file)),
            verdict => verdict,
        },
        // Unreadable or invalid: never trusted (`agcore trust` refuses such a file), so it is
        // reported as untrusted rather than as an error of the user's own config.
        Err(_) => Verdict::Unknown,
    };
    let why = match verdict {
        Verdict::Changed => "changed since it was trusted",
        _ => "not trusted",
    };
    eprintln!(
        "warning: ./{DEFAULT_CONFIG_FILE} is {why}, so it was not loaded (a workspace's config \
         can start programs, send the API key to another server and loosen permissions); \
         review it and run `agcore trust` to use it, or pass --config {DEFAULT_CONFIG_FILE}"
    );
    Ok(None)
}

/// `over` into `base`, key by key: tables merge, anything else is replaced.
fn merge(base: &mut toml::Table, over: toml::Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(toml::Value::Table(inner)), toml::Value::Table(over)) => merge(inner, over),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_later_file_overrides_key_by_key_and_tables_merge() {
        let mut base: toml::Table = toml::from_str(
            "[model]\nmodel = \"a\"\nbase_url = \"http://u\"\n[mcp.servers.x]\ncommand = \"x\"\n",
        )
        .unwrap();
        let over: toml::Table =
            toml::from_str("[model]\nmodel = \"b\"\n[mcp.servers.y]\ncommand = \"y\"\n").unwrap();
        merge(&mut base, over);
        let config = into_config(base).unwrap();
        assert_eq!(config.model.model.as_deref(), Some("b"));
        assert_eq!(config.model.base_url.as_deref(), Some("http://u"));
        assert_eq!(config.mcp.servers.len(), 2);
    }
}
