//! The run's end of its tools' updates ([`crate::tools::ToolContext::report`]): one channel
//! per run; each update is journaled ([`JournalEntry::CallUpdate`]) and handed to the caller
//! as a [`StreamEvent::ToolCallUpdate`], in the order the call reported it, and before the
//! call's [`StreamEvent::ToolExecutionCompleted`] (the driver drains the channel before it
//! reports a finished call).

use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use crate::run::event::StreamEvent;
use crate::run::journal::{JournalEntry, RunJournal};
use crate::tools::context::{ToolEventReceiver, ToolEvents};
use crate::tools::event::ToolCallUpdate;

/// The run's channel of call updates.
pub(crate) struct CallUpdates {
    events: ToolEvents,
    /// Shared so the batch's select can poll it while the driver drains it between items.
    receiver: Arc<Mutex<ToolEventReceiver>>,
}

impl CallUpdates {
    pub(crate) fn new() -> Self {
        let (events, receiver) = ToolEvents::channel();
        CallUpdates {
            events,
            receiver: Arc::new(Mutex::new(receiver)),
        }
    }

    /// The sending end (give each call its own with [`ToolEvents::for_call`]).
    pub(crate) fn events(&self) -> &ToolEvents {
        &self.events
    }

    /// Every update sent so far.
    pub(crate) fn drain(&self) -> Vec<(String, ToolCallUpdate)> {
        let mut receiver = self.receiver.lock().unwrap_or_else(|p| p.into_inner());
        let mut updates = Vec::new();
        while let Ok(update) = receiver.try_recv() {
            updates.push(update);
        }
        updates
    }

    /// The updates as a stream, for a select beside the calls (never ends).
    pub(crate) fn stream(&self) -> impl futures::Stream<Item = (String, ToolCallUpdate)> + use<> {
        let receiver = Arc::clone(&self.receiver);
        futures::stream::poll_fn(move |cx: &mut Context<'_>| {
            let mut receiver = receiver.lock().unwrap_or_else(|p| p.into_inner());
            match receiver.poll_recv(cx) {
                Poll::Ready(Some(update)) => Poll::Ready(Some(update)),
                // The run holds a sender: the channel does not close while it runs.
                Poll::Ready(None) | Poll::Pending => Poll::Pending,
            }
        })
    }
}

/// Journal `update` of call `id` and make it the caller's event. A failed record is logged,
/// not fatal: updates are for display, and the run's state does not depend on them.
pub(crate) async fn deliver(
    journal: Option<&dyn RunJournal>,
    id: String,
    update: ToolCallUpdate,
) -> StreamEvent {
    if let Some(journal) = journal
        && let Err(error) = journal
            .record(JournalEntry::CallUpdate {
                call_id: &id,
                update: &update,
            })
            .await
    {
        tracing::warn!(%error, call_id = %id, "could not record a tool call update");
    }
    StreamEvent::ToolCallUpdate { id, update }
}
