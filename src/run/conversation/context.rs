//! [`Conversation`]'s context calls: the context in use, and a compaction on demand.

use crate::context::CompactionTier;
use crate::context::engine::{ContextUsage, History, Plan, compact};
use crate::run::conversation::Conversation;
use crate::run::event::StreamEvent;
use crate::run::metered::Metered;

impl Conversation {
    /// How much of the model's window the conversation uses: the server's count after the
    /// last request, else an estimate of the history as it is now.
    pub fn context_usage(&self) -> ContextUsage {
        let window = self.context.window(&self.config.engine());
        match self.context.last {
            Some(last) if last.measured => ContextUsage { window, ..last },
            _ => ContextUsage {
                tokens: self.context.estimate(&self.messages, &[]).0,
                window,
                measured: false,
            },
        }
    }

    /// The token counter the context engine uses for this conversation (`tiktoken/o200k_base`,
    /// `llama.cpp/tokenize`, …), once it has counted; `None`: the calibrated ratio.
    pub fn context_counter(&self) -> Option<&str> {
        self.context.counter()
    }

    /// The compactions made so far in this conversation, per tier (1, 2, 3).
    pub fn compactions(&self) -> [u32; 3] {
        self.context.compactions
    }

    /// Compact now, whatever the estimate: older turns are summarised by the model (tier 2)
    /// — the newest turns, the system prompt and the newest user message kept. Returns the
    /// compaction events: empty when nothing could be compacted or the summary request failed
    /// (then the history is left as it was, and the failure is logged).
    pub async fn compact(&mut self) -> Vec<StreamEvent> {
        let mut events = Vec::new();
        let mut committed = self.messages.len();
        // The summary request passes the hooks and counts in the conversation's usage.
        let metered = Metered::new(
            &*self.model,
            &self.config,
            self.usage.total,
            self.config.usage_limits,
            self.config.prices,
        );
        let plan = Plan {
            from: CompactionTier::Summary,
            force: true,
            escalate: false,
        };
        compact(
            &mut self.context,
            History {
                messages: &mut self.messages,
                committed: &mut committed,
            },
            &metered,
            &self.config.engine(),
            &[],
            plan,
            &mut events,
        )
        .await;
        let spent = metered.spent();
        self.usage.charge(spent.requests, spent.usage);
        events.into_iter().map(StreamEvent::from).collect()
    }
}
