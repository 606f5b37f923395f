//! [`SessionJournal`]: a run's [`RunJournal`] in a [`SessionStore`], and [`replay`], which turns a
//! session's steps back into its history and — when a run was stopped mid-turn or suspended —
//! the [`RunState`] to continue it from.
//!
//! # Step kinds (payloads are JSON)
//! | kind | payload | replayed as |
//! |---|---|---|
//! | `messages` | `{"messages": [...]}` | appended to the history (each message as in `--transcript`) |
//! | `truncate` | `{"len": N}` | the history cut to its first N messages |
//! | `run` | a [`RunState`] without its `messages` | the run in progress (a tool turn, or suspended) |
//! | `call_started` | `{"call_id": "...", "idempotency_key": "agk1_..."}` (no key in sessions of older versions) | that call of the run in progress started |
//! | `call_finished` | `{"call_id": "...", "answer": {"content": "...", "is_error": false}}`, and `"media"` (the user message with its images or audio) when it had any for the model | its answer (and media) |
//! | `call_continues` | `{"call_id": "...", "continuation": {...}}` | how that call goes on when run again (an MCP task's id, a multi-round-trip request's state): a restored run continues it |
//! | `child` | `{"call_id", "agent", "step": {"kind", "payload"}}`: a sub-agent's own step inside the parent's call (see `session::child_steps`) | the child's history and run, on that call of the run in progress |
//! | `call_update` | `{"call_id": "...", "update": {...}}`: a [`crate::tools::ToolCallUpdate`] the call reported | nothing of the run: [`crate::session::call_updates`] replays it to a UI |
//! | `grant` | a [`SessionGrant`]: `{"tool": "..."}`, or with `"arguments"` | an "allow for the session" answer, kept for the rest of the session ([`Restored::grants`]) |
//!
//! A `messages` or `truncate` step after a `run` step closes that run (its turn was committed,
//! or it ended). Each step is one atomic append, made before the effect it announces starts.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::Mutex;

use crate::context::spill::KeptOutput;
use crate::run::journal::{JournalEntry, JournalError, RunJournal};
use crate::run::state::RunState;
use crate::session::error::{Result, SessionError};
use crate::session::outputs::SessionOutputs;
use crate::session::record::{Session, Step};
use crate::session::store::{LeaseFence, SessionLease, SessionStore};
use crate::tools::approval::{GrantRecorder, SessionGrant};
use crate::vocab::{OpenaiChatMessage, ToolAnswer};

/// The step kind holding new messages.
pub const MESSAGES: &str = "messages";
/// The step kind cutting the history to a length.
pub const TRUNCATE: &str = "truncate";
/// The step kind holding the state of a run in progress (without its history).
pub const RUN: &str = "run";
/// The step kind recording that a call started.
pub const CALL_STARTED: &str = "call_started";
/// The step kind recording a call's answer.
pub const CALL_FINISHED: &str = "call_finished";
/// The step kind recording how a started call goes on ([`JournalEntry::CallContinues`]).
pub const CALL_CONTINUES: &str = "call_continues";
/// The step kind recording an update a call reported ([`JournalEntry::CallUpdate`]).
pub const CALL_UPDATE: &str = "call_update";
/// The step kind recording an "allow for the session" grant.
pub const GRANT: &str = "grant";

/// A session's steps, replayed.
#[derive(Debug, Clone, PartialEq)]
pub struct Restored {
    /// The history: every committed turn, plus the prompt of a run that was stopped before
    /// its reply.
    pub history: Vec<OpenaiChatMessage>,
    /// The run that was in progress — stopped during a tool turn, or suspended for approvals —
    /// with the history as its messages: continue it with
    /// [`crate::run::RunRequest::from_state`].
    pub run: Option<RunState>,
    /// The "allow for the session" grants given in this session, in order: hand them to
    /// [`crate::tools::ToolRegistry::restore_session_grants`] (and record new ones with
    /// `ToolRegistry::with_grant_recorder(journal)`).
    pub grants: Vec<SessionGrant>,
}

/// Replay `session`'s steps (see the module docs).
///
/// # Errors
/// [`SessionError::BadRecord`] for a step that does not parse, or of a kind this version does
/// not know (written by a newer agcore).
pub fn replay(session: &Session) -> Result<Restored> {
    let mut history: Vec<OpenaiChatMessage> = Vec::new();
    let mut run: Option<RunState> = None;
    let mut grants: Vec<SessionGrant> = Vec::new();
    for step in &session.steps {
        let bad = |reason: String| SessionError::BadRecord {
            session: session.name.clone(),
            seq: step.seq,
            reason,
        };
        let field = |name: &str| {
            step.payload
                .get(name)
                .cloned()
                .ok_or_else(|| bad(format!("a {} step without \"{name}\"", step.kind)))
        };
        match step.kind.as_str() {
            MESSAGES => {
                let added: Vec<OpenaiChatMessage> = serde_json::from_value(field("messages")?)
                    .map_err(|error| bad(format!("invalid message: {error}")))?;
                history.extend(added);
                run = None;
            }
            TRUNCATE => {
                let len = field("len")?
                    .as_u64()
                    .ok_or_else(|| bad("\"len\" is not a number".to_owned()))?;
                history.truncate(usize::try_from(len).unwrap_or(usize::MAX));
                run = None;
            }
            RUN => {
                let state: RunState = serde_json::from_value(step.payload.clone())
                    .map_err(|error| bad(format!("invalid run state: {error}")))?;
                run = Some(state);
            }
            CALL_CONTINUES => {
                let call_id = field("call_id")?;
                let call_id = call_id
                    .as_str()
                    .ok_or_else(|| bad("\"call_id\" is not a string".to_owned()))?;
                let continuation = field("continuation")?;
                let Some(state) = run.as_mut() else {
                    return Err(bad(format!("a {} step outside a run", step.kind)));
                };
                state.record_continuation_id(call_id, continuation);
            }
            CALL_STARTED | CALL_FINISHED => {
                let call_id = field("call_id")?;
                let call_id = call_id
                    .as_str()
                    .ok_or_else(|| bad("\"call_id\" is not a string".to_owned()))?;
                let Some(state) = run.as_mut() else {
                    return Err(bad(format!("a {} step outside a run", step.kind)));
                };
                if step.kind == CALL_STARTED {
                    state.mark_started_id(call_id);
                } else {
                    let answer: ToolAnswer = serde_json::from_value(field("answer")?)
                        .map_err(|error| bad(format!("invalid answer: {error}")))?;
                    state.record_answer_id(call_id, answer);
                    if let Some(media) = step.payload.get("media") {
                        let media: OpenaiChatMessage = serde_json::from_value(media.clone())
                            .map_err(|error| bad(format!("invalid media: {error}")))?;
                        state.record_media_id(call_id, media);
                    }
                }
            }
            // For UIs only ([`crate::session::call_updates`]): the run does not need it.
            CALL_UPDATE => {}
            crate::session::child_steps::CHILD => {
                let Some(state) = run.as_mut() else {
                    return Err(bad("a child step outside a run".to_owned()));
                };
                crate::session::child_steps::replay(state, &step.payload).map_err(bad)?;
            }
            GRANT => {
                let grant: SessionGrant = serde_json::from_value(step.payload.clone())
                    .map_err(|error| bad(format!("invalid grant: {error}")))?;
                if !grants.contains(&grant) {
                    grants.push(grant);
                }
            }
            other => {
                return Err(bad(format!(
                    "step kind {other:?} is unknown to this agcore (written by a newer version?)"
                )));
            }
        }
    }
    let run = run.map(|mut state| {
        state.committed = state.committed.min(history.len());
        state.messages = history.clone();
        state
    });
    Ok(Restored {
        history,
        run,
        grants,
    })
}

/// Records a run into one session of a store: hold the session's lease
/// ([`SessionStore::lock`]) for as long as the journal is used.
pub struct SessionJournal {
    store: Arc<dyn SessionStore>,
    name: String,
    /// The lease its commits prove (`None`: unfenced).
    fence: Option<LeaseFence>,
    stored: Mutex<Stored>,
}

impl std::fmt::Debug for SessionJournal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SessionJournal")
            .field("session", &self.name)
            .finish_non_exhaustive()
    }
}

/// What the store holds: the history's messages, the next step's number, and whether a `run`
/// step is open (not yet closed by a `messages` or `truncate` step).
struct Stored {
    messages: Vec<OpenaiChatMessage>,
    next_seq: u64,
    run_open: bool,
}

impl SessionJournal {
    /// Load session `name` (empty when it does not exist yet) and a journal that appends to
    /// it. Take the session's lease first: no other writer may append in between.
    ///
    /// # Errors
    /// The store's errors; those of [`replay`].
    pub async fn open(store: Arc<dyn SessionStore>, name: &str) -> Result<(Self, Restored)> {
        crate::session::validate_name(name)?;
        let (restored, next_seq) = match store.load(name).await? {
            Some(session) => (replay(&session)?, session.next_seq()),
            None => (
                Restored {
                    history: Vec::new(),
                    run: None,
                    grants: Vec::new(),
                },
                0,
            ),
        };
        let journal = SessionJournal {
            store,
            name: name.to_owned(),
            fence: None,
            stored: Mutex::new(Stored {
                messages: restored.history.clone(),
                next_seq,
                run_open: restored.run.is_some(),
            }),
        };
        Ok((journal, restored))
    }

    /// This journal with its commits fenced by `lease` (taken on this session): once another
    /// worker took the session over, a commit fails with [`SessionError::LeaseLost`] and
    /// writes nothing — and the run, whose journal failed, stops before its next effect. A
    /// lease without an epoch (a store without epochs) leaves the journal as it is.
    pub fn with_lease(mut self, lease: &SessionLease) -> Self {
        self.fence = lease.fence().filter(|fence| fence.session == self.name);
        self
    }

    /// The session's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// One commit of `steps`, fenced when the journal has a lease. A commit that timed out has
    /// an unknown outcome (the statement may still commit when the server wakes); it is
    /// settled by [`SessionJournal::settle`] rather than left to fail the next append.
    async fn commit(&self, expected_next_seq: u64, steps: &[Step]) -> Result<()> {
        match self.append_once(expected_next_seq, steps).await {
            Err(error @ SessionError::Timeout { .. }) => {
                self.settle(expected_next_seq, steps, error).await
            }
            other => other,
        }
    }

    /// After a commit timed out: reload the session; when `steps` are there whole at
    /// `expected_next_seq` the commit happened and the run goes on; otherwise (not there, or
    /// the store still does not answer) the run stops with the timeout. A commit that lands
    /// even later makes the next writer's append a [`SessionError::Conflict`], never a fork.
    async fn settle(
        &self,
        expected_next_seq: u64,
        steps: &[Step],
        timed_out: SessionError,
    ) -> Result<()> {
        let landed = match self.store.load(&self.name).await {
            Ok(Some(session)) => usize::try_from(expected_next_seq)
                .ok()
                .and_then(|start| session.steps.get(start..start.checked_add(steps.len())?))
                .is_some_and(|stored| stored == steps),
            Ok(None) | Err(_) => false,
        };
        if landed {
            tracing::debug!(
                session = %self.name,
                "a commit that timed out had landed; the run goes on"
            );
            Ok(())
        } else {
            Err(timed_out)
        }
    }

    /// One append of `steps`, fenced when the journal has a lease.
    async fn append_once(&self, expected_next_seq: u64, steps: &[Step]) -> Result<()> {
        match &self.fence {
            Some(fence) => {
                self.store
                    .append_fenced(fence, expected_next_seq, steps)
                    .await
            }
            None => {
                self.store
                    .append(&self.name, expected_next_seq, steps)
                    .await
            }
        }
    }

    /// Make the stored history equal to `messages`: one atomic append of the new messages,
    /// after a `truncate` step when the history no longer starts with what is stored. This
    /// closes a run in progress (the history is what the run left): when the histories are
    /// equal, a `truncate` to the same length is written for that, else nothing.
    ///
    /// # Errors
    /// The store's errors.
    pub async fn sync_history(&self, messages: &[OpenaiChatMessage]) -> Result<()> {
        let mut stored = self.stored.lock().await;
        // Compared as values, not as JSON: most syncs add a turn to an unchanged history.
        let common = stored
            .messages
            .iter()
            .zip(messages)
            .take_while(|(stored, message)| stored == message)
            .count();
        let mut steps = Vec::new();
        let mut seq = stored.next_seq;
        if common < stored.messages.len() {
            steps.push(Step::new(seq, TRUNCATE, json!({ "len": common })));
            seq += 1;
        }
        let added = messages[common..]
            .iter()
            .map(to_json)
            .collect::<Result<Vec<_>>>()?;
        if !added.is_empty() {
            // Moved in, not serialised again: `json!` would copy every message.
            let mut payload = serde_json::Map::with_capacity(1);
            payload.insert("messages".to_owned(), Value::Array(added));
            steps.push(Step::new(seq, MESSAGES, Value::Object(payload)));
        }
        if steps.is_empty() && stored.run_open {
            steps.push(Step::new(seq, TRUNCATE, json!({ "len": common })));
        }
        if steps.is_empty() {
            return Ok(());
        }
        let count = steps.len() as u64;
        self.commit(stored.next_seq, &steps).await?;
        stored.next_seq += count;
        stored.run_open = false;
        stored.messages.truncate(common);
        stored.messages.extend_from_slice(&messages[common..]);
        Ok(())
    }

    /// Append one step of `kind`.
    async fn append(&self, kind: &str, payload: Value) -> Result<()> {
        let mut stored = self.stored.lock().await;
        let step = Step::new(stored.next_seq, kind, payload);
        self.commit(stored.next_seq, std::slice::from_ref(&step))
            .await?;
        stored.next_seq += 1;
        stored.run_open |= kind == RUN;
        Ok(())
    }
}

#[async_trait]
impl RunJournal for SessionJournal {
    async fn record(&self, entry: JournalEntry<'_>) -> std::result::Result<(), JournalError> {
        let written = match entry {
            JournalEntry::History(messages) => self.sync_history(messages).await,
            JournalEntry::Run(state) => match serde_json::to_value(state) {
                Ok(payload) => self.append(RUN, payload).await,
                Err(error) => Err(self.encode_error(error)),
            },
            JournalEntry::CallStarted {
                call_id,
                idempotency_key,
            } => {
                let payload = match idempotency_key {
                    Some(key) => json!({ "call_id": call_id, "idempotency_key": key }),
                    None => json!({ "call_id": call_id }),
                };
                self.append(CALL_STARTED, payload).await
            }
            JournalEntry::CallContinues {
                call_id,
                continuation,
            } => {
                self.append(
                    CALL_CONTINUES,
                    json!({ "call_id": call_id, "continuation": continuation }),
                )
                .await
            }
            JournalEntry::CallFinished {
                call_id,
                answer,
                media,
            } => {
                let payload = match media {
                    Some(media) => json!({ "call_id": call_id, "answer": answer, "media": media }),
                    None => json!({ "call_id": call_id, "answer": answer }),
                };
                self.append(CALL_FINISHED, payload).await
            }
            JournalEntry::CallUpdate { call_id, update } => {
                self.append(CALL_UPDATE, json!({ "call_id": call_id, "update": update }))
                    .await
            }
            child @ JournalEntry::Child { .. } => {
                match crate::session::child_steps::encode(&child) {
                    Ok((kind, payload)) => self.append(kind, payload).await,
                    Err(error) => Err(self.encode_error(error)),
                }
            }
        };
        written.map_err(|error| self.journal_error(error))
    }

    fn session(&self) -> Option<&str> {
        Some(&self.name)
    }

    /// Kept in the store's outputs table (`SessionStore::put_output`), when it has one.
    async fn keep_output(
        &self,
        id: &str,
        content: &str,
        tail_start: Option<usize>,
    ) -> Option<std::result::Result<(), JournalError>> {
        let output = KeptOutput {
            content: content.to_owned(),
            tail_start,
        };
        match self.store.put_output(&self.name, id, &output).await {
            Ok(true) => Some(Ok(())),
            Ok(false) => None,
            Err(error) => Some(Err(self.journal_error(error))),
        }
    }
}

/// Each grant is one `grant` step: a restarted process restores it from [`replay`].
#[async_trait]
impl GrantRecorder for SessionJournal {
    async fn record_grant(&self, grant: &SessionGrant) {
        let written = match serde_json::to_value(grant) {
            Ok(payload) => self.append(GRANT, payload).await,
            Err(error) => Err(self.encode_error(error)),
        };
        if let Err(error) = written {
            // The grant still holds in this process; a later one asks again.
            tracing::warn!(%error, tool = %grant.tool, "could not store a session grant");
        }
    }
}

impl SessionJournal {
    /// The outputs this session keeps, for `crate::context::ReadOutput::with_source`.
    pub fn outputs(&self) -> SessionOutputs {
        SessionOutputs::new(self.store.clone(), self.name.clone())
    }

    fn journal_error(&self, error: SessionError) -> JournalError {
        JournalError::new(
            format!(
                "could not record session {}",
                crate::display::escape_for_terminal(&self.name)
            ),
            error,
        )
    }
}

impl SessionJournal {
    fn encode_error(&self, error: serde_json::Error) -> SessionError {
        SessionError::InvalidStep {
            session: self.name.clone(),
            reason: format!("could not encode the run state: {error}"),
        }
    }
}

fn to_json(message: &OpenaiChatMessage) -> Result<Value> {
    serde_json::to_value(message).map_err(|error| SessionError::InvalidStep {
        session: String::new(),
        reason: format!("could not encode a message: {error}"),
    })
}
