//! [`McpClient`] (the design's API), the façade over the client's parts: the shared state
//! (`shared.rs`), the connection, the [`McpHandle`] its adapters hold, and the adapters.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use rmcp::model::Tool;
use serde_json::Value;
use tokio::sync::broadcast;

use crate::tools::base::BaseTool;
use crate::tools::capability::Permission;
use crate::tools::error::ToolError;
use crate::tools::mcp::adapter::McpToolAdapter;
use crate::tools::mcp::connection::{McpServerInfo, Settings};
use crate::tools::mcp::elicitation::Elicitor;
use crate::tools::mcp::filter::McpToolFilter;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::naming::McpToolNaming;
use crate::tools::mcp::negotiation::McpNegotiation;
use crate::tools::mcp::permissions::PermissionRule;
use crate::tools::mcp::progress::McpProgress;
use crate::tools::mcp::recovery::McpRetry;
use crate::tools::mcp::roots::Roots;
use crate::tools::mcp::sampling::Sampler;
use crate::tools::mcp::shared::{Shared, open_with_retries};
use crate::tools::mcp::skipped::SkippedMcpTool;
use crate::tools::mcp::subscriptions::{McpResourceUpdate, Subscriptions};
use crate::tools::mcp::transport::McpTransport;
use crate::tools::mcp::{
    DEFAULT_CONNECT_TIMEOUT_SECS, DEFAULT_PROTOCOL_VERSION, DEFAULT_REQUEST_TIMEOUT_SECS,
};
use crate::tools::registry::definition_of;
use crate::vocab::ToolDefinition;

/// A client of one MCP server.
///
/// Build it with [`McpClient::new`] and the `with_*` methods, [`connect`](Self::connect), then
/// call tools directly or turn them into registry tools with [`into_tools`](Self::into_tools).
/// Calls take `&self` and share one connection (requests are multiplexed); for calls from
/// several tasks take a [`handle`](Self::handle).
///
/// Every operation is bounded: `connect` by the connect timeout (default 60 s), each request by
/// the request timeout (default 30 s). When a stdio server exits or closes its stdout, every
/// pending and later call fails at once with [`ToolError::McpError`] naming the exit status and
/// the server's last stderr lines; [`is_connected`](Self::is_connected) turns false and
/// `connect()` starts the server again.
///
/// Dropping the client (and every handle and adapter) shuts the server down in the
/// background; [`close`](Self::close) does it now and waits.
pub struct McpClient {
    settings: Settings,
    shared: Arc<Shared>,
    rule: PermissionRule,
    naming: McpToolNaming,
}

impl std::fmt::Debug for McpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpClient")
            .field("server", &self.settings.server)
            .field("transport", &self.settings.transport)
            .field("connected", &self.is_connected())
            .finish()
    }
}

impl McpClient {
    /// A client for the server `server_name` (used in tool sources, qualified tool names and
    /// error messages), reached through `transport`. Nothing starts until `connect()`.
    pub fn new(server_name: impl Into<String>, transport: McpTransport) -> Self {
        let server: Arc<str> = Arc::from(server_name.into());
        let subscriptions = Arc::new(Subscriptions::default());
        McpClient {
            shared: Arc::new(Shared::new(server.clone(), subscriptions.clone())),
            settings: Settings {
                server,
                transport,
                env: Vec::new(),
                env_remove: Vec::new(),
                cwd: None,
                request_timeout: Duration::from_secs(DEFAULT_REQUEST_TIMEOUT_SECS),
                connect_timeout: Duration::from_secs(DEFAULT_CONNECT_TIMEOUT_SECS),
                protocol_version: DEFAULT_PROTOCOL_VERSION.to_owned(),
                negotiation: McpNegotiation::default(),
                progress: None,
                auth: None,
                elicitor: None,
                roots: Arc::new(Roots::default()),
                sampler: None,
                startup: McpRetry::default(),
                restarts: 0,
                subscriptions,
                // The CLI's default for every stdio server: `workspace-write` in its
                // directory, network on (most servers exist to reach an API); `full` only
                // by an explicit `with_sandbox_policy(SandboxPolicy::full())`.
                sandbox: crate::tools::sandbox::Sandbox::new(
                    crate::tools::sandbox::SandboxPolicy::for_mcp_servers(),
                ),
            },
            rule: PermissionRule::default(),
            naming: McpToolNaming::Raw,
        }
    }

    /// Limit every request (`tools/list`, `tools/call`) to `secs` seconds (default 30). Takes
    /// effect at the next `connect()`.
    pub fn with_timeout(self, secs: u64) -> Self {
        self.with_request_timeout(Duration::from_secs(secs))
    }

    /// Limit every request to `limit` (default 30 s). Takes effect at the next `connect()`.
    pub fn with_request_timeout(mut self, limit: Duration) -> Self {
        self.settings.request_timeout = limit;
        self
    }

    /// Authorize to an OAuth-protected HTTP server with `auth` when it asks (a `401` or
    /// `403 insufficient_scope`); see [`auth`](crate::tools::mcp::auth). Ignored by `Stdio`.
    /// Takes effect at the next `connect()`.
    pub fn with_auth(mut self, auth: crate::tools::mcp::auth::McpAuth) -> Self {
        self.settings.auth = Some(auth);
        self
    }

    /// Limit starting the server and the initialize handshake to `limit` (default 60 s).
    pub fn with_connect_timeout(mut self, limit: Duration) -> Self {
        self.settings.connect_timeout = limit;
        self
    }

    /// Set an environment variable for a stdio server (added to agcore's environment).
    pub fn with_env(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.env.push((key.into(), value.into()));
        self
    }

    /// Set several environment variables for a stdio server.
    pub fn with_envs<I, K, V>(mut self, vars: I) -> Self
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        self.settings
            .env
            .extend(vars.into_iter().map(|(k, v)| (k.into(), v.into())));
        self
    }

    /// Do not pass the variable `name` of agcore's environment on to a stdio server — e.g. the
    /// model's API key, which a server has no business reading. A stdio server otherwise
    /// inherits the whole environment. A variable set explicitly with
    /// [`with_env`](Self::with_env) is still passed (the caller asked for it).
    ///
    /// ```
    /// use agcore::tools::mcp::{McpClient, McpTransport};
    ///
    /// let client = McpClient::new("time", McpTransport::stdio("mcp-server-time", Vec::<String>::new()))
    ///     .without_env("OPENAI_API_KEY");
    /// assert_eq!(client.withheld_env(), ["OPENAI_API_KEY"]);
    /// ```
    pub fn without_env(mut self, name: impl Into<String>) -> Self {
        self.settings.env_remove.push(name.into());
        self
    }

    /// The variables [`without_env`](Self::without_env) withholds from a stdio server.
    pub fn withheld_env(&self) -> &[String] {
        &self.settings.env_remove
    }

    /// Run a stdio server under `sandbox`. By default — a client made with [`McpClient::new`]
    /// as one made from an mcpServers config entry without a `"sandbox"` key — a stdio server
    /// runs under [`SandboxPolicy::for_mcp_servers`]: `workspace-write` in its `cwd` (or the
    /// current directory) and in the existing directories its arguments name, network on.
    /// Unsandboxed only by choice: `with_sandbox_policy(SandboxPolicy::full())`. Where the
    /// kernel cannot enforce the policy, or no helper program is found
    /// ([`SandboxHelper::discover`]), `connect` fails instead of starting it unsandboxed.
    ///
    /// [`SandboxPolicy::for_mcp_servers`]: crate::tools::sandbox::SandboxPolicy::for_mcp_servers
    /// [`SandboxHelper::discover`]: crate::tools::sandbox::SandboxHelper::discover
    pub fn with_sandbox(mut self, sandbox: crate::tools::sandbox::Sandbox) -> Self {
        self.settings.sandbox = sandbox;
        self
    }

    /// Run a stdio server under `policy` (keeping the sandbox's helper and probe).
    pub fn with_sandbox_policy(mut self, policy: crate::tools::sandbox::SandboxPolicy) -> Self {
        self.settings.sandbox = self.settings.sandbox.clone().with_policy(policy);
        self
    }

    /// Restricted mode for this server (`true`): its sandbox becomes `read-only` with the
    /// network off, whatever its policy says — as for every command in restricted mode. A
    /// server that needs to write or to reach the network then fails, saying why; `false`
    /// changes nothing.
    pub fn with_restricted_sandbox(mut self, restricted: bool) -> Self {
        if restricted {
            let policy = self.settings.sandbox.policy().clone().restricted(true);
            self.settings.sandbox = self.settings.sandbox.clone().with_policy(policy);
        }
        self
    }

    /// Apply the sandbox with `helper` (e.g. the host program on a leading argument).
    pub fn with_sandbox_helper(mut self, helper: crate::tools::sandbox::SandboxHelper) -> Self {
        self.settings.sandbox = self.settings.sandbox.clone().with_helper(helper);
        self
    }

    /// The sandbox a stdio server runs in.
    pub fn sandbox(&self) -> &crate::tools::sandbox::Sandbox {
        &self.settings.sandbox
    }

    /// Run a stdio server in `dir`.
    pub fn with_cwd(mut self, dir: impl Into<PathBuf>) -> Self {
        self.settings.cwd = Some(dir.into());
        self
    }

    /// Ask for another protocol version than [`DEFAULT_PROTOCOL_VERSION`] (e.g. `2025-06-18`).
    pub fn with_protocol_version(mut self, version: impl Into<String>) -> Self {
        self.settings.protocol_version = version.into();
        self
    }

    /// The cache hint of the last `tools/list` (`None` when the server gave none, as servers
    /// before 2026-07-28 do). A listing with a `ttlMs` is reused until it runs out.
    pub fn tools_cache_hint(&self) -> Option<crate::tools::mcp::McpCacheHint> {
        self.shared.cache.hint()
    }

    /// Which protocol generation to speak (default [`McpNegotiation::Auto`]: over HTTP
    /// 2026-07-28 with a server that answers `server/discover`, the `initialize` handshake with
    /// the rest; over stdio the handshake).
    pub fn with_negotiation(mut self, negotiation: McpNegotiation) -> Self {
        self.settings.negotiation = negotiation;
        self
    }

    /// The permissions of tools whose annotations say neither `readOnlyHint` nor
    /// `destructiveHint` (default: empty, which means the spec's defaults: such a tool counts as
    /// writing and destructive, `Write` + `Delete`). `Network` is added to every tool that does
    /// not say `openWorldHint: false` (the spec's default is true). See [`McpToolAdapter`] for
    /// how annotations map to permissions.
    pub fn with_default_permissions(mut self, permissions: Vec<Permission>) -> Self {
        self.rule.default = permissions;
        self
    }

    /// Whether the server's tool annotations count (default: true). With `false` every tool
    /// counts as unannotated — writing, destructive, open-world (or the
    /// [default permissions](Self::with_default_permissions)) — whatever the server claims:
    /// for a server whose hints you do not believe.
    ///
    /// ```
    /// use agcore::tools::Permission;
    /// use agcore::tools::mcp::{McpClient, McpTransport};
    ///
    /// let client = McpClient::new("time", McpTransport::stdio("mcp-server-time", Vec::<String>::new()))
    ///     .with_trusted_annotations(false)
    ///     .with_tool_permissions("get_current_time", vec![Permission::Read]);
    /// assert!(!client.trusts_annotations());
    /// ```
    pub fn with_trusted_annotations(mut self, trust: bool) -> Self {
        self.rule.trust_annotations = trust;
        self
    }

    /// The exact permissions of the tool `tool` (its name on the server), whatever its
    /// annotations say — e.g. `Read` for an unannotated tool you know only reads.
    pub fn with_tool_permissions(
        mut self,
        tool: impl Into<String>,
        permissions: Vec<Permission>,
    ) -> Self {
        self.rule.per_tool.insert(tool.into(), permissions);
        self
    }

    /// Whether the server's tool annotations count ([`with_trusted_annotations`](Self::with_trusted_annotations)).
    pub fn trusts_annotations(&self) -> bool {
        self.rule.trust_annotations
    }

    /// How [`into_tools`](Self::into_tools) names the adapters (default: the raw tool name).
    pub fn with_naming(mut self, naming: McpToolNaming) -> Self {
        self.naming = naming;
        self
    }

    /// Try a server that fails to start again, by `retry` (default: no retries). A program that
    /// cannot be started at all (not found) is not retried. See [`McpRetry`].
    pub fn with_startup_retry(mut self, retry: McpRetry) -> Self {
        self.settings.startup = retry;
        self
    }

    /// Start a server that died (a crashed stdio process, a closed connection) again on the
    /// next call, at most `restarts` times until the next `connect()` (default 0: a dead server
    /// stays dead until `connect()`). The call in flight when it died fails with how it ended;
    /// the restarted server's tools are listed again (adapters keep working).
    pub fn with_restarts(mut self, restarts: u32) -> Self {
        self.settings.restarts = restarts;
        self
    }

    /// How many times the server was restarted since the last `connect()`.
    pub fn restarts(&self) -> u32 {
        self.shared.restarts.load(Ordering::Relaxed)
    }

    /// How many attempts the last `connect()` made (1 without retries; 0 before any).
    pub fn connect_attempts(&self) -> u32 {
        self.shared.attempts.load(Ordering::Relaxed)
    }

    /// Register only the tools `filter` lets through (`include` / `exclude` lists of tool
    /// names on the server, `*` as a wildcard). The others are listed by
    /// [`skipped_tools`](Self::skipped_tools) with the rule that left them out. Applies from
    /// the next listing (`connect()`, `notifications/tools/list_changed`).
    ///
    /// ```
    /// use agcore::tools::mcp::{McpClient, McpToolFilter, McpTransport};
    ///
    /// let client = McpClient::new("everything", McpTransport::stdio("npx", ["server-everything"]))
    ///     .with_tool_filter(McpToolFilter::default().exclude(["get_env"]));
    /// assert!(!client.tool_filter().allows("get_env"));
    /// ```
    pub fn with_tool_filter(self, filter: McpToolFilter) -> Self {
        self.shared.cache.set_filter(filter);
        self
    }

    /// The `include` / `exclude` lists ([`with_tool_filter`](Self::with_tool_filter)).
    pub fn tool_filter(&self) -> McpToolFilter {
        self.shared.cache.filter()
    }

    /// Call `callback` for every progress notification of this server.
    pub fn with_progress_callback(
        mut self,
        callback: impl Fn(McpProgress) + Send + Sync + 'static,
    ) -> Self {
        self.settings.progress = Some(Arc::new(callback));
        self
    }

    /// Answer the server's `elicitation/create` requests with `elicitor` (and declare the
    /// capability). Without one, elicitation is not declared and any request is declined
    /// (logged). Takes effect at the next `connect()`.
    pub fn with_elicitor(mut self, elicitor: Arc<dyn Elicitor>) -> Self {
        self.settings.elicitor = Some(elicitor);
        self
    }

    /// Answer the server's `sampling/createMessage` requests with `sampler` (and declare the
    /// capability). Without one, sampling is not declared and any request is refused (logged).
    /// Takes effect at the next `connect()`.
    pub fn with_sampler(mut self, sampler: Arc<dyn Sampler>) -> Self {
        self.settings.sampler = Some(sampler);
        self
    }

    /// Offer `roots` (e.g. the workspace root) as `roots/list` and declare the capability.
    /// Takes effect at the next `connect()`; change them later with [`McpClient::set_roots`].
    pub fn with_roots(self, roots: Vec<PathBuf>) -> Self {
        self.settings.roots.set(roots);
        self
    }

    /// Replace the roots and tell a connected server (`notifications/roots/list_changed`).
    pub async fn set_roots(&self, roots: Vec<PathBuf>) -> Result<(), ToolError> {
        self.settings.roots.set(roots);
        let Ok(conn) = self.shared.connection() else {
            return Ok(());
        };
        conn.peer
            .notify_roots_list_changed()
            .await
            .map_err(|error| {
                ToolError::McpError(format!(
                    "MCP server '{}': notifying the roots change failed: {error}",
                    self.settings.server
                ))
            })
    }

    /// The server's name.
    pub fn server_name(&self) -> &str {
        &self.settings.server
    }

    /// The transport.
    pub fn transport(&self) -> &McpTransport {
        &self.settings.transport
    }

    /// The default permissions of tools without annotations (empty: the spec's defaults).
    pub fn default_permissions(&self) -> &[Permission] {
        &self.rule.default
    }

    /// The naming of adapters.
    pub fn naming(&self) -> McpToolNaming {
        self.naming
    }

    /// Start the server (stdio) or open the session (HTTP) and run initialize → initialized,
    /// within the connect timeout; then fetch the tool list (every page, within the request
    /// timeout and the bounds [`MAX_LIST_PAGES`](crate::tools::mcp::MAX_LIST_PAGES) and
    /// [`MAX_LISTED_TOOLS`](crate::tools::mcp::MAX_LISTED_TOOLS)). A connected client is closed
    /// and started again. Tools that cannot be used (a schema that does not compile, a name
    /// listed twice) are left out and listed by [`skipped_tools`](Self::skipped_tools).
    ///
    /// # Errors
    /// [`ToolError::McpError`] when the server cannot start, exits or fails the handshake (with
    /// its exit status and last stderr lines), or when its tool list fails or breaks a bound
    /// ([`McpListError`](crate::tools::mcp::McpListError)); [`ToolError::McpTimeout`] when the
    /// handshake takes longer than the connect timeout or the listing longer than the request
    /// timeout. The server is shut down again on any of these.
    pub async fn connect(&mut self) -> Result<(), ToolError> {
        self.close_connection().await;
        self.shared.restarts.store(0, Ordering::Relaxed);
        self.shared.keep_settings(self.settings.clone());
        let conn = open_with_retries(&self.settings, &self.shared).await?;
        let has_tools = conn.info.has_tools;
        self.shared.replace(Arc::new(conn));
        // A server whose tools cannot be listed (a timeout, an error, an endless listing) is
        // of no use and is reported unavailable with the reason — not "connected, 0 tools".
        if has_tools && let Err(error) = self.shared.list(true).await {
            self.close_connection().await;
            return Err(error);
        }
        Ok(())
    }

    /// Whether the client is connected and the server still runs.
    pub fn is_connected(&self) -> bool {
        self.shared.is_connected()
    }

    /// What the server said about itself in `initialize` (`None` before `connect()`).
    pub fn server_info(&self) -> Option<McpServerInfo> {
        self.shared.connection().ok().map(|conn| conn.info.clone())
    }

    /// The process id of a stdio server (`None` before `connect()` or for HTTP).
    pub fn pid(&self) -> Option<u32> {
        self.shared.connection().ok().and_then(|conn| conn.pid())
    }

    /// The last lines a stdio server wrote to stderr (at most
    /// [`STDERR_TAIL_LINES`](crate::tools::mcp::STDERR_TAIL_LINES)).
    pub fn stderr_tail(&self) -> Vec<String> {
        self.shared
            .connection()
            .map(|conn| conn.stderr_lines())
            .unwrap_or_default()
    }

    /// The server's tools as definitions for the model, named as [`into_tools`](Self::into_tools)
    /// names them (all pages of `tools/list`; cached until the server sends
    /// `notifications/tools/list_changed`).
    ///
    /// # Errors
    /// [`ToolError::McpNotInitialized`] before `connect()`; otherwise as for requests.
    pub async fn list_tools(&mut self) -> Result<Vec<ToolDefinition>, ToolError> {
        self.handle().list_tools().await
    }

    /// Call the tool `name` with `args` (a JSON object, or `null` for none). See the module
    /// docs for how the result maps to a value.
    ///
    /// # Errors
    /// [`ToolError::ExecutionFailed`] with the server's text when the tool reports an error;
    /// [`ToolError::McpTimeout`] after the request timeout (the request is cancelled);
    /// [`ToolError::McpError`] when the server rejects the call or is gone;
    /// [`ToolError::McpNotInitialized`] before `connect()`.
    pub async fn call_tool(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        self.shared.call_tool(name, args).await
    }

    /// A cheap, clonable handle sharing this client's connection.
    pub fn handle(&self) -> McpHandle {
        McpHandle {
            shared: self.shared.clone(),
            naming: self.naming,
            rule: self.rule.clone(),
        }
    }

    /// Shut the server down (close its stdin, wait briefly, then SIGTERM and SIGKILL its
    /// process group) and wait until it is gone. Later calls fail with `McpNotInitialized`
    /// until `connect()`. Handles and adapters are disconnected too.
    pub async fn close(&mut self) -> Result<(), ToolError> {
        self.close_connection().await;
        Ok(())
    }

    async fn close_connection(&self) {
        self.shared.close().await;
    }

    /// The server's tools (as last listed) as registry tools. Call after `connect()` (which
    /// lists them) — a client that never listed yields none.
    pub fn into_tools(self) -> Vec<Arc<dyn BaseTool>> {
        self.adapters()
            .into_iter()
            .map(|adapter| Arc::new(adapter) as Arc<dyn BaseTool>)
            .collect()
    }

    /// The tools of the last listing that agcore left out, each with the reason (the rest are
    /// usable: one bad tool does not cost the server).
    pub fn skipped_tools(&self) -> Vec<SkippedMcpTool> {
        self.shared.cache.skipped()
    }

    /// The adapters [`into_tools`](Self::into_tools) returns, before erasing their type.
    pub fn adapters(&self) -> Vec<McpToolAdapter> {
        let handle = self.handle();
        let tools = self.shared.cache.get().unwrap_or_default();
        tools.iter().map(|tool| handle.adapter(tool)).collect()
    }

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

// The handle's methods that build adapters: here, with the façade, so the handle (which every
// adapter holds) does not depend on the adapters.
impl McpHandle {
    /// The tool definitions; see [`McpClient::list_tools`].
    pub async fn list_tools(&self) -> Result<Vec<ToolDefinition>, ToolError> {
        let tools = self.shared.list(false).await?;
        Ok(tools
            .iter()
            .map(|tool| definition_of(&self.adapter(tool)))
            .collect())
    }

    /// An adapter for `tool` with this client's naming and permission rule.
    pub(crate) fn adapter(&self, tool: &Tool) -> McpToolAdapter {
        McpToolAdapter::new(self.clone(), tool, self.naming, &self.rule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clients_and_handles_can_move_between_tasks() {
        fn send_sync<T: Send + Sync + 'static>() {}
        send_sync::<McpClient>();
        send_sync::<McpHandle>();
        send_sync::<McpToolAdapter>();
    }

    #[test]
    fn defaults_are_the_documented_ones() {
        let client = McpClient::new("s", McpTransport::stdio("x", Vec::<String>::new()));
        assert_eq!(client.settings.request_timeout, Duration::from_secs(30));
        assert_eq!(client.settings.connect_timeout, Duration::from_secs(60));
        assert_eq!(client.settings.protocol_version, "2025-11-25");
        assert_eq!(client.naming(), McpToolNaming::Raw);
        assert!(client.default_permissions().is_empty());
        assert!(!client.is_connected());
    }
}
