//! [`step`]: the tool loop's rules, as a pure function from a [`RunState`] and an [`Input`]
//! to the next state and the [`Effect`] the driver performs. Every rule lives here once: the
//! turn limit, the repeated-call guard, truncated and `stop`-reason tool calls, the forced
//! `tool_choice`, unanswered calls, cancellation and output truncation.

use std::collections::HashSet;

use serde_json::Value;

use crate::llm::config::RepeatedCallAction;
use crate::llm::error::LlmError;
use crate::run::state::{Phase, RepeatStreak, RunState, ToolTurn, TurnCall};
use crate::vocab::{
    ChatResponse, FinishReason, OpenaiChatMessage, RequestOptions, ToolAnswer, ToolCall,
    ToolChoice, Usage, generate_call_id, normalise_arguments,
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
    /// Decisions on the calls of an [`Effect::AskApproval`].
    Decisions(Vec<Decision>),
    /// The run was cancelled (its caller went away).
    Cancel,
}

/// A decision on a call awaiting approval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// The call id.
    pub call_id: String,
    /// Denied, with the reason told to the model; `None`: the call goes ahead.
    pub denied: Option<String>,
}

/// What the driver does next.
#[derive(Debug)]
pub enum Effect {
    /// Send the history to the model.
    RequestModel(ModelRequest),
    /// Run a tool turn's calls.
    RunTools(ToolBatch),
    /// Ask for decisions on these calls, then step with [`Input::Decisions`].
    AskApproval(Vec<ToolCall>),
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
            finish_turn(&mut state, turn, Unanswered::NoResult);
            // A forced choice applied to the request whose reply called these tools.
            state.tool_choice_relaxed |= !resumed;
            request_model(state)
        }
        (Phase::AwaitingTools { mut turn }, Input::Start { .. }) => {
            // A restored turn: a call that started but has no answer may or may not have had
            // its effect; it is not run again.
            for call in &mut turn.calls {
                if call.started && call.answer.is_none() {
                    call.answer = Some(ToolAnswer::error(CANCELLED));
                }
            }
            run_batch(state, turn, false, None)
        }
        (Phase::AwaitingApproval { turn, requests }, Input::Start { .. }) => {
            state.phase = Phase::AwaitingApproval {
                turn,
                requests: requests.clone(),
            };
            (state, Effect::AskApproval(requests))
        }
        (Phase::AwaitingApproval { mut turn, .. }, Input::Decisions(decisions)) => {
            for decision in decisions {
                let Some(denied) = decision.denied else {
                    continue;
                };
                if let Some(call) = turn
                    .calls
                    .iter_mut()
                    .find(|call| call.call.id == decision.call_id)
                {
                    call.answer = Some(ToolAnswer::error(format_args!(
                        "tool '{}' was not approved: {}. Do not retry this call; continue without it or ask the user.",
                        call.call.function.name,
                        denied.trim_end_matches('.')
                    )));
                }
            }
            run_batch(state, turn, false, None)
        }
        (Phase::AwaitingTools { turn } | Phase::AwaitingApproval { turn, .. }, Input::Cancel) => {
            // A started tool may have had effects: forgetting its turn would be worse than
            // keeping a turn the model did not finish. Calls refused before execution never
            // start, so they do not keep a turn.
            if turn.calls.iter().any(|call| call.started) {
                finish_turn(&mut state, turn, Unanswered::Cancelled);
            }
            fail(state, LlmError::Cancelled)
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
    normalise_tool_calls(&mut reply.message);
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
    turn: ToolTurn,
    from_reply: bool,
    usage: Option<Usage>,
) -> (RunState, Effect) {
    let mut batch = ToolBatch {
        calls: Vec::with_capacity(turn.calls.len()),
        from_reply,
        usage,
        answered: Vec::new(),
        run: Vec::new(),
    };
    for (position, call) in turn.calls.iter().enumerate() {
        batch.calls.push(call.call.clone());
        match &call.answer {
            Some(answer) => batch.answered.push((position, answer.clone())),
            None => batch.run.push(position),
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
    for call in turn.calls {
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
    state.committed = state.messages.len();
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
    }
}

fn input_name(input: &Input) -> &'static str {
    match input {
        Input::Start { .. } => "start",
        Input::ModelReplied(_) => "a model reply",
        Input::ModelFailed(_) => "a model failure",
        Input::ToolsDone => "tools done",
        Input::Decisions(_) => "decisions",
        Input::Cancel => "cancel",
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

/// Every call gets a unique, non-empty id and arguments that are JSON text (`""` → `{}`).
fn normalise_tool_calls(message: &mut OpenaiChatMessage) {
    if let OpenaiChatMessage::Assistant { tool_calls, .. } = message {
        let mut seen = HashSet::new();
        for call in tool_calls.iter_mut() {
            if call.id.is_empty() || !seen.insert(call.id.clone()) {
                call.id = generate_call_id();
                seen.insert(call.id.clone());
            }
            call.function.arguments =
                normalise_arguments(std::mem::take(&mut call.function.arguments));
        }
    }
}

/// `answer` with its text cut for the model (see [`truncate_for_model`]).
pub(crate) fn truncate_answer(answer: ToolAnswer, limit: usize) -> ToolAnswer {
    ToolAnswer {
        content: truncate_for_model(answer.content, limit),
        is_error: answer.is_error,
    }
}

/// Cut `content` to about `limit` bytes for the model: its beginning (half the limit) and its
/// end (a quarter), cut at line boundaries when lines are short, with a marker in between
/// saying exactly what was removed — the byte and line range — and how to see it.
pub(crate) fn truncate_for_model(content: String, limit: usize) -> String {
    if content.len() <= limit {
        return content;
    }
    let head_end = line_start_before(&content, floor_char_boundary(&content, limit / 2));
    let tail_start = line_start_after(
        &content,
        ceil_char_boundary(&content, content.len() - limit / 4),
    );
    let (head, removed, tail) = (
        &content[..head_end],
        &content[head_end..tail_start],
        &content[tail_start..],
    );
    let first_line = head.matches('\n').count() + 1;
    let last_line =
        first_line + removed.matches('\n').count() - usize::from(removed.ends_with('\n'));
    let lines = if first_line == last_line {
        format!("line {first_line}")
    } else {
        format!("lines {first_line}-{last_line}")
    };
    let newline = if head.is_empty() || head.ends_with('\n') {
        ""
    } else {
        "\n"
    };
    format!(
        "{head}{newline}[... {} bytes cut here: bytes {}-{} of {} ({lines} of this output); the \
         output was longer than the tool output limit of {limit} bytes; re-run with narrower \
         arguments (e.g. an offset, a limit or a filter) to see them ...]\n{tail}",
        removed.len(),
        head_end + 1,
        tail_start,
        content.len(),
    )
}

/// `index` moved back to the start of its line, unless that loses more than half the text
/// before it (then `index`, a char boundary, as it is).
fn line_start_before(text: &str, index: usize) -> usize {
    match text[..index].rfind('\n') {
        Some(newline) if newline + 1 >= index / 2 => newline + 1,
        _ => index,
    }
}

/// `index` moved forward to the start of the next line, unless that loses more than half the
/// text after it (then `index`, a char boundary, as it is).
fn line_start_after(text: &str, index: usize) -> usize {
    let after = text.len() - index;
    match text[index..].find('\n') {
        _ if index == 0 || text.as_bytes()[index - 1] == b'\n' => index,
        Some(newline) if newline < after / 2 => index + newline + 1,
        _ => index,
    }
}

fn floor_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index -= 1;
    }
    index
}

fn ceil_char_boundary(text: &str, mut index: usize) -> usize {
    while !text.is_char_boundary(index) {
        index += 1;
    }
    index
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
