//! One model request with the context engine around it: prepare the history (repair,
//! estimate, compact), send, learn from the usage; on a server's `context_length_exceeded`
//! compact one tier harder and send once more.

use futures::{Stream, StreamExt};

use crate::context::{self, ContextState, History, Plan};
use crate::llm::config::CycleConfig;
use crate::llm::error::LlmError;
use crate::llm::model::{ChatModel, ChatRequest};
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
        let prepared = context::prepare(
            engine,
            History { messages: &mut state.messages, committed: &mut state.committed },
            first_request,
            model,
            config,
            tools,
        )
        .await;
        for event in prepared.events {
            yield TurnItem::Event(event);
        }
        let mut highest = prepared.highest;
        let mut retried = false;
        loop {
            // Count what compaction wrote (stubs, a summary) before the estimate.
            engine.measure(config, &state.messages, tools).await;
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
            {
                let mut items = std::pin::pin!(model_turn::request(model, config, request, mode));
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
            let message = match &reply {
                Some(Ok(response)) => {
                    engine.observe_usage(config, bytes, response.usage);
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
            engine.observe_overflow(config, bytes, estimate, &message);
            // Once only, and never after part of the reply was shown.
            if retried || streamed {
                yield TurnItem::Reply(Err(exhausted(&message, highest)));
                return;
            }
            retried = true;
            let mut events = Vec::new();
            let plan = Plan { from: context::harder(highest), force: true, escalate: true };
            let applied = context::compact_history(
                engine,
                History { messages: &mut state.messages, committed: &mut state.committed },
                model,
                config,
                tools,
                plan,
                &mut events,
            )
            .await;
            for event in events {
                yield TurnItem::Event(event);
            }
            if applied.is_none() {
                yield TurnItem::Reply(Err(exhausted(&message, highest)));
                return;
            }
            highest = applied;
        }
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
