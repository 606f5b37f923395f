//! [`FallbackModel`]: an ordered list of models (any providers) behind one [`ChatModel`], with
//! a circuit breaker per entry. A retryable failure before any output moves the request to the
//! next entry; each move is a [`ModelDelta::ModelSwitch`] (a
//! [`crate::llm::StreamEvent::ModelSwitch`] in a stream), a warning and an attribute of the
//! request's span.
//!
//! Each entry gets the request with its own model name, so each backend's encoder sends only
//! the continuation artifacts usable by that provider and model (`Artifact::usable_by`); the
//! others stay in the history for a later request to their model.

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt;
use tokio::time::Instant;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelDelta, ModelStream, WireApi};
use crate::llm::retry::{RetryPolicy, open_stream};
use crate::vocab::ChatResponse;

/// When an entry of a [`FallbackModel`] is skipped.
///
/// After `failure_threshold` consecutive retryable failures the entry's breaker opens: it is
/// skipped for `cool_down`. Then it is half-open: the next request tries it again; a success
/// closes the breaker, a failure opens it for another `cool_down`. Defaults: 3 failures, 30
/// seconds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CircuitBreaker {
    /// Consecutive retryable failures that open the breaker.
    pub failure_threshold: u32,
    /// How long an open breaker skips its entry.
    pub cool_down: Duration,
}

impl Default for CircuitBreaker {
    fn default() -> Self {
        CircuitBreaker {
            failure_threshold: 3,
            cool_down: Duration::from_secs(30),
        }
    }
}

/// One entry's breaker state.
#[derive(Debug, Default)]
struct BreakerState {
    consecutive_failures: u32,
    open_until: Option<Instant>,
}

/// One model of the list.
struct Entry {
    model: Arc<dyn ChatModel>,
    name: String,
    breaker: Mutex<BreakerState>,
}

impl Entry {
    /// Why the entry is skipped now (its breaker is open), or `None` when it may be tried.
    fn skipped(&self, now: Instant) -> Option<String> {
        let state = self.breaker.lock().unwrap_or_else(PoisonError::into_inner);
        match state.open_until {
            Some(until) if now < until => Some(format!(
                "circuit breaker open after {} consecutive failures (for {:.1?} more)",
                state.consecutive_failures,
                until - now
            )),
            _ => None,
        }
    }

    fn succeeded(&self) {
        let mut state = self.breaker.lock().unwrap_or_else(PoisonError::into_inner);
        *state = BreakerState::default();
    }

    fn failed(&self, breaker: &CircuitBreaker) {
        let mut state = self.breaker.lock().unwrap_or_else(PoisonError::into_inner);
        state.consecutive_failures = state.consecutive_failures.saturating_add(1);
        if state.consecutive_failures >= breaker.failure_threshold {
            state.open_until = Some(Instant::now() + breaker.cool_down);
        }
    }
}

/// An ordered list of models behind one [`ChatModel`]: the first whose circuit breaker is
/// closed gets the request; a retryable failure ([`RetryPolicy::is_retryable`]) before any
/// output moves it to the next one. A failure that is not retryable (a 400, an
/// authentication error, a context overflow) is returned at once: another model would not
/// make the request right. When every entry failed, the last failure is returned (and the
/// run's [`RetryPolicy`] retries the whole list). When every breaker is open, all entries are
/// tried in order anyway: a request never fails without an attempt.
///
/// A failure after output began is not a fallback's: the run retries the request (see
/// [`crate::llm::StreamEvent::Retry`]), which starts again at the first available entry.
///
/// `provider()`, `base_url()` and `api()` are the first entry's.
///
/// ```
/// use std::sync::Arc;
/// use agcore::llm::{FallbackModel, OpenAiClient, OpenAiConfig};
///
/// let local = OpenAiClient::new(OpenAiConfig::new("http://127.0.0.1:8080/v1")).unwrap();
/// let hosted = OpenAiClient::new(OpenAiConfig::new("https://api.openai.com/v1")).unwrap();
/// let model = FallbackModel::new(Arc::new(local), "qwen3-8b")
///     .with_fallback(Arc::new(hosted), "gpt-4o-mini");
/// assert_eq!(model.names(), ["qwen3-8b", "gpt-4o-mini"]);
/// ```
pub struct FallbackModel {
    entries: Vec<Entry>,
    breaker: CircuitBreaker,
}

impl std::fmt::Debug for FallbackModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FallbackModel")
            .field("models", &self.names())
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl FallbackModel {
    /// A list whose first entry is `model`, asked for `name`.
    pub fn new(model: Arc<dyn ChatModel>, name: impl Into<String>) -> Self {
        FallbackModel {
            entries: Vec::new(),
            breaker: CircuitBreaker::default(),
        }
        .with_fallback(model, name)
    }

    /// Add `model`, asked for `name`, after the entries so far.
    pub fn with_fallback(mut self, model: Arc<dyn ChatModel>, name: impl Into<String>) -> Self {
        self.entries.push(Entry {
            model,
            name: name.into(),
            breaker: Mutex::new(BreakerState::default()),
        });
        self
    }

    /// Set the circuit breaker of every entry.
    pub fn with_circuit_breaker(mut self, breaker: CircuitBreaker) -> Self {
        self.breaker = breaker;
        self
    }

    /// The model names, in order.
    pub fn names(&self) -> Vec<&str> {
        self.entries
            .iter()
            .map(|entry| entry.name.as_str())
            .collect()
    }

    /// The entries to try now, in order, each with why the one before it was left (`None`
    /// for the first): those whose breaker is closed or half-open, else all of them.
    fn plan(&self) -> Vec<(&Entry, Option<String>)> {
        let now = Instant::now();
        let skipped: Vec<Option<String>> = self
            .entries
            .iter()
            .map(|entry| entry.skipped(now))
            .collect();
        if skipped.iter().all(Option::is_some) {
            return self.entries.iter().map(|entry| (entry, None)).collect();
        }
        self.entries.iter().zip(skipped).collect()
    }

    /// Try the entries in order with `attempt`; the switches made on the way, and the first
    /// success or the error that ends the list.
    async fn try_in_order<'a, T, F, Fut>(
        &'a self,
        mut attempt: F,
    ) -> (Vec<ModelDelta>, Result<T, ProviderError>)
    where
        F: FnMut(&'a Entry) -> Fut,
        Fut: Future<Output = Result<T, ProviderError>>,
    {
        let mut switches = Vec::new();
        let mut left: Option<(&str, String)> = None;
        let mut last_error = None;
        for (entry, skipped) in self.plan() {
            if let Some(reason) = skipped {
                // Skipped: the next entry tried says it moved on from this one.
                left.get_or_insert((entry.name.as_str(), reason));
                continue;
            }
            if let Some((from, reason)) = left.take() {
                switches.push(switch(from, entry, reason));
            }
            match attempt(entry).await {
                Ok(value) => {
                    entry.succeeded();
                    return (switches, Ok(value));
                }
                Err(error) if RetryPolicy::is_retryable(&error) => {
                    entry.failed(&self.breaker);
                    left = Some((entry.name.as_str(), error.to_string()));
                    last_error = Some(error);
                }
                Err(error) => return (switches, Err(error)),
            }
        }
        let error = last_error.unwrap_or_else(|| {
            ProviderError::Other("the fallback model has no model to ask".to_owned())
        });
        (switches, Err(error))
    }
}

/// The switch from `from` to `entry`, said in a warning and on the request's span.
fn switch(from: &str, entry: &Entry, reason: String) -> ModelDelta {
    tracing::warn!(
        from,
        to = entry.name.as_str(),
        "model {from} failed before any output ({reason}); switching to {}",
        entry.name
    );
    let span = tracing::Span::current();
    span.record(
        "agcore.model_switch",
        format!("{from} -> {}: {reason}", entry.name),
    );
    span.record("gen_ai.provider.name", entry.model.provider());
    ModelDelta::ModelSwitch {
        from: from.to_owned(),
        to: entry.name.clone(),
        reason,
    }
}

#[async_trait]
impl ChatModel for FallbackModel {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let (_, result) = self
            .try_in_order(|entry| {
                entry.model.chat(ChatRequest {
                    model: &entry.name,
                    ..request
                })
            })
            .await;
        result
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        // Each entry's stream is read up to its first output, so a failure before it moves on.
        let (switches, result) = self
            .try_in_order(|entry| async move {
                let stream = entry
                    .model
                    .chat_stream(ChatRequest {
                        model: &entry.name,
                        ..request
                    })
                    .await?;
                open_stream(stream).await
            })
            .await;
        let stream = result?;
        if switches.is_empty() {
            return Ok(stream);
        }
        Ok(Box::pin(
            futures::stream::iter(switches.into_iter().map(Ok)).chain(stream),
        ))
    }

    fn provider(&self) -> &str {
        self.entries
            .first()
            .map_or("openai", |entry| entry.model.provider())
    }

    fn base_url(&self) -> Option<&str> {
        self.entries.first()?.model.base_url()
    }

    fn api(&self) -> WireApi {
        self.entries
            .first()
            .map_or(WireApi::ChatCompletions, |entry| entry.model.api())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::llm::testing::ScriptedModel;
    use crate::vocab::{OpenaiChatMessage, RequestOptions};

    fn unavailable() -> ProviderError {
        ProviderError::Server {
            status: 503,
            retries: 0,
            retry_after: None,
            message: "down".to_owned(),
        }
    }

    fn entry() -> Entry {
        Entry {
            model: Arc::new(ScriptedModel::new()),
            name: "a".to_owned(),
            breaker: Mutex::new(BreakerState::default()),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn the_breaker_opens_after_the_threshold_and_half_opens_after_the_cool_down() {
        let entry = entry();
        let breaker = CircuitBreaker::default();
        entry.failed(&breaker);
        entry.failed(&breaker);
        assert!(entry.skipped(Instant::now()).is_none());
        entry.failed(&breaker);
        let reason = entry.skipped(Instant::now()).unwrap();
        assert!(reason.contains("3 consecutive failures"), "{reason}");
        tokio::time::advance(breaker.cool_down).await;
        // Half-open: tried again; one more failure opens it at once.
        assert!(entry.skipped(Instant::now()).is_none());
        entry.failed(&breaker);
        assert!(entry.skipped(Instant::now()).is_some());
        entry.succeeded();
        assert!(entry.skipped(Instant::now()).is_none());
    }

    #[tokio::test(start_paused = true)]
    async fn a_retryable_failure_moves_on_and_a_bad_request_does_not() {
        let first = ScriptedModel::new()
            .reply_error(unavailable)
            .reply_error(|| ProviderError::BadRequest {
                status: 400,
                message: "no".to_owned(),
            });
        let second = ScriptedModel::new()
            .reply_text("from b")
            .reply_text("unused");
        let model = FallbackModel::new(Arc::new(first.clone()), "model-a")
            .with_fallback(Arc::new(second.clone()), "model-b");
        let messages = [OpenaiChatMessage::user_text("hi")];
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "configured",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let deltas: Vec<ModelDelta> = model
            .chat_stream(request)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        assert_eq!(
            deltas[0],
            ModelDelta::ModelSwitch {
                from: "model-a".to_owned(),
                to: "model-b".to_owned(),
                reason: unavailable().to_string(),
            }
        );
        assert!(deltas.contains(&ModelDelta::Text("from b".to_owned())));
        // Each entry is asked for its own model name.
        assert_eq!(first.requests()[0].model, "model-a");
        assert_eq!(second.requests()[0].model, "model-b");
        let error = model.chat(request).await.unwrap_err();
        assert!(matches!(error, ProviderError::BadRequest { .. }), "{error}");
        assert_eq!(second.requests().len(), 1);
    }

    #[tokio::test(start_paused = true)]
    async fn an_open_breaker_skips_its_entry_until_the_cool_down_ends() {
        let first = ScriptedModel::new()
            .reply_error(unavailable)
            .reply_text("a is back");
        let second = ScriptedModel::new().reply_text("b").reply_text("b again");
        let model = FallbackModel::new(Arc::new(first.clone()), "model-a")
            .with_fallback(Arc::new(second.clone()), "model-b")
            .with_circuit_breaker(CircuitBreaker {
                failure_threshold: 1,
                cool_down: Duration::from_secs(10),
            });
        let messages = [OpenaiChatMessage::user_text("hi")];
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "configured",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        assert_eq!(model.chat(request).await.unwrap().text(), "b");
        let deltas: Vec<ModelDelta> = model
            .chat_stream(request)
            .await
            .unwrap()
            .map(Result::unwrap)
            .collect()
            .await;
        assert!(
            matches!(&deltas[0], ModelDelta::ModelSwitch { reason, .. } if reason.contains("circuit breaker open")),
            "{deltas:?}"
        );
        assert_eq!(first.requests().len(), 1);
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(model.chat(request).await.unwrap().text(), "a is back");
    }
}
