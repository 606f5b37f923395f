//! The tool-batch handler: the `before_tool_call` hooks, each call's idempotency key, the run
//! state journaled with the starts that ride ahead, then the registry's calls and the team's
//! run concurrently — each reported as it finishes, answered in call order.

use std::collections::HashMap;

use futures::StreamExt;
use serde_json::Value;
use tracing::Instrument;

use crate::run::call_updates;
use crate::run::continued;
use crate::run::event::StreamEvent;
use crate::run::handle::journal::record;
use crate::run::handle::live::Run;
use crate::run::handle::observer::BatchObserver;
use crate::run::handle::team_calls::{self, TeamCall, team_call};
use crate::run::handle::{EventSink, RunContext};
use crate::run::journal::JournalEntry;
use crate::run::step::{Input, ToolBatch};
use crate::run::{hooks, idempotency, journal_batch, telemetry};
use crate::team::child::ChildItem;
use crate::tools::error::ToolError;
use crate::tools::event::ToolCallUpdate;
use crate::tools::outcome::CompletedCall;
use crate::tools::registry::{Gated, ObservedCall, ToolCallRequest};
use crate::vocab::{FinishReason, ToolAnswer, ToolCall};

/// One item of a tool batch: a registry call finished, or a sub-agent's call said something
/// (with its `execute_tool` span).
pub(crate) enum BatchItem {
    Tool(usize, Box<CompletedCall>),
    /// A call reported an update (its id, what it said).
    Update(String, ToolCallUpdate),
    Child(usize, ChildItem, tracing::Span),
}

/// Run `batch`; the step machine's next input. A handoff among its calls is noted in
/// `handoff` (applied before the next request).
pub(crate) async fn run_tools<'a>(
    cx: &'a RunContext<'a>,
    run: &mut Run<'_>,
    mut batch: ToolBatch,
    handoff: &mut Option<String>,
    sink: &EventSink,
) -> Input {
    // Sub-agents narrow the run's tools for themselves: each agent's list selects among what
    // the run may use, under every gate of the run.
    let Some(registry) = cx.tools() else {
        return Input::ToolsDone;
    };
    let hooked =
        hooks::before_tools(&cx.config.hooks, &mut batch).instrument(cx.agent_span.clone());
    for (position, answer) in hooked.await {
        run.state.set_answer(position, answer);
    }
    let run_answered = answer_deferred(cx, registry, run, &batch);
    // Keys before the state is journaled: the journal holds each call's key before its tool
    // can start, and a resumed call keeps it.
    idempotency::assign_keys(
        &mut run.state,
        cx.journal.and_then(|journal| journal.session()),
    );
    let (ahead, mut gated) = starts_ahead(cx, registry, &batch, &run_answered);
    if cx.journal.is_some() {
        let journaled = journal_batch::state_with_starts(&run.state, &batch.run, &ahead);
        if let Err(error) = record(cx.journal, JournalEntry::Run(&journaled)).await {
            return Input::Abort(error);
        }
    }
    for event in announce(&batch) {
        sink.send(event).await;
    }
    let ToolBatch {
        calls,
        run: positions,
        approved,
        approved_for,
        ..
    } = batch;
    let positions = record_run_answers(run, &calls, positions, run_answered, sink).await;
    // The team's own calls: a handoff is answered here, a sub-agent runs as a child next to
    // the registry's calls.
    let (team_positions, positions): (Vec<usize>, Vec<usize>) =
        positions.into_iter().partition(|&p| {
            calls
                .get(p)
                .is_some_and(|call| team_call(cx.agent, call).is_some())
        });
    let (children, team_failure) =
        team_calls::start(cx, run, &calls, &team_positions, handoff, sink).await;
    let approval = |p: usize| {
        approved
            .iter()
            .position(|&a| a == p)
            .map(|i| approved_for.get(i).cloned().flatten())
    };
    let requests: Vec<ObservedCall<'_>> = positions
        .iter()
        .filter_map(|&p| {
            calls
                .get(p)
                .map(|call| (ToolCallRequest::from(call), approval(p), gated.remove(&p)))
        })
        .collect();
    let feeds = requests
        .iter()
        .map(|(call, _, _)| run.input_streams.take_feed(&call.id))
        .collect();
    let batch_calls: Vec<ToolCall> = positions
        .iter()
        .filter_map(|&p| calls.get(p).cloned())
        .collect();
    let spans: Vec<_> = batch_calls
        .iter()
        .map(|call| telemetry::tool_span(&cx.agent_span, call))
        .collect();
    let observer = BatchObserver::new(
        cx.config,
        cx.journal,
        &run.state,
        &positions,
        batch_calls,
        ahead,
        cx.suspend,
    )
    .with_spans(spans.clone())
    .with_updates(run.call_updates.events().clone(), feeds);
    if let Some(error) = team_failure {
        observer.fail(error);
    }
    run.in_flight = Some((observer.started.clone(), positions.clone()));
    let child_limit = registry
        .concurrency_limit()
        .unwrap_or(children.len())
        .clamp(1, crate::team::MAX_CONCURRENT_CHILDREN);
    let children = futures::stream::iter(children).flatten_unordered(child_limit);
    let completed = registry
        .run_stream_observed(requests, &observer)
        .map(|(index, call)| BatchItem::Tool(index, Box::new(call)));
    let items = futures::stream::select(completed, children);
    let deferred = take_items(
        cx,
        run,
        items,
        Finished {
            calls: &calls,
            positions: &positions,
            observer: &observer,
            spans,
        },
        sink,
    )
    .await;
    // The batch is over: its calls' watchers stop, and what they said is delivered.
    run.input_streams.finish().await;
    for (id, update) in run.call_updates.drain() {
        sink.send(call_updates::deliver(cx.journal, id, update).await)
            .await;
    }
    let failure = observer.take_failure();
    run.collect_started();
    match failure {
        Some(error) => Input::Abort(error),
        None if !deferred.is_empty() => Input::ToolsDeferred(deferred),
        None => Input::ToolsDone,
    }
}

/// Which calls' starts ride ahead with the journaled run state (those that will not ask
/// anyone), by index in `batch.run`, and the gates' result of each call whose start needed
/// them to decide (each call passes the gates once: it runs with that result).
fn starts_ahead<'r>(
    cx: &RunContext<'_>,
    registry: &'r crate::tools::registry::ToolRegistry,
    batch: &ToolBatch,
    run_answered: &[(usize, ToolAnswer)],
) -> (Vec<bool>, HashMap<usize, Gated<'r>>) {
    let mut gated: Vec<Option<Gated<'r>>> = batch.run.iter().map(|_| None).collect();
    let mut ahead = journal_batch::starts_ahead(registry, batch, cx.journal.is_some(), &mut gated);
    let gated = batch
        .run
        .iter()
        .zip(gated)
        .filter_map(|(&position, gated)| gated.map(|gated| (position, gated)))
        .collect();
    // A handoff and the run's own answers never start: one cut off by a crash is made again,
    // not answered as interrupted.
    for (flag, &position) in ahead.iter_mut().zip(&batch.run) {
        let call = batch.calls.get(position);
        if call.is_some_and(|call| matches!(team_call(cx.agent, call), Some(TeamCall::Handoff(_))))
            || run_answered.iter().any(|(p, _)| *p == position)
        {
            *flag = false;
        }
    }
    (ahead, gated)
}

/// Record the run's own answers (searches, deferred tools not loaded yet) and report them;
/// the positions left to run.
async fn record_run_answers(
    run: &mut Run<'_>,
    calls: &[ToolCall],
    positions: Vec<usize>,
    run_answered: Vec<(usize, ToolAnswer)>,
    sink: &EventSink,
) -> Vec<usize> {
    let positions = positions
        .into_iter()
        .filter(|p| !run_answered.iter().any(|(q, _)| q == p))
        .collect();
    for (position, answer) in run_answered {
        // Bounded like any tool output (a search's schemas come from servers); its first
        // line, the names it loaded, survives the cut.
        let answer = crate::vocab::truncate_answer(answer, run.state.rules.tool_output_limit);
        let Some(call) = calls.get(position) else {
            continue;
        };
        sink.send(answered_event(call, &answer, 0)).await;
        run.state.set_answer(position, answer);
    }
    positions
}

/// `tool_search`, and deferred tools not loaded yet: answered by the run (an API with its own
/// tool search loads them itself — what it loaded is kept with the run, for callers).
fn answer_deferred(
    cx: &RunContext<'_>,
    registry: &crate::tools::registry::ToolRegistry,
    run: &mut Run<'_>,
    batch: &ToolBatch,
) -> Vec<(usize, ToolAnswer)> {
    super::deferred::answer(cx.model, registry, &cx.config.model, &mut run.state, batch)
}

/// What the batch's items are matched against.
struct Finished<'b, 'o> {
    /// The turn's calls, by position in the turn.
    calls: &'b [ToolCall],
    /// The registry's calls' positions in the turn, by index in the batch.
    positions: &'b [usize],
    observer: &'b BatchObserver<'o>,
    /// The registry's calls' `execute_tool` spans, by index in the batch.
    spans: Vec<tracing::Span>,
}

/// Take each finished call into the state as it comes; the approval requests of the calls
/// that wait (a suspending run).
async fn take_items(
    cx: &RunContext<'_>,
    run: &mut Run<'_>,
    items: impl futures::Stream<Item = BatchItem>,
    mut finished: Finished<'_, '_>,
    sink: &EventSink,
) -> Vec<crate::tools::approval::ApprovalRequest> {
    let mut deferred = Vec::new();
    let mut items = std::pin::pin!(items);
    // The calls' updates as they come, until the last call finished.
    let mut updates = std::pin::pin!(run.call_updates.stream());
    loop {
        let item = tokio::select! {
            item = items.next().instrument(cx.agent_span.clone()) => match item {
                Some(item) => item,
                None => break,
            },
            Some((id, update)) = updates.next() => BatchItem::Update(id, update),
        };
        match item {
            BatchItem::Update(id, update) => {
                sink.send(call_updates::deliver(cx.journal, id, update).await)
                    .await;
            }
            BatchItem::Tool(index, call) => {
                // What the call reported comes before its end.
                for (id, update) in run.call_updates.drain() {
                    sink.send(call_updates::deliver(cx.journal, id, update).await)
                        .await;
                }
                let call = *call;
                let Some(&position) = finished.positions.get(index) else {
                    continue;
                };
                if cx.suspend
                    && let Some(registry) = cx.tools()
                    && let Some(request) = continued::waiting_request(&call, registry)
                {
                    // A call waiting for input goes on from what it recorded.
                    if let Some(continuation) = finished.observer.take_continuation(index) {
                        run.state.record_continuation_id(&call.id, continuation);
                    }
                    deferred.push(request);
                    continue;
                }
                let message = finished.observer.take_media(index);
                let (event, answer) = completed_event(call);
                if let Some(span) = finished.spans.get_mut(index) {
                    telemetry::record_answer(span, &answer);
                    *span = tracing::Span::none();
                }
                run.state.set_answer(position, answer);
                if let Some(message) = message {
                    run.state.record_media(position, message);
                }
                sink.send(event).await;
            }
            BatchItem::Child(_, ChildItem::Event(event), _) => sink.send(event).await,
            BatchItem::Child(position, done @ ChildItem::Done { .. }, span) => {
                let Some(call) = finished.calls.get(position) else {
                    continue;
                };
                if let Err(error) =
                    team_calls::child_done(cx, run, call, position, done, &span, sink).await
                {
                    finished.observer.fail(error);
                }
            }
            BatchItem::Child(position, ChildItem::Suspended { child, requests }, _) => {
                if let Some(turn_call) = run
                    .state
                    .turn_mut()
                    .and_then(|turn| turn.calls.get_mut(position))
                {
                    turn_call.child = Some(child);
                }
                deferred.extend(requests);
            }
        }
    }
    deferred
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
            events.push(answered_event(call, answer, 0));
        }
    }
    events
}

/// The event for a call the run answered (not the registry): the answer's text as output.
pub(crate) fn answered_event(
    call: &ToolCall,
    answer: &ToolAnswer,
    duration_ms: u64,
) -> StreamEvent {
    StreamEvent::ToolExecutionCompleted {
        id: call.id.clone(),
        tool_name: call.function.name.clone(),
        output: Value::String(answer.content.clone()),
        is_error: answer.is_error,
        duration_ms,
    }
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
