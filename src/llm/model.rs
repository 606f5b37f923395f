//! The provider seam: [`ChatModel`] and the request it receives.

use std::pin::Pin;

use async_trait::async_trait;
use futures::Stream;
use serde::Serialize;

use crate::llm::error::ProviderError;
use crate::vocab::{
    Artifact, ArtifactProvider, ChatResponse, FinishReason, OpenaiChatMessage, ReasoningField,
    RequestOptions, ToolDefinition, Usage,
};

/// One model request. Borrowed, so a long history is not copied per turn.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct ChatRequest<'a> {
    /// The model name.
    pub model: &'a str,
    /// The conversation, oldest first.
    pub messages: &'a [OpenaiChatMessage],
    /// Tools offered to the model (not sent when empty).
    #[serde(skip_serializing_if = "<[ToolDefinition]>::is_empty")]
    pub tools: &'a [ToolDefinition],
    /// Sampling and vendor options.
    #[serde(flatten)]
    pub options: &'a RequestOptions,
}

/// One normalised piece of a streaming reply. Providers translate their wire chunks into these;
/// [`crate::llm::StreamAssembler`] turns them into [`crate::llm::StreamEvent`]s and a [`ChatResponse`].
#[derive(Debug, Clone, PartialEq)]
pub enum ModelDelta {
    /// Response metadata (first chunk).
    Meta {
        /// The completion id.
        id: Option<String>,
        /// The model that answers.
        model: Option<String>,
    },
    /// Assistant text.
    Text(String),
    /// Reasoning text.
    Reasoning {
        /// The text.
        text: String,
        /// The field it arrived in; the assembled message keeps it there.
        field: ReasoningField,
    },
    /// Reasoning text to show as it streams, which the reply does not keep as text: a native
    /// API's reasoning comes back to it as an [`Artifact`](ModelDelta::Artifact), never as a
    /// chat-completions reasoning field.
    Thought(String),
    /// Continuation state of the reply, kept verbatim in the message's artifacts.
    Artifact(Artifact),
    /// Refusal text.
    Refusal(String),
    /// A piece of a tool call.
    ToolCall {
        /// The call's `index` (missing on some servers).
        index: Option<u32>,
        /// The call id (first piece only on most servers).
        id: Option<String>,
        /// The tool name (first piece only on most servers).
        name: Option<String>,
        /// A piece of the arguments' JSON text.
        arguments: Option<String>,
    },
    /// The finish reason.
    Finish(FinishReason),
    /// Token usage.
    Usage(Usage),
    /// A hosted tool's call, complete (becomes [`crate::llm::ModelEvent::HostedToolCall`]);
    /// its block goes back to the API as an [`Artifact`](ModelDelta::Artifact).
    HostedToolCall {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// The input.
        input: serde_json::Value,
    },
    /// A hosted tool's result (becomes [`crate::llm::ModelEvent::HostedToolResult`]).
    HostedToolResult {
        /// The call id.
        id: String,
        /// The tool.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// The block or item, verbatim.
        output: serde_json::Value,
    },
    /// A source the text cites (becomes [`crate::llm::ModelEvent::Citation`]).
    Citation(crate::llm::event::Citation),
    /// A [`crate::llm::FallbackModel`] moved on to another model before any output (the
    /// previous one failed, or its circuit breaker is open); becomes
    /// [`crate::llm::StreamEvent::ModelSwitch`]. Not part of the reply.
    ModelSwitch {
        /// The model name that failed or was skipped.
        from: String,
        /// The model name tried next.
        to: String,
        /// Why.
        reason: String,
    },
}

/// The stream a provider returns: deltas, ending cleanly only when the reply was complete.
/// A reply cut short ends with an `Err`.
pub type ModelStream = Pin<Box<dyn Stream<Item = Result<ModelDelta, ProviderError>> + Send>>;

/// A chat model backend. Object-safe: `Conversation` holds an `Arc<dyn ChatModel>`.
///
/// A single call makes a single attempt; retries are the caller's ([`crate::llm::RetryPolicy`]),
/// so every backend retries the same way.
///
/// Tool calls are normalised by the provider, once, and nowhere after: every call of a reply
/// has an id unique within it and arguments that are JSON text (blank means `{}`), as
/// [`normalise_tool_calls`](crate::llm::stream::normalise_tool_calls) makes them. A stream gets
/// this from the [`StreamAssembler`](crate::llm::StreamAssembler) that assembles it (a backend
/// streams the server's pieces as they are); [`ChatModel::chat`] returns a whole reply, so a
/// backend applies `normalise_tool_calls` to it before returning (the OpenAI-compatible client
/// does). The run uses the ids and arguments as it gets them.
#[async_trait]
pub trait ChatModel: Send + Sync {
    /// A non-streaming request.
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError>;

    /// A streaming request. Errors before the first byte (HTTP status, connection) are returned
    /// here; errors after it end the stream.
    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError>;

    /// The provider's name (`"openai"`, `"ollama"`, ...), for tools that support only some providers.
    fn provider(&self) -> &str {
        "openai"
    }

    /// The server's base URL, when the model is reached over HTTP (for the `server.address`
    /// and `server.port` of the request spans). `None` by default.
    fn base_url(&self) -> Option<&str> {
        None
    }

    /// The wire API the backend speaks: [`WireApi::ChatCompletions`] by default. The context
    /// engine's discovery probes (`/props`, `/tokenize`, ...) are for local chat-completions
    /// servers and are never sent to the others.
    fn api(&self) -> WireApi {
        WireApi::ChatCompletions
    }
}

/// The model API a [`ChatModel`] speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WireApi {
    /// OpenAI-compatible `/chat/completions`.
    ChatCompletions,
    /// The OpenAI Responses API (`/responses`).
    Responses,
    /// The Anthropic Messages API (`/messages`).
    AnthropicMessages,
    /// The Gemini API (`:generateContent`).
    Gemini,
    /// Amazon Bedrock's Converse API (`/model/{id}/converse`).
    BedrockConverse,
}

impl WireApi {
    /// The name used on the command line and in configuration (`--provider`).
    pub fn as_str(self) -> &'static str {
        match self {
            WireApi::ChatCompletions => "openai",
            WireApi::Responses => "openai-responses",
            WireApi::AnthropicMessages => "anthropic",
            WireApi::Gemini => "gemini",
            WireApi::BedrockConverse => "bedrock",
        }
    }

    /// The artifacts this API reads back.
    pub fn artifact_provider(self) -> ArtifactProvider {
        match self {
            WireApi::ChatCompletions => ArtifactProvider::OpenaiChat,
            WireApi::Responses => ArtifactProvider::OpenaiResponses,
            WireApi::AnthropicMessages => ArtifactProvider::Anthropic,
            WireApi::Gemini => ArtifactProvider::Gemini,
            WireApi::BedrockConverse => ArtifactProvider::Bedrock,
        }
    }
}

#[async_trait]
impl<T: ChatModel + ?Sized> ChatModel for std::sync::Arc<T> {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        (**self).chat(request).await
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        (**self).chat_stream(request).await
    }

    fn provider(&self) -> &str {
        (**self).provider()
    }

    fn base_url(&self) -> Option<&str> {
        (**self).base_url()
    }

    fn api(&self) -> WireApi {
        (**self).api()
    }
}
