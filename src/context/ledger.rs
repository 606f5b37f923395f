//! The token ledger: with a [`TokenCounter`], each message is counted once, when it first
//! appears (a new turn, a stub, a summary), and remembered by a cheap fingerprint; an estimate
//! is the server's `prompt_tokens` for the last request plus (counted now − counted then).
//! Only the delta is ever tokenized, and at most [`SAMPLE_BYTES`] of each text.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

use crate::context::estimate::{Calibration, INITIAL_BYTES_PER_TOKEN, message_bytes};
use crate::context::tokenizer::{SAMPLE_BYTES, TokenCounter};
use crate::vocab::{Artifact, ContentPart, MessageContent, OpenaiChatMessage, ToolDefinition};

/// Tokens of a message's framing (role, start and end markers) in OpenAI-style chat templates.
pub const MESSAGE_TOKENS: u64 = 4;
/// Tokens of one tool call's framing.
pub const CALL_TOKENS: u64 = 3;
/// Tokens counted for an image or audio part (servers bill these by size or tiles).
pub const MEDIA_TOKENS: u64 = 800;

/// What a counter told the engine about this conversation (kept in
/// [`crate::context::ContextState`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TokenLedger {
    /// Tokens per message, by fingerprint (pruned to the measured history when it grows).
    cache: HashMap<u64, u64, BuildHasherDefault<Identity>>,
    /// The last request the server counted: our count of it and the server's.
    last: Option<(u64, u64)>,
    /// The tool definitions' tokens, by the slice they were counted from.
    tools: Option<(usize, usize, u64)>,
    /// The counter's name once it counted; `None` before, or after it failed.
    counter: Option<String>,
    /// The counter failed: the ratio is used for the rest of the conversation.
    failed: bool,
}

impl TokenLedger {
    /// Whether estimates come from the counter (it counted, and has not failed).
    pub fn active(&self) -> bool {
        self.counter.is_some() && !self.failed
    }

    /// The counter in use, by name.
    pub fn counter(&self) -> Option<&str> {
        self.counter.as_deref().filter(|_| !self.failed)
    }

    /// Count the messages (and tool definitions) not counted yet, in one call to `counter`.
    pub async fn measure(
        &mut self,
        counter: &dyn TokenCounter,
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
    ) {
        if self.failed {
            return;
        }
        let tools_json = match self.tools {
            Some((address, len, _)) if address == tools.as_ptr() as usize && len == tools.len() => {
                None
            }
            _ if tools.is_empty() => {
                self.tools = Some((tools.as_ptr() as usize, 0, 0));
                None
            }
            _ => serde_json::to_string(tools).ok(),
        };
        let mut batch = Batch::default();
        let mut misses = Vec::new();
        let fingerprints: Vec<u64> = messages.iter().map(fingerprint).collect();
        for (message, &print) in messages.iter().zip(&fingerprints) {
            if !self.cache.contains_key(&print) && !misses.iter().any(|(p, _)| *p == print) {
                let (fixed, pieces) = pieces(message);
                misses.push((print, batch.add(fixed, &pieces)));
            }
        }
        let tools_job = tools_json.as_deref().map(|json| batch.add(0, &[json]));
        if misses.is_empty() && tools_job.is_none() {
            self.counter
                .get_or_insert_with(|| counter.name().to_owned());
            return;
        }
        let counts = match counter.count(&batch.texts).await {
            Ok(counts) if counts.len() == batch.texts.len() => counts,
            Ok(counts) => {
                self.fail(
                    counter.name(),
                    &format!("{} counts for {} texts", counts.len(), batch.texts.len()),
                );
                return;
            }
            Err(error) => {
                self.fail(counter.name(), &error.to_string());
                return;
            }
        };
        for (print, job) in misses {
            self.cache.insert(print, batch.tokens(&job, &counts));
        }
        if let Some(job) = tools_job {
            self.tools = Some((
                tools.as_ptr() as usize,
                tools.len(),
                batch.tokens(&job, &counts),
            ));
        }
        // Compacted messages are not coming back: keep only this history's, now and then.
        if self.cache.len() > 2 * fingerprints.len() + 64 {
            let current: std::collections::HashSet<u64, BuildHasherDefault<Identity>> =
                fingerprints.into_iter().collect();
            self.cache.retain(|print, _| current.contains(print));
        }
        self.counter = Some(counter.name().to_owned());
    }

    fn fail(&mut self, counter: &str, reason: &str) {
        tracing::warn!(
            counter,
            reason,
            "the token counter failed; estimating with the calibrated ratio from now on"
        );
        self.failed = true;
    }

    /// Our count of `messages` with `tools`: the counted messages from the ledger, any other by
    /// the calibrated ratio. `None` when the counter is not in use.
    pub fn counted(
        &self,
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
        calibration: &Calibration,
    ) -> Option<u64> {
        if !self.active() {
            return None;
        }
        let messages: u64 = messages
            .iter()
            .map(|message| {
                self.cache
                    .get(&fingerprint(message))
                    .copied()
                    .unwrap_or_else(|| calibration.tokens(message_bytes(message)))
            })
            .sum();
        let tools = match self.tools {
            Some((address, len, tokens))
                if address == tools.as_ptr() as usize && len == tools.len() =>
            {
                tokens
            }
            _ => calibration.tokens(crate::context::estimate::tools_bytes(tools)),
        };
        Some(messages + tools)
    }

    /// The estimate for a request we count at `counted`: the server's count of the last
    /// request plus what changed since; without one (or after most of the history was
    /// replaced), our count.
    pub fn estimate(&self, counted: u64) -> u64 {
        match self.last {
            Some((ours, theirs)) if counted >= ours / 2 => {
                (theirs as i64 + counted as i64 - ours as i64).max(0) as u64
            }
            _ => counted,
        }
    }

    /// The server counted `prompt_tokens` for a request we counted at `counted`.
    pub fn observe(&mut self, counted: Option<u64>, prompt_tokens: u64) {
        if let Some(counted) = counted.filter(|_| prompt_tokens > 0) {
            self.last = Some((counted, prompt_tokens));
        }
    }

    /// The server rejected a request: its count (if it said) is the new ground truth.
    pub fn observe_overflow(&mut self, counted: Option<u64>, prompt_tokens: Option<u64>) {
        self.last = counted.zip(prompt_tokens);
    }
}

/// The texts of one counter call, and how each message's count is put together from them.
#[derive(Default)]
struct Batch<'a> {
    texts: Vec<&'a str>,
}

/// One message's share of a batch: fixed tokens, and per text its range in the batch and
/// the factor that scales a sample to the whole.
struct Job {
    fixed: u64,
    parts: Vec<(usize, usize, f64)>,
}

impl<'a> Batch<'a> {
    fn add(&mut self, fixed: u64, pieces: &[&'a str]) -> Job {
        let mut parts = Vec::with_capacity(pieces.len());
        for &piece in pieces {
            if piece.is_empty() {
                continue;
            }
            let start = self.texts.len();
            if piece.len() <= SAMPLE_BYTES {
                self.texts.push(piece);
                parts.push((start, 1, 1.0));
            } else {
                let head = &piece[..piece.floor_char_boundary(SAMPLE_BYTES / 2)];
                let tail = &piece[piece.ceil_char_boundary(piece.len() - SAMPLE_BYTES / 2)..];
                self.texts.push(head);
                self.texts.push(tail);
                let sampled = (head.len() + tail.len()).max(1);
                parts.push((start, 2, piece.len() as f64 / sampled as f64));
            }
        }
        Job { fixed, parts }
    }

    fn tokens(&self, job: &Job, counts: &[u64]) -> u64 {
        job.fixed
            + job
                .parts
                .iter()
                .map(|&(start, len, scale)| {
                    let sum: u64 = counts[start..start + len].iter().sum();
                    (sum as f64 * scale).ceil() as u64
                })
                .sum::<u64>()
    }
}

/// A message's texts to count, and its fixed tokens (framing, media parts).
fn pieces(message: &OpenaiChatMessage) -> (u64, Vec<&str>) {
    let mut fixed = MESSAGE_TOKENS;
    let mut texts = Vec::new();
    match message {
        OpenaiChatMessage::System { content: c, .. }
        | OpenaiChatMessage::Developer { content: c, .. }
        | OpenaiChatMessage::User { content: c, .. } => {
            content_texts(c, &mut texts, &mut fixed);
        }
        OpenaiChatMessage::Tool {
            tool_call_id,
            content: c,
            ..
        } => {
            texts.push(tool_call_id.as_str());
            content_texts(c, &mut texts, &mut fixed);
        }
        OpenaiChatMessage::Assistant {
            content: c,
            refusal,
            reasoning_content,
            reasoning,
            tool_calls,
            artifacts,
            ..
        } => {
            for text in [c, refusal, reasoning_content, reasoning]
                .into_iter()
                .flatten()
            {
                texts.push(text.as_str());
            }
            // Opaque vendor JSON (signatures, encrypted reasoning) is no text a tokenizer knows:
            // counted by its length, on the large side.
            let artifact_bytes: usize = artifacts.iter().map(Artifact::data_bytes).sum();
            fixed += (artifact_bytes as f64 / INITIAL_BYTES_PER_TOKEN).ceil() as u64;
            for call in tool_calls {
                fixed += CALL_TOKENS;
                texts.push(call.function.name.as_str());
                texts.push(call.function.arguments.as_str());
            }
        }
    }
    (fixed, texts)
}

fn content_texts<'a>(content: &'a MessageContent, texts: &mut Vec<&'a str>, fixed: &mut u64) {
    match content {
        MessageContent::Text(text) => texts.push(text.as_str()),
        MessageContent::Parts(parts) => {
            for part in parts {
                match part {
                    ContentPart::Text { text } => texts.push(text.as_str()),
                    _ => *fixed += MEDIA_TOKENS,
                }
            }
        }
    }
}

/// A message's fingerprint: its role, size, and each text's length and first and last 8
/// bytes, mixed without allocating — O(1) per message, whatever its length (an estimate
/// fingerprints every message a few times per request, so this is most of its cost). Two
/// different messages of the same role and size whose texts agree at both ends share one; the
/// ledger then counts one for the other, an error confined to the estimate.
fn fingerprint(message: &OpenaiChatMessage) -> u64 {
    let role: u64 = match message {
        OpenaiChatMessage::System { .. } => 1,
        OpenaiChatMessage::Developer { .. } => 2,
        OpenaiChatMessage::User { .. } => 3,
        OpenaiChatMessage::Assistant { .. } => 4,
        OpenaiChatMessage::Tool { .. } => 5,
    };
    let mut hash = Mix(role);
    hash.add(message_bytes(message) as u64);
    visit_texts(message, &mut |text| {
        let bytes = text.as_bytes();
        hash.add(bytes.len() as u64);
        hash.add(word(&bytes[..bytes.len().min(8)]));
        hash.add(word(&bytes[bytes.len().saturating_sub(8)..]));
    });
    hash.0
}

/// The hasher of fingerprints, which are hashes already.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        self.0 = bytes
            .iter()
            .fold(self.0, |acc, &b| (acc << 8) | u64::from(b));
    }
    fn write_u64(&mut self, value: u64) {
        self.0 = value;
    }
}

/// Up to 8 bytes as a number.
fn word(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b))
}

/// A multiply-rotate mix (as FxHash): fast, and enough to tell messages apart.
struct Mix(u64);

impl Mix {
    fn add(&mut self, value: u64) {
        self.0 = (self.0.rotate_left(5) ^ value).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

/// Each text of `message` that [`pieces`] counts, without collecting them.
fn visit_texts(message: &OpenaiChatMessage, visit: &mut dyn FnMut(&str)) {
    let content = |content: &MessageContent, visit: &mut dyn FnMut(&str)| match content {
        MessageContent::Text(text) => visit(text),
        MessageContent::Parts(parts) => {
            for part in parts {
                if let ContentPart::Text { text } = part {
                    visit(text);
                }
            }
        }
    };
    match message {
        OpenaiChatMessage::System { content: c, .. }
        | OpenaiChatMessage::Developer { content: c, .. }
        | OpenaiChatMessage::User { content: c, .. } => content(c, visit),
        OpenaiChatMessage::Tool {
            tool_call_id,
            content: c,
            ..
        } => {
            visit(tool_call_id);
            content(c, visit);
        }
        OpenaiChatMessage::Assistant {
            content: c,
            refusal,
            reasoning_content,
            reasoning,
            tool_calls,
            ..
        } => {
            for text in [c, refusal, reasoning_content, reasoning]
                .into_iter()
                .flatten()
            {
                visit(text);
            }
            for call in tool_calls {
                visit(&call.function.name);
                visit(&call.function.arguments);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::tokenizer::TokenCountError;
    use async_trait::async_trait;

    /// One token per byte, and the texts it was given.
    #[derive(Debug, Default)]
    struct Bytes(std::sync::Mutex<Vec<usize>>);

    #[async_trait]
    impl TokenCounter for Bytes {
        fn name(&self) -> &str {
            "bytes"
        }
        async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError> {
            self.0
                .lock()
                .map_err(|_| TokenCountError::Unavailable {
                    counter: "bytes".into(),
                    reason: "poisoned".into(),
                })?
                .push(texts.iter().map(|t| t.len()).sum());
            Ok(texts.iter().map(|t| t.len() as u64).collect())
        }
    }

    #[tokio::test]
    async fn only_new_messages_are_counted_and_the_delta_is_added_to_the_servers_count() {
        let counter = Bytes::default();
        let mut ledger = TokenLedger::default();
        let calibration = Calibration::default();
        let mut messages = vec![
            OpenaiChatMessage::system("sys"),
            OpenaiChatMessage::user_text("hello"),
        ];
        ledger.measure(&counter, &messages, &[]).await;
        let counted = ledger.counted(&messages, &[], &calibration).unwrap();
        assert_eq!(counted, 2 * MESSAGE_TOKENS + 3 + 5);
        ledger.observe(Some(counted), 100);
        messages.push(OpenaiChatMessage::assistant_text("x".repeat(10)));
        ledger.measure(&counter, &messages, &[]).await;
        // The second call counted the new message only.
        assert_eq!(*counter.0.lock().unwrap(), vec![8, 10]);
        let now = ledger.counted(&messages, &[], &calibration).unwrap();
        assert_eq!(ledger.estimate(now), 100 + MESSAGE_TOKENS + 10);
    }

    #[tokio::test]
    async fn a_long_text_is_sampled_at_both_ends() {
        let counter = Bytes::default();
        let mut ledger = TokenLedger::default();
        let long = "é".repeat(20_000);
        let messages = vec![OpenaiChatMessage::user_text(long.clone())];
        ledger.measure(&counter, &messages, &[]).await;
        let counted = counter.0.lock().unwrap().clone();
        assert!(counted[0] <= SAMPLE_BYTES, "{counted:?}");
        let tokens = ledger
            .counted(&messages, &[], &Calibration::default())
            .unwrap();
        assert_eq!(tokens, MESSAGE_TOKENS + long.len() as u64);
    }

    #[tokio::test]
    async fn artifacts_count_by_their_length_and_tell_messages_apart() {
        use crate::vocab::{ArtifactPlace, ArtifactProvider};
        let counter = Bytes::default();
        let mut ledger = TokenLedger::default();
        let thinking = serde_json::json!({"type": "thinking", "thinking": "t", "signature": "s".repeat(3_000)});
        let bytes = serde_json::to_string(&thinking).map_or(0, |text| text.len()) as u64;
        let plain = OpenaiChatMessage::assistant_text("answer");
        let signed = plain
            .clone()
            .with_artifacts(vec![crate::vocab::Artifact::new(
                ArtifactProvider::Anthropic,
                "claude",
                ArtifactPlace::Before(0),
                thinking,
            )]);
        assert_ne!(fingerprint(&plain), fingerprint(&signed));
        let messages = vec![signed];
        ledger.measure(&counter, &messages, &[]).await;
        let tokens = ledger
            .counted(&messages, &[], &Calibration::default())
            .unwrap();
        let by_length = (bytes as f64 / INITIAL_BYTES_PER_TOKEN).ceil() as u64;
        assert_eq!(tokens, MESSAGE_TOKENS + 6 + by_length);
    }

    #[test]
    fn fingerprints_differ_with_content_and_role() {
        let a = OpenaiChatMessage::user_text("hello there");
        let b = OpenaiChatMessage::user_text("hello where");
        let c = OpenaiChatMessage::system("hello there");
        assert_ne!(fingerprint(&a), fingerprint(&b));
        assert_ne!(fingerprint(&a), fingerprint(&c));
        assert_eq!(fingerprint(&a), fingerprint(&a.clone()));
    }
}
