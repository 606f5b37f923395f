//! Token counters for the estimate of what changed since the server's last usage: the
//! [`TokenCounter`] trait (bring your own), [`Tiktoken`] for OpenAI-family models (cargo feature
//! `tiktoken`, on by default: o200k_base / cl100k_base, compiled in, nothing downloaded), and
//! the choice of one per conversation ([`TokenizerChoice`]). Without a counter the engine uses
//! the bytes-per-token ratio calibrated from the server's usage.

use std::sync::Arc;

use async_trait::async_trait;

/// Why a counter could not count (the engine then falls back to the calibrated ratio for the
/// rest of the conversation, and says so once in a log line).
#[derive(Debug, thiserror::Error)]
pub enum TokenCountError {
    /// The tokenizer service did not answer in time, or not at all.
    #[error("tokenizer {counter} is unavailable: {reason}")]
    Unavailable {
        /// The counter's name.
        counter: String,
        /// What went wrong.
        reason: String,
    },
    /// It answered something that is not a count.
    #[error("tokenizer {counter} answered something unexpected: {reason}")]
    BadAnswer {
        /// The counter's name.
        counter: String,
        /// What was wrong with it.
        reason: String,
    },
}

/// Counts the tokens of texts the way the model's tokenizer does. The engine passes only what
/// changed since the server's last count (new messages, stubs, summaries), at most
/// [`SAMPLE_BYTES`] of each text (a longer one is sampled at its head and tail and scaled).
#[async_trait]
pub trait TokenCounter: Send + Sync + std::fmt::Debug {
    /// A short name for logs (`tiktoken/o200k_base`, `llama.cpp/tokenize`).
    fn name(&self) -> &str;

    /// The token count of each of `texts`, in order (no special tokens, no chat framing).
    async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError>;

    /// Whether counting sends the texts out of the process (a server's tokenizer). Their texts
    /// then pass the run's `before_model_request` hooks first, like every request to a model
    /// server ([`OutboundText`]). Default: `false` (counted in-process).
    fn sends_text(&self) -> bool {
        false
    }
}

/// What texts become before they leave the process for a counter that [sends
/// them](TokenCounter::sends_text): the run gives the engine its hooks as one
/// (`crate::run::HookChain`, with `RequestPurpose::TokenCount`).
#[async_trait]
pub trait OutboundText: Send + Sync {
    /// `texts` as they may be sent for `model` (`None`: unchanged). The result has one text per
    /// input text, in order.
    async fn outbound(&self, model: &str, texts: &[&str]) -> Option<Vec<String>>;
}

/// A counter that sends text, behind the run's [`OutboundText`].
#[derive(Debug)]
pub(crate) struct Outbound<'a> {
    /// The counter.
    pub(crate) counter: &'a dyn TokenCounter,
    /// The edits.
    pub(crate) filter: &'a dyn OutboundText,
    /// The conversation's model.
    pub(crate) model: &'a str,
}

impl std::fmt::Debug for dyn OutboundText + '_ {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OutboundText")
    }
}

#[async_trait]
impl TokenCounter for Outbound<'_> {
    fn name(&self) -> &str {
        self.counter.name()
    }

    async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError> {
        match self.filter.outbound(self.model, texts).await {
            Some(edited) if edited.len() == texts.len() => {
                let edited: Vec<&str> = edited.iter().map(String::as_str).collect();
                self.counter.count(&edited).await
            }
            // A filter that lost texts: nothing is sent (the ratio estimates instead).
            Some(_) => Err(TokenCountError::Unavailable {
                counter: self.counter.name().to_owned(),
                reason: "the hooks changed the number of texts to count".to_owned(),
            }),
            None => self.counter.count(texts).await,
        }
    }

    fn sends_text(&self) -> bool {
        true
    }
}

/// The most bytes of one text the engine gives a counter: a longer text is counted on its
/// first and last `SAMPLE_BYTES / 2` bytes and scaled to its length. This bounds a turn's
/// counting (tiktoken-rs counts about 15–17 MB/s here: a whole 8 KB output would be ~0.5 ms)
/// whatever the outputs' size; the error is confined to the long text's own mix of content.
pub const SAMPLE_BYTES: usize = 512;

/// Which counter the engine uses (`ContextConfig::tokenizer`).
#[derive(Debug, Clone, Default)]
pub enum TokenizerChoice {
    /// [`Tiktoken`] when the model's name is an OpenAI-family one (and the `tiktoken` feature
    /// is on), else the calibrated ratio.
    #[default]
    Auto,
    /// The calibrated bytes-per-token ratio only.
    Ratio,
    /// This counter (e.g. [`crate::context::LlamaCppTokenizer`], or your own).
    Custom(Arc<dyn TokenCounter>),
}

impl PartialEq for TokenizerChoice {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (TokenizerChoice::Auto, TokenizerChoice::Auto)
            | (TokenizerChoice::Ratio, TokenizerChoice::Ratio) => true,
            (TokenizerChoice::Custom(a), TokenizerChoice::Custom(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl TokenizerChoice {
    /// The counter for `model`, if any.
    pub fn resolve(&self, model: &str) -> Option<Arc<dyn TokenCounter>> {
        match self {
            TokenizerChoice::Auto => tiktoken_for_model(model),
            TokenizerChoice::Ratio => None,
            TokenizerChoice::Custom(counter) => Some(counter.clone()),
        }
    }
}

/// The tiktoken encoding of an OpenAI-family model name (`gpt-4o`, `openai/gpt-4.1-mini`,
/// `gpt-5`, `o3`, `gpt-oss-20b` → o200k_base; `gpt-4`, `gpt-3.5-turbo` → cl100k_base), or
/// `None` for other models and for the older encodings (p50k, r50k).
pub fn tiktoken_encoding(model: &str) -> Option<TiktokenEncoding> {
    let lower = model.to_ascii_lowercase();
    // A vendor path (`openai/gpt-4o`, `azure/gpt-4o`) names the same model.
    let name = lower.rsplit('/').next().unwrap_or(&lower);
    // OpenAI's own list, then the names it does not know yet but that are the same family.
    #[cfg(feature = "tiktoken")]
    {
        use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
        match get_tokenizer(name) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => {
                return Some(TiktokenEncoding::O200kBase);
            }
            Some(Tokenizer::Cl100kBase) => return Some(TiktokenEncoding::Cl100kBase),
            Some(_) => return None,
            None => {}
        }
    }
    const O200K: [&str; 6] = ["gpt-4o", "gpt-4.1", "gpt-5", "o1", "o3", "o4"];
    if O200K.iter().any(|prefix| name.starts_with(prefix)) {
        Some(TiktokenEncoding::O200kBase)
    } else if name.starts_with("gpt-4") || name.starts_with("gpt-3.5") {
        Some(TiktokenEncoding::Cl100kBase)
    } else {
        None
    }
}

/// A tiktoken encoding agcore counts with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TiktokenEncoding {
    /// GPT-4o, GPT-4.1, GPT-5, the o-series, gpt-oss.
    O200kBase,
    /// GPT-4, GPT-3.5.
    Cl100kBase,
}

impl TiktokenEncoding {
    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            TiktokenEncoding::O200kBase => "o200k_base",
            TiktokenEncoding::Cl100kBase => "cl100k_base",
        }
    }
}

/// The counter for `model` with the `tiktoken` feature: a shared [`Tiktoken`] (its tables are
/// parsed once per process, on first use: about 130 ms for o200k_base, 50 ms for cl100k_base).
pub fn tiktoken_for_model(model: &str) -> Option<Arc<dyn TokenCounter>> {
    #[cfg(feature = "tiktoken")]
    {
        use std::sync::LazyLock;
        static O200K: LazyLock<Arc<dyn TokenCounter>> =
            LazyLock::new(|| Arc::new(Tiktoken::new(TiktokenEncoding::O200kBase)));
        static CL100K: LazyLock<Arc<dyn TokenCounter>> =
            LazyLock::new(|| Arc::new(Tiktoken::new(TiktokenEncoding::Cl100kBase)));
        match tiktoken_encoding(model)? {
            TiktokenEncoding::O200kBase => Some(O200K.clone()),
            TiktokenEncoding::Cl100kBase => Some(CL100K.clone()),
        }
    }
    #[cfg(not(feature = "tiktoken"))]
    {
        let _ = model;
        None
    }
}

/// OpenAI's BPE (tiktoken-rs, its tables compiled into the binary).
#[cfg(feature = "tiktoken")]
#[derive(Debug)]
pub struct Tiktoken {
    encoding: TiktokenEncoding,
    name: String,
}

#[cfg(feature = "tiktoken")]
impl Tiktoken {
    /// A counter with `encoding` (its tables are parsed on the first count, once per process).
    pub fn new(encoding: TiktokenEncoding) -> Self {
        Tiktoken {
            encoding,
            name: format!("tiktoken/{}", encoding.name()),
        }
    }

    /// The tokens of `text`, counted now.
    pub fn count_text(&self, text: &str) -> u64 {
        let bpe = match self.encoding {
            TiktokenEncoding::O200kBase => tiktoken_rs::o200k_base_singleton(),
            TiktokenEncoding::Cl100kBase => tiktoken_rs::cl100k_base_singleton(),
        };
        bpe.count_ordinary(text) as u64
    }
}

#[cfg(feature = "tiktoken")]
#[async_trait]
impl TokenCounter for Tiktoken {
    fn name(&self) -> &str {
        &self.name
    }

    async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError> {
        Ok(texts.iter().map(|text| self.count_text(text)).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openai_family_names_map_to_their_encoding() {
        for model in [
            "gpt-4o",
            "gpt-4o-mini",
            "openai/gpt-4.1-mini",
            "gpt-5",
            "o3",
            "GPT-4O",
        ] {
            assert_eq!(
                tiktoken_encoding(model),
                Some(TiktokenEncoding::O200kBase),
                "{model}"
            );
        }
        for model in ["gpt-4", "gpt-4-turbo", "gpt-3.5-turbo"] {
            assert_eq!(
                tiktoken_encoding(model),
                Some(TiktokenEncoding::Cl100kBase),
                "{model}"
            );
        }
        for model in [
            "llama-3.1-8b",
            "qwen2.5-coder",
            "claude-sonnet-4",
            "local-model",
        ] {
            assert_eq!(tiktoken_encoding(model), None, "{model}");
        }
        assert!(TokenizerChoice::Ratio.resolve("gpt-4o").is_none());
        assert!(TokenizerChoice::Auto.resolve("local-model").is_none());
    }

    #[cfg(feature = "tiktoken")]
    #[tokio::test]
    async fn tiktoken_counts_like_openai() {
        let counter = tiktoken_for_model("gpt-4o").expect("o200k");
        assert_eq!(counter.name(), "tiktoken/o200k_base");
        // Known o200k_base counts (OpenAI's tokenizer page): "hello world" is 2 tokens.
        let counts = counter.count(&["hello world", ""]).await.expect("counts");
        assert_eq!(counts, vec![2, 0]);
        let cl = tiktoken_for_model("gpt-4").expect("cl100k");
        assert_eq!(cl.count(&["hello world"]).await.expect("count"), vec![2]);
    }
}
