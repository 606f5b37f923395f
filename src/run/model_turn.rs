//! One model request for the driver: retries, the request deadline, and (streaming) stream
//! assembly with the reply limits, yielding the deltas' events as they arrive.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::event::StreamEvent;
use crate::llm::model::{ChatModel, ChatRequest};
use crate::llm::retry::open_stream;
use crate::llm::stream::StreamAssembler;
use crate::run::config::CycleConfig;
use crate::run::error::LlmError;
use crate::vocab::ChatResponse;

/// How a run talks to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// `ChatModel::chat`.
    Blocking,
    /// `ChatModel::chat_stream`.
    Streaming,
}

/// What a model request yields: events (streaming), then exactly one reply or error.
// One reply per request: boxing it would allocate once per turn to save stack in a stream state.
#[allow(clippy::large_enum_variant)]
pub(crate) enum TurnItem {
    Event(StreamEvent),
    Reply(Result<ChatResponse, LlmError>),
}

/// One model request in `mode`.
pub(crate) fn request<'a>(
    model: &'a dyn ChatModel,
    config: &'a CycleConfig,
    request: ChatRequest<'a>,
    mode: Mode,
    attempts: &'a AtomicU32,
) -> impl Stream<Item = TurnItem> + Send + 'a {
    async_stream::stream! {
        match mode {
            Mode::Blocking => yield TurnItem::Reply(blocking_request(model, config, request, attempts).await.map_err(LlmError::from)),
            Mode::Streaming => {
                // Each attempt gets its own deadline (a backoff may be longer than the limit);
                // the successful attempt's deadline then covers the whole reply.
                let opened = config.retry.run(|| async move {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    let deadline = config.request_timeout.map(|limit| (tokio::time::Instant::now() + limit, limit));
                    // An error before the first delta fails the attempt (and is retried).
                    let opened = async { open_stream(model.chat_stream(request).await?).await };
                    with_deadline(deadline, opened).await.map(|deltas| (deltas, deadline))
                }).await;
                let (mut deltas, deadline) = match opened {
                    Ok(opened) => opened,
                    Err(error) => {
                        yield TurnItem::Reply(Err(error.into()));
                        return;
                    }
                };
                let mut assembler = StreamAssembler::with_limits(config.reply_limits);
                let mut events = Vec::new();
                loop {
                    let next = match deadline {
                        Some((at, limit)) => match tokio::time::timeout_at(at, deltas.next()).await {
                            Ok(next) => next,
                            Err(_) => Some(Err(request_timeout(limit))),
                        },
                        None => deltas.next().await,
                    };
                    match next {
                        None => break,
                        Some(Ok(delta)) => {
                            let pushed = assembler.try_push(delta, &mut events);
                            for event in events.drain(..) {
                                yield TurnItem::Event(event);
                            }
                            if let Err(error) = pushed {
                                yield TurnItem::Reply(Err(error.into()));
                                return;
                            }
                        }
                        Some(Err(error)) => {
                            yield TurnItem::Reply(Err(error.into()));
                            return;
                        }
                    }
                }
                let finished = assembler.finish(&mut events);
                for event in events.drain(..) {
                    yield TurnItem::Event(event);
                }
                yield TurnItem::Reply(finished.map_err(LlmError::from));
            }
        }
    }
}

/// A non-streaming request with retries and the request deadline.
async fn blocking_request(
    model: &dyn ChatModel,
    config: &CycleConfig,
    request: ChatRequest<'_>,
    attempts: &AtomicU32,
) -> Result<ChatResponse, ProviderError> {
    // Each attempt gets its own deadline: a backoff may be longer than the limit.
    config
        .retry
        .run(|| async move {
            attempts.fetch_add(1, Ordering::Relaxed);
            let deadline = config
                .request_timeout
                .map(|limit| (tokio::time::Instant::now() + limit, limit));
            with_deadline(deadline, model.chat(request)).await
        })
        .await
}

async fn with_deadline<T>(
    deadline: Option<(tokio::time::Instant, Duration)>,
    future: impl Future<Output = Result<T, ProviderError>>,
) -> Result<T, ProviderError> {
    match deadline {
        Some((at, limit)) => tokio::time::timeout_at(at, future)
            .await
            .unwrap_or_else(|_| Err(request_timeout(limit))),
        None => future.await,
    }
}

fn request_timeout(limit: Duration) -> ProviderError {
    ProviderError::Timeout {
        what: TimeoutKind::Request,
        limit,
        retries: 0,
    }
}
