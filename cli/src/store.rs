//! Stored conversations for `--session NAME`: which store (`--store`, `AGCORE_STORE`,
//! `[session] store`, else SQLite under the data directory), and the session opened under its
//! lease: its history, the run in progress (interrupted or suspended), and the library's
//! [`SessionJournal`], which the run records every step into (step kinds: see
//! `agcore::session::journal`).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agcore::llm::OpenaiChatMessage;
use agcore::owner_only;
use agcore::run::RunState;
use agcore::session::{
    LockMode, PostgresTimeouts, Restored, SessionError, SessionJournal, SessionLease, SessionStore,
    Tightened,
};
use agcore::tools::ToolRegistry;
use anyhow::{Context, bail};

use crate::layers::base_dir;

/// The default store: `$XDG_DATA_HOME/agcore/sessions.db`, else
/// `~/.local/share/agcore/sessions.db`.
pub fn default_store_path() -> Option<PathBuf> {
    base_dir("XDG_DATA_HOME", ".local/share").map(|dir| dir.join("agcore").join("sessions.db"))
}

/// The store address: `--store` (or `AGCORE_STORE`, which clap reads into it), then the
/// config's `[session] store` (from a trusted layer only — the config loader's rule), else
/// the default SQLite file.
pub fn store_url(flag: Option<&str>, config: Option<&str>) -> anyhow::Result<String> {
    if let Some(url) = flag.or(config).filter(|url| !url.is_empty()) {
        return Ok(url.to_owned());
    }
    let Some(path) = default_store_path() else {
        bail!("no session store: pass --store URL, set AGCORE_STORE, or set HOME");
    };
    if let Some(dir) = path.parent() {
        // Owner-only when created; an existing one is tightened when the store opens.
        agcore::owner_only::create_dir_all(dir)
            .with_context(|| format!("could not create the session directory {}", dir.display()))?;
    }
    Ok(format!("sqlite:{}", path.display()))
}

/// Writes a conversation to `path` (`--transcript`, `/save`): a new file is owner-only (0600,
/// whatever the umask), as it holds the conversation; an existing one keeps its permissions.
pub fn write_conversation(path: &std::path::Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)?.write_all(text.as_bytes())
}

/// `url` without a password (`postgres://user:secret@host` → `postgres://user@host`, a
/// `?password=` hidden), for messages.
pub fn redact(url: &str) -> String {
    agcore::session::redact_address(url)
}

/// Opens the store `url` names, with an error that says which store could not be used. The
/// data folder (`agcore/`, its `outputs/` and `mcp-auth/`) and the store's files are made
/// owner-only when other users could use them, which one line on stderr says.
pub async fn open(
    url: &str,
    section: &crate::config::SessionSection,
) -> anyhow::Result<Arc<dyn SessionStore>> {
    let mut tightened = tighten_data_dir()?;
    let store = agcore::session::open_with(url, timeouts(section)?)
        .await
        .with_context(|| format!("could not open the session store {}", redact(url)))?;
    tightened.extend_from_slice(store.tightened());
    if let Some(line) = tightened_line(&tightened) {
        eprintln!("{line}");
    }
    Ok(store)
}

/// `[session] connect_timeout` / `statement_timeout` / `lease` (seconds) over the library's
/// defaults.
fn timeouts(section: &crate::config::SessionSection) -> anyhow::Result<PostgresTimeouts> {
    let seconds = |name: &str, value: Option<f64>| -> anyhow::Result<Option<Duration>> {
        value
            .map(|value| {
                Duration::try_from_secs_f64(value)
                    .ok()
                    .filter(|d| !d.is_zero())
                    .with_context(|| {
                        format!("[session] {name} = {value}: give a positive number of seconds")
                    })
            })
            .transpose()
    };
    let mut timeouts = PostgresTimeouts::default();
    if let Some(connect) = seconds("connect_timeout", section.connect_timeout)? {
        timeouts = timeouts.with_connect(connect);
    }
    if let Some(statement) = seconds("statement_timeout", section.statement_timeout)? {
        timeouts = timeouts.with_statement(statement);
    }
    if let Some(lease) = seconds("lease", section.lease)? {
        timeouts = timeouts.with_lease(lease);
    }
    Ok(timeouts)
}

/// Tightens agcore's data folder and the folders it keeps there, those that exist.
fn tighten_data_dir() -> anyhow::Result<Vec<Tightened>> {
    let Some(dir) = base_dir("XDG_DATA_HOME", ".local/share").map(|dir| dir.join("agcore")) else {
        return Ok(Vec::new());
    };
    let mut tightened = Vec::new();
    for dir in [dir.clone(), dir.join("outputs"), dir.join("mcp-auth")] {
        tightened.extend(
            owner_only::tighten(&dir)
                .with_context(|| format!("could not make {} owner-only", dir.display()))?,
        );
    }
    Ok(tightened)
}

/// The one line that says which files were made owner-only (`None` when none were).
pub fn tightened_line(tightened: &[Tightened]) -> Option<String> {
    if tightened.is_empty() {
        return None;
    }
    let list: Vec<String> = tightened
        .iter()
        .map(|t| {
            format!(
                "{} (was {:04o})",
                agcore::display::escape_for_terminal(&t.path.display().to_string()),
                t.was
            )
        })
        .collect();
    Some(format!(
        "agcore: other users could read {} of agcore's files; made owner-only: {}",
        tightened.len(),
        list.join(", ")
    ))
}

/// Takes the session's lease: at once (a clear "busy" error when another process holds it), or
/// waiting up to `wait`.
pub async fn lock(
    store: &dyn SessionStore,
    name: &str,
    wait: Option<Duration>,
) -> anyhow::Result<SessionLease> {
    agcore::session::validate_name(name)?;
    let mode = match wait {
        Some(timeout) => LockMode::Wait { timeout },
        None => LockMode::FailFast,
    };
    match store.lock(name, mode).await {
        Ok(lease) => Ok(lease),
        Err(SessionError::Busy { .. }) => {
            let hint = if wait.is_some() {
                " and stayed busy for the whole wait"
            } else {
                "; pass --wait-session SECONDS to wait for it"
            };
            bail!(
                "session {} is busy (used by another agcore process){hint}",
                agcore::display::escape_for_terminal(name)
            )
        }
        Err(error) => Err(error.into()),
    }
}

/// The history a session's steps describe, and the run in progress (`None` for a session that
/// does not exist).
pub async fn history(store: &dyn SessionStore, name: &str) -> anyhow::Result<Option<Restored>> {
    let Some(session) = store.load(name).await? else {
        return Ok(None);
    };
    Ok(Some(agcore::session::replay(&session)?))
}

/// A session held for a run or a chat: its history, the run in progress, its journal and its
/// lease (the lock is released when this is dropped, or when the process dies).
pub struct OpenSession {
    /// The session's name.
    pub name: String,
    /// The stored history.
    pub history: Vec<OpenaiChatMessage>,
    /// The run that was interrupted mid-turn or suspended for approvals, if any.
    pub run: Option<RunState>,
    /// Where the run records its steps.
    pub journal: Arc<SessionJournal>,
    /// The "allow for the session" answers (`a` at a prompt) the session was given.
    pub grants: Vec<agcore::tools::SessionGrant>,
    /// What its calls reported (titles, diffs), to draw them again.
    pub calls: Vec<agcore::session::StoredCallUpdate>,
    _lease: SessionLease,
}

/// Opens, locks and loads the session `--session` names (`None` without `--session`).
pub async fn open_session(
    args: &crate::cli::SessionArgs,
    config: &crate::config::AgcoreConfig,
) -> anyhow::Result<Option<OpenSession>> {
    let Some(name) = &args.session else {
        return Ok(None);
    };
    let url = store_url(args.store.url.as_deref(), config.session.store.as_deref())?;
    let store = open(&url, &config.session).await?;
    let lease = lock(&*store, name, args.wait_session.map(Duration::from_secs)).await?;
    // Loaded under the lease: no other writer can append between this and our first append.
    let calls = match store.load(name).await {
        Ok(Some(session)) => agcore::session::call_updates(&session),
        _ => Vec::new(),
    };
    let (journal, restored) = SessionJournal::open(store, name).await.with_context(|| {
        format!(
            "could not load session {}",
            agcore::display::escape_for_terminal(name)
        )
    })?;
    // Fenced: once another worker took the session over, this one's commits are refused.
    let journal = journal.with_lease(&lease);
    Ok(Some(OpenSession {
        name: name.clone(),
        history: restored.history,
        run: restored.run,
        grants: restored.grants,
        calls,
        journal: Arc::new(journal),
        _lease: lease,
    }))
}

impl OpenSession {
    /// `registry` with the session's grants: those given before run without asking, and a new
    /// one (`a` at a prompt) is stored with the session, for the next process.
    pub fn keep_grants(&self, registry: ToolRegistry) -> ToolRegistry {
        registry.restore_session_grants(&self.grants);
        registry.with_grant_recorder(self.journal.clone())
    }

    /// Make the stored history equal to `messages` (after a run the library could not record
    /// the end of: a cancelled one, or `/clear`).
    pub async fn sync(&self, messages: &[OpenaiChatMessage]) -> anyhow::Result<()> {
        self.journal.sync_history(messages).await.with_context(|| {
            format!(
                "could not store session {}",
                agcore::display::escape_for_terminal(&self.name)
            )
        })
    }
}

/// Whether a history ends where a run was interrupted: with tool calls or tool results the
/// model has not answered, or with a user message without a reply.
pub fn needs_resume(messages: &[OpenaiChatMessage]) -> bool {
    match messages.last() {
        Some(OpenaiChatMessage::Assistant { tool_calls, .. }) => !tool_calls.is_empty(),
        Some(OpenaiChatMessage::Tool { .. } | OpenaiChatMessage::User { .. }) => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_not_shown() {
        assert_eq!(
            redact("postgres://me:secret@db:5432/x"),
            "postgres://me@db:5432/x"
        );
        assert_eq!(redact("sqlite:/tmp/a.db"), "sqlite:/tmp/a.db");
        assert_eq!(
            redact("host=db user=me password='p@ z\\'z' sslmode=disable"),
            "host=db user=me password=REDACTED sslmode=disable"
        );
        for url in [
            "postgres://me:p@zz@db:5432/x",
            "postgres://me@db:5432/x?password=p%40zz&sslmode=disable",
            "host=db user=me password='p@ z\\'z' sslmode=disable",
        ] {
            let shown = redact(url);
            assert!(
                !shown.contains("zz") && !shown.contains("z\\"),
                "{url} → {shown}"
            );
            assert!(
                shown.contains("REDACTED") || !shown.contains("password"),
                "{url} → {shown}"
            );
            assert!(shown.contains("db"), "{url} → {shown}");
        }
    }
}
