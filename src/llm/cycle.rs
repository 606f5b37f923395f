//! [`LlmCycle`]: a conversation with a model — history, retries, streaming, and the automatic
//! tool loop.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};

use crate::llm::config::CycleConfig;
use crate::llm::error::LlmError;
use crate::llm::event::StreamEvent;
use crate::llm::model::ChatModel;
use crate::llm::tool_loop::{LoopItem, Mode};
use crate::tools::registry::ToolRegistry;
use crate::vocab::{ChatResponse, OpenaiChatMessage};

/// The stream returned by [`LlmCycle::submit_stream`] and [`LlmCycle::submit_stream_with_tools`].
/// Dropping it cancels the call: the in-flight request and running tools are dropped and the
/// history keeps only completed turns.
pub type EventStream<'a> = Pin<Box<dyn Stream<Item = StreamEvent> + Send + 'a>>;

/// A conversation with a model.
///
/// History rules: after a successful call, `messages()` holds the user message, every completed
/// tool turn (assistant message with its `tool_calls`, then one `tool` message per call, in call
/// order, each with the matching `tool_call_id`) and the final assistant message. A call that
/// fails or is cancelled leaves only completed turns — never an assistant `tool_calls` message
/// without its answers; a failure before the first completed turn leaves the history as it was.
///
/// ```
/// # async fn demo() -> Result<(), agcore::llm::LlmError> {
/// use agcore::llm::testing::ScriptedModel;
/// use agcore::llm::{CycleConfig, LlmCycle};
///
/// let model = ScriptedModel::new().reply_text("Hello!");
/// let mut cycle = LlmCycle::new(model, CycleConfig::new("gpt-4o-mini"))
///     .with_system_prompt("You are terse.");
/// let reply = cycle.submit("Hi".to_string()).await?;
/// assert_eq!(reply.text(), "Hello!");
/// assert_eq!(cycle.messages().len(), 3); // system, user, assistant
/// # Ok(()) }
/// ```
pub struct LlmCycle {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) config: CycleConfig,
    pub(crate) messages: Vec<OpenaiChatMessage>,
}

impl std::fmt::Debug for LlmCycle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LlmCycle")
            .field("provider", &self.model.provider())
            .field("config", &self.config)
            .field("messages", &self.messages.len())
            .finish()
    }
}

impl LlmCycle {
    /// A new conversation with `model`.
    pub fn new(model: impl ChatModel + 'static, config: CycleConfig) -> Self {
        LlmCycle {
            model: Arc::new(model),
            config,
            messages: Vec::new(),
        }
    }

    /// Continue a saved conversation (`messages()` serialised with serde, then loaded again).
    pub fn from_history(
        model: impl ChatModel + 'static,
        config: CycleConfig,
        messages: Vec<OpenaiChatMessage>,
    ) -> Self {
        LlmCycle {
            messages,
            ..LlmCycle::new(model, config)
        }
    }

    /// Set the system prompt (builder form of [`LlmCycle::set_system_prompt`]).
    pub fn with_system_prompt(mut self, prompt: impl Into<String>) -> Self {
        self.set_system_prompt(prompt);
        self
    }

    /// Set or replace the system prompt (the first message of the history).
    pub fn set_system_prompt(&mut self, prompt: impl Into<String>) {
        let message = OpenaiChatMessage::system(prompt);
        match self.messages.first_mut() {
            Some(first @ OpenaiChatMessage::System { .. }) => *first = message,
            _ => self.messages.insert(0, message),
        }
    }

    /// The system prompt, if set.
    pub fn system_prompt(&self) -> Option<String> {
        match self.messages.first() {
            Some(message @ OpenaiChatMessage::System { .. }) => message.text(),
            _ => None,
        }
    }

    /// The whole history, oldest first (system prompt included).
    pub fn messages(&self) -> &[OpenaiChatMessage] {
        &self.messages
    }

    /// Forget the conversation but keep the system prompt.
    pub fn clear(&mut self) {
        let keep = usize::from(matches!(
            self.messages.first(),
            Some(OpenaiChatMessage::System { .. })
        ));
        self.messages.truncate(keep);
    }

    /// The configuration.
    pub fn config(&self) -> &CycleConfig {
        &self.config
    }

    /// The configuration, to change it between calls.
    pub fn config_mut(&mut self) -> &mut CycleConfig {
        &mut self.config
    }

    /// The model backend.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }

    /// Send `prompt` and wait for the reply. No tools are offered; tool calls in the reply are
    /// returned, not run (see [`LlmCycle::submit_with_tools`]). The history stores them each
    /// answered by a `tool` message saying it was not run, so it never holds an unanswered
    /// call and every later request (or a saved transcript) stays valid.
    ///
    /// # Errors
    /// Besides the transport and server errors, [`LlmError::TruncatedToolCalls`] when the reply
    /// called tools but was cut by the token limit (`finish_reason: length`): the history is
    /// then left as it was, without the prompt, as for any failure (same for every other call).
    pub async fn submit(&mut self, prompt: String) -> Result<ChatResponse, LlmError> {
        drain(self.run_loop(Some(prompt), None, Mode::Blocking)).await
    }

    /// Send `prompt` and stream the reply. Errors before the reply starts (HTTP status,
    /// connection, retries used up) are returned here; later ones end the stream with
    /// [`StreamEvent::Error`].
    pub async fn submit_stream(&mut self, prompt: String) -> Result<EventStream<'_>, LlmError> {
        into_event_stream(self.run_loop(Some(prompt), None, Mode::Streaming)).await
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
        drain(self.run_loop(Some(prompt), Some(registry), Mode::Blocking)).await
    }

    /// The streaming tool loop: per turn text/reasoning deltas, `ToolExecutionStarted`,
    /// `TurnComplete { reason: ToolCalls }`, `ToolExecutionCompleted` as each tool finishes;
    /// finally `TurnComplete { reason: Stop, usage: <sum> }`.
    pub async fn submit_stream_with_tools<'a>(
        &'a mut self,
        prompt: String,
        registry: &'a ToolRegistry,
    ) -> Result<EventStream<'a>, LlmError> {
        into_event_stream(self.run_loop(Some(prompt), Some(registry), Mode::Streaming)).await
    }

    /// Continue the tool loop from the current history without a new user message — e.g.
    /// after [`LlmError::MaxTurnsExceeded`], a restored history that ends with tool results, or
    /// a restored history that ends with unanswered tool calls (those calls are run first).
    pub async fn resume_with_tools(
        &mut self,
        registry: &ToolRegistry,
    ) -> Result<ChatResponse, LlmError> {
        drain(self.run_loop(None, Some(registry), Mode::Blocking)).await
    }

    /// Streaming form of [`LlmCycle::resume_with_tools`].
    pub async fn resume_stream_with_tools<'a>(
        &'a mut self,
        registry: &'a ToolRegistry,
    ) -> Result<EventStream<'a>, LlmError> {
        into_event_stream(self.run_loop(None, Some(registry), Mode::Streaming)).await
    }
}

async fn drain(items: impl Stream<Item = LoopItem>) -> Result<ChatResponse, LlmError> {
    let mut items = std::pin::pin!(items);
    while let Some(item) = items.next().await {
        match item {
            LoopItem::Event(_) => {}
            LoopItem::Done(response) => return Ok(*response),
            LoopItem::Failed(error) => return Err(error),
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
        Some(LoopItem::Done(_)) | None => None,
    };
    let rest = items.filter_map(|item| {
        futures::future::ready(match item {
            LoopItem::Event(event) => Some(event),
            LoopItem::Failed(error) => Some(StreamEvent::from_error(&error)),
            LoopItem::Done(_) => None,
        })
    });
    Ok(Box::pin(futures::stream::iter(first).chain(rest)))
}
