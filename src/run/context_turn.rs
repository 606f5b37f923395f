//! One model request with the context engine around it: prepare the history (repair,
//! estimate, compact), send, learn from the usage; on a server's `context_length_exceeded`
//! compact one tier harder and send once more.

use std::sync::atomic::AtomicU32;

use futures::{Stream, StreamExt};

use crate::context::{self, ContextState, History, Plan};
use crate::llm::model::{ChatModel, ChatRequest};
use crate::run::budget;
use crate::run::config::CycleConfig;
use crate::run::error::LlmError;
use crate::run::metered::{Metered, Spent};
use crate::run::model_turn::{self, Mode, TurnItem};
use crate::run::state::RunState;
use crate::vocab::{RequestOptions, ToolDefinition};

/// The model request of `state`'s next turn, with the context engine.
pub(crate) fn request<'a>(
    state: &'a mut RunState,
    engine: &'a mut ContextState,
    model: &'a dyn ChatModel,
    config: &'a CycleConfig,
    tools: &'a [ToolDefinition],
    options: &'a RequestOptions,
    mode: Mode,
) -> impl Stream<Item = TurnItem> + Send + 'a {
    async_stream::stream! {
        let first_request = state.turns <= 1;
        // The engine's own requests (summaries) go through the hooks and are counted.
        let metered = metered_model(model, config, state);
        let prepared = context::prepare(
            engine,
            History { messages: &mut state.messages, committed: &mut state.committed },
            first_request,
            &metered,
            &config.engine(),
            tools,
        )
        .await;
        charge(state, metered.spent());
        for event in prepared.events {
            yield TurnItem::Event(event.into());
        }
        let mut highest = prepared.highest;
        let mut retried = false;
        loop {
            // Count what compaction wrote (stubs, a summary) before the estimate.
            engine.measure(&config.engine(), &state.messages, tools).await;
            let (estimate, bytes) = engine.estimate(&state.messages, tools);
            let counted = engine.counted(&state.messages, tools);
            let edited = config.hooks.before_model_request(&config.model, &state.messages, options).await;
            let request = ChatRequest {
                model: &config.model,
                messages: edited.as_ref().map_or(state.messages.as_slice(), |edited| edited.messages.as_slice()),
                tools,
                options: edited.as_ref().map_or(options, |edited| &edited.options),
            };
            let mut reply = None;
            let mut streamed = false;
            let attempts = AtomicU32::new(0);
            {
                let mut items = std::pin::pin!(model_turn::request(model, config, request, mode, &attempts));
                while let Some(item) = items.next().await {
                    match item {
                        TurnItem::Event(event) => {
                            streamed = true;
                            yield TurnItem::Event(event);
                        }
                        TurnItem::Reply(result) => reply = Some(result),
                    }
                }
            }
            // The first attempt is the turn's request (counted by the step); each retry is one more.
            state.extra_requests = state.extra_requests.saturating_add(attempts.into_inner().saturating_sub(1));
            let message = match &reply {
                Some(Ok(response)) => {
                    engine.observe_usage(&config.engine(), bytes, response.usage);
                    engine.observe_counted(counted, response.usage);
                    None
                }
                Some(Err(LlmError::ContextLengthExceeded { message })) if config.context.enabled => Some(message.clone()),
                _ => None,
            };
            let Some(message) = message else {
                if let Some(reply) = reply {
                    yield TurnItem::Reply(reply);
                }
                return;
            };
            engine.observe_overflow(&config.engine(), bytes, estimate, &message);
            // Once only, and never after part of the reply was shown.
            if retried || streamed {
                yield TurnItem::Reply(Err(exhausted(&message, highest)));
                return;
            }
            retried = true;
            let mut events = Vec::new();
            let plan = Plan { from: context::harder(highest), force: true, escalate: true };
            let metered = metered_model(model, config, state);
            let applied = context::compact_history(
                engine,
                History { messages: &mut state.messages, committed: &mut state.committed },
                &metered,
                &config.engine(),
                tools,
                plan,
                &mut events,
            )
            .await;
            charge(state, metered.spent());
            for event in events {
                yield TurnItem::Event(event.into());
            }
            if applied.is_none() {
                yield TurnItem::Reply(Err(exhausted(&message, highest)));
                return;
            }
            highest = applied;
        }
    }
}

/// The model as the engine gets it during `state`'s run.
fn metered_model<'a>(
    model: &'a dyn ChatModel,
    config: &'a CycleConfig,
    state: &RunState,
) -> Metered<'a> {
    Metered::new(
        model,
        config,
        budget::run_usage(state),
        state.rules.usage_limits,
        state.rules.prices,
    )
}

/// Add what the engine's own requests spent to the run's usage.
fn charge(state: &mut RunState, spent: Spent) {
    state.extra_requests = state.extra_requests.saturating_add(spent.requests);
    if let Some(usage) = spent.usage {
        *state.usage.get_or_insert_default() += usage;
    }
}

/// The typed error once compaction cannot help any more.
fn exhausted(message: &str, highest: Option<context::CompactionTier>) -> LlmError {
    let done = match highest {
        Some(tier) => format!("after compaction up to tier {}", tier.number()),
        None => "with nothing left to compact".to_owned(),
    };
    LlmError::ContextLengthExceeded {
        message: format!(
            "{message} (the context engine retried once {done}; the newest turns, the system prompt and the newest user message alone do not fit)"
        ),
    }
}
