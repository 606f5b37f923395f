//! [`ContextConfig`]: how the context engine keeps a conversation inside the model's window
//! (the engine itself is [`crate::context`]; this is its configuration, carried by
//! [`crate::run::CycleConfig`]).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::context::tokenizer::{OutboundText, TokenizerChoice};
use crate::llm::retry::RetryPolicy;
use crate::vocab::RequestOptions;

/// The context engine's settings. `CycleConfig::context_window` gives the window; this says
/// when and how to compact.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ContextConfig {
    /// Whether the engine estimates and compacts at all (history repair and the retry after a
    /// server's `context_length_exceeded` stay on while the engine is on).
    pub enabled: bool,
    /// Compact when the estimated prompt goes over this fraction of the usable window (the
    /// window less the output reserve). Default 0.8.
    pub threshold: f32,
    /// Compaction brings the estimate down to this fraction of the usable window, so it does
    /// not fire again on the next turn. Default 0.6.
    pub target: f32,
    /// The newest turns (assistant messages with their tool results) never compacted.
    pub keep_last_turns: usize,
    /// Whether tier 2 (a summary by the model) is tried before dropping turns.
    pub summarise: bool,
    /// The model that writes summaries (default: the conversation's model).
    pub summary_model: Option<String>,
    /// The most tokens a summary may take (its request's `max_tokens`).
    pub summary_max_tokens: u32,
    /// The output reserve when the request sets no `max_tokens` (a fraction of the window is
    /// used when this is `None`: a quarter, at most 4,096 tokens).
    pub default_output_reserve: Option<u32>,
    /// Output limits of single tools, in bytes (others: `CycleConfig::tool_output_limit`);
    /// MCP tools by their registered names.
    pub tool_output_limits: BTreeMap<String, usize>,
    /// Where outputs over their limit are kept whole (read back with the `read_output` tool,
    /// `crate::context::spill::ReadOutput`); `None`: they are cut, and the rest is lost.
    pub spill_dir: Option<PathBuf>,
    /// What counts the tokens that changed since the server's last usage: by default tiktoken
    /// for OpenAI-family model names (cargo feature `tiktoken`), else the calibrated ratio
    /// (`crate::context::TokenizerChoice`; not read from configuration files).
    #[serde(skip)]
    pub tokenizer: TokenizerChoice,
}

impl Default for ContextConfig {
    fn default() -> Self {
        ContextConfig {
            enabled: true,
            threshold: 0.8,
            target: 0.6,
            keep_last_turns: 2,
            summarise: true,
            summary_model: None,
            summary_max_tokens: 512,
            default_output_reserve: None,
            tool_output_limits: BTreeMap::new(),
            spill_dir: None,
            tokenizer: TokenizerChoice::Auto,
        }
    }
}

impl ContextConfig {
    /// The engine off: no estimate, no compaction, no repair.
    pub fn off() -> Self {
        ContextConfig {
            enabled: false,
            ..ContextConfig::default()
        }
    }
}

/// What the context engine reads of a conversation's configuration: a borrowed view, made by
/// `crate::run::CycleConfig::engine`, so the engine does not depend on the run above it.
#[derive(Debug, Clone, Copy)]
pub struct EngineConfig<'a> {
    /// The conversation's model (the default model of summaries, and the tokenizer's choice).
    pub model: &'a str,
    /// The request options (`max_tokens` sets the output reserve).
    pub options: &'a RequestOptions,
    /// The configured window, if any (else the server's or the known table's).
    pub context_window: Option<u32>,
    /// The engine's own settings.
    pub context: &'a ContextConfig,
    /// The default tool-output limit in bytes (single tools: `ContextConfig::tool_output_limits`).
    pub tool_output_limit: usize,
    /// The deadline of one model request (the summary request's too).
    pub request_timeout: Option<Duration>,
    /// Retries of a model request (the summary request's too).
    pub retry: &'a RetryPolicy,
    /// What texts become before a counter sends them to a server (the run's hooks).
    pub outbound: Option<&'a dyn OutboundText>,
}
