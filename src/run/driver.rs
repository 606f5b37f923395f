//! The local driver: a short loop — step the machine ([`crate::run::step`]), hand the
//! [`Effect`] to its handler ([`crate::run::handle`]), yield the events the handler made, in
//! order — and the [`Drive`] that says how to run.

use std::sync::Arc;

use futures::Stream;

use crate::llm::model::ChatModel;
use crate::run::call_updates::CallUpdates;
use crate::run::config::CycleConfig;
use crate::run::conversation::Conversation;
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::run::handle::live::Run;
use crate::run::handle::start::{self, Opening};
pub(crate) use crate::run::handle::start::{Start, TeamRun};
use crate::run::handle::{self, EventSink, RunContext, approval, finish};
use crate::run::hooks;
use crate::run::journal::RunJournal;
use crate::run::model_turn::Mode;
use crate::run::output_schema::TypedRun;
use crate::run::state::RunState;
use crate::run::step::{Effect, Input};
use crate::run::telemetry;
use crate::team::{Agent, AgentCell, AgentScoped};
use crate::tools::registry::ToolRegistry;
use crate::vocab::{ChatResponse, FinishReason, ToolDefinition};

/// What a run yields: events for streaming callers, then exactly one `Done`, `Suspended` or
/// `Failed`.
pub(crate) enum LoopItem {
    Event(StreamEvent),
    Done(Box<ChatResponse>),
    Suspended(Box<RunState>),
    Failed(LlmError),
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
        // A team's run always has a registry: its agents are tools.
        let no_tools = ToolRegistry::new();
        let registry = registry.or_else(|| team.as_ref().map(|_| &no_tools));
        let opening = Opening {
            history: &mut *messages,
            registry,
            team: team.as_ref(),
            config: base_config,
            output_tool: output_tool.as_ref(),
            typed,
        };
        let (mut state, mut input) = start::first_state(start, opening).await;
        let agent = start::entry_agent(team.as_ref(), &mut state);
        let mut cx = RunContext {
            cycle_model,
            base_config,
            registry,
            journal,
            suspend,
            mode,
            output_tool,
            team,
            agent_cell,
            agent_span: tracing::Span::none(),
            agent: None,
            model: &**cycle_model,
            model_arc: Arc::clone(cycle_model),
            config: base_config,
            narrowed: None,
            tools: Default::default(),
            gated: None,
            relaxed: None,
            server: None,
            offered_loaded: 0,
        };
        cx.seat(agent, &mut state);
        let parent_span = cx.team.as_ref().and_then(|team| team.parent_span.as_ref());
        cx.agent_span = telemetry::agent_span(parent_span, cx.model.provider(), &cx.config.model, agent.map(Agent::name));
        let mut run = Run {
            history: messages,
            usage,
            context,
            state,
            in_flight: None,
            suspended: false,
            call_updates: CallUpdates::new(),
            input_streams: Default::default(),
        };
        if let Input::Decisions(decisions) = &input {
            for decision in decisions {
                hooks::caller_decision(&cx.agent_span, &decision.call_id, &decision.answer);
            }
        }
        if let Some(error) = start::input_guardrails(&cx, &input).await {
            yield LoopItem::Failed(error);
            return;
        }
        let sink = EventSink::default();
        // A handoff made in the last tool turn, applied before the next request.
        let mut handoff: Option<String> = None;
        loop {
            match run.step(input) {
                Effect::RequestModel(request) => {
                    if let Some(to) = handoff.take()
                        && let Some(event) = cx.hand_off(&mut run.state, &to)
                    {
                        yield LoopItem::Event(event);
                    }
                    cx.reoffer(&run.state);
                    let Run { state, context, call_updates, input_streams, .. } = &mut run;
                    let streams = handle::model::Streams { call_updates, input_streams };
                    let mut handler = std::pin::pin!(handle::model::request_model(&cx, state, context, streams, request, &sink));
                    input = loop {
                        let done = sink.until_events(handler.as_mut()).await;
                        for event in sink.take() {
                            yield LoopItem::Event(event);
                        }
                        if let Some(input) = done {
                            break input;
                        }
                    };
                }
                Effect::RunTools(batch) => {
                    let mut handler = std::pin::pin!(handle::tools::run_tools(&cx, &mut run, batch, &mut handoff, &sink));
                    input = loop {
                        let done = sink.until_events(handler.as_mut()).await;
                        for event in sink.take() {
                            yield LoopItem::Event(event);
                        }
                        if let Some(input) = done {
                            break input;
                        }
                    };
                }
                // A suspended run resumed without decisions: its approver is asked now.
                Effect::AskApproval(requests) => input = approval::ask(&cx, requests).await,
                Effect::Suspend(requests) if !cx.suspend => input = approval::refuse_deferred(requests),
                Effect::Suspend(_) => {
                    if let Err(error) = handle::journal::record_run(cx.journal, &run.state).await {
                        input = Input::Abort(error);
                        continue;
                    }
                    run.suspended = true;
                    yield LoopItem::Suspended(Box::new(run.state.clone()));
                    return;
                }
                Effect::Done(reply) => {
                    if let Err(error) = finish::done(&cx, &mut run.state, &reply).await {
                        yield LoopItem::Failed(error);
                        return;
                    }
                    let reason = reply.stop_reason.clone().unwrap_or(FinishReason::Stop);
                    yield LoopItem::Event(StreamEvent::TurnComplete { reason, usage: reply.usage });
                    yield LoopItem::Done(reply);
                    return;
                }
                Effect::Fail(error) => {
                    finish::fail(&cx, &run.state, &error).await;
                    yield LoopItem::Failed(error);
                    return;
                }
            }
        }
    };
    AgentScoped::new(scope, stream)
}
