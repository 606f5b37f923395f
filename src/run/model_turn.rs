//! One model request for the driver: retries, the request deadline, and (streaming) stream
//! assembly with the reply limits, yielding the deltas' events as they arrive. A streamed reply
//! that breaks after it began is sent again within the same retry budget, announced by a
//! [`StreamEvent::Retry`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::{Stream, StreamExt};

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::model::{ChatModel, ChatRequest};
use crate::llm::retry::{RetryPolicy, open_stream, with_retries};
use crate::llm::stream::StreamAssembler;
use crate::run::config::CycleConfig;
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
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
// One reply per request, moved out at once: boxing it would only add an allocation.
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
                let policy = &config.retry;
                let mut retries = 0;
                loop {
                    attempts.fetch_add(1, Ordering::Relaxed);
                    // Each attempt gets its own deadline (a backoff may be longer than the
                    // limit); an opened attempt's deadline then covers its whole reply.
                    let deadline = config.request_timeout.map(|limit| (tokio::time::Instant::now() + limit, limit));
                    // An error before the first delta fails the attempt like a failed request.
                    let opened = with_deadline(deadline, async { open_stream(model.chat_stream(request).await?).await }).await;
                    let mut deltas = match opened {
                        Ok(deltas) => deltas,
                        Err(error) if retries < policy.max_retries && RetryPolicy::is_retryable(&error) => {
                            retries += 1;
                            let wait = policy.backoff(retries, &error);
                            tracing::warn!("model request failed ({error}); retry {retries} of {} in {wait:.1?}", policy.max_retries);
                            tokio::time::sleep(wait).await;
                            continue;
                        }
                        Err(error) => {
                            yield TurnItem::Reply(Err(with_retries(error, retries).into()));
                            return;
                        }
                    };
                    let mut assembler = StreamAssembler::with_limits(config.reply_limits);
                    let mut events = Vec::new();
                    let broken = loop {
                        let next = match deadline {
                            Some((at, limit)) => match tokio::time::timeout_at(at, deltas.next()).await {
                                Ok(next) => next,
                                Err(_) => Some(Err(request_timeout(limit))),
                            },
                            None => deltas.next().await,
                        };
                        match next {
                            None => break None,
                            Some(Ok(delta)) => {
                                let pushed = assembler.try_push(delta, &mut events);
                                for event in events.drain(..) {
                                    yield TurnItem::Event(event.into());
                                }
                                // A reply over the client's limits would be over them again.
                                if let Err(error) = pushed {
                                    yield TurnItem::Reply(Err(error.into()));
                                    return;
                                }
                            }
                            Some(Err(error)) => break Some(error),
                        }
                    };
                    match broken {
                        None => {
                            let finished = assembler.finish(&mut events);
                            for event in events.drain(..) {
                                yield TurnItem::Event(event.into());
                            }
                            yield TurnItem::Reply(finished.map_err(LlmError::from));
                            return;
                        }
                        // Tools run only once a reply is whole, so none has run: the partial
                        // reply is dropped (the event tells consumers) and the request sent again.
                        Some(error) if retries < policy.max_retries && RetryPolicy::is_retryable_after_start(&error) => {
                            retries += 1;
                            let wait = policy.backoff(retries, &error);
                            tracing::warn!("the streamed reply broke ({error}); retry {retries} of {} in {wait:.1?}", policy.max_retries);
                            yield TurnItem::Event(StreamEvent::Retry {
                                attempt: retries + 1,
                                max_attempts: policy.max_attempts(),
                                delay_ms: u64::try_from(wait.as_millis()).unwrap_or(u64::MAX),
                                kind: error.kind(),
                                error: error.to_string(),
                            });
                            tokio::time::sleep(wait).await;
                        }
                        Some(error) => {
                            yield TurnItem::Reply(Err(with_retries(error, retries).into()));
                            return;
                        }
                    }
                }
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
