//! The context engine: long conversations that do not overflow the model's window, and say
//! what they dropped (see `docs/9-context.md`).
//!
//! Before each model request of a run the engine
//! 1. on the run's first request, repairs the history ([`repair`]): results without a call
//!    removed, unanswered calls answered "not run", duplicate call ids renamed, empty assistant
//!    messages dropped — each reported as a [`ContextEvent::HistoryRepaired`];
//! 2. estimates the whole pending request ([`estimate`]): the server's `usage.prompt_tokens`
//!    of the previous request plus what changed since — counted by a [`TokenCounter`]
//!    ([`tokenizer`]: tiktoken for OpenAI-family models, llama.cpp's `/tokenize`, your own;
//!    [`ledger`]) or else its bytes at a ratio calibrated from that usage;
//! 3. when the estimate crosses `ContextConfig::threshold` of the usable window ([`window`]:
//!    the window less the reply's `max_tokens`), compacts in tiers ([`compact`]): old tool
//!    outputs stubbed, then older turns summarised by the model ([`summary`]), then the oldest
//!    turns dropped; each a [`ContextEvent::ContextCompacted`], and written into the
//!    history itself (the stubs, a summary or a marker message) so a resumed session knows.
//!
//! A tool call is never separated from its results, the system prompt and the newest user
//! message are never removed, nothing of a tool turn in progress is touched (only committed
//! turns), and the history stays wire-valid ([`units::check_wire`]). When the server still
//! answers `context_length_exceeded`, the engine learns from its message, compacts one tier
//! harder and retries once; then the error is returned.
//!
//! ```
//! # async fn demo() -> Result<(), agcore::llm::LlmError> {
//! use agcore::llm::testing::ScriptedModel;
//! use agcore::{Conversation, CycleConfig};
//!
//! let mut config = CycleConfig::new("local-model");
//! config.context_window = Some(32_768);
//! config.context.threshold = 0.75;
//! let mut cycle = Conversation::new(ScriptedModel::new().reply_text("Hi!"), config);
//! cycle.submit("Hello".to_string()).await?;
//! let usage = cycle.context_usage();
//! assert_eq!(usage.window, 32_768);
//! # Ok(()) }
//! ```

pub mod agents_sdk;
pub mod compact;
pub mod config;
mod discover;
pub mod engine;
pub mod estimate;
pub mod event;
pub mod ledger;
pub mod llama_tokenize;
pub mod overflow;
pub mod repair;
pub mod spill;
pub mod summary;
pub mod tokenizer;
pub mod units;
pub mod window;

pub use agents_sdk::{Converted, from_agents_sdk_items};
pub use config::ContextConfig;
pub use discover::{DISCOVERY_TIMEOUT, MAX_DISCOVERY_BODY, discover_window, probes_apply};
pub use engine::{
    ContextState, ContextUsage, History, Plan, Prepared, compact as compact_history, harder,
    prepare,
};
pub use event::{CompactionTier, ContextEvent, RepairKind};
pub use llama_tokenize::LlamaCppTokenizer;
pub use repair::{Repair, repair};
pub use spill::{KeptOutput, OutputSource, OutputStore, ReadOutput};
pub use summary::{SUMMARY_SYSTEM_PROMPT, is_summary_request};
#[cfg(feature = "tiktoken")]
pub use tokenizer::Tiktoken;
pub use tokenizer::{
    SAMPLE_BYTES, TiktokenEncoding, TokenCountError, TokenCounter, TokenizerChoice,
    tiktoken_encoding, tiktoken_for_model,
};
pub use units::{WireViolation, check_wire};
pub use window::{DEFAULT_CONTEXT_WINDOW, KNOWN_WINDOWS, known_window};
