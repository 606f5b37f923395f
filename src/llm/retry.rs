//! [`RetryPolicy`]: exponential backoff with jitter, honouring `Retry-After`.

use std::future::Future;
use std::time::Duration;

use futures::StreamExt;

use crate::llm::error::{ProviderError, TimeoutKind};
use crate::llm::model::{ModelDelta, ModelStream};

/// When and how often a failed model request is retried.
///
/// Retried: 408, 409, 429, 5xx, connection errors and request timeouts. Never retried: 400, 401,
/// 403, 404, 422, a context-length error, a 429 for an exhausted quota (`insufficient_quota`),
/// or a reply over a limit of the client. An error that is a stream's very first event
/// (llama.cpp's `error:` event, OpenRouter's upstream failure after HTTP 200) counts as the
/// request failing with the status its `code` or `type` names, and is retried like it. A
/// `Retry-After` sent with a 429 or 5xx sets the wait.
///
/// A streamed reply that breaks after it began — before any tool ran, since tools run only
/// once the reply is whole — is retried too ([`RetryPolicy::is_retryable_after_start`]): the
/// partial reply is discarded, a [`crate::llm::StreamEvent::Retry`] says so, and the request
/// is sent again. Those retries and the ones before a reply began share one budget
/// (`max_retries`) and one backoff sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (0 = no retry).
    pub max_retries: u32,
    /// The first backoff; doubled on each retry.
    pub initial_backoff: Duration,
    /// The largest backoff (and the largest `Retry-After` honoured).
    pub max_backoff: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_retries: 3,
            initial_backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(30),
        }
    }
}

impl RetryPolicy {
    /// No retries.
    pub fn none() -> Self {
        RetryPolicy {
            max_retries: 0,
            ..RetryPolicy::default()
        }
    }

    /// Whether `error` is worth another attempt.
    pub fn is_retryable(error: &ProviderError) -> bool {
        match error {
            ProviderError::RateLimited { .. }
            | ProviderError::Server { .. }
            | ProviderError::Connection { .. } => true,
            ProviderError::Http { status, .. } => matches!(status, 408 | 409),
            ProviderError::Timeout { what, .. } => *what != TimeoutKind::StreamIdle,
            _ => false,
        }
    }

    /// Whether `error`, ending a streamed reply after it began, is worth sending the request
    /// again: what [`RetryPolicy::is_retryable`] retries, and a broken stream — the connection
    /// dropped, the body ended before the reply was complete, an `error` event without a
    /// status, the stream went idle. Not the request's own deadline (the reply would not fit
    /// it again), a reply over a limit of the client, or a 4xx.
    pub fn is_retryable_after_start(error: &ProviderError) -> bool {
        match error {
            ProviderError::Stream(_) => true,
            ProviderError::Timeout { what, .. } => *what == TimeoutKind::StreamIdle,
            other => Self::is_retryable(other),
        }
    }

    /// The most attempts one request may make (the first one included).
    pub fn max_attempts(&self) -> u32 {
        self.max_retries.saturating_add(1)
    }

    /// The wait before retry number `attempt` (1-based): the server's `Retry-After` if it gave
    /// one with a 429 or 5xx (capped at `max_backoff`), else exponential backoff with full jitter.
    pub fn backoff(&self, attempt: u32, error: &ProviderError) -> Duration {
        if let ProviderError::RateLimited {
            retry_after: Some(after),
            ..
        }
        | ProviderError::Server {
            retry_after: Some(after),
            ..
        } = error
        {
            return (*after).min(self.max_backoff);
        }
        let exponent = attempt.saturating_sub(1).min(16);
        let ceiling = self
            .initial_backoff
            .saturating_mul(1u32 << exponent)
            .min(self.max_backoff);
        // Full jitter between half and the whole ceiling keeps clients from retrying in lockstep.
        let half = ceiling / 2;
        half + ceiling.saturating_sub(half).mul_f64(fastrand::f64())
    }

    /// Run `attempt` until it succeeds, fails for good, or the retries are used up. The final
    /// error records how many retries were made.
    pub async fn run<T, F, Fut>(&self, mut attempt: F) -> Result<T, ProviderError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let mut retries = 0;
        loop {
            match attempt().await {
                Ok(value) => return Ok(value),
                Err(error) if retries < self.max_retries && Self::is_retryable(&error) => {
                    retries += 1;
                    let wait = self.backoff(retries, &error);
                    tracing::warn!(
                        "model request failed ({error}); retry {retries} of {} in {wait:.1?}",
                        self.max_retries
                    );
                    tokio::time::sleep(wait).await;
                }
                Err(error) => return Err(with_retries(error, retries)),
            }
        }
    }
}

/// Read `stream` up to its first delta the caller would see (text, reasoning, a tool call, a
/// finish, usage), so an error before any of it is returned here — as the request's error, for
/// [`RetryPolicy::run`] to retry — instead of ending a stream the caller already holds. The
/// deltas read on the way (metadata, empty fields) are replayed in front of the rest.
pub(crate) async fn open_stream(mut stream: ModelStream) -> Result<ModelStream, ProviderError> {
    let mut head = Vec::new();
    loop {
        match stream.next().await {
            Some(Ok(delta)) => {
                let seen = !is_silent(&delta);
                head.push(Ok(delta));
                if seen {
                    return Ok(Box::pin(futures::stream::iter(head).chain(stream)));
                }
            }
            Some(Err(error)) => return Err(error),
            // Ended: `head` is all there is (a stream is not polled again after its end).
            None => return Ok(Box::pin(futures::stream::iter(head))),
        }
    }
}

/// Deltas that reach no caller as an event.
fn is_silent(delta: &ModelDelta) -> bool {
    match delta {
        ModelDelta::Meta { .. } | ModelDelta::ModelSwitch { .. } => true,
        ModelDelta::Text(text) | ModelDelta::Reasoning { text, .. } => text.is_empty(),
        _ => false,
    }
}

/// `error` with the number of retries made recorded in it (for its message).
pub(crate) fn with_retries(error: ProviderError, count: u32) -> ProviderError {
    match error {
        ProviderError::RateLimited {
            retry_after,
            message,
            ..
        } => ProviderError::RateLimited {
            retry_after,
            retries: count,
            message,
        },
        ProviderError::Server {
            status,
            retry_after,
            message,
            ..
        } => ProviderError::Server {
            status,
            retries: count,
            retry_after,
            message,
        },
        ProviderError::Timeout { what, limit, .. } => ProviderError::Timeout {
            what,
            limit,
            retries: count,
        },
        ProviderError::Connection { message, .. } => ProviderError::Connection {
            retries: count,
            message,
        },
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let policy = RetryPolicy::default();
        let error = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(2)),
            retries: 0,
            message: String::new(),
        };
        assert_eq!(policy.backoff(1, &error), Duration::from_secs(2));
        let error = ProviderError::RateLimited {
            retry_after: Some(Duration::from_secs(3600)),
            retries: 0,
            message: String::new(),
        };
        assert_eq!(policy.backoff(1, &error), policy.max_backoff);
    }

    #[tokio::test(start_paused = true)]
    async fn a_timeout_reports_its_retries() {
        let result: Result<(), _> = RetryPolicy::default()
            .run(|| async {
                Err(ProviderError::Timeout {
                    what: TimeoutKind::Request,
                    limit: Duration::from_secs(1),
                    retries: 0,
                })
            })
            .await;
        let error = result.unwrap_err();
        assert!(
            matches!(error, ProviderError::Timeout { retries: 3, .. }),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "timed out: the request took longer than 1s after 3 retries"
        );
    }

    #[test]
    fn a_5xx_retry_after_is_honoured() {
        let error = ProviderError::Server {
            status: 503,
            retries: 0,
            retry_after: Some(Duration::from_secs(7)),
            message: String::new(),
        };
        assert_eq!(
            RetryPolicy::default().backoff(1, &error),
            Duration::from_secs(7)
        );
    }

    #[test]
    fn backoff_grows_and_stays_in_bounds() {
        let policy = RetryPolicy::default();
        let error = ProviderError::Connection {
            retries: 0,
            message: String::new(),
        };
        for attempt in 1..10 {
            let wait = policy.backoff(attempt, &error);
            let ceiling = policy
                .initial_backoff
                .saturating_mul(1 << (attempt - 1))
                .min(policy.max_backoff);
            assert!(
                wait >= ceiling / 2 && wait <= ceiling,
                "{attempt}: {wait:?}"
            );
        }
    }

    #[test]
    fn client_errors_are_not_retried() {
        for error in [
            ProviderError::BadRequest {
                status: 400,
                message: String::new(),
            },
            ProviderError::Authentication {
                status: 401,
                message: String::new(),
            },
            ProviderError::ContextLengthExceeded {
                message: String::new(),
            },
        ] {
            assert!(!RetryPolicy::is_retryable(&error));
        }
        assert!(RetryPolicy::is_retryable(&ProviderError::Http {
            status: 408,
            message: String::new()
        }));
    }

    #[tokio::test(start_paused = true)]
    async fn run_counts_retries_in_the_final_error() {
        let policy = RetryPolicy::default();
        let mut calls = 0;
        let result: Result<(), _> = policy
            .run(|| {
                calls += 1;
                async {
                    Err(ProviderError::Server {
                        status: 503,
                        retries: 0,
                        retry_after: None,
                        message: "down".into(),
                    })
                }
            })
            .await;
        assert_eq!(calls, 4);
        assert!(matches!(
            result,
            Err(ProviderError::Server { retries: 3, .. })
        ));
    }
}
