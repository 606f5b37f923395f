//! The engine between two requests: repair a loaded history, estimate the pending request,
//! and compact it in tiers when it crosses the threshold; after the request, learn from the
//! server's usage or its `context_length_exceeded`.

use crate::context::compact::{
    Compacted, dropped_marker, replace_runs, select, stub_tool_outputs, summary_message,
};
use crate::context::config::EngineConfig;
use crate::context::estimate::{Calibration, messages_bytes, tools_bytes};
use crate::context::event::{CompactionTier, ContextEvent};
use crate::context::ledger::TokenLedger;
use crate::context::overflow::parse_overflow;
use crate::context::repair::repair;
use crate::context::summary::summarise;
use crate::context::tokenizer::Outbound;
use crate::context::units::Compactable;
use crate::context::window::{Budget, output_reserve, resolve_window};
use crate::llm::model::ChatModel;
use crate::vocab::{OpenaiChatMessage, ToolDefinition, Usage};

/// What the engine knows of one conversation between requests (kept by
/// [`crate::run::Conversation`] across its calls).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContextState {
    /// The estimator's calibration from the server's usage.
    pub calibration: Calibration,
    /// A window learnt from a server's `context_length_exceeded` message.
    pub learnt_window: Option<u32>,
    /// The context in use after the last request (or the last estimate).
    pub last: Option<ContextUsage>,
    /// Compactions made so far, per tier (1, 2, 3).
    pub compactions: [u32; 3],
    /// The size of the run's tool definitions, by the slice they were measured from: they are
    /// the same for every request of a run, and measuring them is most of an estimate's cost.
    tools_measured: Option<(usize, usize, usize)>,
    /// Per-message token counts, when a counter is in use.
    ledger: TokenLedger,
    /// Whether the pending request is estimated with the counter (see `count_exactly`).
    exact: bool,
}

/// The counter is used once the ratio's estimate is within `window / EXACT_MARGIN_DIVISOR`
/// tokens of the threshold: 12.5 % of the window, several times the ratio's p95 error.
const EXACT_MARGIN_DIVISOR: u32 = 8;

/// How much of the window a conversation uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextUsage {
    /// Tokens: the server's count (prompt and reply) after a request, else the estimate.
    pub tokens: u64,
    /// The window.
    pub window: u32,
    /// Whether `tokens` is the server's count.
    pub measured: bool,
}

/// A history and how much of it is committed (a compaction touches only committed turns).
pub struct History<'a> {
    /// The messages.
    pub messages: &'a mut Vec<OpenaiChatMessage>,
    /// How many are committed.
    pub committed: &'a mut usize,
}

/// What [`prepare`] did.
#[derive(Debug, Default)]
pub struct Prepared {
    /// Events to yield before the request (repairs, compactions).
    pub events: Vec<ContextEvent>,
    /// The highest tier applied.
    pub highest: Option<CompactionTier>,
}

impl ContextState {
    /// The window in force: the configured (or table, or default) one, or less if a server
    /// said so.
    pub fn window(&self, config: &EngineConfig<'_>) -> u32 {
        let (window, _) = resolve_window(config);
        self.learnt_window
            .map_or(window, |learnt| learnt.min(window))
    }

    /// The estimated prompt tokens of `messages` with `tools`, and its bytes.
    pub fn estimate(
        &self,
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
    ) -> (u64, usize) {
        let bytes = messages_bytes(messages) + self.tools_bytes(tools);
        match self.counted(messages, tools) {
            Some(counted) => (self.ledger.estimate(counted), bytes),
            None => (self.calibration.estimate(bytes), bytes),
        }
    }

    /// The request as the token counter counts it (its messages counted so far, any other by
    /// the ratio); `None` when no counter is in use.
    pub fn counted(&self, messages: &[OpenaiChatMessage], tools: &[ToolDefinition]) -> Option<u64> {
        if !self.exact {
            return None;
        }
        self.ledger.counted(messages, tools, &self.calibration)
    }

    /// The token counter in use for this conversation, by name (`None`: the ratio).
    pub fn counter(&self) -> Option<&str> {
        self.ledger.counter()
    }

    /// Count what the configured counter has not counted yet (the delta since the last
    /// request: new turns, stubs, summaries). Nothing without a counter.
    pub async fn measure(
        &mut self,
        config: &EngineConfig<'_>,
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
    ) {
        if !config.context.enabled {
            return;
        }
        let Some(counter) = config.context.tokenizer.resolve(config.model) else {
            self.exact = false;
            return;
        };
        self.exact = self.count_exactly(config, messages, tools);
        if self.exact {
            match config.outbound.filter(|_| counter.sends_text()) {
                Some(filter) => {
                    let outbound = Outbound {
                        counter: &*counter,
                        filter,
                        model: config.model,
                    };
                    self.ledger.measure(&outbound, messages, tools).await;
                }
                None => self.ledger.measure(&*counter, messages, tools).await,
            }
        }
    }

    /// Whether the pending request is worth counting with the tokenizer: before the server has
    /// counted one, and near the compaction threshold. Far below it the calibrated ratio makes
    /// the same decision (compact or not) for a small part of the cost — tokenizing is most of
    /// an estimate's work with a counter (docs/9-context.md, "Estimation CPU per turn").
    fn count_exactly(
        &self,
        config: &EngineConfig<'_>,
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
    ) -> bool {
        if self.calibration.last.is_none() {
            return true;
        }
        let window = self.window(config);
        let trigger = Budget::new(config, window).trigger;
        let by_ratio = self
            .calibration
            .estimate(messages_bytes(messages) + self.tools_bytes(tools));
        by_ratio.saturating_add(u64::from(window / EXACT_MARGIN_DIVISOR)) >= trigger
    }

    /// The server counted `usage.prompt_tokens` for a request the counter counted at
    /// `counted` ([`ContextState::counted`] before it was sent).
    pub fn observe_counted(&mut self, counted: Option<u64>, usage: Option<Usage>) {
        if let Some(usage) = usage {
            self.ledger.observe(counted, usage.prompt_tokens);
        }
    }

    /// The bytes of `tools`, measured once per run (the slice's address and length name it).
    fn tools_bytes(&self, tools: &[ToolDefinition]) -> usize {
        match self.tools_measured {
            Some((address, len, bytes))
                if address == tools.as_ptr() as usize && len == tools.len() =>
            {
                bytes
            }
            _ => tools_bytes(tools),
        }
    }

    /// Measure `tools` for the requests that follow.
    fn measure_tools(&mut self, tools: &[ToolDefinition]) {
        self.tools_measured = Some((tools.as_ptr() as usize, tools.len(), tools_bytes(tools)));
    }

    /// The server replied to a request of `bytes` bytes with `usage`.
    pub fn observe_usage(&mut self, config: &EngineConfig<'_>, bytes: usize, usage: Option<Usage>) {
        let Some(usage) = usage.filter(|u| u.prompt_tokens > 0) else {
            return;
        };
        self.calibration.observe(bytes, usage.prompt_tokens);
        self.last = Some(ContextUsage {
            tokens: usage.prompt_tokens.saturating_add(usage.completion_tokens),
            window: self.window(config),
            measured: true,
        });
    }

    /// The server said a request of `bytes` bytes (estimated at `estimate` tokens) does not
    /// fit: learn the window from its message, or else take the request as an upper bound of
    /// it (the window is at most what was sent and its reserve), and make the ratio more
    /// cautious when the message has no count.
    pub fn observe_overflow(
        &mut self,
        config: &EngineConfig<'_>,
        bytes: usize,
        estimate: u64,
        message: &str,
    ) {
        let overflow = parse_overflow(message);
        let window = overflow.window.unwrap_or_else(|| {
            let sent = overflow.prompt_tokens.unwrap_or(estimate);
            let reserve = u64::from(output_reserve(config, self.window(config)));
            u32::try_from(sent.saturating_add(reserve)).unwrap_or(u32::MAX)
        });
        self.learnt_window = Some(self.learnt_window.map_or(window, |w| w.min(window)));
        self.calibration
            .observe_overflow(bytes, overflow.prompt_tokens);
        self.ledger.observe_overflow(None, None);
    }
}

/// Before a request: on the run's first request repair the history; then estimate, and
/// compact when the estimate crosses the threshold.
pub async fn prepare(
    state: &mut ContextState,
    history: History<'_>,
    first_request: bool,
    model: &dyn ChatModel,
    config: &EngineConfig<'_>,
    tools: &[ToolDefinition],
) -> Prepared {
    let mut prepared = Prepared::default();
    if !config.context.enabled {
        return prepared;
    }
    if first_request || state.tools_measured.is_none() {
        state.measure_tools(tools);
    }
    if first_request {
        repair_committed(history.messages, history.committed, &mut prepared.events);
    }
    state.measure(config, history.messages, tools).await;
    prepared.highest = compact(
        state,
        history,
        model,
        config,
        tools,
        Plan::AUTO,
        &mut prepared.events,
    )
    .await;
    prepared
}

/// Repair the committed turns (the unit the commit boundary cuts, if any, stays as it is).
fn repair_committed(
    messages: &mut Vec<OpenaiChatMessage>,
    committed: &mut usize,
    events: &mut Vec<ContextEvent>,
) {
    let mut boundary = (*committed).min(messages.len());
    while boundary > 0 && matches!(messages.get(boundary), Some(OpenaiChatMessage::Tool { .. })) {
        boundary -= 1;
    }
    let rest = messages.split_off(boundary);
    let (repaired, repairs) = repair(std::mem::take(messages));
    for item in repairs {
        tracing::warn!(kind = ?item.kind, detail = %item.detail, "history repaired before its first request");
        events.push(ContextEvent::HistoryRepaired {
            kind: item.kind,
            detail: item.detail,
        });
    }
    *committed = (*committed - boundary) + repaired.len();
    *messages = repaired;
    messages.extend(rest);
}

/// Which tiers a compaction runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// The first tier tried.
    pub from: CompactionTier,
    /// Run `from` in full whatever the estimate (a server overflow, `/compact`).
    pub force: bool,
    /// When the forced tier could do nothing, force the next one.
    pub escalate: bool,
}

impl Plan {
    /// Before every request: the tiers in order, while over the threshold.
    pub const AUTO: Plan = Plan {
        from: CompactionTier::StubToolOutputs,
        force: false,
        escalate: false,
    };
}

/// Run the tiers of `plan` while the estimate is over the threshold. Returns the highest
/// tier applied.
pub async fn compact(
    state: &mut ContextState,
    history: History<'_>,
    model: &dyn ChatModel,
    config: &EngineConfig<'_>,
    tools: &[ToolDefinition],
    plan: Plan,
    events: &mut Vec<ContextEvent>,
) -> Option<CompactionTier> {
    let Plan {
        from,
        force,
        escalate,
    } = plan;
    let History {
        messages,
        committed,
    } = history;
    let window = state.window(config);
    let budget = Budget::new(config, window);
    let estimate =
        |state: &ContextState, messages: &[OpenaiChatMessage]| state.estimate(messages, tools).0;
    let mut highest = None;
    let keep = config.context.keep_last_turns;
    for tier in [
        CompactionTier::StubToolOutputs,
        CompactionTier::Summary,
        CompactionTier::DropTurns,
    ] {
        if tier < from {
            continue;
        }
        let forced = force && (tier == from || escalate && highest.is_none() && tier > from);
        let before = estimate(state, messages);
        if !forced && before <= budget.trigger {
            break;
        }
        if !forced && tier == CompactionTier::DropTurns && before <= budget.last_resort {
            // Over the threshold but it fits: nothing is dropped for that.
            break;
        }
        let need = if forced {
            usize::MAX
        } else {
            state
                .calibration
                .bytes(before.saturating_sub(budget.target))
        };
        let compactable = Compactable::of(messages, *committed, keep);
        let done = match tier {
            CompactionTier::StubToolOutputs => stub_tool_outputs(messages, &compactable, need),
            CompactionTier::Summary if !config.context.summarise => Compacted::default(),
            CompactionTier::Summary => {
                let cost = state
                    .calibration
                    .bytes(u64::from(config.context.summary_max_tokens));
                let selected = select(messages, &compactable, need.saturating_add(cost), true);
                let Some((first, last)) = selected.first().zip(selected.last()) else {
                    continue;
                };
                let run = &messages[first.start..last.end];
                if messages_bytes(run) <= cost && !forced {
                    // Summarising this little saves nothing.
                    continue;
                }
                match summarise(model, config, &budget, &state.calibration, run).await {
                    Ok(summary) => {
                        let text = summary.text;
                        replace_runs(messages, committed, &selected, |removed| {
                            summary_message(removed.len(), &text)
                        })
                    }
                    Err(error) => {
                        tracing::warn!(%error, "the summary request failed; dropping turns instead");
                        Compacted::default()
                    }
                }
            }
            CompactionTier::DropTurns => {
                let selected = select(messages, &compactable, need, false);
                replace_runs(messages, committed, &selected, dropped_marker)
            }
        };
        if done.messages == 0 {
            continue;
        }
        let after = estimate(state, messages);
        tracing::info!(
            tier = i64::from(tier.number()),
            tokens_before = crate::vocab::trace_context::otel_int(before),
            tokens_after = crate::vocab::trace_context::otel_int(after),
            messages = crate::vocab::trace_context::otel_int(done.messages),
            window = i64::from(window),
            "context compacted"
        );
        events.push(ContextEvent::ContextCompacted {
            tier,
            tokens_before: before,
            tokens_after: after,
            messages: done.messages as u64,
            window: u64::from(window),
        });
        state.compactions[usize::from(tier.number() - 1)] += 1;
        highest = Some(tier);
    }
    let tokens = estimate(state, messages);
    state.last = Some(ContextUsage {
        tokens,
        window,
        measured: false,
    });
    highest
}

/// The tier one harder than `highest` (the retry after a server's overflow).
pub fn harder(highest: Option<CompactionTier>) -> CompactionTier {
    match highest {
        None => CompactionTier::StubToolOutputs,
        Some(CompactionTier::StubToolOutputs) => CompactionTier::Summary,
        Some(_) => CompactionTier::DropTurns,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use async_trait::async_trait;

    use super::*;
    use crate::context::tokenizer::{TokenCountError, TokenCounter, TokenizerChoice};
    use crate::run::CycleConfig;

    /// Four bytes a token, and how many texts it was asked to count.
    #[derive(Debug, Default)]
    struct Counting(AtomicUsize);

    #[async_trait]
    impl TokenCounter for Counting {
        fn name(&self) -> &str {
            "counting"
        }
        async fn count(&self, texts: &[&str]) -> Result<Vec<u64>, TokenCountError> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|text| text.len() as u64 / 4).collect())
        }
    }

    #[tokio::test]
    async fn the_counter_is_used_first_and_near_the_threshold_not_far_below_it() {
        let counter = Arc::new(Counting::default());
        let mut config = CycleConfig::new("local-model");
        config.context_window = Some(10_000);
        config.context.tokenizer = TokenizerChoice::Custom(counter.clone());
        let mut state = ContextState::default();
        let mut messages = vec![OpenaiChatMessage::user_text("x".repeat(400))];

        // Before the server has counted anything, the counter counts.
        state.measure(&config.engine(), &messages, &[]).await;
        assert!(state.counted(&messages, &[]).is_some());
        assert_eq!(counter.0.load(Ordering::SeqCst), 1);

        // The server counted; a small history far below the threshold is left to the ratio.
        let bytes = messages_bytes(&messages);
        state.calibration.observe(bytes, 100);
        messages.push(OpenaiChatMessage::user_text("y".repeat(400)));
        state.measure(&config.engine(), &messages, &[]).await;
        assert_eq!(state.counted(&messages, &[]), None);
        assert_eq!(counter.0.load(Ordering::SeqCst), 1, "nothing counted");
        let (estimate, _) = state.estimate(&messages, &[]);
        assert_eq!(
            estimate,
            state
                .calibration
                .estimate(messages_bytes(&messages) + tools_bytes(&[]))
        );

        // Near the threshold the counter counts what it has not counted yet.
        let trigger = Budget::new(&config.engine(), 10_000).trigger;
        let near = usize::try_from(trigger).unwrap() * 4;
        messages.push(OpenaiChatMessage::user_text("z".repeat(near)));
        state.measure(&config.engine(), &messages, &[]).await;
        assert!(state.counted(&messages, &[]).is_some());
        assert!(
            counter.0.load(Ordering::SeqCst) > 1,
            "the new messages counted"
        );
    }
}
