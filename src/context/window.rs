//! The budget: the model's context window (configured, else a table of well-known models,
//! else a conservative default) and the output reserve kept free for the reply.

use crate::context::config::EngineConfig;

/// The window assumed for a model that is neither configured nor in [`KNOWN_WINDOWS`]: small
/// enough for a default local server (llama.cpp, Ollama), so an unknown model is compacted
/// early rather than failing.
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8_192;

/// Well-known models and their windows, in tokens: the first entry whose pattern the model
/// name (lower-cased, any `vendor/` prefix removed) starts with wins, so longer names come
/// first. The windows are the vendors' published figures.
pub const KNOWN_WINDOWS: &[(&str, u32)] = &[
    ("gpt-4.1", 1_047_576),
    ("gpt-4o", 128_000),
    ("gpt-4-turbo", 128_000),
    ("gpt-4-32k", 32_768),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1-mini", 128_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4-mini", 200_000),
    ("claude", 200_000),
    ("gemini-1.5", 1_048_576),
    ("gemini-2", 1_048_576),
    ("deepseek", 128_000),
    ("qwen2.5", 32_768),
    ("qwen3", 32_768),
    ("llama-3.1", 128_000),
    ("llama-3.2", 128_000),
    ("llama-3.3", 128_000),
    ("llama3.1", 128_000),
    ("llama3.2", 128_000),
    ("llama3.3", 128_000),
    ("llama-3", 8_192),
    ("llama3", 8_192),
    ("mistral-large", 128_000),
    ("mistral-small", 32_768),
    ("mixtral", 32_768),
    ("gemma-3", 128_000),
    ("gemma3", 128_000),
    ("gemma-2", 8_192),
    ("gemma2", 8_192),
    ("phi-4", 16_384),
    ("phi4", 16_384),
];

/// Where a window came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowSource {
    /// `CycleConfig::context_window` (or `--context-window`, or discovered and set there).
    Configured,
    /// [`KNOWN_WINDOWS`].
    Table,
    /// [`DEFAULT_CONTEXT_WINDOW`].
    Default,
    /// Learnt from a server's `context_length_exceeded` message.
    Server,
}

/// The window of a well-known model, from [`KNOWN_WINDOWS`].
pub fn known_window(model: &str) -> Option<u32> {
    let name = model.to_ascii_lowercase();
    let name = name.rsplit('/').next().unwrap_or(&name);
    KNOWN_WINDOWS
        .iter()
        .find(|(pattern, _)| name.starts_with(pattern))
        .map(|&(_, window)| window)
}

/// The window for `config`: configured, else the table, else the default.
pub fn resolve_window(config: &EngineConfig<'_>) -> (u32, WindowSource) {
    if let Some(window) = config.context_window.filter(|&w| w > 0) {
        return (window, WindowSource::Configured);
    }
    match known_window(config.model) {
        Some(window) => (window, WindowSource::Table),
        None => (DEFAULT_CONTEXT_WINDOW, WindowSource::Default),
    }
}

/// The tokens kept free for the reply: the request's `max_tokens` (or
/// `max_completion_tokens`), else the configured default, else a quarter of the window (at
/// most 4,096).
pub fn output_reserve(config: &EngineConfig<'_>, window: u32) -> u32 {
    let options = &config.options;
    options
        .max_completion_tokens
        .or(options.max_tokens)
        .or(config.context.default_output_reserve)
        .unwrap_or((window / 4).min(4_096))
        .min(window / 2)
}

/// The numbers one request is measured against.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Budget {
    /// The model's window.
    pub window: u32,
    /// The output reserve.
    pub reserve: u32,
    /// Compact above this many prompt tokens.
    pub trigger: u64,
    /// Compaction aims at this many.
    pub target: u64,
    /// Turns are dropped (tier 3, the last resort) only above this many: 95 % of the usable
    /// window, the request would not fit.
    pub last_resort: u64,
}

impl Budget {
    /// The budget for `window` under `config`.
    pub fn new(config: &EngineConfig<'_>, window: u32) -> Self {
        let reserve = output_reserve(config, window);
        let usable = f64::from(window.saturating_sub(reserve));
        let threshold = f64::from(config.context.threshold.clamp(0.05, 1.0));
        let target = f64::from(config.context.target.clamp(0.05, 1.0)).min(threshold);
        Budget {
            window,
            reserve,
            trigger: (usable * threshold) as u64,
            target: (usable * target) as u64,
            last_resort: (usable * 0.95).max(usable * threshold) as u64,
        }
    }

    /// The prompt tokens that fit at all (window less reserve).
    pub fn usable(&self) -> u64 {
        u64::from(self.window.saturating_sub(self.reserve))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::CycleConfig;

    #[test]
    fn the_table_matches_prefixes_and_vendor_paths() {
        assert_eq!(known_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(known_window("openai/GPT-4o"), Some(128_000));
        assert_eq!(known_window("gpt-4"), Some(8_192));
        assert_eq!(known_window("Qwen/Qwen2.5-7B-Instruct"), Some(32_768));
        assert_eq!(known_window("my-finetune"), None);
    }

    #[test]
    fn configured_beats_table_beats_default() {
        let mut config = CycleConfig::new("gpt-4o");
        assert_eq!(
            resolve_window(&config.engine()),
            (128_000, WindowSource::Table)
        );
        config.context_window = Some(4_096);
        assert_eq!(
            resolve_window(&config.engine()),
            (4_096, WindowSource::Configured)
        );
        let unknown = CycleConfig::new("local");
        assert_eq!(
            resolve_window(&unknown.engine()),
            (DEFAULT_CONTEXT_WINDOW, WindowSource::Default)
        );
    }

    #[test]
    fn the_reserve_is_max_tokens_else_a_quarter() {
        let mut config = CycleConfig::new("x");
        assert_eq!(output_reserve(&config.engine(), 8_192), 2_048);
        assert_eq!(output_reserve(&config.engine(), 128_000), 4_096);
        config.options.max_tokens = Some(1_000);
        assert_eq!(output_reserve(&config.engine(), 8_192), 1_000);
        let budget = Budget::new(&config.engine(), 8_192);
        assert_eq!(budget.usable(), 7_192);
        assert_eq!(budget.trigger, (7_192.0 * 0.8_f64) as u64);
    }
}
