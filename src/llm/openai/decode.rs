//! The chat-completions stream: each SSE event's `data:` is a `chat.completion.chunk`, `[DONE]`
//! ends it, and an error arrives as an `{"error": ...}` chunk, an `event: error` event or
//! llama.cpp's `error: {...}` line (rewritten to an error event by the transport).

use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;

use crate::llm::error::ProviderError;
use crate::llm::model::{ModelDelta, ModelStream};
use crate::llm::openai::errors::stream_error;
use crate::llm::openai::stream::ChunkDecoder;
use crate::llm::transport::{SseDecoder, decode_events, truncate};

/// Decode an OpenAI-compatible SSE body into a [`ModelStream`].
///
/// `bytes` is the raw response body in any chunking (events and UTF-8 characters may be split
/// anywhere). `idle_timeout` ends the stream with [`ProviderError::Timeout`] (`what: TimeoutKind::StreamIdle`)
/// when the reply makes no progress for that long: only an event that yields a delta counts,
/// so SSE comments such as `: ping`, empty events and chunks without content do not keep a
/// stream alive; `None` waits forever. An event (or line) over 16 MiB or a body over 64 MiB
/// ends it with [`ProviderError::ResponseLimitExceeded`] ([`crate::llm::OpenAiClient`] takes these
/// limits, and a deadline, from its [`crate::llm::OpenAiConfig`]). The stream ends cleanly
/// after `[DONE]`, or at the end of the body when a `finish_reason` was seen; a body that ends
/// before either yields a final [`ProviderError::Stream`]. An `{"error": ...}` chunk, an
/// `event: error` event and llama.cpp's `error: {...}` line each yield [`ProviderError::Stream`]
/// with the server's message. Nothing follows an error.
///
/// Useful on its own to replay a recorded transcript:
///
/// ```
/// # async fn demo() -> Result<(), agcore::llm::ProviderError> {
/// use agcore::llm::{StreamAssembler, openai::decode_stream};
/// use futures::StreamExt;
///
/// let body = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"Hi\"},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n";
/// let bytes = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(body))]);
/// let mut deltas = decode_stream(bytes, None);
/// let mut assembler = StreamAssembler::new();
/// let mut events = Vec::new();
/// while let Some(delta) = deltas.next().await {
///     assembler.push(delta?, &mut events);
/// }
/// assert_eq!(assembler.finish(&mut events)?.text(), "Hi");
/// # Ok(()) }
/// ```
pub fn decode_stream<S, E>(bytes: S, idle_timeout: Option<Duration>) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_events(bytes, idle_timeout, ChunkDecoder::default())
}

impl SseDecoder for ChunkDecoder {
    fn event(
        &mut self,
        event: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        if event == Some("error") {
            return Err(error_event(data));
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        self.decode(data, out)?;
        Ok(false)
    }

    fn finished(&self) -> bool {
        ChunkDecoder::finished(self)
    }
}

/// The error of an `event: error` payload (JSON error object or plain text).
fn error_event(data: &str) -> ProviderError {
    match serde_json::from_str::<serde_json::Value>(data) {
        Ok(value) => stream_error(value.get("error").unwrap_or(&value)),
        Err(_) => ProviderError::Stream(truncate(data)),
    }
}
