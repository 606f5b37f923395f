//! [`Metered`]: the model as the context engine sees it during a run. Every request the engine
//! sends on its own (a summary) goes through the run's `before_model_request` hooks, is
//! refused when the run's usage limits leave no room, gets a `chat` span, and is counted: its
//! tokens and the request itself go into the run's usage, budgets and cost like any turn's.
//!
//! The engine never receives the bare provider during a run (`context_turn` hands it this), so
//! an internal request that skips the hooks or the budget cannot be written by accident.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use futures::StreamExt;
use tracing::{Instrument, Span};

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, ChatRequest, ModelDelta, ModelStream};
use crate::run::config::CycleConfig;
use crate::run::hooks::RequestPurpose;
use crate::run::telemetry;
use crate::run::usage::{Prices, RunUsage, UsageLimit, UsageLimits};
use crate::vocab::{ChatResponse, Usage};

/// What the engine's own requests spent, to add to the run's state.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Spent {
    /// Requests sent (each attempt of a retried request counts).
    pub requests: u32,
    /// Their token usage.
    pub usage: Option<Usage>,
}

/// The provider wrapped for the context engine (see the module doc).
pub(crate) struct Metered<'a> {
    model: &'a dyn ChatModel,
    config: &'a CycleConfig,
    /// What the run had spent when the engine started (the room left is judged on it plus
    /// `spent`).
    base: RunUsage,
    limits: UsageLimits,
    prices: Option<Prices>,
    spent: Arc<Mutex<Spent>>,
}

impl<'a> Metered<'a> {
    /// `model` for the engine, for a run that has spent `base` under `limits` (costed with
    /// `prices`).
    pub(crate) fn new(
        model: &'a dyn ChatModel,
        config: &'a CycleConfig,
        base: RunUsage,
        limits: UsageLimits,
        prices: Option<Prices>,
    ) -> Self {
        Metered {
            model,
            config,
            base,
            limits,
            prices,
            spent: Arc::default(),
        }
    }

    /// What the engine's requests spent so far.
    pub(crate) fn spent(&self) -> Spent {
        self.spent.lock().map(|spent| *spent).unwrap_or_default()
    }

    /// A usage limit the run has already reached, counting the engine's own requests.
    fn crossed(&self) -> Option<UsageLimit> {
        let spent = self.spent();
        let mut usage = self.base;
        usage.requests = usage.requests.saturating_add(spent.requests);
        if let Some(tokens) = spent.usage {
            usage.tokens += tokens;
        }
        self.limits.crossed(&usage, self.prices.as_ref())
    }

    /// The request after the hooks (`None`: sent as it is).
    async fn hooked(&self, request: &ChatRequest<'_>) -> Option<crate::run::hooks::HookRequest> {
        self.config
            .hooks
            .before_request(
                RequestPurpose::Summary,
                request.model,
                request.messages,
                request.options,
            )
            .await
    }

    fn span(&self, request: &ChatRequest<'_>) -> Span {
        let server = telemetry::server_of(self.model);
        telemetry::chat_span(
            &Span::current(),
            self.model.provider(),
            request.model,
            server.as_ref(),
            request.messages,
        )
    }

    fn refuse(&self) -> Result<(), ProviderError> {
        match self.crossed() {
            Some(limit) => Err(ProviderError::Other(format!(
                "not sent: the run reached its usage limit {limit}"
            ))),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl ChatModel for Metered<'_> {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        self.refuse()?;
        let edited = self.hooked(&request).await;
        let request = ChatRequest {
            messages: edited.as_ref().map_or(request.messages, |e| &e.messages),
            options: edited.as_ref().map_or(request.options, |e| &e.options),
            ..request
        };
        let span = self.span(&request);
        let reply = self.model.chat(request).instrument(span.clone()).await;
        charge(
            &self.spent,
            1,
            reply.as_ref().ok().and_then(|reply| reply.usage),
        );
        match &reply {
            Ok(reply) => telemetry::record_usage(&span, reply.usage),
            Err(error) => {
                span.record("error.type", error.kind().to_string());
                span.record("otel.status_code", "ERROR");
            }
        }
        reply
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        self.refuse()?;
        let edited = self.hooked(&request).await;
        let request = ChatRequest {
            messages: edited.as_ref().map_or(request.messages, |e| &e.messages),
            options: edited.as_ref().map_or(request.options, |e| &e.options),
            ..request
        };
        let span = self.span(&request);
        charge(&self.spent, 1, None);
        let deltas = self.model.chat_stream(request).instrument(span).await?;
        // Usage arrives in the stream: counted as it is read.
        let spent = Arc::clone(&self.spent);
        Ok(Box::pin(deltas.inspect(move |delta| {
            if let Ok(ModelDelta::Usage(usage)) = delta {
                charge(&spent, 0, Some(*usage));
            }
        })))
    }

    fn provider(&self) -> &str {
        self.model.provider()
    }

    fn base_url(&self) -> Option<&str> {
        self.model.base_url()
    }
}

fn charge(spent: &Mutex<Spent>, requests: u32, usage: Option<Usage>) {
    if let Ok(mut spent) = spent.lock() {
        spent.requests = spent.requests.saturating_add(requests);
        if let Some(usage) = usage {
            *spent.usage.get_or_insert_default() += usage;
        }
    }
}
