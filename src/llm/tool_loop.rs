//! The one request path behind `submit`, `submit_stream` and the tool loop: a model request
//! per turn (with retries and deadline), stream assembly, tool execution through the registry,
//! and history that only ever holds completed turns.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};
use serde_json::Value;

use crate::llm::config::{CycleConfig, RepeatedCallAction};
use crate::llm::cycle::LlmCycle;
use crate::llm::error::{LlmError, TimeoutKind};
use crate::llm::event::StreamEvent;
use crate::llm::model::{ChatModel, ChatRequest};
use crate::llm::retry::open_stream;
use crate::llm::stream::StreamAssembler;
use crate::tools::registry::{ToolCallRequest, ToolInvocation, ToolRegistry};
use crate::vocab::generate_call_id;
use crate::vocab::{
    ChatResponse, FinishReason, OpenaiChatMessage, RequestOptions, ToolCall, ToolChoice, Usage,
};

/// How a turn talks to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `ChatModel::chat`.
    Blocking,
    /// `ChatModel::chat_stream`.
    Streaming,
}

/// What the loop yields: events for streaming callers, then exactly one `Done` or `Failed`.
pub(crate) enum LoopItem {
    Event(StreamEvent),
    Done(Box<ChatResponse>),
    Failed(LlmError),
}

/// The history of one call. Messages pushed after the last `commit` are removed when the guard
/// is dropped — on error, on cancellation (the stream dropped), on early return — except a tool
/// turn in which some tool already started: it may have had effects, so the turn is kept (the
/// user message before it too, on the first turn), with the calls that had not finished
/// answered as cancelled.
struct History<'a> {
    messages: &'a mut Vec<OpenaiChatMessage>,
    committed: usize,
    turn: Option<ToolTurn>,
}

/// A tool turn in progress: the assistant message (`None` when it is already in the history),
/// an answer slot per call, and which calls' tools have started executing.
struct ToolTurn {
    assistant: Option<OpenaiChatMessage>,
    ids: Vec<String>,
    answers: Vec<Option<String>>,
    started: StartedCalls,
}

/// Which calls of a turn have started executing, set by the registry as each tool starts —
/// before it finishes, so a cancellation knows about tools still in flight.
#[derive(Clone)]
struct StartedCalls(Arc<[AtomicBool]>);

impl StartedCalls {
    fn new(calls: usize) -> Self {
        StartedCalls((0..calls).map(|_| AtomicBool::new(false)).collect())
    }

    fn mark(&self, position: usize) {
        if let Some(flag) = self.0.get(position) {
            flag.store(true, Ordering::Relaxed);
        }
    }

    fn get(&self, position: usize) -> bool {
        self.0
            .get(position)
            .is_some_and(|flag| flag.load(Ordering::Relaxed))
    }

    fn any(&self) -> bool {
        self.0.iter().any(|flag| flag.load(Ordering::Relaxed))
    }
}

/// The answer of a call that was cancelled while running.
const CANCELLED: &str =
    "Error: cancelled before the tool finished; whether it had any effect is unknown.";

/// The answer of a call that was cancelled before its tool started (queued, or waiting for
/// approval).
const NOT_STARTED: &str = "Error: cancelled before the tool started; it did not run.";

/// How `finish_turn` answers a call without a result.
#[derive(Clone, Copy)]
enum Unanswered {
    /// The turn ran to its end: a tool stream that misbehaved.
    NoResult,
    /// The turn was cancelled.
    Cancelled,
}

impl History<'_> {
    fn push(&mut self, message: OpenaiChatMessage) {
        self.messages.push(message);
    }

    fn commit(&mut self) {
        self.committed = self.messages.len();
    }

    /// Start a tool turn answering `calls` (of `assistant`, or of the last message when `None`).
    /// The registry marks the returned flags as each call's tool starts.
    fn begin_turn(
        &mut self,
        assistant: Option<OpenaiChatMessage>,
        calls: &[ToolCall],
    ) -> StartedCalls {
        let started = StartedCalls::new(calls.len());
        self.turn = Some(ToolTurn {
            assistant,
            ids: calls.iter().map(|call| call.id.clone()).collect(),
            answers: vec![None; calls.len()],
            started: started.clone(),
        });
        started
    }

    /// Record the answer of the call at `position`.
    fn answer(&mut self, position: usize, content: String) {
        if let Some(slot) = self
            .turn
            .as_mut()
            .and_then(|turn| turn.answers.get_mut(position))
        {
            *slot = Some(content);
        }
    }

    /// Push the turn (assistant message, then one tool message per call in call order) and
    /// commit. Calls without an answer are answered as `unanswered` says.
    fn finish_turn(&mut self, unanswered: Unanswered) {
        if let Some(turn) = self.turn.take() {
            self.messages.extend(turn.assistant);
            for (position, (id, answer)) in turn.ids.into_iter().zip(turn.answers).enumerate() {
                let answer = answer.unwrap_or_else(|| {
                    match unanswered {
                        Unanswered::NoResult => NO_RESULT,
                        Unanswered::Cancelled if turn.started.get(position) => CANCELLED,
                        Unanswered::Cancelled => NOT_STARTED,
                    }
                    .to_owned()
                });
                self.messages
                    .push(OpenaiChatMessage::tool_result(id, answer));
            }
            self.commit();
        }
    }
}

impl Drop for History<'_> {
    fn drop(&mut self) {
        // A started tool may have had effects: forgetting its turn would be worse than keeping
        // a turn the model did not finish. Calls refused before execution (unknown, hidden,
        // denied, invalid, not approved) never start, so they do not keep a turn.
        if self.turn.as_ref().is_some_and(|turn| turn.started.any()) {
            self.finish_turn(Unanswered::Cancelled);
        }
        self.messages.truncate(self.committed);
    }
}

impl LlmCycle {
    pub(crate) fn run_loop<'a>(
        &'a mut self,
        prompt: Option<String>,
        registry: Option<&'a ToolRegistry>,
        mode: Mode,
    ) -> impl Stream<Item = LoopItem> + Send + 'a {
        let LlmCycle {
            model,
            config,
            messages,
        } = self;
        let model: &'a dyn ChatModel = &**model;
        let config: &'a CycleConfig = config;
        async_stream::stream! {
            let committed = messages.len();
            let mut history = History { messages, committed, turn: None };
            // Calls left unanswered by an earlier `submit` (which returns tool calls without running
            // them) would make every later request invalid: resuming with a registry runs them;
            // anything else answers them as not run.
            let pending = unanswered_calls(history.messages);
            if !pending.is_empty() {
                match (&prompt, registry) {
                    (None, Some(registry)) => {
                        for call in &pending {
                            yield LoopItem::Event(StreamEvent::ToolExecutionStarted {
                                id: call.id.clone(),
                                tool_name: call.function.name.clone(),
                                input: parse_input(&call.function.arguments),
                            });
                        }
                        let started = history.begin_turn(None, &pending);
                        {
                            let requests = pending.iter().map(ToolCallRequest::from).collect();
                            let mut completed = registry.invoke_stream_observed(requests, move |index| started.mark(index));
                            while let Some((index, invocation)) = completed.next().await {
                                let content = registry.model_content(&invocation);
                                let event = completed_event(invocation, &content);
                                history.answer(index, truncate_for_model(content, config.tool_output_limit));
                                yield LoopItem::Event(event);
                            }
                        }
                        // The earlier turn is now complete.
                        history.finish_turn(Unanswered::NoResult);
                    }
                    _ => {
                        for call in &pending {
                            history.push(OpenaiChatMessage::tool_result(call.id.clone(), NOT_RUN));
                        }
                    }
                }
            }
            if let Some(prompt) = prompt {
                history.push(OpenaiChatMessage::user_text(prompt));
            }
            let max_turns = config.effective_max_turns();
            let mut total_usage: Option<Usage> = None;
            let mut repeats = RepeatTracker::default();

            // Built once per call, not per turn: a registry's schemas can be large.
            let tools = match registry {
                Some(registry) => registry.exposed_definitions(model.provider(), &config.model),
                None => Vec::new(),
            };
            // A forced tool choice (`required`, or one named function) applies to the first
            // request only: forced on every turn the model could never give its final answer.
            let relaxed = forced_tool_choice_relaxed(&config.options);
            let mut options = &config.options;
            for _turn in 0..max_turns {
                let request = ChatRequest {
                    model: &config.model,
                    messages: history.messages.as_slice(),
                    tools: &tools,
                    options,
                };

                // One model request.
                let mut response = match mode {
                    Mode::Blocking => match blocking_request(model, config, request).await {
                        Ok(response) => response,
                        Err(error) => {
                            yield LoopItem::Failed(error);
                            return;
                        }
                    },
                    Mode::Streaming => {
                        // Each attempt gets its own deadline (a backoff may be longer than the
                        // limit); the successful attempt's deadline then covers the whole reply.
                        let opened = config.retry.run(|| async move {
                            let deadline = config.request_timeout.map(|limit| (tokio::time::Instant::now() + limit, limit));
                            // An error before the first delta fails the attempt (and is retried).
                            let opened = async { open_stream(model.chat_stream(request).await?).await };
                            with_deadline(deadline, opened).await.map(|deltas| (deltas, deadline))
                        }).await;
                        let (mut deltas, deadline) = match opened {
                            Ok(opened) => opened,
                            Err(error) => {
                                yield LoopItem::Failed(error);
                                return;
                            }
                        };
                        let mut assembler = StreamAssembler::with_limits(config.reply_limits);
                        let mut events = Vec::new();
                        loop {
                            let next = match deadline {
                                Some((at, limit)) => match tokio::time::timeout_at(at, deltas.next()).await {
                                    Ok(next) => next,
                                    Err(_) => Some(Err(request_timeout(limit))),
                                },
                                None => deltas.next().await,
                            };
                            match next {
                                None => break,
                                Some(Ok(delta)) => {
                                    let pushed = assembler.try_push(delta, &mut events);
                                    for event in events.drain(..) {
                                        yield LoopItem::Event(event);
                                    }
                                    if let Err(error) = pushed {
                                        yield LoopItem::Failed(error);
                                        return;
                                    }
                                }
                                Some(Err(error)) => {
                                    yield LoopItem::Failed(error);
                                    return;
                                }
                            }
                        }
                        let finished = assembler.finish(&mut events);
                        for event in events.drain(..) {
                            yield LoopItem::Event(event);
                        }
                        match finished {
                            Ok(response) => response,
                            Err(error) => {
                                yield LoopItem::Failed(error);
                                return;
                            }
                        }
                    }
                };
                normalise_tool_calls(&mut response.message);
                if let Some(usage) = response.usage {
                    *total_usage.get_or_insert_with(Usage::default) += usage;
                }

                let calls: Vec<ToolCall> = response.message.tool_calls().to_vec();
                if !calls.is_empty() && response.stop_reason == Some(FinishReason::Length) {
                    // The arguments may be cut mid-JSON: report, never execute or store, with or
                    // without a registry.
                    yield LoopItem::Failed(LlmError::TruncatedToolCalls);
                    return;
                }
                let registry = match registry {
                    Some(registry) if !calls.is_empty() => registry,
                    _ => {
                        // The final answer (or a plain call): commit and finish. Calls of a
                        // plain call are returned, not run, and stored answered as not run, so
                        // the history never holds an unanswered call.
                        history.push(response.message.clone());
                        for call in &calls {
                            history.push(OpenaiChatMessage::tool_result(call.id.clone(), NOT_RUN));
                        }
                        history.commit();
                        response.usage = total_usage;
                        let reason = response.stop_reason.clone().unwrap_or(FinishReason::Stop);
                        yield LoopItem::Event(StreamEvent::TurnComplete { reason, usage: total_usage });
                        yield LoopItem::Done(Box::new(response));
                        return;
                    }
                };

                // Decide which calls run; the repeated-call guard may stop the loop or answer for a call.
                let streaks = repeats.observe_turn(&calls);
                let mut blocked: Vec<Option<String>> = Vec::with_capacity(calls.len());
                for (call, streak) in calls.iter().zip(streaks) {
                    match config.repeated_call_guard.limit {
                        Some(limit) if streak >= limit => match config.repeated_call_guard.action {
                            RepeatedCallAction::Abort => {
                                yield LoopItem::Failed(LlmError::RepeatedToolCall {
                                    tool: call.function.name.clone(),
                                    times: streak,
                                });
                                return;
                            }
                            RepeatedCallAction::TellModel => blocked.push(Some(format!(
                                "Error: you have called '{}' with these same arguments in {streak} turns in a row; \
                                 the result will not change. Use the earlier result or try something different.",
                                call.function.name
                            ))),
                        },
                        _ => blocked.push(None),
                    }
                }

                for call in &calls {
                    yield LoopItem::Event(StreamEvent::ToolExecutionStarted {
                        id: call.id.clone(),
                        tool_name: call.function.name.clone(),
                        input: parse_input(&call.function.arguments),
                    });
                }
                yield LoopItem::Event(StreamEvent::TurnComplete {
                    reason: FinishReason::ToolCalls,
                    usage: response.usage,
                });

                // Run the calls concurrently; report each as it finishes, answer in call order.
                let started = history.begin_turn(Some(response.message), &calls);
                let mut runnable = Vec::new();
                let mut positions = Vec::new();
                for (position, call) in calls.iter().enumerate() {
                    match &blocked[position] {
                        Some(message) => {
                            history.answer(position, message.clone());
                            yield LoopItem::Event(StreamEvent::ToolExecutionCompleted {
                                id: call.id.clone(),
                                tool_name: call.function.name.clone(),
                                output: Value::String(message.clone()),
                                is_error: true,
                                duration_ms: 0,
                            });
                        }
                        None => {
                            runnable.push(ToolCallRequest::from(call));
                            positions.push(position);
                        }
                    }
                }
                {
                    let marks = positions.clone();
                    let mut completed = registry.invoke_stream_observed(runnable, move |index| {
                        if let Some(&position) = marks.get(index) {
                            started.mark(position);
                        }
                    });
                    while let Some((index, invocation)) = completed.next().await {
                        let content = registry.model_content(&invocation);
                        let event = completed_event(invocation, &content);
                        history.answer(positions[index], truncate_for_model(content, config.tool_output_limit));
                        yield LoopItem::Event(event);
                    }
                }
                history.finish_turn(Unanswered::NoResult);
                if let Some(relaxed) = &relaxed {
                    options = relaxed;
                }
            }

            // What the history holds once the guard drops the uncommitted rest (with
            // `max_turns: Some(0)` that is the prompt): the error and `messages()` agree.
            let snapshot = history.messages[..history.committed].to_vec();
            yield LoopItem::Failed(LlmError::MaxTurnsExceeded { turns: max_turns, history: snapshot });
        }
    }
}

/// A non-streaming request with retries and the request deadline.
async fn blocking_request(
    model: &dyn ChatModel,
    config: &CycleConfig,
    request: ChatRequest<'_>,
) -> Result<ChatResponse, LlmError> {
    // Each attempt gets its own deadline: a backoff may be longer than the limit.
    config
        .retry
        .run(|| async move {
            let deadline = config
                .request_timeout
                .map(|limit| (tokio::time::Instant::now() + limit, limit));
            with_deadline(deadline, model.chat(request)).await
        })
        .await
}

async fn with_deadline<T>(
    deadline: Option<(tokio::time::Instant, Duration)>,
    future: impl Future<Output = Result<T, LlmError>>,
) -> Result<T, LlmError> {
    match deadline {
        Some((at, limit)) => tokio::time::timeout_at(at, future)
            .await
            .unwrap_or_else(|_| Err(request_timeout(limit))),
        None => future.await,
    }
}

fn request_timeout(limit: Duration) -> LlmError {
    LlmError::Timeout {
        what: TimeoutKind::Request,
        limit,
        retries: 0,
    }
}

/// `options` with a forced `tool_choice` turned into `auto`, or `None` when none is forced.
fn forced_tool_choice_relaxed(options: &RequestOptions) -> Option<RequestOptions> {
    match options.tool_choice {
        Some(ToolChoice::Required | ToolChoice::Function(_)) => Some(RequestOptions {
            tool_choice: Some(ToolChoice::Auto),
            ..options.clone()
        }),
        _ => None,
    }
}

/// The answer given to a call that was never run because the conversation went on without it.
const NOT_RUN: &str = "Error: this tool call was not run; the conversation continued without it.";

/// The answer of a call that produced nothing (cannot happen unless a tool stream misbehaves).
const NO_RESULT: &str = "Error: the tool produced no result";

/// The calls of the last assistant message that no `tool` message answers yet, in call order
/// (empty when the history does not end with such a message and its answers).
fn unanswered_calls(messages: &[OpenaiChatMessage]) -> Vec<ToolCall> {
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
            if call.function.arguments.trim().is_empty() {
                call.function.arguments = "{}".to_owned();
            }
        }
    }
}

/// The arguments as JSON, or the raw text as a JSON string when it is not valid JSON.
fn parse_input(arguments: &str) -> Value {
    serde_json::from_str(arguments).unwrap_or_else(|_| Value::String(arguments.to_owned()))
}

/// The event for a finished call; takes the invocation so its (possibly large) output moves
/// into the event instead of being copied.
fn completed_event(invocation: ToolInvocation, content: &str) -> StreamEvent {
    let is_error = invocation.is_error();
    StreamEvent::ToolExecutionCompleted {
        id: invocation.id,
        tool_name: invocation.tool_name,
        output: match invocation.output {
            Ok(value) => value,
            Err(_) => Value::String(content.to_owned()),
        },
        is_error,
        duration_ms: u64::try_from(invocation.duration.as_millis()).unwrap_or(u64::MAX),
    }
}

/// Cut `content` to about `limit` bytes for the model: head and tail kept, with a marker in
/// between saying how much was cut.
pub(crate) fn truncate_for_model(content: String, limit: usize) -> String {
    if content.len() <= limit {
        return content;
    }
    let keep_head = floor_char_boundary(&content, limit / 2);
    let tail_start = ceil_char_boundary(&content, content.len() - limit / 4);
    let cut = tail_start - keep_head;
    format!(
        "{}\n[... {cut} of {} bytes cut here; the output was too long ...]\n{}",
        &content[..keep_head],
        content.len(),
        &content[tail_start..]
    )
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

/// Counts, per call (same tool, same arguments), in how many consecutive turns of one call it
/// was requested. A turn counts once however many identical calls it holds: parallel
/// identical calls are a model fanning out, not a model stuck in a loop.
#[derive(Default)]
struct RepeatTracker {
    /// The calls of the last turn, with their streak of consecutive turns.
    streaks: HashMap<(String, String), u32>,
}

impl RepeatTracker {
    /// Record one turn's calls; returns each call's streak (this turn included), in call order.
    fn observe_turn(&mut self, calls: &[ToolCall]) -> Vec<u32> {
        let signatures: Vec<(String, String)> = calls.iter().map(signature).collect();
        let mut streaks = HashMap::with_capacity(signatures.len());
        for signature in &signatures {
            if !streaks.contains_key(signature) {
                let streak = self
                    .streaks
                    .get(signature)
                    .map_or(1, |s| s.saturating_add(1));
                streaks.insert(signature.clone(), streak);
            }
        }
        // A call missing from this turn starts again from zero.
        self.streaks = streaks;
        signatures
            .iter()
            .map(|signature| self.streaks.get(signature).copied().unwrap_or(1))
            .collect()
    }
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
mod tests {
    use super::*;

    #[test]
    fn long_output_is_cut_with_a_marker_and_keeps_head_and_tail() {
        let content = format!("HEAD{}TAIL", "é".repeat(10_000));
        let cut = truncate_for_model(content.clone(), 1_000);
        assert!(cut.starts_with("HEAD") && cut.ends_with("TAIL"));
        assert!(cut.contains("bytes cut here"));
        assert!(cut.len() < 1_200);
        assert_eq!(truncate_for_model("short".into(), 1_000), "short");
    }

    #[test]
    fn repeats_are_counted_per_turn_on_canonical_arguments() {
        let mut tracker = RepeatTracker::default();
        let f = |id: &str, args: &str| ToolCall::new(id, "f", args);
        // Three identical calls in one turn: one occurrence each.
        assert_eq!(
            tracker.observe_turn(&[
                f("a", r#"{"x":1,"y":2}"#),
                f("b", r#"{ "y": 2, "x": 1 }"#),
                f("c", r#"{"x":1,"y":2}"#),
            ]),
            [1, 1, 1]
        );
        assert_eq!(
            tracker.observe_turn(&[
                ToolCall::new("d", "g", r#"{"x":1,"y":2}"#),
                f("e", r#"{ "x": 1, "y": 2 }"#),
            ]),
            [1, 2]
        );
        // A turn without it resets its count.
        assert_eq!(tracker.observe_turn(&[f("g", "{}")]), [1]);
        assert_eq!(tracker.observe_turn(&[f("h", r#"{"x":1,"y":2}"#)]), [1]);
    }

    #[test]
    fn unanswered_calls_are_those_of_the_last_assistant_message_without_a_tool_message() {
        let calls = vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")];
        let mut messages = vec![
            OpenaiChatMessage::user_text("q"),
            OpenaiChatMessage::assistant_tool_calls(None, calls.clone()),
        ];
        assert_eq!(unanswered_calls(&messages), calls);
        messages.push(OpenaiChatMessage::tool_result("a", "ok"));
        assert_eq!(unanswered_calls(&messages), calls[1..]);
        messages.push(OpenaiChatMessage::tool_result("b", "ok"));
        assert!(unanswered_calls(&messages).is_empty());
        messages.push(OpenaiChatMessage::assistant_text("done"));
        assert!(unanswered_calls(&messages).is_empty());
        assert!(unanswered_calls(&[]).is_empty());
    }

    #[test]
    fn duplicate_and_empty_ids_are_replaced() {
        let mut message = OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![
                ToolCall::new("", "f", ""),
                ToolCall::new("x", "f", "{}"),
                ToolCall::new("x", "g", "{}"),
            ],
        );
        normalise_tool_calls(&mut message);
        let ids: HashSet<&str> = message.tool_calls().iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids.len(), 3);
        assert!(!ids.contains(""));
        assert_eq!(message.tool_calls()[0].function.arguments, "{}");
    }
}
