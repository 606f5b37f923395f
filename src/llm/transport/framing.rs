//! The framing hook: how a streaming body is cut into the messages a codec's decoder reads.
//! Server-sent events ([`SseFraming`]) are one framing; AWS event-stream (Bedrock's binary
//! frames with an `:event-type` header and a JSON payload) is the next. Whatever the framing,
//! the decoder sees the same thing: a message name, if any, and its text payload.

use bytes::Bytes;
use futures::Stream;

use crate::llm::model::ModelStream;
use crate::llm::transport::body::BodyLimits;
use crate::llm::transport::{SseDecoder, sse};

/// A streaming response body with the limits it is read under (idle timeout, response
/// deadline, event and body size). Opaque: a [`Framer`] hands it on to the transport's bounded
/// reader, so every framing gets the same limits.
pub struct StreamBody {
    pub(crate) bytes: std::pin::Pin<Box<dyn Stream<Item = Result<Bytes, reqwest::Error>> + Send>>,
    pub(crate) limits: BodyLimits,
}

impl std::fmt::Debug for StreamBody {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamBody")
            .field("limits", &self.limits)
            .finish_non_exhaustive()
    }
}

/// Cuts a streaming body into messages for a decoder.
pub trait Framer: Default + Send + Sync + 'static {
    /// The `Accept` header of a streaming request in this framing.
    const ACCEPT: &'static str;

    /// The deltas `decoder` makes of the messages in `body`; the stream ends with an error when
    /// the body breaks a limit, is malformed, or ends before the decoder saw a whole reply.
    fn frame<D: SseDecoder>(&self, body: StreamBody, decoder: D) -> ModelStream;
}

/// Server-sent events (`text/event-stream`): each event's `event:` name and trimmed `data:`
/// go to the decoder; llama.cpp's `error:` lines are read as error events.
#[derive(Debug, Default, Clone, Copy)]
pub struct SseFraming;

impl Framer for SseFraming {
    const ACCEPT: &'static str = "text/event-stream";

    fn frame<D: SseDecoder>(&self, body: StreamBody, decoder: D) -> ModelStream {
        sse::decode_limited(body.bytes, body.limits, decoder)
    }
}
