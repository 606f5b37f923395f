//! The provider layer: how agcore talks to a model server, and nothing about the conversation.
//!
//! - [`types`]: OpenAI Chat Completions wire types ([`OpenaiChatMessage`], [`ToolDefinition`], ...).
//! - [`ChatModel`]: the provider seam; [`OpenAiClient`] speaks to any OpenAI-compatible server,
//!   [`OpenAiResponsesClient`] to OpenAI's Responses API, [`AnthropicClient`] to Anthropic's
//!   Messages API, [`GeminiClient`] to Gemini. Each keeps its API's reasoning state as
//!   [`Artifact`]s on the reply (see [`crate::vocab::artifact`]).
//! - [`StreamAssembler`]: a provider's deltas into [`ModelEvent`]s and a [`ChatResponse`],
//!   within [`ReplyLimits`]; [`RetryPolicy`]: retries, the same for every backend.
//! - [`ProviderError`]: why one model request failed.
//! - [`Codec`] and [`HttpModel`]: one wire API is a codec (endpoint, borrowed encode, parse,
//!   stream decoder, status → error); the generic HTTP model runs any codec, with optional
//!   request signing ([`RequestSigner`]) and framing ([`Framer`]) hooks.
//! - [`providers`]: the provider table (name, default URL, key variables, ...) that every
//!   `from_env` and the CLI read.
//! - [`transport`]: the bounded HTTP request, body and event stream every backend shares.
//! - [`testing`]: a scripted model for tests.
//!
//! The conversation — history, the tool loop, hooks, usage limits — is [`crate::run`]. The
//! names the design documents give under `agcore::llm` ([`LlmCycle`], [`CycleConfig`],
//! [`LlmError`], ...) are re-exported here from there, so code written against the design
//! compiles unchanged.

pub mod anthropic;
pub mod bedrock;
pub mod codec;
pub mod error;
pub mod event;
pub mod fallback;
pub mod gemini;
pub mod hosted;
pub mod http_model;
pub mod model;
pub mod openai;
pub mod openai_responses;
pub mod provider;
pub mod providers;
pub mod retry;
pub mod stream;
pub mod testing;
pub mod transport;
pub mod types;

pub use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, ReasoningEffort};
pub use anthropic::{AnthropicClient, AnthropicConfig};
pub use bedrock::{BedrockClient, BedrockConfig};
pub use codec::{Codec, Resource};
pub use error::{ErrorKind, ProviderError, ResponseLimit, TimeoutKind};
pub use event::{Citation, ModelEvent};
pub use fallback::{CircuitBreaker, FallbackModel};
pub use gemini::{GeminiClient, GeminiConfig};
pub use hosted::HostedTool;
pub use http_model::HttpModel;
pub use model::{ChatModel, ChatRequest, ModelDelta, ModelStream, WireApi};
pub use openai::{OpenAiClient, OpenAiConfig, ReasoningEcho};
pub use openai_responses::{OpenAiResponsesClient, OpenAiResponsesConfig};
pub use retry::RetryPolicy;
pub use stream::{ReplyLimits, StreamAssembler};
pub use transport::{
    Framer, HttpTransport, RequestSigner, SignableRequest, SseDecoder, SseFraming,
    TransportSettings,
};
pub use types::{
    ChatResponse, FinishReason, OpenaiChatMessage, OpenaiToolDefinition, ReasoningField, ToolCall,
    ToolDefinition, Usage,
};

// The design's names for the conversation, which lives in `crate::run`.
#[doc(no_inline)]
pub use crate::context::ContextConfig;
#[doc(no_inline)]
pub use crate::context::{CompactionTier, RepairKind};
#[doc(no_inline)]
pub use crate::run::Conversation as LlmCycle;
#[doc(no_inline)]
pub use crate::run::event::StreamEvent;
#[doc(no_inline)]
pub use crate::run::hooks::{HookChain, Hooks, ToolCallDecision};
#[doc(no_inline)]
pub use crate::run::replay::replay;
#[doc(no_inline)]
pub use crate::run::usage::{Prices, RunUsage, UsageLimit, UsageLimits};
#[doc(no_inline)]
pub use crate::run::{CycleConfig, LlmError, RepeatedCallAction, RepeatedCallGuard};
