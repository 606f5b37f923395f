//! Deferred tools in a run (see [`crate::tools::deferred`]): what the model is offered while
//! some tools wait to be found, and the calls the run answers itself — `tool_search`, and a
//! deferred tool called before a search loaded it. One place for the local driver and the
//! external-engine API ([`crate::run::external`]), so a durable engine defers exactly as a
//! local run does.

use crate::llm::model::{ChatModel, WireApi};
use crate::run::state::RunState;
use crate::run::step::ToolBatch;
use crate::tools::registry::ToolRegistry;
use crate::vocab::{OpenaiChatMessage, ToolAnswer, ToolDefinition};

/// Whether deferred tools go to the model's API for its own tool search (Anthropic's Messages
/// API: every tool sent, the deferred ones with `defer_loading`) instead of the local
/// `tool_search`.
pub(crate) fn native_search(model: &dyn ChatModel, registry: &ToolRegistry, name: &str) -> bool {
    model.api() == WireApi::AnthropicMessages && registry.offers_tool_search(model.provider(), name)
}

/// What `registry` offers the model `name` of `model` once the run's searches loaded `loaded`.
pub(crate) fn offered(
    model: &dyn ChatModel,
    registry: &ToolRegistry,
    name: &str,
    loaded: &[String],
) -> Vec<ToolDefinition> {
    if native_search(model, registry, name) {
        registry.native_definitions(model.provider(), name)
    } else {
        registry.offered_definitions(model.provider(), name, loaded)
    }
}

/// Answer the calls of `batch` the run answers itself, and add what they loaded to
/// `state.loaded_tools`. With the API's own search nothing is answered: the names its search
/// loaded (found in the last reply) are kept with the run, for callers. Deterministic for the
/// same registry and state, so an engine replaying its handler gets the same answers.
pub(crate) fn answer(
    model: &dyn ChatModel,
    registry: &ToolRegistry,
    name: &str,
    state: &mut RunState,
    batch: &ToolBatch,
) -> Vec<(usize, ToolAnswer)> {
    if native_search(model, registry, name) {
        let reply = state
            .messages
            .iter()
            .rev()
            .find(|m| matches!(m, OpenaiChatMessage::Assistant { .. }));
        let found = reply
            .map(crate::tools::tool_search::loaded_natively)
            .unwrap_or_default();
        for tool in found {
            if !state.loaded_tools.contains(&tool) {
                state.loaded_tools.push(tool);
            }
        }
        return Vec::new();
    }
    let calls = batch
        .run
        .iter()
        .filter_map(|&p| batch.calls.get(p).map(|call| (p, call)));
    registry.answer_deferred_calls(model.provider(), name, calls, &mut state.loaded_tools)
}
