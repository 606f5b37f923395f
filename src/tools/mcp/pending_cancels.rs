//! [`PendingCancels`]: the `tasks/cancel` requests a connection still has in flight (see
//! `tasks.rs`), which closing it waits for.

use std::sync::{Arc, Mutex, PoisonError};

/// The `tasks/cancel` requests of dropped calls still in flight on one connection: closing
/// the connection waits for them (bounded), so a run cancelled just before the CLI closes its
/// servers still cancels its tasks.
#[derive(Clone, Default)]
pub(crate) struct PendingCancels(Arc<Mutex<Vec<tokio::task::JoinHandle<()>>>>);

impl PendingCancels {
    pub(crate) fn push(&self, handle: tokio::task::JoinHandle<()>) {
        let mut pending = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        pending.retain(|handle| !handle.is_finished());
        pending.push(handle);
    }

    /// Wait for every cancel in flight (each bounded by the cancel's own wait).
    pub(crate) async fn settle(&self) {
        let pending = std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner));
        for handle in pending {
            let _ = handle.await;
        }
    }
}
