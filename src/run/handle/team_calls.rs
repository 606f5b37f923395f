//! A team's own calls in a tool batch: a handoff (`transfer_to_<agent>`) is answered by the run
//! itself and takes effect before the next request; a sub-agent runs as a child run next to
//! the registry's calls, its events passed up, its answer the call's.

use std::sync::Arc;

use futures::StreamExt;
use futures::stream::BoxStream;

use crate::run::error::LlmError;
use crate::run::handle::journal::record;
use crate::run::handle::live::Run;
use crate::run::handle::tools::{BatchItem, answered_event};
use crate::run::handle::{EventSink, RunContext};
use crate::run::journal::JournalEntry;
use crate::run::telemetry;
use crate::team::child::{ChildCall, ChildItem};
use crate::team::tools::{TRANSFER_PREFIX, task_of};
use crate::team::{Agent, charge, child_limits};
use crate::vocab::{ToolAnswer, ToolCall};

/// A call the team answers rather than the registry.
pub(crate) enum TeamCall {
    /// `transfer_to_<agent>`: the conversation goes to that agent.
    Handoff(String),
    /// A sub-agent.
    Agent,
}

/// Whether `call` is one of `agent`'s handoffs or sub-agents.
pub(crate) fn team_call(agent: Option<&Agent>, call: &ToolCall) -> Option<TeamCall> {
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

/// Answer the handoffs among the team's calls at `positions` (one per turn: the first wins,
/// noted in `handoff`) and start the sub-agents' child runs; the children's streams, and the
/// journal's failure that stops the batch, if any.
pub(crate) async fn start<'a>(
    cx: &'a RunContext<'a>,
    run: &mut Run<'_>,
    calls: &[ToolCall],
    positions: &[usize],
    handoff: &mut Option<String>,
    sink: &EventSink,
) -> (Vec<BoxStream<'a, BatchItem>>, Option<LlmError>) {
    let mut children = Vec::new();
    for &position in positions {
        let Some(call) = calls.get(position) else {
            continue;
        };
        match team_call(cx.agent, call) {
            Some(TeamCall::Handoff(to)) => {
                let answer = if let Some(first) = handoff.as_ref() {
                    ToolAnswer::error(format_args!(
                        "the conversation already goes to agent '{first}' in this turn: one handoff per turn"
                    ))
                } else {
                    let answer = ToolAnswer::ok(format!(
                        "Transferred to agent '{to}'; it answers from now on."
                    ));
                    *handoff = Some(to);
                    answer
                };
                sink.send(answered_event(call, &answer, 0)).await;
                run.state.set_answer(position, answer);
            }
            Some(TeamCall::Agent) => children.push(position),
            None => {}
        }
    }
    let mut streams = Vec::with_capacity(children.len());
    let Some(team) = &cx.team else {
        return (streams, None);
    };
    // The parent's history with this run's prompt (the calling turn is not in it yet).
    let history = run.state.messages.clone();
    let parent = cx.path_of(cx.agent.map_or("", Agent::name));
    // Each child's share of the run's budget is reserved before any starts.
    let siblings = children.len();
    for position in children {
        let Some(call) = calls.get(position) else {
            continue;
        };
        let Some(child) = team.team.agent(&call.function.name) else {
            // A team that was not checked names an agent it does not have.
            let answer = ToolAnswer::error(format_args!(
                "no agent named '{}' in the team",
                call.function.name
            ));
            sink.send(answered_event(call, &answer, 0)).await;
            run.state.set_answer(position, answer);
            continue;
        };
        let turn_call = run
            .state
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position));
        let key = turn_call.and_then(|turn_call| turn_call.idempotency_key.clone());
        let started = JournalEntry::CallStarted {
            call_id: &call.id,
            idempotency_key: key.as_deref(),
        };
        if let Err(error) = record(cx.journal, started).await {
            return (streams, Some(error));
        }
        run.state.mark_started(position);
        let stored = run
            .state
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position))
            .and_then(|turn_call| turn_call.child.take());
        let span = telemetry::tool_span(&cx.agent_span, call);
        let stream = crate::team::child::run(ChildCall {
            team: team.team,
            agent: child,
            path: format!("{parent}/{}", child.name()),
            depth: team.depth + 1,
            parent_model: Arc::clone(&cx.model_arc),
            parent_config: cx.config,
            registry: cx.registry,
            journal: cx.journal,
            call_id: call.id.clone(),
            task: task_of(child, &call.function.arguments),
            parent_history: history.clone(),
            stored,
            limits: child_limits(child.usage_limits(), &run.state, siblings),
            suspend: cx.suspend,
            mode: cx.mode,
            span: span.clone(),
        });
        streams.push(
            stream
                .map(move |item| BatchItem::Child(position, item, span.clone()))
                .boxed(),
        );
    }
    (streams, None)
}

/// A child's run ended with `answer`: charge what it spent, record and report the answer.
/// A journal failure is the batch's (it stops the run after the batch).
pub(crate) async fn child_done(
    cx: &RunContext<'_>,
    run: &mut Run<'_>,
    call: &ToolCall,
    position: usize,
    done: ChildItem,
    span: &tracing::Span,
    sink: &EventSink,
) -> Result<(), LlmError> {
    let ChildItem::Done {
        answer,
        usage,
        duration,
    } = done
    else {
        return Ok(());
    };
    charge(&mut run.state, usage);
    let answer = crate::vocab::truncate_answer(answer, run.state.rules.tool_output_limit);
    let finished = JournalEntry::CallFinished {
        call_id: &call.id,
        answer: &answer,
        media: None,
    };
    let recorded = record(cx.journal, finished).await;
    telemetry::record_answer(span, &answer);
    let millis = u64::try_from(duration.as_millis()).unwrap_or(u64::MAX);
    sink.send(answered_event(call, &answer, millis)).await;
    run.state.set_answer(position, answer);
    recorded
}
