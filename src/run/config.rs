//! [`CycleConfig`]: how an [`crate::run::Conversation`] talks to its model and runs tools.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::context::config::{ContextConfig, EngineConfig};
use crate::context::tokenizer::OutboundText;
use crate::llm::retry::RetryPolicy;
use crate::llm::stream::ReplyLimits;
use crate::run::hooks::HookChain;
use crate::run::usage::{Prices, UsageLimits};
use crate::vocab::RequestOptions;

/// Configuration of an [`crate::run::Conversation`].
#[derive(Debug, Clone)]
pub struct CycleConfig {
    /// The model name sent with every request.
    pub model: String,
    /// Sampling and vendor options sent with every request.
    pub options: RequestOptions,
    /// The most model requests one tool-loop call may make (`None` = 10).
    pub max_turns: Option<u32>,
    /// Retries for 408/409/429/5xx and connection errors.
    pub retry: RetryPolicy,
    /// A deadline for one model request (a whole streaming reply included); `None` = no deadline.
    pub request_timeout: Option<Duration>,
    /// Tool output longer than this many bytes is cut for the model (head and tail kept, with a
    /// marker saying how much was cut). The full output stays in events and invocation records.
    pub tool_output_limit: usize,
    /// What to do when the model repeats the same tool call.
    pub repeated_call_guard: RepeatedCallGuard,
    /// Limits on one streamed reply (message bytes, tool calls), whatever the provider.
    pub reply_limits: ReplyLimits,
    /// Whether the model reads images (and audio): then the media a tool returns (an MCP
    /// tool's image content) follow the step's tool messages as a user message of content
    /// parts. Off by default: the tool message says what was returned and not shown.
    pub accepts_images: bool,
    /// The model's context window in tokens; `None`: the table of well-known models, else a
    /// conservative default (see [`crate::context::window`]; `crate::context::discover_window`
    /// asks the server).
    pub context_window: Option<u32>,
    /// The context engine: when to compact and how.
    pub context: ContextConfig,
    /// The most one run may spend: requests, tokens, tool calls, cost (default: no limit).
    pub usage_limits: UsageLimits,
    /// What the model's tokens cost, for [`UsageLimits::max_cost`] and reports.
    pub prices: Option<Prices>,
    /// Code run before and after each model request and tool call (default: none).
    pub hooks: HookChain,
}

impl CycleConfig {
    /// The part of this configuration the context engine reads.
    pub fn engine(&self) -> EngineConfig<'_> {
        EngineConfig {
            model: &self.model,
            options: &self.options,
            context_window: self.context_window,
            context: &self.context,
            tool_output_limit: self.tool_output_limit,
            request_timeout: self.request_timeout,
            retry: &self.retry,
            outbound: (!self.hooks.is_empty()).then_some(&self.hooks as &dyn OutboundText),
        }
    }

    /// The default configuration for `model`.
    pub fn new(model: impl Into<String>) -> Self {
        CycleConfig {
            model: model.into(),
            ..CycleConfig::default()
        }
    }

    /// The effective `max_turns` (10 unless set).
    pub fn effective_max_turns(&self) -> u32 {
        self.max_turns.unwrap_or(DEFAULT_MAX_TURNS)
    }
}

/// `max_turns` when none is configured.
pub const DEFAULT_MAX_TURNS: u32 = 10;

pub use crate::vocab::DEFAULT_TOOL_OUTPUT_LIMIT;

impl Default for CycleConfig {
    fn default() -> Self {
        CycleConfig {
            model: String::new(),
            options: RequestOptions::default(),
            max_turns: None,
            retry: RetryPolicy::default(),
            request_timeout: None,
            tool_output_limit: DEFAULT_TOOL_OUTPUT_LIMIT,
            repeated_call_guard: RepeatedCallGuard::default(),
            reply_limits: ReplyLimits::default(),
            accepts_images: false,
            context_window: None,
            context: ContextConfig::default(),
            usage_limits: UsageLimits::default(),
            prices: None,
            hooks: HookChain::default(),
        }
    }
}

/// Guard against a model that keeps calling the same tool with the same arguments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatedCallGuard {
    /// Identical calls in a row that trigger the guard; `None` disables it.
    pub limit: Option<u32>,
    /// What happens when it triggers.
    pub action: RepeatedCallAction,
}

impl Default for RepeatedCallGuard {
    fn default() -> Self {
        RepeatedCallGuard {
            limit: Some(3),
            action: RepeatedCallAction::Abort,
        }
    }
}

/// What the repeated-call guard does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RepeatedCallAction {
    /// End the call with [`crate::run::LlmError::RepeatedToolCall`].
    Abort,
    /// Do not run the call; tell the model (as the tool result) that it is repeating itself.
    TellModel,
}
