//! A server's progress on a `tools/call`, as updates of the calling tool's card
//! ([`ToolCallUpdate::progress`]), besides the client-wide progress callback.
//!
//! rmcp gives every request a progress token of its own counter and does not tell the
//! caller which, so a notification is tied to a call only when that cannot be wrong: exactly
//! one request of the session is in flight and it is a `tools/call` made inside a run's call
//! (one with a [`ToolContext`]). Otherwise (two calls at once, a listing beside a call) the
//! progress reaches only the client's callback — never the wrong card. A task's status
//! messages are reported by the polling call itself, which knows its context.

use std::sync::Mutex;
use std::sync::PoisonError;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use crate::tools::context::ToolContext;
use crate::tools::event::ToolCallUpdate;

/// The session's requests in flight, and the run calls among them.
#[derive(Default)]
pub(crate) struct InFlight {
    requests: AtomicUsize,
    next: AtomicU64,
    calls: Mutex<Vec<(u64, ToolContext)>>,
}

/// Counts one request while it lives.
pub(crate) struct RequestGuard<'a>(&'a InFlight);

impl Drop for RequestGuard<'_> {
    fn drop(&mut self) {
        self.0.requests.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Keeps one call's context while its `tools/call` (and any task polling) lives.
pub(crate) struct CallGuard<'a> {
    in_flight: &'a InFlight,
    id: u64,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        self.in_flight
            .calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(id, _)| *id != self.id);
    }
}

impl InFlight {
    /// A request is sent: counted until the guard drops.
    pub(crate) fn request(&self) -> RequestGuard<'_> {
        self.requests.fetch_add(1, Ordering::SeqCst);
        RequestGuard(self)
    }

    /// A run's call starts its `tools/call`: its context is known until the guard drops.
    /// `None` outside a run's call, or when nobody listens to its updates.
    pub(crate) fn call(&self) -> Option<CallGuard<'_>> {
        let context = ToolContext::current().filter(|context| context.events().is_some())?;
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((id, context));
        Some(CallGuard {
            in_flight: self,
            id,
        })
    }

    /// The card of the one call that `notifications/progress` can be about, if exactly one is.
    pub(crate) fn report(&self, progress: f64, total: Option<f64>, message: Option<String>) {
        if self.requests.load(Ordering::SeqCst) != 1 {
            return;
        }
        let calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        let [(_, context)] = calls.as_slice() else {
            return;
        };
        context.report(progress_update(progress, total, message));
    }
}

/// The most characters of a server's progress message a card keeps.
const MAX_MESSAGE_CHARS: usize = 1024;

/// MCP's progress (any non-negative number) as a card's whole units; the server's message
/// cut to [`MAX_MESSAGE_CHARS`] and stripped of control characters (it is untrusted text).
pub(crate) fn progress_update(
    progress: f64,
    total: Option<f64>,
    message: Option<String>,
) -> ToolCallUpdate {
    // `as` saturates: negative and NaN become 0, huge values u64::MAX.
    let units = |value: f64| value.round() as u64;
    let message = message.map(|text| {
        let cut: String = text.chars().take(MAX_MESSAGE_CHARS).collect();
        crate::display::escape_for_terminal(&cut).into_owned()
    });
    ToolCallUpdate::progress(units(progress), total.map(units), message)
}
