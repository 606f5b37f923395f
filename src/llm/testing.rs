//! [`ScriptedModel`]: a [`ChatModel`] that replies from a script and records what it was asked.
//!
//! For tests of agents built on agcore (and agcore's own): no network, deterministic, streams
//! its replies in small chunks like a real server.
//!
//! ```
//! # async fn demo() -> Result<(), agcore::LlmError> {
//! use agcore::llm::testing::ScriptedModel;
//! use agcore::{Conversation, CycleConfig, ToolCall};
//!
//! let model = ScriptedModel::new()
//!     .reply_tool_calls(vec![ToolCall::new("call_1", "get_weather", r#"{"city":"Paris"}"#)])
//!     .reply_text("It is 22 °C in Paris.");
//! let mut cycle = Conversation::new(model.clone(), CycleConfig::new("scripted"));
//! let reply = cycle.submit("Hi".into()).await?;
//! assert!(reply.tool_calls().len() == 1);
//! assert_eq!(model.requests().len(), 1);
//! # Ok(()) }
//! ```

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelDelta, ModelStream};
use crate::vocab::{
    ChatResponse, FinishReason, OpenaiChatMessage, ReasoningField, RequestOptions, ToolCall,
    ToolDefinition, Usage,
};

/// One scripted reply.
pub enum ScriptedReply {
    /// An assistant reply, streamed in chunks on streaming requests.
    Assistant {
        /// Reply text.
        text: Option<String>,
        /// Reasoning text.
        reasoning: Option<String>,
        /// Tool calls.
        tool_calls: Vec<ToolCall>,
        /// Finish reason (`None` = `tool_calls` when there are calls, else `stop`).
        finish: Option<FinishReason>,
        /// Usage reported with the reply.
        usage: Option<Usage>,
    },
    /// Raw deltas for streaming requests (a non-streaming request assembles them); an `Err`
    /// item ends the stream with that error.
    Deltas(Vec<Result<ModelDelta, String>>),
    /// The request fails with the error this builds.
    Error(Box<dyn Fn() -> ProviderError + Send + Sync>),
    /// The request never completes (for cancellation tests).
    Hang,
}

impl std::fmt::Debug for ScriptedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ScriptedReply::Assistant {
                text, tool_calls, ..
            } => f
                .debug_struct("Assistant")
                .field("text", text)
                .field("tool_calls", tool_calls)
                .finish_non_exhaustive(),
            ScriptedReply::Deltas(deltas) => f.debug_tuple("Deltas").field(deltas).finish(),
            ScriptedReply::Error(_) => f.write_str("Error(..)"),
            ScriptedReply::Hang => f.write_str("Hang"),
        }
    }
}

/// A request as the scripted model received it.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    /// The model name.
    pub model: String,
    /// The messages sent.
    pub messages: Vec<OpenaiChatMessage>,
    /// The tools offered.
    pub tools: Vec<ToolDefinition>,
    /// The options.
    pub options: RequestOptions,
    /// Whether it was a streaming request.
    pub stream: bool,
}

impl RecordedRequest {
    /// The names of the tools offered.
    pub fn tool_names(&self) -> Vec<String> {
        self.tools
            .iter()
            .map(|tool| tool.function.name.clone())
            .collect()
    }
}

type Responder = Box<dyn Fn(&RecordedRequest) -> ScriptedReply + Send + Sync>;

struct Inner {
    script: VecDeque<ScriptedReply>,
    requests: Vec<RecordedRequest>,
    responder: Option<Responder>,
}

/// A [`ChatModel`] that replies from a script. Clones share the script and the record.
#[derive(Clone)]
pub struct ScriptedModel {
    inner: Arc<Mutex<Inner>>,
    chunk_size: usize,
    chunk_delay: Option<Duration>,
    provider: String,
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("chunk_size", &self.chunk_size)
            .field("provider", &self.provider)
            .finish_non_exhaustive()
    }
}

impl Default for ScriptedModel {
    fn default() -> Self {
        Self::new()
    }
}

impl ScriptedModel {
    /// An empty script. Streams text and arguments in 8-character chunks.
    pub fn new() -> Self {
        ScriptedModel {
            inner: Arc::new(Mutex::new(Inner {
                script: VecDeque::new(),
                requests: Vec::new(),
                responder: None,
            })),
            chunk_size: 8,
            chunk_delay: None,
            provider: "scripted".to_owned(),
        }
    }

    /// A model that computes every reply from the request (used when the script is empty).
    pub fn from_fn(
        responder: impl Fn(&RecordedRequest) -> ScriptedReply + Send + Sync + 'static,
    ) -> Self {
        let model = Self::new();
        model.lock().responder = Some(Box::new(responder));
        model
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A poisoned lock only means a test panicked elsewhere; the data is still usable.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Append a reply to the script.
    pub fn reply(self, reply: ScriptedReply) -> Self {
        self.push(reply);
        self
    }

    /// Append a reply through a shared handle.
    pub fn push(&self, reply: ScriptedReply) {
        self.lock().script.push_back(reply);
    }

    /// Append a text reply.
    pub fn reply_text(self, text: impl Into<String>) -> Self {
        self.reply(ScriptedReply::text(text))
    }

    /// Append a reply that calls tools.
    pub fn reply_tool_calls(self, tool_calls: Vec<ToolCall>) -> Self {
        self.reply(ScriptedReply::tool_calls(tool_calls))
    }

    /// Append a failing reply.
    pub fn reply_error(self, error: impl Fn() -> ProviderError + Send + Sync + 'static) -> Self {
        self.reply(ScriptedReply::Error(Box::new(error)))
    }

    /// Stream in chunks of `size` characters.
    pub fn with_chunk_size(mut self, size: usize) -> Self {
        self.chunk_size = size.max(1);
        self
    }

    /// Wait this long before each streamed chunk (to watch a UI stream, or to cancel midway).
    pub fn with_chunk_delay(mut self, delay: Duration) -> Self {
        self.chunk_delay = Some(delay);
        self
    }

    /// The provider name reported to exposure gates (default `scripted`).
    pub fn with_provider(mut self, provider: impl Into<String>) -> Self {
        self.provider = provider.into();
        self
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.lock().requests.clone()
    }

    /// How many scripted replies are left.
    pub fn remaining(&self) -> usize {
        self.lock().script.len()
    }

    fn next_reply(&self, request: &ChatRequest<'_>, stream: bool) -> ScriptedReply {
        let recorded = RecordedRequest {
            model: request.model.to_owned(),
            messages: request.messages.to_vec(),
            tools: request.tools.to_vec(),
            options: request.options.clone(),
            stream,
        };
        let mut inner = self.lock();
        let reply = match inner.script.pop_front() {
            Some(reply) => reply,
            None => match &inner.responder {
                Some(responder) => responder(&recorded),
                None => ScriptedReply::Error(Box::new(|| {
                    ProviderError::Other("the scripted model has no more replies".to_owned())
                })),
            },
        };
        inner.requests.push(recorded);
        reply
    }

    fn deltas_of(
        &self,
        reply: ScriptedReply,
    ) -> Result<Vec<Result<ModelDelta, String>>, ProviderError> {
        match reply {
            ScriptedReply::Deltas(deltas) => Ok(deltas),
            ScriptedReply::Error(make) => Err(make()),
            ScriptedReply::Hang => Ok(Vec::new()),
            ScriptedReply::Assistant {
                text,
                reasoning,
                tool_calls,
                finish,
                usage,
            } => {
                let mut deltas = vec![Ok(ModelDelta::Meta {
                    id: Some("chatcmpl-scripted".to_owned()),
                    model: Some("scripted".to_owned()),
                })];
                for piece in chunks(reasoning.as_deref().unwrap_or(""), self.chunk_size) {
                    deltas.push(Ok(ModelDelta::Reasoning {
                        text: piece,
                        field: ReasoningField::ReasoningContent,
                    }));
                }
                for piece in chunks(text.as_deref().unwrap_or(""), self.chunk_size) {
                    deltas.push(Ok(ModelDelta::Text(piece)));
                }
                let finish = finish.unwrap_or(if tool_calls.is_empty() {
                    FinishReason::Stop
                } else {
                    FinishReason::ToolCalls
                });
                for (index, call) in tool_calls.into_iter().enumerate() {
                    let index = u32::try_from(index).unwrap_or(u32::MAX);
                    deltas.push(Ok(ModelDelta::ToolCall {
                        index: Some(index),
                        id: Some(call.id),
                        name: Some(call.function.name),
                        arguments: Some(String::new()),
                    }));
                    for piece in chunks(&call.function.arguments, self.chunk_size) {
                        deltas.push(Ok(ModelDelta::ToolCall {
                            index: Some(index),
                            id: None,
                            name: None,
                            arguments: Some(piece),
                        }));
                    }
                }
                deltas.push(Ok(ModelDelta::Finish(finish)));
                if let Some(usage) = usage {
                    deltas.push(Ok(ModelDelta::Usage(usage)));
                }
                Ok(deltas)
            }
        }
    }
}

impl ScriptedReply {
    /// A text reply.
    pub fn text(text: impl Into<String>) -> Self {
        ScriptedReply::Assistant {
            text: Some(text.into()),
            reasoning: None,
            tool_calls: Vec::new(),
            finish: None,
            usage: None,
        }
    }

    /// A reply that calls tools.
    pub fn tool_calls(tool_calls: Vec<ToolCall>) -> Self {
        ScriptedReply::Assistant {
            text: None,
            reasoning: None,
            tool_calls,
            finish: None,
            usage: None,
        }
    }

    /// Set the usage reported with an assistant reply.
    pub fn with_usage(mut self, new_usage: Usage) -> Self {
        if let ScriptedReply::Assistant { usage, .. } = &mut self {
            *usage = Some(new_usage);
        }
        self
    }

    /// Set the reasoning text of an assistant reply.
    pub fn with_reasoning(mut self, text: impl Into<String>) -> Self {
        if let ScriptedReply::Assistant { reasoning, .. } = &mut self {
            *reasoning = Some(text.into());
        }
        self
    }

    /// Set the text of an assistant reply.
    pub fn with_text(mut self, new_text: impl Into<String>) -> Self {
        if let ScriptedReply::Assistant { text, .. } = &mut self {
            *text = Some(new_text.into());
        }
        self
    }

    /// Set the finish reason of an assistant reply.
    pub fn with_finish(mut self, reason: FinishReason) -> Self {
        if let ScriptedReply::Assistant { finish, .. } = &mut self {
            *finish = Some(reason);
        }
        self
    }
}

fn chunks(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size)
        .map(|chunk| chunk.iter().collect())
        .collect()
}

#[async_trait]
impl ChatModel for ScriptedModel {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let reply = self.next_reply(&request, false);
        if matches!(reply, ScriptedReply::Hang) {
            return futures::future::pending().await;
        }
        let deltas = self.deltas_of(reply)?;
        let mut assembler = crate::llm::stream::StreamAssembler::new();
        let mut events = Vec::new();
        for delta in deltas {
            assembler.push(delta.map_err(ProviderError::Stream)?, &mut events);
        }
        assembler.finish(&mut events)
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let reply = self.next_reply(&request, true);
        let hang = matches!(reply, ScriptedReply::Hang);
        let deltas = self.deltas_of(reply)?;
        let delay = self.chunk_delay;
        let items = futures::stream::iter(deltas).then(move |delta| async move {
            if let Some(delay) = delay {
                tokio::time::sleep(delay).await;
            }
            delta.map_err(ProviderError::Stream)
        });
        if hang {
            return Ok(Box::pin(items.chain(futures::stream::pending())));
        }
        Ok(Box::pin(items))
    }

    fn provider(&self) -> &str {
        &self.provider
    }
}
