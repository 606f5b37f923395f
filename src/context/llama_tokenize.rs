//! [`LlamaCppTokenizer`]: a llama.cpp server's own tokenizer, through its `POST /tokenize`
//! (`{"content": "...", "add_special": false}` → `{"tokens": [...]}`), as a
//! [`TokenCounter`]. The library never asks on its own: [`LlamaCppTokenizer::discover`] is
//! called by the CLI (or by you) and the counter is set as `ContextConfig::tokenizer`. Each
//! call is bounded: [`DISCOVERY_TIMEOUT`] for all its requests together, at most
//! [`MAX_DISCOVERY_BODY`] bytes read per reply, at most [`MAX_REQUESTS`] requests, no redirects.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::context::discover::{DISCOVERY_TIMEOUT, MAX_DISCOVERY_BODY, get_json};
use crate::context::tokenizer::{TokenCountError, TokenCounter};

/// The most `/tokenize` requests one count makes: more texts are joined into groups, and a
/// group's count is shared among its texts by their lengths.
pub const MAX_REQUESTS: usize = 32;

const NAME: &str = "llama.cpp/tokenize";

/// A llama.cpp server's `/tokenize`.
#[derive(Debug, Clone)]
pub struct LlamaCppTokenizer {
    client: reqwest::Client,
    url: String,
    api_key: Option<String>,
    deadline: Duration,
}

impl LlamaCppTokenizer {
    /// The tokenizer of the server at `base_url` (an OpenAI-compatible base such as
    /// `http://127.0.0.1:8080/v1`; `/tokenize` is at its root), without asking it yet.
    pub fn new(base_url: &str, api_key: Option<&str>) -> Option<Self> {
        let client = reqwest::Client::builder()
            .timeout(DISCOVERY_TIMEOUT)
            .connect_timeout(DISCOVERY_TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .ok()?;
        let base = base_url.trim_end_matches('/');
        let root = base.strip_suffix("/v1").unwrap_or(base);
        Some(LlamaCppTokenizer {
            client,
            url: format!("{root}/tokenize"),
            api_key: api_key.map(str::to_owned),
            deadline: DISCOVERY_TIMEOUT,
        })
    }

    /// The tokenizer of the server at `base_url` when it has `/tokenize` the llama.cpp way
    /// (one bounded probe), else `None`.
    pub async fn discover(base_url: &str, api_key: Option<&str>) -> Option<Self> {
        let tokenizer = Self::new(base_url, api_key)?;
        match tokenizer.count_one("hello").await {
            Ok(count) if count > 0 => Some(tokenizer),
            _ => None,
        }
    }

    async fn count_one(&self, text: &str) -> Result<u64, TokenCountError> {
        let mut request = self
            .client
            .post(&self.url)
            .json(&json!({ "content": text, "add_special": false, "with_pieces": false }));
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let reply = get_json(request)
            .await
            .ok_or_else(|| TokenCountError::Unavailable {
                counter: NAME.to_owned(),
                reason: format!(
                    "no JSON reply from {} (within {MAX_DISCOVERY_BODY} bytes)",
                    self.url
                ),
            })?;
        reply
            .get("tokens")
            .and_then(Value::as_array)
            .map(|tokens| tokens.len() as u64)
            .ok_or_else(|| TokenCountError::BadAnswer {
                counter: NAME.to_owned(),
                reason: "the reply has no \"tokens\" list".to_owned(),
            })
    }
}

#[async_trait]
impl TokenCounter for LlamaCppTokenizer {
    fn name(&self) -> &str {
        NAME
    }

    fn sends_text(&self) -> bool {
        true
    }

    async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError> {
        let group = texts.len().div_ceil(MAX_REQUESTS).max(1);
        let work = async {
            let mut counts = Vec::with_capacity(texts.len());
            for chunk in texts.chunks(group) {
                if let [text] = chunk {
                    counts.push(self.count_one(text).await?);
                    continue;
                }
                let joined = chunk.join("\n");
                // A newline between two texts is about one token of its own.
                let total = self
                    .count_one(&joined)
                    .await?
                    .saturating_sub(chunk.len() as u64 - 1);
                let bytes = joined.len().max(1) as f64;
                counts.extend(
                    chunk
                        .iter()
                        .map(|text| (total as f64 * text.len() as f64 / bytes).round() as u64),
                );
            }
            Ok(counts)
        };
        tokio::time::timeout(self.deadline, work)
            .await
            .map_err(|_| TokenCountError::Unavailable {
                counter: NAME.to_owned(),
                reason: format!("no answer within {:?}", self.deadline),
            })?
    }
}
