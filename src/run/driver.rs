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
use crate::run::config::CycleConfig;
use crate::run::context_turn;
use crate::run::continued;
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
use crate::team::child::{ChildCall, ChildItem};
use crate::team::tools::{self as team_tools, TRANSFER_PREFIX, task_of};
use crate::team::{
    Agent, AgentCell, AgentScoped, GuardrailStage, Team, agent_registry, charge, check_guardrails,
    child_limits, current_agent, handoff_filter,
};
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::call_digest::CallDigest;
use crate::run::call_updates::{self, CallUpdates};
use crate::run::input_stream::InputStreams;
use crate::tools::context::{ToolContext, ToolEvents};
use crate::tools::event::ToolCallUpdate;
use crate::tools::streaming::ApprovalFeed;
use crate::tools::error::ToolError;
use crate::tools::outcome::CompletedCall;
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
    /// A team's run: its agents, and where this run is in the tree.
    pub team: Option<TeamRun<'a>>,
}

/// Where a run is in a team's tree of runs.
#[derive(Clone)]
pub(crate) struct TeamRun<'a> {
    pub team: &'a Team,
    /// The agent the run starts with, unless the state or the history's last handoff says
    /// another.
    pub entry: String,
    /// The path of the agent that called this run (`None`: the root run).
    pub parent_path: Option<String>,
    /// How deep in the tree this run is (the root: 0).
    pub depth: u32,
    /// The parent's `execute_tool` span of the call that runs this one.
    pub parent_span: Option<tracing::Span>,
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
            team: None,
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
        model: cycle_model,
        config,
        messages,
        context,
        usage,
    } = cycle;
    let cycle_model: &'a Arc<dyn ChatModel> = &*cycle_model;
    let base_config: &'a CycleConfig = &*config;
    let Drive {
        start,
        registry,
        journal,
        suspend,
        mode,
        output_tool,
        typed,
        team,
    } = drive;
    let agent_cell = AgentCell::default();
    let scope = Arc::clone(&agent_cell);
    let stream = async_stream::stream! {
        // What tools report while they run, and the calls whose arguments stream.
        let call_updates = CallUpdates::new();
        let mut input_streams = InputStreams::default();
        let mut model: &dyn ChatModel = &**cycle_model;
        let mut model_arc: Arc<dyn ChatModel> = Arc::clone(cycle_model);
        let mut config: &CycleConfig = base_config;
        // A team's run always has a registry: its agents are tools.
        let no_tools = ToolRegistry::new();
        let registry = registry.or_else(|| team.as_ref().map(|_| &no_tools));
        let (mut state, mut input) = match start {
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
                    let team_agent = team.as_ref().and_then(|team| {
                        let name = state.agent.as_deref().unwrap_or(&team.entry);
                        team.team.agent(name)
                    });
                    // A sub-agent's call continues its child: it is safe to run again.
                    rerun_idempotent(&mut state, |name| {
                        team_agent.is_some_and(|agent| agent.agents().iter().any(|a| a == name))
                            || registry.is_idempotent(name)
                    });
                    continued::rerun_continued(&mut state);
                    remember_grants(registry, state.pending_approvals(), &decisions);
                    continued::give_up_denied(&state, &decisions, registry).await;
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
        // The agent the run is with: as saved, else where the history's last handoff went,
        // else the one the request names.
        let mut agent: Option<&Agent> = None;
        if let Some(team) = &team {
            let name = state
                .agent
                .clone()
                .or_else(|| current_agent(&state.messages).filter(|name| team.team.agent(name).is_some()))
                .unwrap_or_else(|| team.entry.clone());
            agent = team.team.agent(&name);
            state.agent = Some(name);
        }
        let path_of = |name: &str| match team.as_ref().and_then(|team| team.parent_path.as_deref()) {
            Some(parent) => format!("{parent}/{name}"),
            None => name.to_owned(),
        };
        let mut run = Run { history: messages, usage, state, in_flight: None, suspended: false };
        let mut narrowed: Option<ToolRegistry> = None;
        if let Some(agent) = agent {
            (model, model_arc, config) = agent_model(agent, cycle_model, base_config);
            narrowed = registry.and_then(|registry| agent_registry(registry, agent, &path_of(agent.name())));
            set_system_prompt(&mut run.state, agent.instructions());
            *agent_cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::from(path_of(agent.name())));
        }
        // Built once per run (and per handoff), not per turn: a registry's schemas can be large.
        let mut tools = offered_tools(narrowed.as_ref().or(registry), agent, team.as_ref().map(|t| t.team), model, config, output_tool.as_ref());
        let mut relaxed = relaxed_tool_choice(&config.options);
        let agent_span = telemetry::agent_span(
            team.as_ref().and_then(|team| team.parent_span.as_ref()),
            model.provider(),
            &config.model,
            agent.map(Agent::name),
        );
        let mut server = telemetry::server_of(model);
        if let Input::Decisions(decisions) = &input {
            for decision in decisions {
                hooks::caller_decision(&agent_span, &decision.call_id, &decision.answer);
            }
        }
        // Input guardrails: before the model sees the prompt.
        if let (Some(agent), Input::Start { prompt: Some(prompt) }) = (agent, &input)
            && let Some(error) = check_guardrails(agent, &path_of(agent.name()), GuardrailStage::Input, prompt).await
        {
            yield LoopItem::Failed(error);
            return;
        }
        // A handoff made in the last tool turn, applied before the next request.
        let mut handoff: Option<String> = None;
        loop {
            match run.step(input) {
                Effect::RequestModel(request) => {
                    // A new reply: nothing of an earlier one streams on.
                    input_streams.reset();
                    if let Some(to) = handoff.take()
                        && let Some(team) = &team
                        && let Some(next) = team.team.agent(&to)
                    {
                        let from = run.state.agent.clone().unwrap_or_default();
                        run.state.agent = Some(to.clone());
                        if run.state.committed == run.state.messages.len() {
                            let history = std::mem::take(&mut run.state.messages);
                            run.state.messages = handoff_filter(history, next.handoff_history());
                            run.state.committed = run.state.messages.len();
                        }
                        agent = Some(next);
                        (model, model_arc, config) = agent_model(next, cycle_model, base_config);
                        narrowed = registry.and_then(|registry| agent_registry(registry, next, &path_of(next.name())));
                        set_system_prompt(&mut run.state, next.instructions());
                        tools = offered_tools(narrowed.as_ref().or(registry), agent, Some(team.team), model, config, output_tool.as_ref());
                        relaxed = relaxed_tool_choice(&config.options);
                        server = telemetry::server_of(model);
                        *agent_cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::from(path_of(&to)));
                        yield LoopItem::Event(StreamEvent::Handoff { from: path_of(&from), to: path_of(&to) });
                    }
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
                                    let streamed = input_streams.on_event(&event, narrowed.as_ref().or(registry), call_updates.events());
                                    hooks::on_event(&config.hooks, &agent_span, &event).await;
                                    yield LoopItem::Event(event);
                                    if let Some(update) = streamed {
                                        yield LoopItem::Event(update);
                                    }
                                    for (id, update) in call_updates.drain() {
                                        yield LoopItem::Event(call_updates::deliver(journal, id, update).await);
                                    }
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
                    // Sub-agents narrow the run's tools for themselves: each agent's list
                    // selects among what the run may use, under every gate of the run.
                    let base_registry = registry;
                    let Some(registry) = narrowed.as_ref().or(registry) else {
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
                    let mut ahead = journal_batch::starts_ahead(registry, &batch, journal.is_some());
                    // A handoff is answered by the run itself and never starts: one cut off by
                    // a crash is made again, not answered as interrupted.
                    for (flag, &position) in ahead.iter_mut().zip(&batch.run) {
                        if batch.calls.get(position).is_some_and(|call| matches!(team_call(agent, call), Some(TeamCall::Handoff(_)))) {
                            *flag = false;
                        }
                    }
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
                    // The team's own calls: a handoff is answered here, a sub-agent runs as a
                    // child next to the registry's calls.
                    let (team_positions, positions): (Vec<usize>, Vec<usize>) = positions
                        .into_iter()
                        .partition(|&p| calls.get(p).is_some_and(|call| team_call(agent, call).is_some()));
                    let mut children = Vec::new();
                    for &position in &team_positions {
                        let Some(call) = calls.get(position) else { continue };
                        match team_call(agent, call) {
                            Some(TeamCall::Handoff(to)) => {
                                let answer = if let Some(first) = &handoff {
                                    ToolAnswer::error(format_args!(
                                        "the conversation already goes to agent '{first}' in this turn: one handoff per turn"
                                    ))
                                } else {
                                    handoff = Some(to.clone());
                                    ToolAnswer::ok(format!("Transferred to agent '{to}'; it answers from now on."))
                                };
                                yield LoopItem::Event(StreamEvent::ToolExecutionCompleted {
                                    id: call.id.clone(),
                                    tool_name: call.function.name.clone(),
                                    output: Value::String(answer.content.clone()),
                                    is_error: answer.is_error,
                                    duration_ms: 0,
                                });
                                run.state.set_answer(position, answer);
                            }
                            Some(TeamCall::Agent) => children.push(position),
                            None => {}
                        }
                    }
                    let mut team_failure = None;
                    let mut child_streams = Vec::with_capacity(children.len());
                    if let Some(team) = &team {
                        // The parent's history with this run's prompt (the calling turn is not in it yet).
                        let history = run.state.messages.clone();
                        let parent = path_of(agent.map_or("", Agent::name));
                        for &position in &children {
                            let Some(call) = calls.get(position) else { continue };
                            let Some(child) = team.team.agent(&call.function.name) else {
                                // A team that was not checked names an agent it does not have.
                                let answer = ToolAnswer::error(format_args!("no agent named '{}' in the team", call.function.name));
                                yield LoopItem::Event(StreamEvent::ToolExecutionCompleted {
                                    id: call.id.clone(),
                                    tool_name: call.function.name.clone(),
                                    output: Value::String(answer.content.clone()),
                                    is_error: true,
                                    duration_ms: 0,
                                });
                                run.state.set_answer(position, answer);
                                continue;
                            };
                            let key = run
                                .state
                                .turn_mut()
                                .and_then(|turn| turn.calls.get(position))
                                .and_then(|turn_call| turn_call.idempotency_key.clone());
                            if let Err(error) = record(journal, JournalEntry::CallStarted { call_id: &call.id, idempotency_key: key.as_deref() }).await {
                                team_failure = Some(error);
                                break;
                            }
                            run.state.mark_started(position);
                            let stored = run
                                .state
                                .turn_mut()
                                .and_then(|turn| turn.calls.get_mut(position))
                                .and_then(|turn_call| turn_call.child.take());
                            let span = telemetry::tool_span(&agent_span, call);
                            let stream = crate::team::child::run(ChildCall {
                                team: team.team,
                                agent: child,
                                path: format!("{parent}/{}", child.name()),
                                depth: team.depth + 1,
                                parent_model: Arc::clone(&model_arc),
                                parent_config: config,
                                registry: base_registry,
                                journal,
                                call_id: call.id.clone(),
                                task: task_of(child, &call.function.arguments),
                                parent_history: history.clone(),
                                stored,
                                limits: child_limits(child.usage_limits(), &run.state),
                                suspend,
                                mode,
                                span: span.clone(),
                            });
                            child_streams.push(stream.map(move |item| BatchItem::Child(position, item, span.clone())));
                        }
                    }
                    let child_limit = registry.concurrency_limit().unwrap_or(child_streams.len()).max(1);
                    let children_stream = futures::stream::iter(child_streams).flatten_unordered(child_limit);
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
                        failure: std::sync::Mutex::new(team_failure),
                        spans: std::sync::Mutex::new(tool_spans.clone()),
                        media: std::sync::Mutex::new(vec![None; positions.len()]),
                        continuations: continued::of_batch(&run.state, &positions),
                        recorded: std::sync::Mutex::new(vec![None; positions.len()]),
                        events: call_updates.events().clone(),
                        feeds: std::sync::Mutex::new(requests.iter().map(|(call, _)| input_streams.take_feed(&call.id)).collect()),
                    };
                    run.in_flight = Some((observer.started.clone(), positions.clone()));
                    let mut deferred = Vec::new();
                    {
                        let completed = registry
                            .run_stream_observed(requests, &observer)
                            .map(|(index, call)| BatchItem::Tool(index, Box::new(call)));
                        let mut completed = futures::stream::select(completed, children_stream);
                        // The calls' updates as they come, until the last call finished.
                        let mut updates = std::pin::pin!(call_updates.stream());
                        loop {
                            let item = tokio::select! {
                                item = completed.next().instrument(agent_span.clone()) => match item {
                                    Some(item) => item,
                                    None => break,
                                },
                                Some((id, update)) = updates.next() => BatchItem::Update(id, update),
                            };
                            match item {
                                BatchItem::Update(id, update) => {
                                    yield LoopItem::Event(call_updates::deliver(journal, id, update).await);
                                }
                                BatchItem::Tool(index, call) => {
                                    // What the call reported comes before its end.
                                    for (id, update) in call_updates.drain() {
                                        yield LoopItem::Event(call_updates::deliver(journal, id, update).await);
                                    }
                                    let call = *call;
                                    let Some(&position) = positions.get(index) else {
                                        continue;
                                    };
                                    if suspend && let Some(request) = continued::waiting_request(&call, registry) {
                                        // A call waiting for input goes on from what it recorded.
                                        if let Some(continuation) = observer.take_continuation(index) {
                                            run.state.record_continuation_id(&call.id, continuation);
                                        }
                                        deferred.push(request);
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
                                BatchItem::Child(_, ChildItem::Event(event), _) => {
                                    yield LoopItem::Event(event);
                                }
                                BatchItem::Child(position, ChildItem::Done { answer, usage, duration }, span) => {
                                    charge(&mut run.state, usage);
                                    let answer = crate::vocab::truncate_answer(answer, run.state.rules.tool_output_limit);
                                    let Some(call) = calls.get(position) else { continue };
                                    if let Err(error) = record(journal, JournalEntry::CallFinished { call_id: &call.id, answer: &answer, media: None }).await {
                                        observer.fail(error);
                                    }
                                    telemetry::record_answer(&span, &answer);
                                    yield LoopItem::Event(StreamEvent::ToolExecutionCompleted {
                                        id: call.id.clone(),
                                        tool_name: call.function.name.clone(),
                                        output: Value::String(answer.content.clone()),
                                        is_error: answer.is_error,
                                        duration_ms: u64::try_from(duration.as_millis()).unwrap_or(u64::MAX),
                                    });
                                    run.state.set_answer(position, answer);
                                }
                                BatchItem::Child(position, ChildItem::Suspended { child, requests }, _) => {
                                    if let Some(turn_call) = run.state.turn_mut().and_then(|turn| turn.calls.get_mut(position)) {
                                        turn_call.child = Some(child);
                                    }
                                    deferred.extend(requests);
                                }
                            }
                        }
                    }
                    // The batch is over: its calls' watchers stop, and what they said is delivered.
                    input_streams.finish().await;
                    for (id, update) in call_updates.drain() {
                        yield LoopItem::Event(call_updates::deliver(journal, id, update).await);
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
                        let answer = match narrowed.as_ref().or(registry) {
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
                    // Output guardrails: before the caller sees the answer.
                    if let Some(agent) = agent
                        && let Some(error) = check_guardrails(agent, &path_of(agent.name()), GuardrailStage::Output, &reply.text()).await
                    {
                        // The answer never reaches the caller: it leaves the history too.
                        if matches!(run.state.messages.last(), Some(OpenaiChatMessage::Assistant { .. })) {
                            run.state.messages.pop();
                        }
                        run.state.committed = run.state.committed.min(run.state.messages.len());
                        run.state.phase = Phase::Failed { error: error.to_string() };
                        if let Err(journal_error) = record(journal, JournalEntry::History(run.state.committed_messages())).await {
                            tracing::warn!(error = %journal_error, "could not record the history of a run its guardrail stopped");
                        }
                        telemetry::record_error(&agent_span, &error);
                        yield LoopItem::Failed(error);
                        return;
                    }
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
    };
    AgentScoped::new(scope, stream)
}

/// One item of a tool batch: a registry call finished, or a sub-agent's call said something
/// (with its `execute_tool` span).
enum BatchItem {
    Tool(usize, Box<CompletedCall>),
    /// A call reported an update (its id, what it said).
    Update(String, ToolCallUpdate),
    Child(usize, ChildItem, tracing::Span),
}

/// The model, its `Arc` and the configuration `agent` runs with: its own, else the cycle's.
fn agent_model<'a>(
    agent: &'a Agent,
    cycle_model: &'a Arc<dyn ChatModel>,
    base: &'a CycleConfig,
) -> (&'a dyn ChatModel, Arc<dyn ChatModel>, &'a CycleConfig) {
    match agent.model() {
        Some((model, config)) => (&**model, Arc::clone(model), config),
        None => (&**cycle_model, Arc::clone(cycle_model), base),
    }
}

/// What the model is offered: the registry's exposed tools, the agent's sub-agents and
/// handoffs, and a typed run's final-answer tool.
fn offered_tools(
    registry: Option<&ToolRegistry>,
    agent: Option<&Agent>,
    team: Option<&Team>,
    model: &dyn ChatModel,
    config: &CycleConfig,
    output_tool: Option<&ToolDefinition>,
) -> Vec<ToolDefinition> {
    let mut tools = match registry {
        Some(registry) => registry.exposed_definitions(model.provider(), &config.model),
        None => Vec::new(),
    };
    if let (Some(agent), Some(team)) = (agent, team) {
        tools.extend(
            agent
                .agents()
                .iter()
                .filter_map(|name| team.agent(name))
                .map(team_tools::agent_tool),
        );
        tools.extend(
            agent
                .handoffs()
                .iter()
                .filter_map(|name| team.agent(name))
                .map(team_tools::transfer_tool),
        );
    }
    tools.extend(output_tool.cloned());
    tools
}

/// Replace (or set) the history's system prompt with an agent's instructions; none: keep it.
fn set_system_prompt(state: &mut RunState, instructions: &str) {
    if instructions.is_empty() {
        return;
    }
    let message = OpenaiChatMessage::system(instructions);
    match state.messages.first_mut() {
        Some(first @ OpenaiChatMessage::System { .. }) => *first = message,
        _ => {
            state.messages.insert(0, message);
            state.committed = state.committed.saturating_add(1);
        }
    }
}

/// A call the team answers rather than the registry.
enum TeamCall {
    /// `transfer_to_<agent>`: the conversation goes to that agent.
    Handoff(String),
    /// A sub-agent.
    Agent,
}

fn team_call(agent: Option<&Agent>, call: &ToolCall) -> Option<TeamCall> {
    let agent = agent?;
    let name = call.function.name.as_str();
    if let Some(to) = name.strip_prefix(TRANSFER_PREFIX)
        && agent.handoffs().iter().any(|h| h == to)
    {
        return Some(TeamCall::Handoff(to.to_owned()));
    }
    agent
        .agents()
        .iter()
        .any(|a| a == name)
        .then_some(TeamCall::Agent)
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
    /// What an earlier attempt of each call recorded to be continued from, by position.
    continuations: Vec<Option<Value>>,
    /// What each call recorded in this attempt, by position, until the driver takes it.
    recorded: std::sync::Mutex<Vec<Option<Value>>>,
    /// Where the calls' updates go.
    events: ToolEvents,
    /// The approval end of each watched call's streamed input, by position.
    feeds: std::sync::Mutex<Vec<Option<ApprovalFeed>>>,
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

    fn take_continuation(&self, position: usize) -> Option<Value> {
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        recorded.get_mut(position).and_then(Option::take)
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
        let context = ToolContext::new(self.ids.get(position)?.clone(), key)
            .with_events(self.events.for_call());
        let mut feeds = self.feeds.lock().unwrap_or_else(|p| p.into_inner());
        Some(match feeds.get_mut(position).and_then(Option::take) {
            Some(feed) => context.with_approval_feed(feed),
            None => context,
        })
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
            // A failure with structured output: the caller gets the output itself.
            Err(ToolError::FailedWithOutput { output, .. }) => output,
            Err(_) => Value::String(call.answer.content.clone()),
        },
        is_error,
        duration_ms: u64::try_from(call.duration.as_millis()).unwrap_or(u64::MAX),
    };
    (event, call.answer)
}
