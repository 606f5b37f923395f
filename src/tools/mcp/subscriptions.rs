//! Resource subscriptions, as state: the subscribed URIs, and the server's
//! `notifications/resources/updated` (and `notifications/resources/list_changed`) delivered to
//! the application as [`McpResourceUpdate`]s on a broadcast channel. Subscribing is
//! [`McpHandle::subscribe_resource`](crate::tools::mcp::McpHandle::subscribe_resource).
//!
//! The subscribed URIs are remembered: a server restarted after it died
//! ([`McpClient::with_restarts`](crate::tools::mcp::McpClient::with_restarts)) is subscribed
//! again.

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use tokio::sync::broadcast;

/// How many updates a slow receiver may fall behind before it misses some (it is told how
/// many it missed: `RecvError::Lagged`).
const UPDATE_BUFFER: usize = 256;

/// A change a server announced.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum McpResourceUpdate {
    /// A subscribed resource changed (`notifications/resources/updated`); read it again.
    Updated {
        /// The server.
        server: String,
        /// The resource's URI.
        uri: String,
    },
    /// The list of resources changed (`notifications/resources/list_changed`).
    ListChanged {
        /// The server.
        server: String,
    },
}

/// The subscribed URIs and the channel updates go out on; shared by a client's sessions.
#[derive(Debug)]
pub(crate) struct Subscriptions {
    uris: Mutex<BTreeSet<String>>,
    updates: broadcast::Sender<McpResourceUpdate>,
}

impl Default for Subscriptions {
    fn default() -> Self {
        Subscriptions {
            uris: Mutex::new(BTreeSet::new()),
            updates: broadcast::Sender::new(UPDATE_BUFFER),
        }
    }
}

impl Subscriptions {
    /// Tell the receivers (none listening is fine).
    pub(crate) fn publish(&self, update: McpResourceUpdate) {
        tracing::debug!(target: "agcore::mcp", ?update, "resource update");
        let _ = self.updates.send(update);
    }

    /// The subscribed URIs.
    pub(crate) fn uris(&self) -> BTreeSet<String> {
        self.uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Remember a subscription (renewed after a restart).
    pub(crate) fn remember(&self, uri: &str) {
        self.uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_owned());
    }

    /// Forget a subscription.
    pub(crate) fn forget(&self, uri: &str) {
        self.uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
    }

    /// A receiver of the updates from now on.
    pub(crate) fn receiver(&self) -> broadcast::Receiver<McpResourceUpdate> {
        self.updates.subscribe()
    }
}
