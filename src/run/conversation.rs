//! [`Conversation`]: a conversation with a model — history, retries, streaming, and the automatic
//! tool loop. The calls (`submit*`, `resume*`) are defined with the run they drive, in
//! `crate::run`.

mod calls;
mod context;
mod prompt;

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;

use crate::llm::model::ChatModel;
use crate::run::config::CycleConfig;
use crate::run::event::StreamEvent;
use crate::run::usage::{RunUsage, UsageTally};
use crate::vocab::OpenaiChatMessage;

/// The stream returned by [`Conversation::submit_stream`] and [`Conversation::submit_stream_with_tools`].
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
/// use agcore::{Conversation, CycleConfig};
///
/// let model = ScriptedModel::new().reply_text("Hello!");
/// let mut cycle = Conversation::new(model, CycleConfig::new("gpt-4o-mini"))
///     .with_system_prompt("You are terse.");
/// let reply = cycle.submit("Hi".to_string()).await?;
/// assert_eq!(reply.text(), "Hello!");
/// assert_eq!(cycle.messages().len(), 3); // system, user, assistant
/// # Ok(()) }
/// ```
pub struct Conversation {
    pub(crate) model: Arc<dyn ChatModel>,
    pub(crate) config: CycleConfig,
    pub(crate) messages: Vec<OpenaiChatMessage>,
    /// The context engine's memory of this conversation (calibration, compactions).
    pub(crate) context: crate::context::ContextState,
    pub(crate) usage: UsageTally,
}

impl std::fmt::Debug for Conversation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Conversation")
            .field("provider", &self.model.provider())
            .field("config", &self.config)
            .field("messages", &self.messages.len())
            .finish()
    }
}

impl Conversation {
    /// A new conversation with `model`.
    pub fn new(model: impl ChatModel + 'static, config: CycleConfig) -> Self {
        Conversation {
            model: Arc::new(model),
            config,
            messages: Vec::new(),
            context: crate::context::ContextState::default(),
            usage: UsageTally::default(),
        }
    }

    /// Continue a saved conversation (`messages()` serialised with serde, then loaded again).
    pub fn from_history(
        model: impl ChatModel + 'static,
        config: CycleConfig,
        messages: Vec<OpenaiChatMessage>,
    ) -> Self {
        Conversation {
            messages,
            ..Conversation::new(model, config)
        }
    }

    /// Set the system prompt (builder form of [`Conversation::set_system_prompt`]).
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

    /// What the last run (one `submit*`, `resume*` or `run*` call) spent, however it ended.
    pub fn last_run_usage(&self) -> RunUsage {
        self.usage.last_run
    }

    /// What every run of this conversation spent together (since this `Conversation` was made).
    pub fn usage(&self) -> RunUsage {
        self.usage.total
    }

    /// The model backend.
    pub fn model(&self) -> &Arc<dyn ChatModel> {
        &self.model
    }
}
