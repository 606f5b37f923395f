//! Trust records for workspace configs, and `agcore trust`.
//!
//! A record is the canonical path of a workspace's `agcore.toml` and the SHA-256 of its content
//! and referenced files ([`ConfigFile::fingerprint`]). They live in
//! `$XDG_DATA_HOME/agcore/trusted.toml` (else `~/.local/share/agcore/trusted.toml`), written
//! atomically with mode 0600: outside any workspace, so a tool confined to the workspace cannot
//! add a record.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};

use crate::cli::TrustArgs;
use crate::config::DEFAULT_CONFIG_FILE;
use crate::layers::{ConfigFile, base_dir};
use crate::render::json_for_terminal;

/// One trusted workspace config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustRecord {
    /// The config file's canonical path.
    pub path: PathBuf,
    /// [`ConfigFile::fingerprint`] when it was trusted.
    pub sha256: String,
}

/// Every trust record.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TrustStore {
    /// The records.
    #[serde(default)]
    pub trusted: Vec<TrustRecord>,
}

/// What the records say about one config file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A record matches its path and fingerprint.
    Trusted,
    /// A record names its path, but the content (or a referenced file) changed since.
    Changed,
    /// No record names it.
    Unknown,
}

/// The trust store's file.
pub fn store_path() -> Option<PathBuf> {
    base_dir("XDG_DATA_HOME", ".local/share").map(|dir| dir.join("agcore").join("trusted.toml"))
}

impl TrustStore {
    /// The records (none when the file does not exist).
    pub fn load() -> anyhow::Result<Self> {
        let Some(path) = store_path() else {
            return Ok(TrustStore::default());
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text)
                .with_context(|| format!("invalid trust records in {}", path.display())),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(TrustStore::default()),
            Err(error) => Err(error)
                .with_context(|| format!("could not read the trust records {}", path.display())),
        }
    }

    /// Whether `file` is trusted: its canonical path and fingerprint must both match.
    pub fn verdict(&self, file: &ConfigFile) -> anyhow::Result<Verdict> {
        let path = canonical(&file.path)?;
        let fingerprint = file.fingerprint();
        let mut named = false;
        for record in self.trusted.iter().filter(|record| record.path == path) {
            named = true;
            if record.sha256 == fingerprint {
                return Ok(Verdict::Trusted);
            }
        }
        Ok(if named {
            Verdict::Changed
        } else {
            Verdict::Unknown
        })
    }

    /// Write the records atomically (a temporary file renamed over the old one), mode 0600.
    pub fn save(&self) -> anyhow::Result<PathBuf> {
        let Some(path) = store_path() else {
            bail!("cannot store trust records: neither XDG_DATA_HOME nor HOME is set");
        };
        let dir = path.parent().unwrap_or(Path::new("."));
        agcore::owner_only::create_dir_all(dir)
            .with_context(|| format!("could not create {}", dir.display()))?;
        let text = toml::to_string(self).context("could not serialise the trust records")?;
        // tempfile creates the file with mode 0600 on Unix.
        let mut temporary = tempfile::NamedTempFile::new_in(dir)
            .with_context(|| format!("could not write in {}", dir.display()))?;
        temporary.write_all(text.as_bytes())?;
        temporary.as_file().sync_all()?;
        temporary
            .persist(&path)
            .with_context(|| format!("could not write {}", path.display()))?;
        Ok(path)
    }
}

fn canonical(path: &Path) -> anyhow::Result<PathBuf> {
    std::fs::canonicalize(path).with_context(|| format!("cannot resolve {}", path.display()))
}

/// Run `agcore trust`.
pub fn trust(args: TrustArgs) -> anyhow::Result<ExitCode> {
    let mut store = TrustStore::load()?;
    if args.list {
        if store.trusted.is_empty() {
            println!("no trusted workspace configs");
        }
        for record in &store.trusted {
            let short = record.sha256.get(..16).unwrap_or(&record.sha256);
            let path = record.path.to_string_lossy();
            let state = match ConfigFile::read(&record.path) {
                Ok(file) if file.fingerprint() == record.sha256 => "trusted",
                Ok(_) => "changed since (not loaded)",
                Err(_) => "unreadable or invalid (not loaded)",
            };
            println!("{}  sha256 {short}…  {state}", escape_for_terminal(&path));
        }
        return Ok(ExitCode::SUCCESS);
    }
    let dir = args.dir.unwrap_or_else(|| PathBuf::from("."));
    let named = dir.join(DEFAULT_CONFIG_FILE);
    // A record can be revoked after its file is gone.
    let file_path = match canonical(&named) {
        Err(_) if args.revoke => std::path::absolute(&named)?,
        resolved => resolved?,
    };
    let shown = escape_for_terminal(&file_path.to_string_lossy()).into_owned();
    if args.revoke {
        let before = store.trusted.len();
        store.trusted.retain(|record| record.path != file_path);
        if store.trusted.len() == before {
            println!("{shown} was not trusted");
        } else {
            store.save()?;
            println!("{shown} is no longer trusted");
        }
        return Ok(ExitCode::SUCCESS);
    }
    let file = ConfigFile::read(&file_path)?;
    println!("{}", summary(&file)?);
    if std::io::stdin().is_terminal() && !ask("trust this config?")? {
        println!("not trusted");
        return Ok(ExitCode::FAILURE);
    }
    let fingerprint = file.fingerprint();
    store.trusted.retain(|record| record.path != file_path);
    store.trusted.push(TrustRecord {
        path: file_path,
        sha256: fingerprint,
    });
    let stored = store.save()?;
    println!(
        "trusted {shown} (records in {}); any change to it voids the trust",
        escape_for_terminal(&stored.to_string_lossy())
    );
    Ok(ExitCode::SUCCESS)
}

/// What trusting `file` lets it do: the programs it starts, where model requests (and the API
/// key) go, what it changes for tools; then the file itself.
fn summary(file: &ConfigFile) -> anyhow::Result<String> {
    let config = &file.config;
    let mut lines = vec![format!(
        "{} (sha256 {})",
        escape_for_terminal(&file.path.to_string_lossy()),
        file.fingerprint()
    )];
    let mut files = std::collections::BTreeMap::new();
    files.extend(file.referenced.clone());
    let servers = config.mcp_servers(Some(&file.path), &files)?;
    for (name, server) in &servers.servers {
        let what = match (&server.command, &server.url) {
            // Quoted as JSON, so the argument boundaries are exact.
            (Some(command), _) => json_for_terminal(format!(
                "starts the program: {} with arguments {}",
                serde_json::Value::from(command.as_str()),
                serde_json::Value::from(server.args.clone())
            )),
            (None, Some(url)) => format!("connects to {}", escape_for_terminal(url)),
            (None, None) => "(neither command nor url)".to_owned(),
        };
        let disabled = if server.disabled { " (disabled)" } else { "" };
        lines.push(format!(
            "  MCP server {}{disabled} {what}",
            escape_for_terminal(name)
        ));
    }
    if let Some(url) = &config.model.base_url {
        lines.push(format!(
            "  model requests (with the API key) go to {}",
            escape_for_terminal(url)
        ));
    }
    for fallback in &config.model.fallback {
        let target = match &fallback.base_url {
            Some(url) => format!("go to {}", escape_for_terminal(url)),
            None => "go to its provider's public URL".to_owned(),
        };
        lines.push(format!(
            "  fallback model {}: requests (with its API key{}) {target}",
            escape_for_terminal(&fallback.model),
            fallback
                .api_key_env
                .as_ref()
                .map(|variable| format!(" from ${}", escape_for_terminal(variable)))
                .unwrap_or_default()
        ));
    }
    for (name, agent) in &config.agents {
        let mut what = vec![format!("defines the agent {}", escape_for_terminal(name))];
        if let Some(model) = &agent.model {
            what.push(format!("with the model {}", escape_for_terminal(model)));
        }
        for (label, path) in [
            (
                "reads its instructions from",
                agent.instructions_file.as_ref(),
            ),
            (
                "reads its output schema from",
                match &agent.output_schema {
                    Some(crate::agents_config::SchemaSource::File(path)) => Some(path),
                    _ => None,
                },
            ),
        ] {
            if let Some(path) = path {
                what.push(format!(
                    "{label} {}",
                    escape_for_terminal(&path.to_string_lossy())
                ));
            }
        }
        lines.push(format!("  {}", what.join(", ")));
    }
    if let Some(variable) = &config.model.api_key_env {
        lines.push(format!(
            "  the API key is read from ${}",
            escape_for_terminal(variable)
        ));
    }
    if config.builtin.enabled || config.builtin.root.is_some() {
        lines.push("  enables or moves the built-in file, search, command and fetch tools".into());
    }
    if config.builtin.allow_private_network {
        lines.push("  lets fetch_url reach loopback and private addresses".into());
    }
    for (event, command) in config.hooks.commands() {
        lines.push(json_for_terminal(format!(
            "  hook on {event} runs the program: {}",
            serde_json::Value::from(command.command.clone())
        )));
    }
    if file.table.contains_key("tools") {
        lines.push("  sets permissions, approvals, profiles or idempotent tools ([tools])".into());
    }
    lines.push(format!(
        "--- {DEFAULT_CONFIG_FILE} ---\n{}",
        escape_keeping_lines(&file.text)
    ));
    if let Some((path, text)) = &file.referenced {
        lines.push(format!(
            "--- {} ---\n{}",
            escape_for_terminal(&path.to_string_lossy()),
            escape_keeping_lines(text)
        ));
    }
    Ok(lines.join("\n"))
}

fn ask(question: &str) -> anyhow::Result<bool> {
    let mut editor = rustyline::DefaultEditor::new()?;
    let answer = editor.readline(&format!("{question} [y/N] "));
    Ok(matches!(answer, Ok(line) if matches!(line.trim(), "y" | "Y" | "yes")))
}
