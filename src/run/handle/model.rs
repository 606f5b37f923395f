//! The model-request handler: record the history, run the context engine's turn (repair,
//! estimate, compact, retry once on overflow), pass its events on, and give the step machine
//! the reply or the error.

use futures::StreamExt;
use tracing::Instrument;

use crate::context::ContextState;
use crate::run::call_updates::{self, CallUpdates};
use crate::run::context_turn;
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::run::handle::journal::record;
use crate::run::handle::{EventSink, RunContext};
use crate::run::hooks;
use crate::run::input_stream::InputStreams;
use crate::run::journal::JournalEntry;
use crate::run::model_turn::TurnItem;
use crate::run::state::RunState;
use crate::run::step::{Input, ModelRequest};
use crate::run::telemetry;

/// What the tools say while the reply streams: the calls whose arguments stream (their titles
/// and watchers), and the updates tools report meanwhile.
pub(crate) struct Streams<'s> {
    pub call_updates: &'s CallUpdates,
    pub input_streams: &'s mut InputStreams,
}

/// Make `request` as the run's current agent; the step machine's next input.
pub(crate) async fn request_model(
    cx: &RunContext<'_>,
    state: &mut RunState,
    context: &mut ContextState,
    streams: Streams<'_>,
    request: ModelRequest,
    sink: &EventSink,
) -> Input {
    // A new reply: nothing of an earlier one streams on.
    streams.input_streams.reset();
    // The history (with the prompt) is recorded before the request: a crash during it can
    // be resumed.
    if let Err(error) = record(cx.journal, JournalEntry::History(&state.messages)).await {
        return Input::ModelFailed(error);
    }
    let config = cx.config;
    let options = match &cx.relaxed {
        Some(relaxed) if request.tool_choice_relaxed => relaxed,
        _ => cx.options(),
    };
    let provider = cx.model.provider();
    let chat_span = telemetry::chat_span(
        &cx.agent_span,
        provider,
        &config.model,
        cx.server.as_ref(),
        &state.messages,
    );
    let mut reply = None;
    {
        // The hooks may edit what is sent (not the history).
        let turn = context_turn::request(
            state, context, cx.model, config, &cx.tools, options, cx.mode,
        );
        let mut items = std::pin::pin!(turn);
        while let Some(item) = items.next().instrument(chat_span.clone()).await {
            match item {
                TurnItem::Event(event) => {
                    if let StreamEvent::HostedToolResult {
                        id,
                        tool_name,
                        is_error,
                        ..
                    } = &event
                    {
                        telemetry::hosted_tool_span(&chat_span, id, tool_name, *is_error);
                    }
                    let updates = streams.call_updates.events();
                    let streamed = streams.input_streams.on_event(&event, cx.tools(), updates);
                    hooks::on_event(&config.hooks, &cx.agent_span, &event).await;
                    sink.send(event).await;
                    if let Some(update) = streamed {
                        sink.send(update).await;
                    }
                    for (id, update) in streams.call_updates.drain() {
                        sink.send(call_updates::deliver(cx.journal, id, update).await)
                            .await;
                    }
                }
                TurnItem::Reply(result) => reply = Some(result),
            }
        }
    }
    if let Some(reply) = &reply {
        telemetry::record_reply(&chat_span, reply.as_ref());
    }
    drop(chat_span);
    match reply {
        Some(Ok(reply)) => {
            config.hooks.after_model_response(&reply).await;
            Input::ModelReplied(Box::new(reply))
        }
        Some(Err(error)) => Input::ModelFailed(error),
        None => Input::ModelFailed(LlmError::Other(
            "the model request ended without a reply".to_owned(),
        )),
    }
}
