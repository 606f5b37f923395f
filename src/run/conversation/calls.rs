//! [`Conversation`]'s calls — `submit`, `submit_stream`, the tool loop and resume — as thin
//! wrappers over the run driver.

use futures::{Stream, StreamExt};

use crate::run::conversation::{Conversation, EventStream};
use crate::run::driver::{Drive, LoopItem, drive};
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::run::model_turn::Mode;
use crate::tools::registry::ToolRegistry;
use crate::vocab::ChatResponse;

impl Conversation {
    /// Send `prompt` and wait for the reply. No tools are offered; tool calls in the reply are
    /// returned, not run (see [`Conversation::submit_with_tools`]). The history stores them each
    /// answered by a `tool` message saying it was not run, so it never holds an unanswered
    /// call and every later request (or a saved transcript) stays valid.
    ///
    /// # Errors
    /// Besides the transport and server errors, [`LlmError::TruncatedToolCalls`] when the reply
    /// called tools but was cut by the token limit (`finish_reason: length`): the history is
    /// then left as it was, without the prompt, as for any failure (same for every other call).
    pub async fn submit(&mut self, prompt: String) -> Result<ChatResponse, LlmError> {
        drain(drive(
            self,
            Drive::plain(Some(prompt), None, Mode::Blocking),
        ))
        .await
    }

    /// Send `prompt` and stream the reply. Errors before the reply starts (HTTP status,
    /// connection, retries used up) are returned here; later ones end the stream with
    /// [`StreamEvent::Error`].
    pub async fn submit_stream(&mut self, prompt: String) -> Result<EventStream<'_>, LlmError> {
        into_event_stream(drive(
            self,
            Drive::plain(Some(prompt), None, Mode::Streaming),
        ))
        .await
    }

    /// Send `prompt` with the registry's tools and run the tool loop until the model answers
    /// without tool calls (or `max_turns` requests were made). Tool failures are fed back to
    /// the model; the returned usage is the sum over all turns. A forced `tool_choice`
    /// (`required` or a named function) applies to the first request only; later turns send
    /// `auto`, so the model can give its final answer.
    pub async fn submit_with_tools(
        &mut self,
        prompt: String,
        registry: &ToolRegistry,
    ) -> Result<ChatResponse, LlmError> {
        drain(drive(
            self,
            Drive::plain(Some(prompt), Some(registry), Mode::Blocking),
        ))
        .await
    }

    /// The streaming tool loop: per turn text/reasoning deltas, `ToolExecutionStarted`,
    /// `TurnComplete { reason: ToolCalls }`, `ToolExecutionCompleted` as each tool finishes;
    /// finally `TurnComplete { reason: Stop, usage: <sum> }`.
    pub async fn submit_stream_with_tools<'a>(
        &'a mut self,
        prompt: String,
        registry: &'a ToolRegistry,
    ) -> Result<EventStream<'a>, LlmError> {
        into_event_stream(drive(
            self,
            Drive::plain(Some(prompt), Some(registry), Mode::Streaming),
        ))
        .await
    }

    /// Continue the tool loop from the current history without a new user message — e.g.
    /// after [`LlmError::MaxTurnsExceeded`], a restored history that ends with tool results, or
    /// a restored history that ends with unanswered tool calls (those calls are run first).
    pub async fn resume_with_tools(
        &mut self,
        registry: &ToolRegistry,
    ) -> Result<ChatResponse, LlmError> {
        drain(drive(
            self,
            Drive::plain(None, Some(registry), Mode::Blocking),
        ))
        .await
    }

    /// Streaming form of [`Conversation::resume_with_tools`].
    pub async fn resume_stream_with_tools<'a>(
        &'a mut self,
        registry: &'a ToolRegistry,
    ) -> Result<EventStream<'a>, LlmError> {
        into_event_stream(drive(
            self,
            Drive::plain(None, Some(registry), Mode::Streaming),
        ))
        .await
    }

    /// The one call behind all the others: `prompt` (or `None`, to continue from the
    /// history) with `tools` (or `None`: no tools are offered and tool calls are returned,
    /// not run), waiting for the reply.
    pub async fn run(
        &mut self,
        prompt: Option<String>,
        tools: Option<&ToolRegistry>,
    ) -> Result<ChatResponse, LlmError> {
        drain(drive(self, Drive::plain(prompt, tools, Mode::Blocking))).await
    }

    /// Streaming form of [`Conversation::run`].
    pub async fn run_stream<'a>(
        &'a mut self,
        prompt: Option<String>,
        tools: Option<&'a ToolRegistry>,
    ) -> Result<EventStream<'a>, LlmError> {
        into_event_stream(drive(self, Drive::plain(prompt, tools, Mode::Streaming))).await
    }
}

async fn drain(items: impl Stream<Item = LoopItem>) -> Result<ChatResponse, LlmError> {
    let mut items = std::pin::pin!(items);
    while let Some(item) = items.next().await {
        match item {
            LoopItem::Event(_) => {}
            LoopItem::Done(response) => return Ok(*response),
            LoopItem::Failed(error) => return Err(error),
            // Only a run that may suspend does (`run_with`); never these.
            LoopItem::Suspended(_) => break,
        }
    }
    Err(LlmError::Other(
        "the call ended without a result".to_owned(),
    ))
}

async fn into_event_stream<'a>(
    items: impl Stream<Item = LoopItem> + Send + 'a,
) -> Result<EventStream<'a>, LlmError> {
    let mut items = Box::pin(items);
    let first = match items.next().await {
        Some(LoopItem::Event(event)) => Some(event),
        Some(LoopItem::Failed(error)) => return Err(error),
        Some(LoopItem::Done(_) | LoopItem::Suspended(_)) | None => None,
    };
    let rest = items.filter_map(|item| {
        futures::future::ready(match item {
            LoopItem::Event(event) => Some(event),
            LoopItem::Failed(error) => Some(StreamEvent::from_error(&error)),
            LoopItem::Done(_) | LoopItem::Suspended(_) => None,
        })
    });
    Ok(Box::pin(futures::stream::iter(first).chain(rest)))
}
