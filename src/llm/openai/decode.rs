//! The streaming body: bytes → SSE events (`sse-stream`) → chunks → [`ModelDelta`]s, under the
//! body's limits (see `body.rs`), with a typed error for a stream that ends too early.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use sse_stream::{Sse, SseStream};

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::model::{ModelDelta, ModelStream};
use crate::llm::openai::body::{BodyError, BodyLimits, BodyReader, Progress};
use crate::llm::openai::chunk::ChunkDecoder;
use crate::llm::openai::errors::{error_chain, stream_error, truncate};
use crate::llm::openai::{DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES};

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
    decode_limited(
        bytes,
        BodyLimits {
            idle: idle_timeout,
            deadline: None,
            max_event_bytes: DEFAULT_MAX_EVENT_BYTES,
            max_body_bytes: DEFAULT_MAX_RESPONSE_BYTES,
        },
    )
}

/// [`decode_stream`] under `limits`.
pub(crate) fn decode_limited<S, E>(bytes: S, limits: BodyLimits) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    let progress = Progress::default();
    let bytes = BodyReader::new(
        Box::pin(bytes.map_err(|error| error_chain(&error))),
        limits,
        progress.clone(),
    );
    Box::pin(DeltaStream {
        events: SseStream::from_bytes_stream(bytes),
        decoder: ChunkDecoder::default(),
        pending: VecDeque::new(),
        progress,
        done: false,
    })
}

struct DeltaStream {
    events: SseStream<sse_stream::ByteStreamBody<BodyReader, Bytes>>,
    decoder: ChunkDecoder,
    pending: VecDeque<ModelDelta>,
    /// Told whenever an event yields deltas (the idle timer's notion of progress).
    progress: Progress,
    done: bool,
}

impl DeltaStream {
    /// Handle one SSE event; `Ok(true)` when it was `[DONE]`.
    fn event(&mut self, event: Sse) -> Result<bool, ProviderError> {
        let Some(data) = event.data else {
            return Ok(false);
        };
        let data = data.trim();
        if event.event.as_deref() == Some("error") {
            return Err(error_event(data));
        }
        if data == "[DONE]" {
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        self.decoder.decode(data, &mut self.pending)?;
        if !self.pending.is_empty() {
            self.progress.note();
        }
        Ok(false)
    }
}

/// The error of an `event: error` payload (JSON error object or plain text).
fn error_event(data: &str) -> ProviderError {
    match serde_json::from_str::<serde_json::Value>(data) {
        Ok(value) => stream_error(value.get("error").unwrap_or(&value)),
        Err(_) => ProviderError::Stream(truncate(data)),
    }
}

fn sse_error(error: sse_stream::Error) -> ProviderError {
    match error {
        sse_stream::Error::Body(body) => match body.downcast::<BodyError>() {
            Ok(body) => match *body {
                BodyError::Idle(limit) => ProviderError::Timeout {
                    what: TimeoutKind::StreamIdle,
                    limit,
                    retries: 0,
                },
                BodyError::Limit(limit) => ProviderError::ResponseLimitExceeded { limit },
                BodyError::Transport(message) => {
                    ProviderError::Stream(format!("the connection failed mid-stream: {message}"))
                }
            },
            Err(other) => ProviderError::Stream(format!(
                "the connection failed mid-stream: {}",
                error_chain(&*other)
            )),
        },
        other => ProviderError::Stream(format!("malformed server-sent events: {other}")),
    }
}

impl Stream for DeltaStream {
    type Item = Result<ModelDelta, ProviderError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(delta) = this.pending.pop_front() {
                return Poll::Ready(Some(Ok(delta)));
            }
            if this.done {
                return Poll::Ready(None);
            }
            let next = match Pin::new(&mut this.events).poll_next(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(next) => next,
            };
            let error = match next {
                Some(Ok(event)) => match this.event(event) {
                    Ok(is_done) => {
                        this.done = is_done;
                        continue;
                    }
                    Err(error) => error,
                },
                Some(Err(error)) => sse_error(error),
                None if this.decoder.finished() => {
                    this.done = true;
                    continue;
                }
                None => ProviderError::Stream(
                    "the stream ended before the reply was complete (no finish_reason and no [DONE])"
                        .to_owned(),
                ),
            };
            // An error ends the stream.
            this.done = true;
            return Poll::Ready(Some(Err(error)));
        }
    }
}
