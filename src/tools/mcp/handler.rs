//! The client side of the session: what agcore tells the server about itself, and what it does
//! with the server's notifications (tool list changes, progress, log messages).

// Logging, roots and sampling are deprecated by SEP-2577 for the 2026 protocol; released servers still send it.
#![allow(deprecated)]

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::ErrorData;
use rmcp::model::{
    ClientConfig, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ListRootsResult, LoggingLevel, LoggingMessageNotificationParam,
    ProgressNotificationParam, ResourceUpdatedNotificationParam, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, RoleClient, ServiceError};
use tokio::sync::watch;

use crate::tools::mcp::answers::Answers;
use crate::tools::mcp::filter::McpToolFilter;
use crate::tools::mcp::listing::{ListFailure, McpCacheHint, list_bounded};
use crate::tools::mcp::progress::{McpProgress, ProgressCallback};
use crate::tools::mcp::skipped::{SkippedMcpTool, partition};
use crate::tools::mcp::subscriptions::{McpResourceUpdate, Subscriptions};

/// The cached `tools/list` of one server, shared by the client, its handles and its adapters.
#[derive(Debug)]
pub(crate) struct ToolCache {
    tools: RwLock<Option<Arc<Vec<Tool>>>>,
    /// The listed tools that were not usable (bad schema, repeated name), with the reason.
    skipped: RwLock<Vec<SkippedMcpTool>>,
    /// The user's `include` / `exclude` lists.
    filter: RwLock<McpToolFilter>,
    generation: watch::Sender<u64>,
    /// The last listing's cache hint and when it arrived (none: reused until invalidated).
    hint: RwLock<Option<(McpCacheHint, Instant)>>,
}

impl ToolCache {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(ToolCache {
            tools: RwLock::new(None),
            skipped: RwLock::new(Vec::new()),
            filter: RwLock::new(McpToolFilter::default()),
            generation: watch::Sender::new(0),
            hint: RwLock::new(None),
        })
    }

    /// The cached list, `None` when never listed or invalidated.
    pub(crate) fn get(&self) -> Option<Arc<Vec<Tool>>> {
        self.tools
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The tools of the last listing that were skipped, and why.
    pub(crate) fn skipped(&self) -> Vec<SkippedMcpTool> {
        self.skipped
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replace the list (keeping only usable tools; the rest is recorded as skipped) and tell
    /// subscribers.
    pub(crate) fn store(&self, server: &str, tools: Vec<Tool>) -> Arc<Vec<Tool>> {
        let filter = self
            .filter
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let (tools, skipped) = partition(server, tools, &filter);
        *self.skipped.write().unwrap_or_else(PoisonError::into_inner) = skipped;
        let tools = Arc::new(tools);
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = Some(tools.clone());
        self.generation.send_modify(|generation| *generation += 1);
        tools
    }

    /// Set the `include` / `exclude` lists (applied from the next listing on).
    pub(crate) fn set_filter(&self, filter: McpToolFilter) {
        *self.filter.write().unwrap_or_else(PoisonError::into_inner) = filter;
    }

    /// The `include` / `exclude` lists.
    pub(crate) fn filter(&self) -> McpToolFilter {
        self.filter
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The cached list while its cache hint says it is fresh (`None`: never listed,
    /// invalidated, or older than its `ttlMs`).
    pub(crate) fn fresh(&self) -> Option<Arc<Vec<Tool>>> {
        let expired = self
            .hint
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .and_then(|(hint, at)| Some((hint.ttl()?, at)))
            .is_some_and(|(ttl, at)| at.elapsed() >= ttl);
        if expired { None } else { self.get() }
    }

    /// Record the cache hint of the listing just stored.
    pub(crate) fn set_hint(&self, hint: Option<McpCacheHint>) {
        *self.hint.write().unwrap_or_else(PoisonError::into_inner) =
            hint.map(|hint| (hint, Instant::now()));
    }

    /// The last listing's cache hint.
    pub(crate) fn hint(&self) -> Option<McpCacheHint> {
        self.hint
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .map(|(hint, _)| hint)
    }

    /// Forget the list (the next `list_tools` asks the server again).
    pub(crate) fn invalidate(&self) {
        *self.tools.write().unwrap_or_else(PoisonError::into_inner) = None;
    }

    /// A receiver that changes whenever the list is replaced.
    pub(crate) fn subscribe(&self) -> watch::Receiver<u64> {
        self.generation.subscribe()
    }
}

/// agcore's `ClientHandler`.
#[derive(Clone)]
pub(crate) struct Handler {
    pub(crate) info: ClientConfig,
    pub(crate) server: Arc<str>,
    pub(crate) cache: Arc<ToolCache>,
    pub(crate) progress: Option<ProgressCallback>,
    pub(crate) request_timeout: Duration,
    /// Answers elicitation, sampling and roots requests (also those inside a multi-round-trip
    /// `tools/call`).
    pub(crate) answers: Arc<Answers>,
    pub(crate) subscriptions: Arc<Subscriptions>,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, ErrorData> {
        Ok(self.answers.elicit(request).await)
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        self.answers.sample(params).await
    }

    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, ErrorData> {
        Ok(self.answers.roots())
    }

    async fn on_tool_list_changed(&self, context: NotificationContext<RoleClient>) {
        self.cache.invalidate();
        let peer = &context.peer;
        let pages = list_bounded(&self.server, |params| peer.list_tools(params));
        let listed = tokio::time::timeout(self.request_timeout, pages).await;
        match listed {
            Ok(Ok(tools)) => {
                tracing::debug!(target: "agcore::mcp", server = %self.server, count = tools.len(), "tool list changed");
                self.cache.store(&self.server, tools);
            }
            // The session ended (a clean close, or the server went away) while the refresh was
            // in flight: not a failure of the refresh; the next call reports a dead server.
            Ok(Err(ListFailure::Request(
                ServiceError::TransportClosed | ServiceError::Cancelled { .. },
            ))) => {
                tracing::debug!(target: "agcore::mcp", server = %self.server, "tool list refresh ended with the session");
            }
            Ok(Err(_)) if peer.is_transport_closed() => {
                tracing::debug!(target: "agcore::mcp", server = %self.server, "tool list refresh ended with the session");
            }
            Ok(Err(ListFailure::Limit(error))) => {
                tracing::warn!(target: "agcore::mcp", server = %self.server, %error, "refreshing the tool list failed");
            }
            Ok(Err(ListFailure::Request(error))) => {
                tracing::warn!(target: "agcore::mcp", server = %self.server, %error, "refreshing the tool list failed");
            }
            Err(_) => {
                tracing::warn!(target: "agcore::mcp", server = %self.server, "refreshing the tool list timed out");
            }
        }
    }

    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.subscriptions.publish(McpResourceUpdate::Updated {
            server: self.server.to_string(),
            uri: params.uri,
        });
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.subscriptions.publish(McpResourceUpdate::ListChanged {
            server: self.server.to_string(),
        });
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        tracing::debug!(target: "agcore::mcp", server = %self.server, progress = params.progress, total = ?params.total, message = ?params.message, "progress");
        self.answers
            .in_flight
            .report(params.progress, params.total, params.message.clone());
        if let Some(callback) = &self.progress {
            callback(McpProgress {
                server: self.server.to_string(),
                progress: params.progress,
                total: params.total,
                message: params.message,
            });
        }
    }

    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let server = &*self.server;
        let logger = params.logger.as_deref().unwrap_or("");
        let data = &params.data;
        match params.level {
            LoggingLevel::Debug => {
                tracing::debug!(target: "agcore::mcp::log", server, logger, %data)
            }
            LoggingLevel::Info | LoggingLevel::Notice => {
                tracing::info!(target: "agcore::mcp::log", server, logger, %data)
            }
            LoggingLevel::Warning => {
                tracing::warn!(target: "agcore::mcp::log", server, logger, %data)
            }
            _ => tracing::error!(target: "agcore::mcp::log", server, logger, %data),
        }
    }
}
