//! [`BatchObserver`]: the run's watch on a tool batch's calls, from inside their futures
//! (the registry's [`CallObserver`]): each start journaled before its tool runs (unless it rode
//! ahead with the run state), each answer shaped by the answer pipeline and recorded, each
//! call's idempotency key and continuation handed to its tool.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use serde_json::Value;

use crate::run::answer::AnswerPipeline;
use crate::run::config::CycleConfig;
use crate::run::continued;
use crate::run::error::LlmError;
use crate::run::handle::journal::record;
use crate::run::idempotency;
use crate::run::journal::{JournalEntry, RunJournal};
use crate::run::state::RunState;
use crate::tools::context::{ToolContext, ToolEvents};
use crate::tools::outcome::CompletedCall;
use crate::tools::registry::CallObserver;
use crate::tools::streaming::ApprovalFeed;
use crate::vocab::{OpenaiChatMessage, ToolCall};

/// Which calls of a batch have started executing.
#[derive(Clone)]
pub(crate) struct StartedCalls(Arc<[AtomicBool]>);

impl StartedCalls {
    pub(crate) fn new(calls: usize) -> Self {
        StartedCalls((0..calls).map(|_| AtomicBool::new(false)).collect())
    }

    pub(crate) fn mark(&self, index: usize) {
        if let Some(flag) = self.0.get(index) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    pub(crate) fn get(&self, index: usize) -> bool {
        self.0
            .get(index)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

/// Watches a batch's calls from inside their futures: records each start (before the tool
/// runs) and each answer (shaped by the answer pipeline) in memory and in the journal.
pub(crate) struct BatchObserver<'a> {
    journal: Option<&'a dyn RunJournal>,
    /// Takes each finished call's result to what the model reads.
    answers: AnswerPipeline<'a>,
    /// The call ids, by position in the batch.
    ids: Vec<String>,
    /// The calls' idempotency keys, by position in the batch.
    keys: Vec<Option<String>>,
    /// Whether each call's start was journaled ahead, with the run state (by position).
    ahead: Vec<bool>,
    /// Calls not finished yet: the last one's answer rides with the run's next record.
    unfinished: AtomicUsize,
    /// The calls, by position in the batch (for the hooks after each call).
    calls: Vec<ToolCall>,
    pub(crate) started: StartedCalls,
    /// Deferred calls suspend the run (they are not answered, so not journaled).
    suspend: bool,
    /// The first journal failure: the run stops after the batch.
    failure: std::sync::Mutex<Option<LlmError>>,
    /// The calls' `execute_tool` spans, by position, each taken by its call's future.
    spans: std::sync::Mutex<Vec<tracing::Span>>,
    /// The media message of each finished call, by position, until the driver takes it.
    media: std::sync::Mutex<Vec<Option<OpenaiChatMessage>>>,
    /// What an earlier attempt of each call recorded to be continued from, by position.
    continuations: Vec<Option<Value>>,
    /// What each call recorded in this attempt, by position, until the driver takes it.
    recorded: std::sync::Mutex<Vec<Option<Value>>>,
    /// Where the calls' updates go.
    events: Option<ToolEvents>,
    /// The approval end of each watched call's streamed input, by position.
    feeds: std::sync::Mutex<Vec<Option<ApprovalFeed>>>,
}

impl<'a> BatchObserver<'a> {
    /// The observer of the calls at `positions` of `state`'s tool turn (`calls`, in that
    /// order), whose starts `ahead` says were journaled with the run state.
    pub(crate) fn new(
        config: &'a CycleConfig,
        journal: Option<&'a dyn RunJournal>,
        state: &RunState,
        positions: &[usize],
        calls: Vec<ToolCall>,
        ahead: Vec<bool>,
        suspend: bool,
    ) -> Self {
        BatchObserver {
            journal,
            answers: AnswerPipeline {
                config,
                journal,
                limit: state.rules.tool_output_limit,
                accepts_images: state.rules.accepts_images,
            },
            ids: calls.iter().map(|call| call.id.clone()).collect(),
            keys: idempotency::keys_of(state, positions),
            unfinished: AtomicUsize::new(positions.len()),
            ahead,
            calls,
            started: StartedCalls::new(positions.len()),
            suspend,
            failure: std::sync::Mutex::new(None),
            spans: std::sync::Mutex::new(Vec::new()),
            media: std::sync::Mutex::new(vec![None; positions.len()]),
            continuations: continued::of_batch(state, positions),
            recorded: std::sync::Mutex::new(vec![None; positions.len()]),
            events: None,
            feeds: std::sync::Mutex::new(Vec::new()),
        }
    }

    /// Where the calls report their updates, and the approval end of each watched call's
    /// streamed input (by position).
    pub(crate) fn with_updates(
        mut self,
        events: ToolEvents,
        feeds: Vec<Option<ApprovalFeed>>,
    ) -> Self {
        self.events = Some(events);
        self.feeds = std::sync::Mutex::new(feeds);
        self
    }

    /// The calls' `execute_tool` spans, by position.
    pub(crate) fn with_spans(self, spans: Vec<tracing::Span>) -> Self {
        *self.spans.lock().unwrap_or_else(|p| p.into_inner()) = spans;
        self
    }

    pub(crate) fn fail(&self, error: LlmError) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert(error);
    }

    pub(crate) fn failed(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    pub(crate) fn take_media(&self, position: usize) -> Option<OpenaiChatMessage> {
        let mut media = self.media.lock().unwrap_or_else(|p| p.into_inner());
        media.get_mut(position).and_then(Option::take)
    }

    pub(crate) fn take_continuation(&self, position: usize) -> Option<Value> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        recorded.get_mut(position).and_then(Option::take)
    }

    pub(crate) fn take_failure(&self) -> Option<LlmError> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }
}

#[async_trait::async_trait]
impl CallObserver for BatchObserver<'_> {
    async fn started(&self, position: usize) -> Result<(), String> {
        if self.failed() {
            return Err("the run's journal failed before this call".to_owned());
        }
        if self.ahead.get(position).copied().unwrap_or(false) {
            // Journaled with the run state before the batch.
            self.started.mark(position);
            return Ok(());
        }
        if let Some(id) = self.ids.get(position)
            && let Err(error) = record(
                self.journal,
                JournalEntry::CallStarted {
                    call_id: id,
                    idempotency_key: self.keys.get(position).and_then(Option::as_deref),
                },
            )
            .await
        {
            let reason = error.to_string();
            self.fail(error);
            return Err(reason);
        }
        self.started.mark(position);
        Ok(())
    }

    async fn finished(&self, position: usize, call: &mut CompletedCall) {
        let last = self.unfinished.fetch_sub(1, Ordering::AcqRel) == 1;
        if self.suspend && continued::waits(call) {
            return;
        }
        // Shaped before it is recorded: the journal keeps what the model reads.
        let message = self.answers.shape(self.calls.get(position), call).await;
        // The batch's last answer is not a commit of its own: the run's next record (the
        // history before the next request, or the suspended state) holds it.
        if !last
            && !self.failed()
            && let Some(id) = self.ids.get(position)
            && let Err(error) = record(
                self.journal,
                JournalEntry::CallFinished {
                    call_id: id,
                    answer: &call.answer,
                    media: message.as_ref(),
                },
            )
            .await
        {
            self.fail(error);
        }
        if message.is_some() {
            let mut media = self.media.lock().unwrap_or_else(|p| p.into_inner());
            if let Some(slot) = media.get_mut(position) {
                *slot = message;
            }
        }
    }

    fn continuation(&self, position: usize) -> Option<Value> {
        self.continuations.get(position).cloned().flatten()
    }

    async fn continues(&self, position: usize, continuation: Value) -> Result<(), String> {
        let Some(id) = self.ids.get(position) else {
            return Ok(());
        };
        let entry = JournalEntry::CallContinues {
            call_id: id,
            continuation: &continuation,
        };
        record(self.journal, entry).await.map_err(|error| {
            let reason = error.to_string();
            self.fail(error);
            reason
        })?;
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(slot) = recorded.get_mut(position) {
            *slot = Some(continuation);
        }
        Ok(())
    }

    fn span(&self, position: usize) -> tracing::Span {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        spans
            .get_mut(position)
            .map(|span| std::mem::replace(span, tracing::Span::none()))
            .unwrap_or_else(tracing::Span::none)
    }

    fn context(&self, position: usize) -> Option<ToolContext> {
        let key = self.keys.get(position)?.as_deref()?;
        let mut context = ToolContext::new(self.ids.get(position)?.clone(), key);
        if let Some(events) = &self.events {
            context = context.with_events(events.for_call());
        }
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        Some(match feeds.get_mut(position).and_then(Option::take) {
            Some(feed) => context.with_approval_feed(feed),
            None => context,
        })
    }
}
