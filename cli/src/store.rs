//! Stored conversations for `--session NAME`: which store (`--store`, `AGCORE_STORE`,
//! `[session] store`, else SQLite under the data directory), the session's history, and the
//! journal that writes each committed turn as steps.
//!
//! A session's steps are `messages` (payload `{"messages": [...]}`, appended to the history,
//! the same JSON as `--transcript`) and `truncate` (payload `{"len": N}`, the history cut to
//! its first N messages — written when the library dropped what had been journaled, e.g. the
//! prompt of a request that failed, or `/clear`). Replaying them in order gives the history.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use agcore::llm::{ChatModel, ChatRequest, ChatResponse, LlmError, ModelStream, OpenaiChatMessage};
use agcore::session::{LockMode, SessionError, SessionLease, SessionStore, Step};
use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::layers::base_dir;

/// The step kind holding new messages.
pub const MESSAGES: &str = "messages";
/// The step kind cutting the history to a length.
pub const TRUNCATE: &str = "truncate";

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
        std::fs::create_dir_all(dir)
            .with_context(|| format!("could not create the session directory {}", dir.display()))?;
    }
    Ok(format!("sqlite:{}", path.display()))
}

/// `url` without a password (`postgres://user:secret@host` → `postgres://user@host`), for
/// messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    match rest.split_once('@') {
        Some((credentials, host)) => {
            let user = credentials.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}@{host}")
        }
        None => url.to_owned(),
    }
}

/// Opens the store `url` names, with an error that says which store could not be used.
pub async fn open(url: &str) -> anyhow::Result<Arc<dyn SessionStore>> {
    agcore::session::open(url)
        .await
        .with_context(|| format!("could not open the session store {}", redact(url)))
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

/// The history a session's steps describe (empty for a session that does not exist).
pub async fn history(
    store: &dyn SessionStore,
    name: &str,
) -> anyhow::Result<Option<(Vec<OpenaiChatMessage>, u64)>> {
    let Some(session) = store.load(name).await? else {
        return Ok(None);
    };
    let mut messages: Vec<OpenaiChatMessage> = Vec::new();
    for step in &session.steps {
        let bad = |reason: String| anyhow::anyhow!("session {name:?}, step {}: {reason}", step.seq);
        match step.kind.as_str() {
            MESSAGES => {
                let added = step
                    .payload
                    .get("messages")
                    .cloned()
                    .ok_or_else(|| bad("a messages step without \"messages\"".to_owned()))?;
                let added: Vec<OpenaiChatMessage> = serde_json::from_value(added)
                    .map_err(|error| bad(format!("invalid message: {error}")))?;
                messages.extend(added);
            }
            TRUNCATE => {
                let len = step
                    .payload
                    .get("len")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| bad("a truncate step without \"len\"".to_owned()))?;
                messages.truncate(usize::try_from(len).unwrap_or(usize::MAX));
            }
            other => {
                return Err(bad(format!(
                    "step kind {other:?} is unknown to this agcore (written by a newer version?)"
                )));
            }
        }
    }
    Ok(Some((messages, session.next_seq())))
}

/// A session held for a run or a chat: its history, its journal and its lease (the lock is
/// released when this is dropped, or when the process dies).
pub struct OpenSession {
    /// The stored history.
    pub history: Vec<OpenaiChatMessage>,
    /// Where committed turns go.
    pub journal: Arc<Journal>,
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
    let store = open(&url).await?;
    let lease = lock(&*store, name, args.wait_session.map(Duration::from_secs)).await?;
    // Loaded under the lease: no other writer can append between this and our first append.
    let (history, next_seq) = self::history(&*store, name).await?.unwrap_or_default();
    let journal = Journal::new(store, name, &history, next_seq)?;
    Ok(Some(OpenSession {
        history,
        journal,
        _lease: lease,
    }))
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

/// Writes a session's history as it grows: what is stored is kept equal to the history the
/// library committed, at each model request and at the end of each prompt.
pub struct Journal {
    store: Arc<dyn SessionStore>,
    name: String,
    state: Mutex<Stored>,
}

/// What the store holds: the history's messages as JSON, and the next step's number.
struct Stored {
    messages: Vec<Value>,
    next_seq: u64,
}

impl Journal {
    /// A journal for session `name`, whose stored history is `messages` with `next_seq` steps.
    pub fn new(
        store: Arc<dyn SessionStore>,
        name: &str,
        messages: &[OpenaiChatMessage],
        next_seq: u64,
    ) -> anyhow::Result<Arc<Self>> {
        let messages = messages
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        Ok(Arc::new(Self {
            store,
            name: name.to_owned(),
            state: Mutex::new(Stored { messages, next_seq }),
        }))
    }

    /// Makes the stored history equal to `messages`: one atomic append of the new messages,
    /// after a `truncate` step when the history no longer starts with what is stored.
    pub async fn sync(&self, messages: &[OpenaiChatMessage]) -> anyhow::Result<()> {
        let current: Vec<Value> = messages
            .iter()
            .map(serde_json::to_value)
            .collect::<Result<_, _>>()?;
        let mut stored = self.state.lock().await;
        let common = stored
            .messages
            .iter()
            .zip(&current)
            .take_while(|(a, b)| a == b)
            .count();
        let mut steps = Vec::new();
        let mut seq = stored.next_seq;
        if common < stored.messages.len() {
            steps.push(Step::new(seq, TRUNCATE, json!({ "len": common })));
            seq += 1;
        }
        if common < current.len() {
            steps.push(Step::new(
                seq,
                MESSAGES,
                json!({ "messages": &current[common..] }),
            ));
        }
        if steps.is_empty() {
            return Ok(());
        }
        self.store
            .append(&self.name, stored.next_seq, &steps)
            .await
            .with_context(|| {
                format!(
                    "could not store session {}",
                    agcore::display::escape_for_terminal(&self.name)
                )
            })?;
        stored.next_seq += steps.len() as u64;
        stored.messages = current;
        Ok(())
    }
}

/// A model that stores the session's history before each request: the history a request
/// carries is the one the library has committed (plus the prompt), so every finished turn is
/// stored before the next effect starts and a crash loses at most the turn in progress.
pub struct JournalingModel {
    inner: Arc<dyn ChatModel>,
    journal: Arc<Journal>,
}

impl JournalingModel {
    /// `inner`, journaling into `journal`.
    pub fn new(inner: Arc<dyn ChatModel>, journal: Arc<Journal>) -> Self {
        Self { inner, journal }
    }

    async fn store(&self, request: &ChatRequest<'_>) -> Result<(), LlmError> {
        // The context engine's summary requests carry no history of the session.
        if agcore::context::is_summary_request(request) {
            return Ok(());
        }
        self.journal
            .sync(request.messages)
            .await
            .map_err(|error| LlmError::Other(crate::describe_raw(&error)))
    }
}

#[async_trait]
impl ChatModel for JournalingModel {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, LlmError> {
        self.store(&request).await?;
        self.inner.chat(request).await
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, LlmError> {
        self.store(&request).await?;
        self.inner.chat_stream(request).await
    }

    fn provider(&self) -> &str {
        self.inner.provider()
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
    }
}
