//! The driver: performs each [`Effect`] of the [`step`] function — the model request, the
//! tool calls through the registry, approvals — feeds the result back, and yields the
//! [`StreamEvent`]s a streaming caller sees, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use futures::{Stream, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use crate::llm::event::StreamEvent;
use crate::llm::model::ChatModel;
use crate::run::answer::AnswerPipeline;
use crate::run::context_turn;
use crate::run::conversation::Conversation;
use crate::run::error::LlmError;
use crate::run::journal::{JournalEntry, RunJournal};
use crate::run::model_turn::{Mode, TurnItem};
use crate::run::output_schema::TypedRun;
use crate::run::state::{Phase, RunRules, RunState};
use crate::run::step::{
    Decision, Effect, Input, ToolBatch, relaxed_tool_choice, rerun_idempotent, step,
};
use crate::run::usage::UsageTally;
use crate::run::{budget, hooks, idempotency, journal_batch, telemetry};
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::call_digest::CallDigest;
use crate::tools::context::ToolContext;
use crate::tools::error::ToolError;
use crate::tools::outcome::{CompletedCall, ToolOutcome};
use crate::tools::registry::{CallObserver, ToolCallRequest, ToolRegistry};
use crate::vocab::{
    ChatResponse, FinishReason, OpenaiChatMessage, ToolAnswer, ToolCall, ToolDefinition,
};

/// What a run yields: events for streaming callers, then exactly one `Done`, `Suspended` or
/// `Failed`.
pub(crate) enum LoopItem {
    Event(StreamEvent),
    Done(Box<ChatResponse>),
    Suspended(Box<RunState>),
    Failed(LlmError),
}

/// Where a run starts.
pub(crate) enum Start {
    /// A new run over the cycle's history: this prompt, or none (continue the history).
    Prompt(Option<String>),
    /// A saved run (suspended, or stopped mid-turn), with decisions on its pending approvals.
    State {
        state: Box<RunState>,
        decisions: Vec<Decision>,
    },
}

/// How to drive a run.
pub(crate) struct Drive<'a> {
    pub start: Start,
    /// The tools (none: tool calls are returned, not run).
    pub registry: Option<&'a ToolRegistry>,
    /// Where progress is recorded before each effect.
    pub journal: Option<&'a dyn RunJournal>,
    /// Whether a deferred approval suspends the run (else it refuses the call).
    pub suspend: bool,
    pub mode: Mode,
    /// A final-answer tool (typed output, tool mode): offered besides the registry's tools,
    /// answered by the run itself, and the run ends after the turn that calls it (see
    /// [`RunState::output_tool`]).
    pub output_tool: Option<ToolDefinition>,
    /// A typed run's schema and mode, kept in the state (see [`RunState::typed`]).
    pub typed: Option<TypedRun>,
}

impl<'a> Drive<'a> {
    /// The design's calls: a prompt (or none), tools (or none), no journal, no suspension.
    pub(crate) fn plain(
        prompt: Option<String>,
        registry: Option<&'a ToolRegistry>,
        mode: Mode,
    ) -> Self {
        Drive {
            start: Start::Prompt(prompt),
            registry,
            journal: None,
            suspend: false,
            mode,
            output_tool: None,
            typed: None,
        }
    }
}

/// A run's state, owned while the run goes on; the conversation gets its committed history
/// back however the run ends — finished, failed, suspended, or dropped mid-turn (cancelled: a
/// turn in which some tool started is kept, see [`step`]).
struct Run<'a> {
    history: &'a mut Vec<OpenaiChatMessage>,
    usage: &'a mut UsageTally,
    state: RunState,
    /// The batch in flight: which of its calls' tools started (set as each starts, before it
    /// finishes) and their positions in the turn.
    in_flight: Option<(StartedCalls, Vec<usize>)>,
    /// The run suspended: its state went to the caller, nothing is cancelled.
    suspended: bool,
}

impl Run<'_> {
    fn step(&mut self, input: Input) -> Effect {
        let placeholder = RunState::new(Vec::new(), self.state.rules, false);
        let (state, effect) = step(std::mem::replace(&mut self.state, placeholder), input);
        self.state = state;
        effect
    }

    /// Copy the started flags of the batch in flight into the state.
    fn collect_started(&mut self) {
        if let Some((started, positions)) = self.in_flight.take() {
            for (index, &position) in positions.iter().enumerate() {
                if started.get(index) {
                    self.state.mark_started(position);
                }
            }
        }
    }
}

impl Drop for Run<'_> {
    fn drop(&mut self) {
        let ended = matches!(
            self.state.phase,
            Phase::Finished { .. } | Phase::Failed { .. }
        );
        if !ended && !self.suspended {
            self.collect_started();
            let _ = self.step(Input::Cancel);
        }
        let committed = self.state.committed.min(self.state.messages.len());
        self.state.messages.truncate(committed);
        *self.history = std::mem::take(&mut self.state.messages);
        self.usage.record(budget::run_usage(&self.state));
    }
}

/// Which calls of a batch have started executing.
#[derive(Clone)]
struct StartedCalls(Arc<[AtomicBool]>);

impl StartedCalls {
    fn new(calls: usize) -> Self {
        StartedCalls((0..calls).map(|_| AtomicBool::new(false)).collect())
    }

    fn mark(&self, index: usize) {
        if let Some(flag) = self.0.get(index) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    fn get(&self, index: usize) -> bool {
        self.0
            .get(index)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }
}

/// Record `entry` in `journal` (if any), as an [`LlmError::Journal`] when it fails.
async fn record(journal: Option<&dyn RunJournal>, entry: JournalEntry<'_>) -> Result<(), LlmError> {
    let Some(journal) = journal else {
        return Ok(());
    };
    journal
        .record(entry)
        .await
        .map_err(|error| LlmError::Journal {
            message: error_chain(&error),
        })
}

/// Record `state` without its history ([`JournalEntry::Run`]); without a journal nothing is
/// cloned (this is on every tool turn).
async fn record_run(journal: Option<&dyn RunJournal>, state: &RunState) -> Result<(), LlmError> {
    match journal {
        Some(_) => record(journal, JournalEntry::Run(&state.without_messages())).await,
        None => Ok(()),
    }
}

/// `error` and its sources, `: `-separated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// Drive one run of `cycle` as `drive` says.
pub(crate) fn drive<'a>(
    cycle: &'a mut Conversation,
    drive: Drive<'a>,
) -> impl Stream<Item = LoopItem> + Send + 'a {
    let Conversation {
        model,
        config,
        messages,
        context,
        usage,
    } = cycle;
    let model: &'a dyn ChatModel = &**model;
    let config = &*config;
    let Drive {
        start,
        registry,
        journal,
        suspend,
        mode,
        output_tool,
        typed,
    } = drive;
    async_stream::stream! {
        let (state, mut input) = match start {
            Start::Prompt(prompt) => {
                let mut state = RunState::new(std::mem::take(messages), RunRules::of(config), registry.is_some());
                state.output_tool = output_tool.as_ref().map(|tool| tool.name().to_owned());
                state.typed = typed;
                (state, Input::Start { prompt })
            }
            Start::State { state, decisions } => {
                let mut state = *state;
                if typed.is_some() {
                    state.typed = typed;
                }
                if let Some(registry) = registry {
                    rerun_idempotent(&mut state, |name| registry.get(name).is_some_and(|tool| tool.idempotent()));
                    remember_grants(registry, state.pending_approvals(), &decisions);
                }
                // The saved run's history replaces the cycle's.
                messages.clear();
                let input = if decisions.is_empty() {
                    Input::Start { prompt: None }
                } else {
                    Input::Decisions(decisions)
                };
                (state, input)
            }
        };
        let mut run = Run { history: messages, usage, state, in_flight: None, suspended: false };
        // Built once per run, not per turn: a registry's schemas can be large.
        let mut tools = match registry {
            Some(registry) => registry.exposed_definitions(model.provider(), &config.model),
            None => Vec::new(),
        };
        tools.extend(output_tool);
        let relaxed = relaxed_tool_choice(&config.options);
        let agent_span = telemetry::agent_span(model.provider(), &config.model);
        let server = telemetry::server_of(model);
        if let Input::Decisions(decisions) = &input {
            for decision in decisions {
                hooks::caller_decision(&agent_span, &decision.call_id, &decision.answer);
            }
        }
        loop {
            match run.step(input) {
                Effect::RequestModel(request) => {
                    // The history (with the prompt) is recorded before the request: a crash
                    // during it can be resumed.
                    if let Err(error) = record(journal, JournalEntry::History(&run.state.messages)).await {
                        input = Input::ModelFailed(error);
                        continue;
                    }
                    let options = match &relaxed {
                        Some(relaxed) if request.tool_choice_relaxed => relaxed,
                        _ => &config.options,
                    };
                    let mut reply = None;
                    let chat_span = telemetry::chat_span(&agent_span, model.provider(), &config.model, server.as_ref(), &run.state.messages);
                    {
                        // The context engine: repair, estimate, compact; retry once on overflow. The
                        // hooks may edit what is sent (not the history).
                        let turn = context_turn::request(&mut run.state, &mut *context, model, config, &tools, options, mode);
                        let mut items = std::pin::pin!(turn);
                        while let Some(item) = items.next().instrument(chat_span.clone()).await {
                            match item {
                                TurnItem::Event(event) => {
                                    hooks::on_event(&config.hooks, &agent_span, &event).await;
                                    yield LoopItem::Event(event);
                                }
                                TurnItem::Reply(result) => reply = Some(result),
                            }
                        }
                    }
                    if let Some(reply) = &reply {
                        telemetry::record_reply(&chat_span, reply.as_ref());
                    }
                    drop(chat_span);
                    if let Some(Ok(reply)) = &reply {
                        config.hooks.after_model_response(reply).await;
                    }
                    input = match reply {
                        Some(Ok(reply)) => Input::ModelReplied(Box::new(reply)),
                        Some(Err(error)) => Input::ModelFailed(error),
                        None => Input::ModelFailed(LlmError::Other("the model request ended without a reply".to_owned())),
                    };
                }
                Effect::RunTools(batch) => {
                    let Some(registry) = registry else {
                        input = Input::ToolsDone;
                        continue;
                    };
                    let mut batch = batch;
                    for (position, answer) in hooks::before_tools(&config.hooks, &mut batch).instrument(agent_span.clone()).await {
                        run.state.set_answer(position, answer);
                    }
                    // Keys before the state is journaled: the journal holds each call's key
                    // before its tool can start, and a resumed call keeps it.
                    idempotency::assign_keys(&mut run.state, journal.and_then(|journal| journal.session()));
                    // The starts of the calls that will not ask anyone ride with the run state.
                    let ahead = journal_batch::starts_ahead(registry, &batch, journal.is_some());
                    let recorded = match journal {
                        Some(_) => record(journal, JournalEntry::Run(&journal_batch::state_with_starts(&run.state, &batch.run, &ahead))).await,
                        None => Ok(()),
                    };
                    if let Err(error) = recorded {
                        input = Input::Abort(error);
                        continue;
                    }
                    for event in announce(&batch) {
                        yield LoopItem::Event(event);
                    }
                    // Run the calls concurrently; report each as it finishes, answer in call order.
                    let ToolBatch { calls, run: positions, approved, approved_for, .. } = batch;
                    // An approved call carries the digest it was approved for (if known).
                    let approval = |p: usize| approved.iter().position(|&a| a == p).map(|i| approved_for.get(i).cloned().flatten());
                    let requests: Vec<(ToolCallRequest, Option<Option<CallDigest>>)> = positions
                        .iter()
                        .filter_map(|&p| calls.get(p).map(|call| (ToolCallRequest::from(call), approval(p))))
                        .collect();
                    let mut tool_spans: Vec<_> = positions.iter().filter_map(|&p| calls.get(p)).map(|call| telemetry::tool_span(&agent_span, call)).collect();
                    let observer = BatchObserver {
                        journal,
                        answers: AnswerPipeline {
                            config,
                            journal,
                            limit: run.state.rules.tool_output_limit,
                            accepts_images: run.state.rules.accepts_images,
                        },
                        ids: requests.iter().map(|(call, _)| call.id.clone()).collect(),
                        keys: idempotency::keys_of(&run.state, &positions),
                        unfinished: AtomicUsize::new(positions.len()),
                        ahead,
                        calls: positions.iter().filter_map(|&p| calls.get(p).cloned()).collect(),
                        started: StartedCalls::new(positions.len()),
                        suspend,
                        failure: std::sync::Mutex::new(None),
                        spans: std::sync::Mutex::new(tool_spans.clone()),
                        media: std::sync::Mutex::new(vec![None; positions.len()]),
                    };
                    run.in_flight = Some((observer.started.clone(), positions.clone()));
                    let mut deferred = Vec::new();
                    {
                        let mut completed = registry.run_stream_observed(requests, &observer);
                        while let Some((index, call)) = completed.next().instrument(agent_span.clone()).await {
                            let Some(&position) = positions.get(index) else {
                                continue;
                            };
                            if let Some(request) = deferred_request(&call).filter(|_| suspend) {
                                deferred.push(request.clone());
                                continue;
                            }
                            let message = observer.take_media(index);
                            let (event, answer) = completed_event(call);
                            if let Some(span) = tool_spans.get_mut(index) {
                                telemetry::record_answer(span, &answer);
                                *span = tracing::Span::none();
                            }
                            run.state.set_answer(position, answer);
                            if let Some(message) = message {
                                run.state.record_media(position, message);
                            }
                            yield LoopItem::Event(event);
                        }
                    }
                    let failure = observer.take_failure();
                    run.collect_started();
                    input = match failure {
                        Some(error) => Input::Abort(error),
                        None if !deferred.is_empty() => Input::ToolsDeferred(deferred),
                        None => Input::ToolsDone,
                    };
                }
                Effect::AskApproval(requests) => {
                    // A suspended run resumed without decisions: its approver is asked now.
                    let mut decisions = Vec::with_capacity(requests.len());
                    for request in requests {
                        let answer = match registry {
                            Some(registry) => registry.ask_pending(&request).instrument(agent_span.clone()).await,
                            None => ApprovalDecision::Defer,
                        };
                        decisions.push(Decision::for_request(&request, answer));
                    }
                    input = Input::Decisions(decisions);
                }
                Effect::Suspend(requests) => {
                    if !suspend {
                        // This caller cannot wait: the deferred calls are refused.
                        input = Input::Decisions(requests.into_iter().map(|request| Decision::deny(
                            request.call_id,
                            Some("its approval was deferred and this run cannot wait for a decision".to_owned()),
                        )).collect());
                        continue;
                    }
                    if let Err(error) = record_run(journal, &run.state).await {
                        input = Input::Abort(error);
                        continue;
                    }
                    run.suspended = true;
                    yield LoopItem::Suspended(Box::new(run.state.clone()));
                    return;
                }
                Effect::Done(reply) => {
                    if let Err(error) = record(journal, JournalEntry::History(run.state.committed_messages())).await {
                        yield LoopItem::Failed(error);
                        return;
                    }
                    telemetry::record_usage(&agent_span, reply.usage);
                    let reason = reply.stop_reason.clone().unwrap_or(FinishReason::Stop);
                    yield LoopItem::Event(StreamEvent::TurnComplete { reason, usage: reply.usage });
                    yield LoopItem::Done(reply);
                    return;
                }
                Effect::Fail(error) => {
                    // What the run committed (a failure drops the prompt) is what the journal keeps.
                    if let Err(journal_error) = record(journal, JournalEntry::History(run.state.committed_messages())).await {
                        tracing::warn!(error = %journal_error, "could not record the failed run's history");
                    }
                    telemetry::record_usage(&agent_span, run.state.usage);
                    telemetry::record_error(&agent_span, &error);
                    config.hooks.on_error(&error).await;
                    yield LoopItem::Failed(error);
                    return;
                }
            }
        }
    }
}

/// Watches a batch's calls from inside their futures: records each start (before the tool
/// runs) and each answer (shaped by the answer pipeline) in memory and in the journal.
struct BatchObserver<'a> {
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
    started: StartedCalls,
    /// Deferred calls suspend the run (they are not answered, so not journaled).
    suspend: bool,
    /// The first journal failure: the run stops after the batch.
    failure: std::sync::Mutex<Option<LlmError>>,
    /// The calls' `execute_tool` spans, by position, each taken by its call's future.
    spans: std::sync::Mutex<Vec<tracing::Span>>,
    /// The media message of each finished call, by position, until the driver takes it.
    media: std::sync::Mutex<Vec<Option<OpenaiChatMessage>>>,
}

impl BatchObserver<'_> {
    fn fail(&self, error: LlmError) {
        let mut failure = self.failure.lock().unwrap_or_else(|p| p.into_inner());
        failure.get_or_insert(error);
    }

    fn failed(&self) -> bool {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    fn take_media(&self, position: usize) -> Option<OpenaiChatMessage> {
        let mut media = self.media.lock().unwrap_or_else(|p| p.into_inner());
        media.get_mut(position).and_then(Option::take)
    }

    fn take_failure(&self) -> Option<LlmError> {
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
        if self.suspend && deferred_request(call).is_some() {
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

    fn span(&self, position: usize) -> tracing::Span {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        spans
            .get_mut(position)
            .map(|span| std::mem::replace(span, tracing::Span::none()))
            .unwrap_or_else(tracing::Span::none)
    }

    fn context(&self, position: usize) -> Option<ToolContext> {
        let key = self.keys.get(position)?.as_deref()?;
        Some(ToolContext::new(self.ids.get(position)?.clone(), key))
    }
}

/// What the approver was asked, for a call it deferred.
fn deferred_request(call: &CompletedCall) -> Option<&ApprovalRequest> {
    match &call.outcome {
        ToolOutcome::Refused {
            reason: ToolError::ApprovalDeferred { request },
        } => Some(request),
        _ => None,
    }
}

/// Remember the session-wide grants among `decisions` (on `pending`'s calls) in the registry.
fn remember_grants(registry: &ToolRegistry, pending: &[ApprovalRequest], decisions: &[Decision]) {
    for decision in decisions {
        if let Some(request) = pending.iter().find(|r| r.call_id == decision.call_id) {
            registry.remember_grant(request, &decision.answer);
        }
    }
}

/// The events that open a tool batch: every call started, the model's turn complete (after a
/// reply), and the calls the run answered itself.
fn announce(batch: &ToolBatch) -> Vec<StreamEvent> {
    let mut events = Vec::with_capacity(batch.calls.len() + batch.answered.len() + 1);
    for call in &batch.calls {
        events.push(StreamEvent::ToolExecutionStarted {
            id: call.id.clone(),
            tool_name: call.function.name.clone(),
            input: parse_input(&call.function.arguments),
        });
    }
    if batch.from_reply {
        events.push(StreamEvent::TurnComplete {
            reason: FinishReason::ToolCalls,
            usage: batch.usage,
        });
    }
    for (position, answer) in &batch.answered {
        if let Some(call) = batch.calls.get(*position) {
            events.push(StreamEvent::ToolExecutionCompleted {
                id: call.id.clone(),
                tool_name: call.function.name.clone(),
                output: Value::String(answer.content.clone()),
                is_error: answer.is_error,
                duration_ms: 0,
            });
        }
    }
    events
}

/// The arguments as JSON, or the raw text as a JSON string when it is not valid JSON.
fn parse_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// The event for a finished call, and its answer; the (possibly large) output moves into the
/// event instead of being copied.
fn completed_event(call: CompletedCall) -> (StreamEvent, ToolAnswer) {
    let is_error = call.outcome.is_error();
    let event = StreamEvent::ToolExecutionCompleted {
        id: call.id,
        tool_name: call.tool_name,
        output: match call.outcome.into_result() {
            Ok(value) => value,
            Err(_) => Value::String(call.answer.content.clone()),
        },
        is_error,
        duration_ms: u64::try_from(call.duration.as_millis()).unwrap_or(u64::MAX),
    };
    (event, call.answer)
}
