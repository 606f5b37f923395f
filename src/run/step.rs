//! [`step`]: the tool loop's rules, as a pure function from a [`RunState`] and an [`Input`]
//! to the next state and the [`Effect`] the driver performs. Every rule lives here once: the
//! turn limit, the repeated-call guard, truncated and `stop`-reason tool calls, the forced
//! `tool_choice`, unanswered calls, cancellation and the final-answer tool of a typed run. (What
//! a tool's answer looks like to the model is the answer pipeline's, `run/answer.rs`.)

use std::collections::HashSet;

use serde_json::Value;

use crate::run::config::RepeatedCallAction;
use crate::run::error::LlmError;
use crate::run::state::{ChildDecision, Phase, RepeatStreak, RunState, ToolTurn, TurnCall};
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::call_digest::CallDigest;
use crate::tools::error::ToolError;
use crate::vocab::{
    ChatResponse, FinishReason, OpenaiChatMessage, RequestOptions, ToolAnswer, ToolCall,
    ToolChoice, Usage,
};

/// What happened since the last step.
#[derive(Debug)]
pub enum Input {
    /// Start the run (`prompt`: this run's user message, if any), or continue a restored
    /// state.
    Start {
        /// The user message of this run; `None` continues from the history.
        prompt: Option<String>,
    },
    /// The model replied.
    ModelReplied(Box<ChatResponse>),
    /// The model request failed (after its retries).
    ModelFailed(LlmError),
    /// Every call of the [`Effect::RunTools`] batch has its answer (recorded with
    /// [`RunState::record_answer`]) or is left without one.
    ToolsDone,
    /// The batch ran, except these calls: the approver deferred them (their answers are not
    /// recorded). The run suspends until they are decided.
    ToolsDeferred(Vec<ApprovalRequest>),
    /// Decisions on calls awaiting approval (an [`Effect::AskApproval`] or a suspended run).
    /// A call without a decision, or decided [`ApprovalDecision::Defer`], stays pending.
    Decisions(Vec<Decision>),
    /// The run was cancelled (its caller went away).
    Cancel,
    /// The run must stop with this error (e.g. its journal failed); like [`Input::Cancel`],
    /// a tool turn in which some tool started is kept.
    Abort(LlmError),
}

/// A decision on a call awaiting approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The call id.
    pub call_id: String,
    /// The decision: an allow runs the call (without asking the approver again), a deny
    /// answers it with the denial (its message told to the model), a defer keeps it pending.
    pub answer: ApprovalDecision,
    /// The digest of the request the decision was given for
    /// ([`ApprovalRequest::shown_digest`]; see [`Decision::for_request`]). When set, an allow
    /// applies only if the pending request still shows that call; either way the call runs
    /// only while its tool and arguments are the ones shown.
    pub digest: Option<CallDigest>,
}

impl Decision {
    /// Allow the call `call_id` once.
    pub fn allow(call_id: impl Into<String>) -> Self {
        Decision {
            call_id: call_id.into(),
            answer: ApprovalDecision::AllowOnce,
            digest: None,
        }
    }

    /// Deny the call `call_id`; `message` (if any) is told to the model.
    pub fn deny(call_id: impl Into<String>, message: Option<String>) -> Self {
        Decision {
            call_id: call_id.into(),
            answer: ApprovalDecision::Deny { message },
            digest: None,
        }
    }

    /// `answer` for the call `request` shows, bound to it: should the stored request or the
    /// call change before the run continues, the decision does not apply.
    pub fn for_request(request: &ApprovalRequest, answer: ApprovalDecision) -> Self {
        Decision {
            call_id: request.call_id.clone(),
            answer,
            digest: Some(request.shown_digest()),
        }
    }
}

/// What the driver does next.
#[derive(Debug)]
pub enum Effect {
    /// Send the history to the model.
    RequestModel(ModelRequest),
    /// Run a tool turn's calls.
    RunTools(ToolBatch),
    /// Ask the approver about these calls of a resumed suspended run, then step with
    /// [`Input::Decisions`].
    AskApproval(Vec<ApprovalRequest>),
    /// Suspend the run: these calls wait for decisions (the state holds everything needed to
    /// continue, in this process or another).
    Suspend(Vec<ApprovalRequest>),
    /// The run finished with this reply (usage summed over the run).
    Done(Box<ChatResponse>),
    /// The run failed; the state holds only committed turns.
    Fail(LlmError),
}

/// How to make the model request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ModelRequest {
    /// Send a forced `tool_choice` as `auto` (see [`relaxed_tool_choice`]).
    pub tool_choice_relaxed: bool,
}

/// A tool turn's calls to run.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolBatch {
    /// Every call of the turn, in call order (each is announced as started).
    pub calls: Vec<ToolCall>,
    /// Whether the turn follows a model reply (then announced complete, with `usage`) rather
    /// than being resumed from the history.
    pub from_reply: bool,
    /// The reply's usage.
    pub usage: Option<Usage>,
    /// Calls the run answered itself without running them (the repeated-call guard).
    pub answered: Vec<(usize, ToolAnswer)>,
    /// Positions (in `calls`) of the calls to execute.
    pub run: Vec<usize>,
    /// Positions (in `calls`) of the calls a decision already allowed (not asked again).
    pub approved: Vec<usize>,
    /// For each of `approved` (same order), the call the decision was given for, when known:
    /// the registry runs it only if the call still is that call.
    pub approved_for: Vec<Option<CallDigest>>,
}

/// The answer given to a call that was never run because the conversation went on without it.
const NOT_RUN: &str = "this tool call was not run; the conversation continued without it.";

/// The answer of a call that produced nothing (cannot happen unless a tool stream misbehaves).
const NO_RESULT: &str = "the tool produced no result";

/// The answer of a call that was cancelled while running.
const CANCELLED: &str = "cancelled before the tool finished; whether it had any effect is unknown.";

/// The answer of a call that was cancelled before its tool started (queued, or waiting for
/// approval).
const NOT_STARTED: &str = "cancelled before the tool started; it did not run.";

/// The answer of a call found started and unfinished when a run is restored (the process
/// died or was stopped while it ran).
const INTERRUPTED: &str =
    "interrupted: the run stopped while this tool ran; whether it had any effect is unknown.";

/// The [`INTERRUPTED`] answer, naming the call's idempotency key when it has one: a tool that
/// takes the key can tell whether that call had its effect.
pub(crate) fn interrupted(key: Option<&str>) -> String {
    match key {
        Some(key) => format!(
            "{INTERRUPTED} Its idempotency key was {key}: the tool (or the service it calls) can \
             tell by that key whether it had its effect."
        ),
        None => INTERRUPTED.to_owned(),
    }
}

/// The answer of a call still waiting for approval when the user sent a new message instead.
const UNDECIDED: &str = "this call was never approved or denied: the user went on with a new \
message instead. It did not run; do not retry it unless the user asks.";

/// One step of a run.
pub fn step(mut state: RunState, input: Input) -> (RunState, Effect) {
    let phase = std::mem::replace(&mut state.phase, Phase::NeedModel);
    match (phase, input) {
        (Phase::NeedModel, Input::Start { prompt }) => start(state, prompt),
        (Phase::ModelReplied { reply }, Input::Start { .. }) => model_replied(state, reply),
        (Phase::NeedModel, Input::ModelReplied(reply)) => model_replied(state, *reply),
        (Phase::NeedModel, Input::ModelFailed(error)) => fail(state, error),
        (Phase::AwaitingTools { turn }, Input::ToolsDone) => {
            let resumed = turn.assistant.is_none();
            let output = output_reply(&state, &turn);
            finish_turn(&mut state, turn, Unanswered::NoResult);
            if let Some(reply) = output {
                return finish_with_output(state, reply);
            }
            // A forced choice applied to the request whose reply called these tools.
            state.tool_choice_relaxed |= !resumed;
            request_model(state)
        }
        (Phase::AwaitingTools { turn }, Input::ToolsDeferred(requests)) => {
            suspend(state, turn, requests)
        }
        (Phase::AwaitingTools { mut turn }, Input::Start { .. }) => {
            // A restored turn: a call that started but has no answer may or may not have had
            // its effect; it is not run again (the driver clears `started` first for a tool
            // that declares itself idempotent, see [`rerun_idempotent`]).
            for call in &mut turn.calls {
                if call.started && call.answer.is_none() {
                    call.answer = Some(ToolAnswer::error(interrupted(
                        call.idempotency_key.as_deref(),
                    )));
                }
            }
            run_batch(state, turn, false, None)
        }
        (Phase::AwaitingApproval { turn, requests }, Input::Start { prompt: None }) => {
            state.phase = Phase::AwaitingApproval {
                turn,
                requests: requests.clone(),
            };
            (state, Effect::AskApproval(requests))
        }
        (
            Phase::AwaitingApproval { mut turn, .. },
            Input::Start {
                prompt: Some(prompt),
            },
        ) => {
            // The user moved on: the undecided calls did not run; the turn (whose other calls
            // may have had effects) is kept, then the new message.
            for call in &mut turn.calls {
                if call.answer.is_none() && !call.approved {
                    call.answer = Some(ToolAnswer::error(UNDECIDED));
                }
            }
            finish_turn(&mut state, turn, Unanswered::NoResult);
            state.messages.push(OpenaiChatMessage::user_text(prompt));
            request_model(state)
        }
        (Phase::AwaitingApproval { turn, requests }, Input::Decisions(decisions)) => {
            decided(state, turn, requests, decisions)
        }
        (
            Phase::AwaitingTools { turn } | Phase::AwaitingApproval { turn, .. },
            input @ (Input::Cancel | Input::Abort(_)),
        ) if turn.calls.iter().any(|call| call.started) => {
            // A started tool may have had effects: forgetting its turn would be worse than
            // keeping a turn the model did not finish. Calls refused before execution never
            // start, so they do not keep a turn.
            finish_turn(&mut state, turn, Unanswered::Cancelled);
            fail(state, abort_error(input))
        }
        (Phase::Finished { reply }, _) => {
            state.phase = Phase::Finished {
                reply: reply.clone(),
            };
            (state, Effect::Done(Box::new(reply)))
        }
        (Phase::Failed { error }, _) => {
            state.phase = Phase::Failed {
                error: error.clone(),
            };
            (state, Effect::Fail(LlmError::Other(error)))
        }
        (_, Input::Cancel) => fail(state, LlmError::Cancelled),
        (_, Input::Abort(error)) => fail(state, error),
        (phase, input) => {
            let error = LlmError::Other(format!(
                "run step out of order: {} in phase {}",
                input_name(&input),
                phase_name(&phase)
            ));
            fail(state, error)
        }
    }
}

/// Decisions on a turn's pending approvals: each call approved (bound to what was shown),
/// denied, or still pending; a call inside a sub-agent gets its decision through its child.
fn decided(
    state: RunState,
    mut turn: ToolTurn,
    requests: Vec<ApprovalRequest>,
    decisions: Vec<Decision>,
) -> (RunState, Effect) {
    let mut pending = Vec::new();
    for request in requests {
        let decision = decisions
            .iter()
            .find(|decision| decision.call_id == request.call_id);
        let Some(call) = turn
            .calls
            .iter_mut()
            .find(|call| call.call.id == request.call_id && call.child.is_none())
        else {
            // A call inside a sub-agent: its decision waits for the child, whose
            // call in this turn runs again to continue it.
            if let Some(holder) = turn.calls.iter_mut().find(|call| {
                call.child.as_ref().is_some_and(|child| {
                    child
                        .pending_approvals()
                        .iter()
                        .any(|r| r.call_id == request.call_id)
                })
            }) {
                match decision {
                    None
                    | Some(Decision {
                        answer: ApprovalDecision::Defer,
                        ..
                    }) => pending.push(request),
                    Some(decision) => {
                        if let Some(child) = holder.child.as_mut() {
                            child.decisions.push(ChildDecision {
                                call_id: decision.call_id.clone(),
                                answer: decision.answer.clone(),
                                digest: decision.digest.clone(),
                            });
                        }
                    }
                }
            }
            continue;
        };
        match decision.map(|decision| &decision.answer) {
            None | Some(ApprovalDecision::Defer) => pending.push(request),
            Some(ApprovalDecision::Deny { message }) => {
                let message = message.as_deref().unwrap_or("the user declined this call");
                call.answer = Some(ToolAnswer::error(format_args!(
                    "tool '{}' was not approved: {}. Do not retry this call; continue without it or ask the user.",
                    call.call.function.name,
                    message.trim_end_matches('.')
                )));
            }
            Some(
                ApprovalDecision::AllowOnce
                | ApprovalDecision::AllowForSession
                | ApprovalDecision::AllowForSessionWithArgs,
            ) => {
                // Bound to what was shown: the stored request must still show the
                // call it was asked with and the decision was given for.
                let shown = request.shown_digest();
                let expected = decision.and_then(|decision| decision.digest.as_ref());
                if request.digest.as_ref().is_none_or(|d| *d == shown)
                    && expected.is_none_or(|d| *d == shown)
                {
                    call.approved = true;
                    call.approved_for = Some(shown);
                } else {
                    let mismatch = ToolError::ApprovalMismatch {
                        tool: call.call.function.name.clone(),
                        call_id: call.call.id.clone(),
                    };
                    call.answer = Some(ToolAnswer::error(format_args!(
                        "{mismatch}. Do not retry this call; continue without it or ask the user."
                    )));
                }
            }
        }
    }
    if pending.is_empty() {
        run_batch(state, turn, false, None)
    } else {
        suspend(state, turn, pending)
    }
}

/// The first step: calls left unanswered by an earlier call, then the prompt.
fn start(mut state: RunState, prompt: Option<String>) -> (RunState, Effect) {
    // Calls left unanswered by an earlier `submit` (which returns tool calls without running
    // them) would make every later request invalid: resuming with tools runs them; anything
    // else answers them as not run.
    let pending = unanswered_calls(&state.messages);
    if !pending.is_empty() {
        if prompt.is_none() && state.tools_offered {
            let turn = ToolTurn {
                assistant: None,
                calls: pending.into_iter().map(turn_call).collect(),
            };
            return run_batch(state, turn, false, None);
        }
        for call in pending {
            state.messages.push(OpenaiChatMessage::tool_answer(
                call.id,
                ToolAnswer::error(NOT_RUN),
            ));
        }
    }
    if let Some(prompt) = prompt {
        state.messages.push(OpenaiChatMessage::user_text(prompt));
    }
    request_model(state)
}

/// The next model request, unless the turn limit is reached.
fn request_model(mut state: RunState) -> (RunState, Effect) {
    if state.turns >= state.rules.max_turns {
        let error = LlmError::MaxTurnsExceeded {
            turns: state.rules.max_turns,
            history: state.committed_messages().to_vec(),
        };
        return fail(state, error);
    }
    if let Err(error) = crate::run::budget::admit_request(&state) {
        return fail(state, error);
    }
    state.turns += 1;
    state.phase = Phase::NeedModel;
    let request = ModelRequest {
        tool_choice_relaxed: state.tool_choice_relaxed,
    };
    (state, Effect::RequestModel(request))
}

/// Apply the rules to a reply: a final answer, or a tool turn.
fn model_replied(mut state: RunState, mut reply: ChatResponse) -> (RunState, Effect) {
    if let Some(usage) = reply.usage {
        *state.usage.get_or_insert_with(Usage::default) += usage;
    }
    let has_calls = !reply.message.tool_calls().is_empty();
    // Calls under `length` may be cut mid-JSON: reported, never executed or stored, with or
    // without tools. Calls under any other reason (Ollama sends `stop`) are a tool turn.
    if has_calls && reply.stop_reason == Some(FinishReason::Length) {
        return fail(state, LlmError::TruncatedToolCalls);
    }
    if !has_calls || !state.tools_offered {
        // The final answer (or a call without tools): commit and finish. Calls without tools
        // are returned, not run, and stored answered as not run, so the history never holds
        // an unanswered call.
        let ids: Vec<String> = reply
            .message
            .tool_calls()
            .iter()
            .map(|c| c.id.clone())
            .collect();
        state.messages.push(reply.message.clone());
        for id in ids {
            state.messages.push(OpenaiChatMessage::tool_answer(
                id,
                ToolAnswer::error(NOT_RUN),
            ));
        }
        state.committed = state.messages.len();
        reply.usage = state.usage;
        state.phase = Phase::Finished {
            reply: reply.clone(),
        };
        return (state, Effect::Done(Box::new(reply)));
    }

    let calls: Vec<ToolCall> = reply.message.tool_calls().to_vec();
    let streaks = observe_turn(&mut state.repeats, &calls);
    let guard = state.rules.repeated_call_guard;
    let mut turn = ToolTurn {
        assistant: Some(reply.message),
        calls: Vec::with_capacity(calls.len()),
    };
    for (call, streak) in calls.into_iter().zip(streaks) {
        let mut entry = turn_call(call);
        if guard.limit.is_some_and(|limit| streak >= limit) {
            match guard.action {
                RepeatedCallAction::Abort => {
                    let error = LlmError::RepeatedToolCall {
                        tool: entry.call.function.name,
                        times: streak,
                    };
                    return fail(state, error);
                }
                RepeatedCallAction::TellModel => {
                    entry.answer = Some(ToolAnswer::error(format_args!(
                        "you have called '{}' with these same arguments in {streak} turns in a row; \
                         the result will not change. Use the earlier result or try something different.",
                        entry.call.function.name
                    )));
                }
            }
        }
        turn.calls.push(entry);
    }
    if let Err(error) = crate::run::budget::admit_tool_turn(&mut state, &turn) {
        return fail(state, error);
    }
    run_batch(state, turn, true, reply.usage)
}

/// Enter `AwaitingTools` for `turn`: the calls without an answer run.
fn run_batch(
    mut state: RunState,
    mut turn: ToolTurn,
    from_reply: bool,
    usage: Option<Usage>,
) -> (RunState, Effect) {
    // The final-answer tool is the run's own: answered here, never executed.
    for call in &mut turn.calls {
        if call.answer.is_none() && is_output_call(&state, &call.call) {
            call.answer = Some(ToolAnswer::ok(OUTPUT_RECEIVED));
        }
    }
    let mut batch = ToolBatch {
        calls: Vec::with_capacity(turn.calls.len()),
        from_reply,
        usage,
        answered: Vec::new(),
        run: Vec::new(),
        approved: Vec::new(),
        approved_for: Vec::new(),
    };
    for (position, call) in turn.calls.iter().enumerate() {
        batch.calls.push(call.call.clone());
        match &call.answer {
            Some(answer) => batch.answered.push((position, answer.clone())),
            None => batch.run.push(position),
        }
        if call.approved && call.answer.is_none() {
            batch.approved.push(position);
            batch.approved_for.push(call.approved_for.clone());
        }
    }
    state.phase = Phase::AwaitingTools { turn };
    (state, Effect::RunTools(batch))
}

/// How `finish_turn` answers a call without an answer.
#[derive(Clone, Copy)]
enum Unanswered {
    /// The turn ran to its end: a tool stream that misbehaved.
    NoResult,
    /// The turn was cancelled.
    Cancelled,
}

/// Push the turn (assistant message, then one tool message per call in call order) and
/// commit. Calls without an answer are answered as `unanswered` says.
fn finish_turn(state: &mut RunState, turn: ToolTurn, unanswered: Unanswered) {
    state.messages.extend(turn.assistant);
    let mut media = Vec::new();
    for call in turn.calls {
        media.extend(call.media);
        let answer = call.answer.unwrap_or_else(|| {
            ToolAnswer::error(match unanswered {
                Unanswered::NoResult => NO_RESULT,
                Unanswered::Cancelled if call.started => CANCELLED,
                Unanswered::Cancelled => NOT_STARTED,
            })
        });
        state
            .messages
            .push(OpenaiChatMessage::tool_answer(call.call.id, answer));
    }
    // Tool media go after every tool message of the turn: nothing may come between the
    // assistant's calls and their answers.
    state.messages.extend(media);
    state.committed = state.messages.len();
}

/// The error an [`Input::Cancel`] or [`Input::Abort`] ends the run with.
fn abort_error(input: Input) -> LlmError {
    match input {
        Input::Abort(error) => error,
        _ => LlmError::Cancelled,
    }
}

/// Suspend `turn` until `requests` are decided.
fn suspend(
    mut state: RunState,
    turn: ToolTurn,
    requests: Vec<ApprovalRequest>,
) -> (RunState, Effect) {
    state.phase = Phase::AwaitingApproval {
        turn,
        requests: requests.clone(),
    };
    (state, Effect::Suspend(requests))
}

/// Clear `started` on the unfinished calls of a restored tool turn whose tool is idempotent
/// (`idempotent(tool name)`), so that the next step runs them again instead of answering them
/// as interrupted.
pub fn rerun_idempotent(state: &mut RunState, idempotent: impl Fn(&str) -> bool) {
    if let Some(turn) = state.turn_mut() {
        for call in &mut turn.calls {
            if call.started && call.answer.is_none() && idempotent(&call.call.function.name) {
                call.started = false;
            }
        }
    }
}

/// The answer to a call of the final-answer tool ([`RunState::output_tool`]).
pub(crate) const OUTPUT_RECEIVED: &str = "Final answer received.";

fn is_output_call(state: &RunState, call: &ToolCall) -> bool {
    state.output_tool.as_deref() == Some(call.function.name.as_str())
}

/// The reply a turn that called the final-answer tool ends the run with: the assistant
/// message with the calls, usage summed over the run.
fn output_reply(state: &RunState, turn: &ToolTurn) -> Option<ChatResponse> {
    if !turn
        .calls
        .iter()
        .any(|call| is_output_call(state, &call.call))
    {
        return None;
    }
    // A resumed turn's assistant message is already in the history.
    let message = turn.assistant.clone().or_else(|| {
        state
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m, OpenaiChatMessage::Assistant { .. }))
            .cloned()
    })?;
    Some(ChatResponse {
        message,
        stop_reason: Some(FinishReason::Stop),
        usage: state.usage,
        model: None,
        id: None,
    })
}

/// Finish after a turn that called the final-answer tool (already committed).
fn finish_with_output(mut state: RunState, reply: ChatResponse) -> (RunState, Effect) {
    state.phase = Phase::Finished {
        reply: reply.clone(),
    };
    (state, Effect::Done(Box::new(reply)))
}

/// Fail: keep only the committed history.
fn fail(mut state: RunState, error: LlmError) -> (RunState, Effect) {
    let committed = state.committed.min(state.messages.len());
    state.messages.truncate(committed);
    state.phase = Phase::Failed {
        error: error.to_string(),
    };
    (state, Effect::Fail(error))
}

fn turn_call(call: ToolCall) -> TurnCall {
    TurnCall {
        call,
        started: false,
        answer: None,
        approved: false,
        approved_for: None,
        media: None,
        child: None,
        continuation: None,
        idempotency_key: None,
    }
}

fn input_name(input: &Input) -> &'static str {
    match input {
        Input::Start { .. } => "start",
        Input::ModelReplied(_) => "a model reply",
        Input::ModelFailed(_) => "a model failure",
        Input::ToolsDone => "tools done",
        Input::ToolsDeferred(_) => "deferred approvals",
        Input::Decisions(_) => "decisions",
        Input::Cancel => "cancel",
        Input::Abort(_) => "an abort",
    }
}

fn phase_name(phase: &Phase) -> &'static str {
    match phase {
        Phase::NeedModel => "need_model",
        Phase::ModelReplied { .. } => "model_replied",
        Phase::AwaitingTools { .. } => "awaiting_tools",
        Phase::AwaitingApproval { .. } => "awaiting_approval",
        Phase::Finished { .. } => "finished",
        Phase::Failed { .. } => "failed",
    }
}

/// `options` with a forced `tool_choice` turned into `auto`, or `None` when none is forced:
/// a forced choice (`required`, or one named function) applies to the first request only.
pub fn relaxed_tool_choice(options: &RequestOptions) -> Option<RequestOptions> {
    match options.tool_choice {
        Some(ToolChoice::Required | ToolChoice::Function(_)) => Some(RequestOptions {
            tool_choice: Some(ToolChoice::Auto),
            ..options.clone()
        }),
        _ => None,
    }
}

/// The calls of the last assistant message that no `tool` message answers yet, in call order
/// (empty when the history does not end with such a message and its answers).
pub(crate) fn unanswered_calls(messages: &[OpenaiChatMessage]) -> Vec<ToolCall> {
    let answers = messages
        .iter()
        .rev()
        .take_while(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        .count();
    let Some(assistant) = messages.len().checked_sub(answers + 1) else {
        return Vec::new();
    };
    let answered: HashSet<&str> = messages[assistant + 1..]
        .iter()
        .filter_map(|m| match m {
            OpenaiChatMessage::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    messages[assistant]
        .tool_calls()
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .cloned()
        .collect()
}

/// Record one tool turn's calls in `streaks`; returns each call's streak (consecutive tool
/// turns with the same tool and canonical arguments, this one included), in call order. A
/// turn counts once however many identical calls it holds: parallel identical calls are a
/// model fanning out, not a model stuck in a loop. A call missing from a turn starts again.
fn observe_turn(streaks: &mut Vec<RepeatStreak>, calls: &[ToolCall]) -> Vec<u32> {
    let mut next: Vec<RepeatStreak> = Vec::with_capacity(calls.len());
    let mut result = Vec::with_capacity(calls.len());
    for call in calls {
        let (tool, arguments) = signature(call);
        if let Some(seen) = next
            .iter()
            .find(|s| s.tool == tool && s.arguments == arguments)
        {
            result.push(seen.streak);
            continue;
        }
        let streak = streaks
            .iter()
            .find(|s| s.tool == tool && s.arguments == arguments)
            .map_or(1, |s| s.streak.saturating_add(1));
        result.push(streak);
        next.push(RepeatStreak {
            tool,
            arguments,
            streak,
        });
    }
    *streaks = next;
    result
}

/// A call's identity for the repeat guard: the tool name and canonical arguments (parsed and
/// re-serialised, so whitespace and key order do not matter).
fn signature(call: &ToolCall) -> (String, String) {
    let arguments = serde_json::from_str::<Value>(&call.function.arguments)
        .map(|value| value.to_string())
        .unwrap_or_else(|_| call.function.arguments.clone());
    (call.function.name.clone(), arguments)
}

#[cfg(test)]
#[path = "step_tests.rs"]
mod tests;
