//! The estimate of a request's prompt tokens before it is sent. Ground truth is the server's
//! own `usage.prompt_tokens` for the previous request; only the bytes that changed since are
//! turned into tokens, with a bytes-per-token ratio calibrated from that same usage.

use crate::vocab::{Artifact, ContentPart, MessageContent, OpenaiChatMessage, ToolDefinition};

/// The ratio used before any usage is seen: lower than English prose (about 4) so a first
/// estimate errs on the large side for code and JSON.
pub const INITIAL_BYTES_PER_TOKEN: f64 = 3.0;

/// Bytes counted per message for its role and framing (the chat template's tokens).
const MESSAGE_OVERHEAD: usize = 12;

/// Bytes counted for an image or audio part: servers bill these by size or tiles, not bytes;
/// a fixed figure (about 800 tokens) is closer than its base64 length.
const MEDIA_PART_BYTES: usize = 2_400;

/// The size of one message as the estimator counts it: its texts, tool calls, reasoning,
/// continuation artifacts, and a fixed overhead. No allocation.
///
/// Artifacts count by their JSON length whichever API they are for: an encrypted reasoning item
/// or a thinking block can be most of a message, and a request to its own API carries it; for
/// another API the estimate errs on the large side, as it should.
pub fn message_bytes(message: &OpenaiChatMessage) -> usize {
    MESSAGE_OVERHEAD
        + match message {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. }
            | OpenaiChatMessage::User { content, .. } => content_bytes(content),
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                ..
            } => tool_call_id.len() + content_bytes(content),
            OpenaiChatMessage::Assistant {
                content,
                refusal,
                reasoning_content,
                reasoning,
                tool_calls,
                artifacts,
                ..
            } => {
                [content, refusal, reasoning_content, reasoning]
                    .iter()
                    .map(|text| text.as_ref().map_or(0, String::len))
                    .sum::<usize>()
                    + artifacts.iter().map(Artifact::data_bytes).sum::<usize>()
                    + tool_calls
                        .iter()
                        .map(|call| {
                            MESSAGE_OVERHEAD
                                + call.id.len()
                                + call.function.name.len()
                                + call.function.arguments.len()
                        })
                        .sum::<usize>()
            }
        }
}

fn content_bytes(content: &MessageContent) -> usize {
    match content {
        MessageContent::Text(text) => text.len(),
        MessageContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => text.len(),
                _ => MEDIA_PART_BYTES,
            })
            .sum(),
    }
}

/// The bytes of a list of messages.
pub fn messages_bytes(messages: &[OpenaiChatMessage]) -> usize {
    messages.iter().map(message_bytes).sum()
}

/// The bytes of the tool definitions: their JSON, counted without building it.
pub fn tools_bytes(tools: &[ToolDefinition]) -> usize {
    let mut counter = ByteCounter(0);
    // Writing into a counter cannot fail; a serialisation error counts what was written.
    let _ = serde_json::to_writer(&mut counter, tools);
    counter.0
}

struct ByteCounter(usize);

impl std::io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// What the estimator learnt from the server: the last request's size and its reported
/// prompt tokens, and the bytes-per-token ratio.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// Bytes per token, averaged over the usage seen.
    pub bytes_per_token: f64,
    /// The last request measured: its bytes and the server's prompt tokens for it.
    pub last: Option<(usize, u64)>,
}

impl Default for Calibration {
    fn default() -> Self {
        Calibration {
            bytes_per_token: INITIAL_BYTES_PER_TOKEN,
            last: None,
        }
    }
}

impl Calibration {
    /// The estimated prompt tokens of a request of `bytes` bytes: the last measured request's
    /// tokens plus the change in bytes turned into tokens; without a measurement (or after
    /// the history was mostly replaced), all of it by the ratio.
    pub fn estimate(&self, bytes: usize) -> u64 {
        let by_ratio = (bytes as f64 / self.bytes_per_token).ceil() as u64;
        match self.last {
            Some((last_bytes, last_tokens)) if bytes >= last_bytes / 2 => {
                let delta = (bytes as f64 - last_bytes as f64) / self.bytes_per_token;
                (last_tokens as f64 + delta).ceil().max(0.0) as u64
            }
            _ => by_ratio,
        }
    }

    /// Tokens for `bytes` bytes by the ratio alone (the size of a part of a request).
    pub fn tokens(&self, bytes: usize) -> u64 {
        (bytes as f64 / self.bytes_per_token).ceil() as u64
    }

    /// Bytes for `tokens` tokens by the ratio.
    pub fn bytes(&self, tokens: u64) -> usize {
        (tokens as f64 * self.bytes_per_token) as usize
    }

    /// Learn from the server: the request of `bytes` bytes had `prompt_tokens` tokens.
    pub fn observe(&mut self, bytes: usize, prompt_tokens: u64) {
        if prompt_tokens == 0 || bytes == 0 {
            return;
        }
        let ratio = (bytes as f64 / prompt_tokens as f64).clamp(0.5, 16.0);
        self.bytes_per_token = if self.last.is_none() {
            ratio
        } else {
            // An average that follows the conversation (prose, code, JSON) but not one outlier.
            0.7 * self.bytes_per_token + 0.3 * ratio
        };
        self.last = Some((bytes, prompt_tokens));
    }

    /// The server said the request of `bytes` bytes had `prompt_tokens` tokens and did not
    /// fit: learn it, and err on the large side from now on.
    pub fn observe_overflow(&mut self, bytes: usize, prompt_tokens: Option<u64>) {
        match prompt_tokens {
            Some(tokens) if tokens > 0 => {
                self.bytes_per_token = (bytes as f64 / tokens as f64).clamp(0.5, 16.0);
                self.last = Some((bytes, tokens));
            }
            _ => {
                self.bytes_per_token = (self.bytes_per_token * 0.8).max(0.5);
                self.last = None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::ToolCall;

    #[test]
    fn message_bytes_count_texts_and_calls() {
        let user = OpenaiChatMessage::user_text("hello");
        assert_eq!(message_bytes(&user), MESSAGE_OVERHEAD + 5);
        let call = OpenaiChatMessage::assistant_tool_calls(
            Some("ok".into()),
            vec![ToolCall::new("c1", "read", "{}")],
        );
        assert_eq!(
            message_bytes(&call),
            MESSAGE_OVERHEAD + 2 + MESSAGE_OVERHEAD + 2 + 4 + 2
        );
    }

    #[test]
    fn artifacts_count_by_their_json_length() {
        use crate::vocab::{ArtifactPlace, ArtifactProvider};
        let call = OpenaiChatMessage::assistant_tool_calls(
            Some("ok".into()),
            vec![ToolCall::new("c1", "read", "{}")],
        );
        let reasoning = serde_json::json!({
            "type": "reasoning",
            "id": "rs_1",
            "summary": [],
            "encrypted_content": "gAAAAAB".repeat(4_000),
        });
        let size = serde_json::to_string(&reasoning).map_or(0, |text| text.len());
        let with = call.clone().with_artifacts(vec![Artifact::new(
            ArtifactProvider::OpenaiResponses,
            "gpt-5",
            ArtifactPlace::Before(0),
            reasoning,
        )]);
        assert!(size > 28_000);
        assert_eq!(message_bytes(&with), message_bytes(&call) + size);
    }

    #[test]
    fn only_the_delta_is_estimated() {
        let mut calibration = Calibration::default();
        assert_eq!(calibration.estimate(3_000), 1_000);
        calibration.observe(4_000, 1_000);
        assert_eq!(calibration.bytes_per_token, 4.0);
        // 400 bytes more: 100 tokens more than the server's count.
        assert_eq!(calibration.estimate(4_400), 1_100);
        // Mostly replaced: by the ratio.
        assert_eq!(calibration.estimate(1_000), 250);
    }

    #[test]
    fn an_overflow_makes_the_ratio_smaller() {
        let mut calibration = Calibration::default();
        calibration.observe(4_000, 1_000);
        calibration.observe_overflow(8_000, None);
        assert!(calibration.bytes_per_token < 4.0);
        calibration.observe_overflow(8_000, Some(4_000));
        assert_eq!(calibration.bytes_per_token, 2.0);
    }

    #[test]
    fn tool_bytes_are_their_json_length() {
        let tools = vec![ToolDefinition::function(
            "read",
            "Read a file",
            serde_json::json!({"type": "object"}),
        )];
        assert_eq!(
            tools_bytes(&tools),
            serde_json::to_string(&tools).map(|s| s.len()).unwrap_or(0)
        );
    }
}
