//! Phase 0: the LLM call cycle.
//!
//! - [`types`]: OpenAI Chat Completions wire types ([`OpenaiChatMessage`], [`ToolDefinition`], ...).
//! - [`ChatModel`]: the provider seam; [`OpenAiClient`] speaks to any OpenAI-compatible server.
//! - [`StreamEvent`]: what a streaming call yields.
//! - [`LlmCycle`]: a conversation with history, retries and the automatic tool loop.
//! - [`testing`]: a scripted model for tests.

pub mod config;
pub mod context_config;
pub mod cycle;
pub mod error;
pub mod event;
pub mod hooks;
pub mod model;
pub mod openai;
pub mod replay;
pub mod retry;
pub mod stream;
pub mod testing;
pub mod types;
pub mod usage;

pub use config::{CycleConfig, RepeatedCallAction, RepeatedCallGuard};
pub use context_config::ContextConfig;
pub use cycle::LlmCycle;
pub use error::{ErrorKind, LlmError, ResponseLimit, TimeoutKind};
pub use event::{CompactionTier, RepairKind, StreamEvent};
pub use hooks::{HookChain, Hooks, ToolCallDecision};
pub use model::{ChatModel, ChatRequest, ModelDelta, ModelStream};
pub use openai::{OpenAiClient, OpenAiConfig, ReasoningEcho};
pub use replay::replay;
pub use retry::RetryPolicy;
pub use stream::{ReplyLimits, StreamAssembler};
pub use types::{
    ChatResponse, FinishReason, OpenaiChatMessage, OpenaiToolDefinition, ReasoningField, ToolCall,
    ToolDefinition, Usage,
};
pub use usage::{Prices, RunUsage, UsageLimit, UsageLimits};
