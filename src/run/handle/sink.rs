//! [`EventSink`]: where a handler puts the events it makes, in order; the loop that polls the
//! handler yields them whenever the handler waits (so they stream live, with no channel).
//! [`EventSink::send`] waits until its event is taken, as a `yield` would: a caller that stops
//! reading at an event stops the run there (before the next tool starts, say).

use std::future::{Future, poll_fn};
use std::pin::Pin;
use std::sync::Mutex;
use std::task::Poll;

use crate::run::event::StreamEvent;

/// The events a handler made that its loop has not yielded yet.
#[derive(Default)]
pub(crate) struct EventSink {
    events: Mutex<Vec<StreamEvent>>,
    /// Nobody reads the events (an external engine's call): they are dropped.
    discard: bool,
}

impl EventSink {
    /// A sink whose events nobody reads.
    pub(crate) fn discarding() -> Self {
        EventSink {
            events: Mutex::default(),
            discard: true,
        }
    }

    /// Add `event` after the ones made before it, and wait until the loop has taken it.
    pub(crate) async fn send(&self, event: StreamEvent) {
        if self.discard {
            return;
        }
        self.lock().push(event);
        poll_fn(|cx| {
            if self.is_empty() {
                Poll::Ready(())
            } else {
                // Polled again once the loop has yielded the events.
                cx.waker().wake_by_ref();
                Poll::Pending
            }
        })
        .await;
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<StreamEvent>> {
        self.events.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The events made so far, oldest first (the sink is empty after).
    pub(crate) fn take(&self) -> Vec<StreamEvent> {
        std::mem::take(&mut *self.lock())
    }

    fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Poll `handler` until it finishes (its output) or waits with events made (`None`):
    /// the caller yields [`EventSink::take`] and polls again.
    pub(crate) async fn until_events<F: Future>(
        &self,
        mut handler: Pin<&mut F>,
    ) -> Option<F::Output> {
        poll_fn(|cx| match handler.as_mut().poll(cx) {
            Poll::Ready(output) => Poll::Ready(Some(output)),
            Poll::Pending if !self.is_empty() => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        })
        .await
    }
}
