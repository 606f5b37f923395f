//! The API for external engines: a durable-execution engine (e.g. `agcore-restate`) that
//! drives [`step`](crate::run::step) itself and journals each effect its own way calls these
//! for the effects, one model request or one tool call at a time, made exactly as the
//! built-in driver makes them (context engine, hooks, retries; permissions, approvals,
//! timeouts and the answer pipeline).
//!
//! A tool turn, as the driver takes it: [`before_tools`] (the `before_tool_call` hooks; the
//! engine journals what they decided), [`assign_keys`] (each call's idempotency key, from a
//! run id the engine keeps deterministic across its replays), then [`run_call`] for each call
//! (concurrently, at most [`ToolRegistry::concurrency_limit`] at a time); a call cut off by a
//! crash that is not run again is answered with [`interrupted`].

use futures::StreamExt;

use crate::run::conversation::Conversation;
use crate::run::error::LlmError;
use crate::run::handle::observer::BatchObserver;
use crate::run::handle::{self, EventSink, RunContext};
use crate::run::hooks;
use crate::run::idempotency;
use crate::run::state::RunState;
use crate::run::step::{Input, ModelRequest, ToolBatch};
use crate::tools::approval::ApprovalRequest;
use crate::tools::call_digest::CallDigest;
use crate::tools::error::ToolError;
use crate::tools::outcome::ToolOutcome;
use crate::tools::registry::{ToolCallRequest, ToolRegistry};
use crate::vocab::{ChatResponse, OpenaiChatMessage, ToolAnswer, ToolCall, ToolDefinition};

/// A conversation with `template`'s model, configuration and history (its system prompt),
/// with a context engine of its own: one per run an engine drives, the model shared.
pub fn fork(template: &Conversation) -> Conversation {
    Conversation {
        model: template.model.clone(),
        config: template.config.clone(),
        messages: template.messages.clone(),
        context: crate::context::ContextState::default(),
        usage: Default::default(),
    }
}

/// The tools offered to `conversation`'s model from `registry` (as the driver offers them).
pub fn offered_tools(conversation: &Conversation, registry: &ToolRegistry) -> Vec<ToolDefinition> {
    registry.exposed_definitions(conversation.model.provider(), &conversation.config.model)
}

/// The tools offered for `state`'s next model request, as the driver offers them when some
/// of `registry`'s tools are deferred ([`crate::tools::deferred`]): `tool_search` in their
/// place, and from the request after a search on, the tools it loaded (`state.loaded_tools`);
/// for Anthropic's Messages API, every tool, the deferred ones marked for its own search.
/// Without deferred tools, the same as [`offered_tools`].
pub fn offered_tools_for(
    conversation: &Conversation,
    registry: &ToolRegistry,
    state: &RunState,
) -> Vec<ToolDefinition> {
    handle::deferred::offered(
        conversation.model.as_ref(),
        registry,
        &conversation.config.model,
        &state.loaded_tools,
    )
}

/// Narrow `conversation`'s hosted tools (web search, code execution, ...; see
/// [`crate::tools::hosted`]) to those `registry`'s gates let through — restricted mode,
/// profiles, permissions — as the driver does before each request. Call it on the fork an
/// engine requests the model with; without it, the configured hosted tools go out ungated.
pub fn gate_hosted_tools(conversation: &mut Conversation, registry: &ToolRegistry) {
    let asked = &conversation.config.options.hosted_tools;
    if asked.is_empty() {
        return;
    }
    let offered = registry.offered_hosted_tools(
        asked,
        conversation.model.provider(),
        &conversation.config.model,
    );
    conversation.config.options.hosted_tools = offered;
}

/// Answer the calls of `batch` that the run answers itself, as the driver does before a tool
/// turn: a `tool_search` call (its matches load, and join `state.loaded_tools`), and a
/// deferred tool called before a search loaded it. Each answered call leaves `batch.run`, its
/// answer is recorded in `state` and listed in `batch.answered`; the answers are returned by
/// position. The answers depend only on `registry` and `state`, so an engine replaying its
/// handler gets the same ones without journaling them (it journals `state`).
pub fn answer_deferred(
    conversation: &Conversation,
    registry: &ToolRegistry,
    state: &mut RunState,
    batch: &mut ToolBatch,
) -> Vec<(usize, ToolAnswer)> {
    let answers = handle::deferred::answer(
        conversation.model.as_ref(),
        registry,
        &conversation.config.model,
        state,
        batch,
    );
    for (position, answer) in &answers {
        batch.run.retain(|p| p != position);
        state.record_answer(*position, answer.clone());
        batch.answered.push((*position, answer.clone()));
    }
    answers
}

/// The model request of an [`Effect::RequestModel`](crate::run::Effect::RequestModel): the
/// context engine prepares `state`'s history (it may compact it, and counts its own requests
/// in `state`), the hooks see the request and the reply. Blocking, not streamed.
pub async fn request_model(
    conversation: &mut Conversation,
    state: &mut RunState,
    request: ModelRequest,
    tools: &[ToolDefinition],
) -> Result<ChatResponse, LlmError> {
    let Conversation {
        model,
        config,
        context,
        ..
    } = conversation;
    let cx = RunContext::external(model, config, tools);
    let sink = EventSink::discarding();
    // Nobody watches an engine's calls stream (its events are discarded).
    let call_updates = crate::run::call_updates::CallUpdates::new();
    let mut input_streams = crate::run::input_stream::InputStreams::default();
    let streams = handle::model::Streams {
        call_updates: &call_updates,
        input_streams: &mut input_streams,
    };
    match handle::model::request_model(&cx, state, context, streams, request, &sink).await {
        Input::ModelReplied(reply) => Ok(*reply),
        Input::ModelFailed(error) => Err(error),
        _ => Err(LlmError::Other(
            "the model request ended without a reply".to_owned(),
        )),
    }
}

/// Ask `conversation`'s `before_tool_call` hooks about every call of `batch` that is to run,
/// as the driver does before a tool turn: a rewritten call's arguments change in
/// `batch.calls`; a denied call moves from `batch.run` to `batch.answered`. Returns the denied
/// calls' answers by position, for the run state ([`RunState::record_answer`]). Without hooks,
/// nothing changes. Hooks may ask a person or a service: an engine journals their outcome.
pub async fn before_tools(
    conversation: &Conversation,
    batch: &mut ToolBatch,
) -> Vec<(usize, ToolAnswer)> {
    hooks::before_tools(&conversation.config.hooks, batch).await
}

/// Give each call of `state`'s tool turn that has none its idempotency key, derived from
/// `session`, `state.run_id`, the turn and the call id (see [`crate::run::idempotency`]);
/// keys already given are kept. A state without a run id gets a random one first — an
/// engine that replays its handler sets `state.run_id` itself beforehand, from a value that
/// is the same on every replay, so the keys are too.
pub fn assign_keys(state: &mut RunState, session: Option<&str>) {
    idempotency::assign_keys(state, session);
}

/// The idempotency key given to the call `call_id` of `state`'s tool turn, if any.
pub fn idempotency_key_of(state: &RunState, call_id: &str) -> Option<String> {
    let position = idempotency::position_of(state, call_id)?;
    idempotency::keys_of(state, &[position]).pop().flatten()
}

/// The answer of a call that was cut off by a crash and is not run again (a tool that does
/// not declare itself idempotent): whether it had any effect is unknown, and it names `key`
/// so the tool or its service can tell — the answer a local run gives.
pub fn interrupted(key: Option<&str>) -> ToolAnswer {
    ToolAnswer::error(crate::run::step::interrupted(key))
}

/// How one tool call ended.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub enum CallEnd {
    /// The call has its answer (shaped for the model), and media to follow the turn's tool
    /// messages, if any.
    Answered {
        /// What the model reads.
        answer: ToolAnswer,
        /// The media message, if the tool returned media.
        media: Option<OpenaiChatMessage>,
    },
    /// The approver deferred the call: it waits for a decision (not answered).
    Deferred(ApprovalRequest),
}

/// Run one call of an [`Effect::RunTools`](crate::run::Effect::RunTools) batch through
/// `registry` (permission, rules, approval, timeout), its answer shaped as the driver shapes
/// it. `approved`: `Some(digest)` when a decision already allowed the call (the batch's
/// `approved` / `approved_for`), so its approver is not asked again. The tool sees the call's
/// idempotency key (given by [`assign_keys`] in `state`) through [`ToolContext::current`], an
/// MCP server in `_meta`.
pub async fn run_call(
    conversation: &Conversation,
    state: &RunState,
    registry: &ToolRegistry,
    call: &ToolCall,
    approved: Option<Option<CallDigest>>,
) -> CallEnd {
    // The driver's observer, without a journal (the engine keeps its own): the same key,
    // the same answer pipeline.
    let position = idempotency::position_of(state, &call.id).unwrap_or(usize::MAX);
    let observer = BatchObserver::new(
        &conversation.config,
        None,
        state,
        &[position],
        vec![call.clone()],
        vec![false],
        true,
    );
    let mut completed = registry.run_stream_observed(
        vec![(ToolCallRequest::from(call), approved, None)],
        &observer,
    );
    let Some((_, done)) = completed.next().await else {
        return CallEnd::Answered {
            answer: ToolAnswer::error("the tool produced no result"),
            media: None,
        };
    };
    drop(completed);
    if let ToolOutcome::Refused {
        reason: ToolError::ApprovalDeferred { request },
    } = done.outcome
    {
        return CallEnd::Deferred(*request);
    }
    let media = observer.take_media(0);
    CallEnd::Answered {
        answer: done.answer,
        media,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use serde_json::{Value, json};

    use super::*;
    use crate::llm::{CycleConfig, OpenAiClient, OpenAiConfig};
    use crate::run::state::RunRules;
    use crate::run::step::{Effect, Input, step};
    use crate::tools::BaseTool;
    use crate::tools::context::ToolContext;
    use crate::vocab::{ChatResponse, FinishReason};

    /// Writes down the key each of its runs sees.
    struct Keyed(Mutex<Vec<Option<String>>>);

    #[async_trait::async_trait]
    impl BaseTool for Keyed {
        fn name(&self) -> &str {
            "keyed"
        }
        fn description(&self) -> &str {
            "writes down its key"
        }
        fn parameters(&self) -> Value {
            json!({"type": "object", "properties": {}})
        }
        async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
            let key = ToolContext::current().map(|context| context.idempotency_key().to_owned());
            self.0.lock().unwrap().push(key);
            Ok(json!("done"))
        }
    }

    #[tokio::test]
    async fn an_engines_call_sees_the_key_a_local_run_would_give_it() {
        // Never asked: the model's replies are given to the step machine by hand.
        let client = OpenAiClient::new(OpenAiConfig::new("http://127.0.0.1:9/v1")).unwrap();
        let conversation = Conversation::new(client, CycleConfig::new("m"));
        let tool = Arc::new(Keyed(Mutex::new(Vec::new())));
        let mut registry = ToolRegistry::new();
        registry.register(tool.clone()).unwrap();

        let state = RunState::new(Vec::new(), RunRules::of(conversation.config()), true);
        let (state, _) = step(
            state,
            Input::Start {
                prompt: Some("q".to_owned()),
            },
        );
        let reply = ChatResponse {
            message: OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c1", "keyed", "{}")],
            ),
            stop_reason: Some(FinishReason::ToolCalls),
            usage: None,
            model: None,
            id: None,
        };
        let (mut state, effect) = step(state, Input::ModelReplied(Box::new(reply)));
        let Effect::RunTools(mut batch) = effect else {
            panic!("expected a tool batch, got {effect:?}");
        };
        // No hooks: nothing changes.
        assert!(before_tools(&conversation, &mut batch).await.is_empty());
        assert_eq!(batch.run, [0]);

        // The engine's deterministic run id: the keys derive from it, and stay.
        state.run_id = Some("run_fixed".to_owned());
        assign_keys(&mut state, Some("s"));
        let expected = idempotency::idempotency_key(Some("s"), "run_fixed", state.turns, "c1");
        assert_eq!(idempotency_key_of(&state, "c1"), Some(expected.clone()));
        assign_keys(&mut state, Some("other"));
        assert_eq!(idempotency_key_of(&state, "c1"), Some(expected.clone()));

        let end = run_call(&conversation, &state, &registry, &batch.calls[0], None).await;
        assert!(matches!(end, CallEnd::Answered { .. }), "{end:?}");
        assert_eq!(*tool.0.lock().unwrap(), [Some(expected.clone())]);

        let cut = interrupted(Some(&expected));
        assert!(cut.is_error && cut.content.contains(&expected), "{cut:?}");
    }
}
