//! [`McpHandle`]: a shareable view of a client — what adapters, resource and prompt tools hold
//! to call the server. The client ([`crate::tools::mcp::McpClient`]) builds it.

// resources/subscribe is legacy-only for the 2026 draft; every released protocol version has it.
#![allow(deprecated)]

use std::sync::Arc;

use rmcp::model::{Tool, UnsubscribeRequestParams};
use serde_json::Value;
use tokio::sync::{broadcast, watch};

use crate::tools::error::ToolError;
use crate::tools::mcp::connection::{Connection, McpServerInfo};
use crate::tools::mcp::filter::McpToolFilter;
use crate::tools::mcp::naming::McpToolNaming;
use crate::tools::mcp::permissions::PermissionRule;
use crate::tools::mcp::shared::{Shared, subscribe};
use crate::tools::mcp::skipped::SkippedMcpTool;
use crate::tools::mcp::subscriptions::{McpResourceUpdate, Subscriptions};

/// A shareable view of a connected [`McpClient`](crate::tools::mcp::McpClient): clone it into tasks to call tools
/// concurrently over the one connection. It follows the client: after `close()` it fails with
/// `McpNotInitialized`, after a new `connect()` it uses the new session.
#[derive(Clone)]
pub struct McpHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) naming: McpToolNaming,
    pub(super) rule: PermissionRule,
}

impl std::fmt::Debug for McpHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHandle")
            .field("server", &self.shared.server)
            .finish()
    }
}

impl McpHandle {
    /// Shut the server down gracefully, as [`McpClient::close`](crate::tools::mcp::McpClient::close) does — stdio: close its stdin,
    /// wait briefly, then SIGTERM and SIGKILL its process group; streamable HTTP: end the
    /// session (`DELETE`) — and wait until it is done. The client, every handle and every
    /// adapter are disconnected: later calls fail with `McpNotInitialized`.
    pub async fn close(&self) {
        self.shared.close().await;
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.shared.server
    }

    /// Whether the client is connected and the server still runs.
    pub fn is_connected(&self) -> bool {
        self.shared.is_connected()
    }

    /// Call a tool; see [`McpClient::call_tool`](crate::tools::mcp::McpClient::call_tool).
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        self.shared.call_tool(name, args).await
    }

    /// The tools of the last listing that were left out, with the reason
    /// ([`McpClient::skipped_tools`](crate::tools::mcp::McpClient::skipped_tools)).
    pub fn skipped_tools(&self) -> Vec<SkippedMcpTool> {
        self.shared.cache.skipped()
    }

    /// The usable MCP tool descriptions from the cache (as last listed).
    pub fn cached_tools(&self) -> Vec<Tool> {
        self.shared
            .cache
            .get()
            .map(|tools| tools.as_ref().clone())
            .unwrap_or_default()
    }

    /// A receiver whose value changes whenever the tool list is replaced (after
    /// `notifications/tools/list_changed` or a new listing).
    pub fn tool_changes(&self) -> watch::Receiver<u64> {
        self.shared.cache.subscribe()
    }

    /// The client's `include` / `exclude` lists ([`McpClient::with_tool_filter`](crate::tools::mcp::McpClient::with_tool_filter)).
    pub fn tool_filter(&self) -> McpToolFilter {
        self.shared.cache.filter()
    }

    /// What the server said in `initialize` (`None` while not connected).
    pub fn server_info(&self) -> Option<McpServerInfo> {
        self.shared.connection().ok().map(|conn| conn.info.clone())
    }

    pub(crate) fn subscriptions(&self) -> &Subscriptions {
        &self.shared.subscriptions
    }

    /// The connection for a request (restarting a dead server when allowed).
    pub(crate) async fn live(&self) -> Result<Arc<Connection>, ToolError> {
        self.shared.live().await
    }

    /// The cached description of the tool `name` (empty when the server gives none), or
    /// `None` when the cache does not list it.
    pub(crate) fn cached_description(&self, name: &str) -> Option<String> {
        let tools = self.shared.cache.get()?;
        let tool = tools.iter().find(|tool| tool.name == name)?;
        Some(tool.description.as_deref().unwrap_or("").to_owned())
    }

    pub(crate) fn cached_tool(&self, name: &str) -> Option<Tool> {
        let tools = self.shared.cache.get()?;
        tools.iter().find(|tool| tool.name == name).cloned()
    }

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
        self.subscriptions().remember(uri);
        Ok(())
    }

    /// End a subscription.
    ///
    /// # Errors
    /// [`ToolError::McpError`] when the server refuses.
    pub async fn unsubscribe_resource(&self, uri: &str) -> Result<(), ToolError> {
        self.subscriptions().forget(uri);
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
        self.subscriptions().receiver()
    }
}
