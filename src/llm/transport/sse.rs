//! The streaming body: bytes → SSE events (`sse-stream`) → the backend's [`SseDecoder`] →
//! [`ModelDelta`]s, under the body's limits (see `body.rs`), with a typed error for a stream
//! that ends too early.

use std::collections::VecDeque;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures::{Stream, TryStreamExt};
use sse_stream::{Sse, SseStream};

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::model::{ModelDelta, ModelStream};
use crate::llm::transport::body::{BodyError, BodyLimits, BodyReader, Progress};
use crate::llm::transport::errors::error_chain;
use crate::llm::transport::{DEFAULT_MAX_EVENT_BYTES, DEFAULT_MAX_RESPONSE_BYTES, SseDecoder};

/// Decode an SSE body with `decoder`, under the default size limits and `idle_timeout` (no
/// deadline): for replaying a recorded stream and for benchmarks. Each backend has a
/// `decode_stream` that calls this with its decoder.
pub fn decode_events<S, E>(
    bytes: S,
    idle_timeout: Option<std::time::Duration>,
    decoder: impl SseDecoder,
) -> ModelStream
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
        decoder,
    )
}

/// Decode an SSE body with `decoder` under `limits`.
pub(crate) fn decode_limited<S, E, D>(bytes: S, limits: BodyLimits, decoder: D) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
    D: SseDecoder,
{
    let progress = Progress::default();
    let bytes = BodyReader::new(
        Box::pin(bytes.map_err(|error| error_chain(&error))),
        limits,
        progress.clone(),
    );
    Box::pin(DeltaStream {
        events: SseStream::from_bytes_stream(bytes),
        decoder,
        pending: VecDeque::new(),
        progress,
        done: false,
    })
}

struct DeltaStream<D> {
    events: SseStream<sse_stream::ByteStreamBody<BodyReader, Bytes>>,
    decoder: D,
    pending: VecDeque<ModelDelta>,
    /// Told whenever an event yields deltas (the idle timer's notion of progress).
    progress: Progress,
    done: bool,
}

impl<D: SseDecoder> DeltaStream<D> {
    /// Handle one SSE event; `Ok(true)` when it ends the stream.
    fn event(&mut self, event: Sse) -> Result<bool, ProviderError> {
        let Some(data) = event.data else {
            return Ok(false);
        };
        let done = self
            .decoder
            .event(event.event.as_deref(), data.trim(), &mut self.pending)?;
        if !self.pending.is_empty() {
            self.progress.note();
        }
        Ok(done)
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

impl<D: SseDecoder> Stream for DeltaStream<D> {
    type Item = Result<ModelDelta, ProviderError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
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
                    "the stream ended before the reply was complete".to_owned(),
                ),
            };
            // An error ends the stream.
            this.done = true;
            return Poll::Ready(Some(Err(error)));
        }
    }
}
