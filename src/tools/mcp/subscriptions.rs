//! Resource subscriptions: `resources/subscribe` / `resources/unsubscribe`, and the server's
//! `notifications/resources/updated` (and `notifications/resources/list_changed`) delivered to
//! the application as [`McpResourceUpdate`]s on a broadcast channel.
//!
//! The subscribed URIs are remembered: a server restarted after it died
//! ([`McpClient::with_restarts`](crate::tools::mcp::McpClient::with_restarts)) is subscribed
//! again.

// resources/subscribe is legacy-only for the 2026 draft; every released protocol version has it.
#![allow(deprecated)]

use std::collections::BTreeSet;
use std::sync::{Mutex, PoisonError};

use rmcp::model::{SubscribeRequestParams, UnsubscribeRequestParams};
use tokio::sync::broadcast;

use crate::tools::error::ToolError;
use crate::tools::mcp::client::{McpClient, McpHandle};
use crate::tools::mcp::connection::Connection;

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

    fn uris(&self) -> BTreeSet<String> {
        self.uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Subscribe a new session (after a restart) to every remembered URI.
    pub(crate) async fn renew(&self, conn: &Connection) {
        for uri in self.uris() {
            if let Err(error) = subscribe(conn, &uri).await {
                tracing::warn!(target: "agcore::mcp", server = %conn.server, uri, %error, "renewing a resource subscription failed");
            }
        }
    }
}

async fn subscribe(conn: &Connection, uri: &str) -> Result<(), ToolError> {
    conn.request(
        "resources/subscribe",
        uri,
        conn.peer.subscribe(SubscribeRequestParams::new(uri)),
    )
    .await
}

impl McpHandle {
    /// Subscribe to changes of the resource `uri`; each one arrives as
    /// [`McpResourceUpdate::Updated`] on [`resource_updates`](Self::resource_updates).
    ///
    /// # Errors
    /// [`ToolError::McpError`] when the server does not offer subscriptions or refuses.
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), ToolError> {
        let conn = self.live().await?;
        if !conn.info.can_subscribe {
            return Err(ToolError::McpError(format!(
                "MCP server '{}' does not offer resource subscriptions",
                conn.server
            )));
        }
        subscribe(&conn, uri).await?;
        self.subscriptions()
            .uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(uri.to_owned());
        Ok(())
    }

    /// End a subscription.
    ///
    /// # Errors
    /// [`ToolError::McpError`] when the server refuses.
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), ToolError> {
        self.subscriptions()
            .uris
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(uri);
        let conn = self.live().await?;
        conn.request(
            "resources/unsubscribe",
            uri,
            conn.peer
                .unsubscribe(UnsubscribeRequestParams::new(uri.to_owned())),
        )
        .await
    }

    /// The URIs subscribed to.
    pub fn subscribed_resources(&self) -> Vec<String> {
        self.subscriptions().uris().into_iter().collect()
    }

    /// A receiver of the server's resource updates from now on.
    pub fn resource_updates(&self) -> broadcast::Receiver<McpResourceUpdate> {
        self.subscriptions().updates.subscribe()
    }
}

impl McpClient {
    /// Subscribe to changes of the resource `uri` ([`McpHandle::subscribe_resource`]).
    ///
    /// # Errors
    /// As [`McpHandle::subscribe_resource`].
    pub async fn subscribe_resource(&self, uri: &str) -> Result<(), ToolError> {
        self.handle().subscribe_resource(uri).await
    }

    /// End a subscription ([`McpHandle::unsubscribe_resource`]).
    ///
    /// # Errors
    /// As [`McpHandle::unsubscribe_resource`].
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), ToolError> {
        self.handle().unsubscribe_resource(uri).await
    }

    /// A receiver of the server's resource updates ([`McpHandle::resource_updates`]).
    pub fn resource_updates(&self) -> broadcast::Receiver<McpResourceUpdate> {
        self.handle().resource_updates()
    }
}
