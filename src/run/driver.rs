//! The driver: performs each [`Effect`] of the [`step`] function — the model request, the
//! tool calls through the registry, approvals — feeds the result back, and yields the
//! [`StreamEvent`]s a streaming caller sees, in order.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::{Stream, StreamExt};
use serde_json::Value;
use tracing::Instrument;

use crate::llm::cycle::LlmCycle;
use crate::llm::error::LlmError;
use crate::llm::event::StreamEvent;
use crate::llm::model::{ChatModel, ChatRequest};
use crate::llm::usage::UsageTally;
use crate::run::model_turn::{self, Mode, TurnItem};
use crate::run::state::{Phase, RunRules, RunState};
use crate::run::step::{Decision, Effect, Input, ToolBatch, relaxed_tool_choice, step};
use crate::run::{budget, hooks, telemetry};
use crate::tools::outcome::CompletedCall;
use crate::tools::registry::{ToolCallRequest, ToolRegistry};
use crate::vocab::{ChatResponse, FinishReason, OpenaiChatMessage, ToolAnswer};

/// What a run yields: events for streaming callers, then exactly one `Done` or `Failed`.
pub(crate) enum LoopItem {
    Event(StreamEvent),
    Done(Box<ChatResponse>),
    Failed(LlmError),
}

/// A run's state, owned while the run goes on; the conversation gets its committed history
/// back however the run ends — finished, failed, or dropped mid-turn (cancelled: a turn in
/// which some tool started is kept, see [`step`]).
struct Run<'a> {
    history: &'a mut Vec<OpenaiChatMessage>,
    usage: &'a mut UsageTally,
    state: RunState,
    /// The batch in flight: which of its calls' tools started (set by the registry as each
    /// starts, before it finishes) and their positions in the turn.
    in_flight: Option<(StartedCalls, Vec<usize>)>,
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
        if !matches!(
            self.state.phase,
            Phase::Finished { .. } | Phase::Failed { .. }
        ) {
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

/// Drive one run of `cycle`: `prompt` (or none, to continue from the history), with
/// `registry`'s tools (or none: tool calls are returned, not run).
pub(crate) fn drive<'a>(
    cycle: &'a mut LlmCycle,
    prompt: Option<String>,
    registry: Option<&'a ToolRegistry>,
    mode: Mode,
) -> impl Stream<Item = LoopItem> + Send + 'a {
    let LlmCycle {
        model,
        config,
        messages,
        usage,
    } = cycle;
    let model: &'a dyn ChatModel = &**model;
    let config = &*config;
    async_stream::stream! {
        let state = RunState::new(std::mem::take(messages), RunRules::of(config), registry.is_some());
        let mut run = Run { history: messages, usage, state, in_flight: None };
        // Built once per run, not per turn: a registry's schemas can be large.
        let tools = match registry {
            Some(registry) => registry.exposed_definitions(model.provider(), &config.model),
            None => Vec::new(),
        };
        let relaxed = relaxed_tool_choice(&config.options);
        let agent_span = telemetry::agent_span(model.provider(), &config.model);
        let mut input = Input::Start { prompt };
        loop {
            match run.step(input) {
                Effect::RequestModel(request) => {
                    let options = match &relaxed {
                        Some(relaxed) if request.tool_choice_relaxed => relaxed,
                        _ => &config.options,
                    };
                    let edited = config.hooks.before_model_request(&config.model, &run.state.messages, options).await;
                    let request = ChatRequest {
                        model: &config.model,
                        messages: edited.as_ref().map_or(run.state.messages.as_slice(), |edited| edited.messages.as_slice()),
                        tools: &tools,
                        options: edited.as_ref().map_or(options, |edited| &edited.options),
                    };
                    let mut reply = None;
                    let chat_span = telemetry::chat_span(&agent_span, model.provider(), &config.model, request.messages);
                    {
                        let mut items = std::pin::pin!(model_turn::request(model, config, request, mode));
                        while let Some(item) = items.next().instrument(chat_span.clone()).await {
                            match item {
                                TurnItem::Event(event) => yield LoopItem::Event(event),
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
                    for (position, answer) in hooks::before_tools(&config.hooks, &mut batch).await {
                        run.state.record_answer(position, answer);
                    }
                    for event in announce(&batch) {
                        yield LoopItem::Event(event);
                    }
                    // Run the calls concurrently; report each as it finishes, answer in call order.
                    let ToolBatch { calls, run: positions, .. } = batch;
                    let requests = positions.iter().filter_map(|&p| calls.get(p)).map(ToolCallRequest::from).collect();
                    let mut tool_spans: Vec<_> = positions.iter().filter_map(|&p| calls.get(p)).map(|call| telemetry::tool_span(&agent_span, call)).collect();
                    let started = StartedCalls::new(positions.len());
                    run.in_flight = Some((started.clone(), positions.clone()));
                    {
                        let mut completed = registry.run_stream_observed(requests, move |index| started.mark(index));
                        while let Some((index, call)) = completed.next().instrument(agent_span.clone()).await {
                            let (event, answer) = completed_event(call);
                            if let Some(&position) = positions.get(index) {
                                let answer = hooks::after_tool(&config.hooks, calls.get(position), answer).await;
                                if let Some(span) = tool_spans.get_mut(index) {
                                    telemetry::record_answer(span, &answer);
                                    *span = tracing::Span::none();
                                }
                                run.state.record_answer(position, answer);
                            }
                            yield LoopItem::Event(event);
                        }
                    }
                    run.collect_started();
                    input = Input::ToolsDone;
                }
                Effect::AskApproval(requests) => {
                    // This driver leaves each decision to the registry's approver, which asks
                    // as the call runs.
                    input = Input::Decisions(requests.into_iter().map(|call| Decision { call_id: call.id, denied: None }).collect());
                }
                Effect::Done(reply) => {
                    telemetry::record_usage(&agent_span, reply.usage);
                    let reason = reply.stop_reason.clone().unwrap_or(FinishReason::Stop);
                    yield LoopItem::Event(StreamEvent::TurnComplete { reason, usage: reply.usage });
                    yield LoopItem::Done(reply);
                    return;
                }
                Effect::Fail(error) => {
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
