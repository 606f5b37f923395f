//! `Shared`: the state a client, its handles and its adapters share — the connection, the tool
//! cache, the subscriptions — and how it recovers: a server that fails to start is tried again
//! (`open_with_retries`, by [`McpRetry`](crate::tools::mcp::McpRetry)); one that died is started
//! again on the next call (`Shared::live`).

// resources/subscribe is legacy-only for the 2026 draft; every released protocol version has it.
#![allow(deprecated)]

use crate::vocab::trace_context::otel_int;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, PoisonError, RwLock};

use rmcp::model::{CallToolRequestParams, SubscribeRequestParams, Tool};
use serde_json::Value;

use crate::tools::context::{MCP_META_KEY, ToolContext};
use crate::tools::error::ToolError;
use crate::tools::mcp::connection::{Connection, OpenFailure, Settings};
use crate::tools::mcp::handler::ToolCache;
use crate::tools::mcp::mrtr;
use crate::tools::mcp::output_schema::check_structured_content;
use crate::tools::mcp::result::call_result_to_value;
use crate::tools::mcp::subscriptions::Subscriptions;
use crate::tools::mcp::trace;

/// What a client, its handles and its adapters share.
pub(crate) struct Shared {
    pub(crate) server: Arc<str>,
    conn: RwLock<Option<Arc<Connection>>>,
    pub(crate) cache: Arc<ToolCache>,
    /// The settings of the last `connect()`, for restarts.
    settings: RwLock<Option<Settings>>,
    /// One restart at a time.
    pub(crate) restart_lock: tokio::sync::Mutex<()>,
    /// Restarts since the last `connect()`.
    pub(crate) restarts: AtomicU32,
    /// Attempts of the last `connect()`.
    pub(crate) attempts: AtomicU32,
    /// Subscribed resources and their updates.
    pub(crate) subscriptions: Arc<Subscriptions>,
}

impl Shared {
    /// Nothing connected yet, for the server `server`.
    pub(crate) fn new(server: Arc<str>, subscriptions: Arc<Subscriptions>) -> Self {
        Shared {
            server,
            conn: RwLock::new(None),
            cache: ToolCache::new(),
            settings: RwLock::new(None),
            restart_lock: tokio::sync::Mutex::new(()),
            restarts: AtomicU32::new(0),
            attempts: AtomicU32::new(0),
            subscriptions,
        }
    }

    /// Keep `settings` (those of this `connect()`) for restarts.
    pub(crate) fn keep_settings(&self, settings: Settings) {
        *self
            .settings
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(settings);
    }

    /// The settings to restart with, when restarts are allowed.
    pub(crate) fn restart_settings(&self) -> Option<Settings> {
        self.settings
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .filter(|settings| settings.restarts > 0)
    }

    /// Put a new or restarted connection in place.
    pub(crate) fn replace(&self, conn: Arc<Connection>) {
        *self.conn.write().unwrap_or_else(PoisonError::into_inner) = Some(conn);
    }

    pub(crate) fn connection(&self) -> Result<Arc<Connection>, ToolError> {
        self.conn
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .ok_or_else(|| {
                ToolError::McpNotInitialized(format!(
                    "MCP server '{}' is not connected; call connect() first",
                    self.server
                ))
            })
    }

    pub(crate) fn is_connected(&self) -> bool {
        self.connection().is_ok_and(|conn| conn.is_alive())
    }

    /// Take the connection out (calls now fail as not connected) and close it gracefully.
    pub(crate) async fn close(&self) {
        let old = self
            .conn
            .write()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        self.cache.invalidate();
        if let Some(old) = old {
            old.close().await;
        }
    }

    pub(crate) async fn call_tool(&self, name: &str, args: Value) -> Result<Value, ToolError> {
        let arguments = match args {
            Value::Object(map) => Some(map),
            Value::Null => None,
            other => {
                return Err(ToolError::InvalidArguments(
                    name.to_owned(),
                    format!("MCP tool arguments must be a JSON object, not {other}"),
                ));
            }
        };
        let conn = self.live().await?;
        let span = conn.span("tools/call", name);
        let mut params = CallToolRequestParams::new(name.to_owned());
        params.arguments = arguments;
        params.meta = trace::meta(&span);
        if let Some(context) = ToolContext::current() {
            // The server (or what it calls) can recognise a call repeated after a crash.
            params.meta.get_or_insert_with(Default::default).0.0.insert(
                MCP_META_KEY.to_owned(),
                Value::String(context.idempotency_key().to_owned()),
            );
        }
        // The server's progress on this call updates the call's card (when it can only be
        // about this call: see `call_progress`).
        let _card = conn.answers.in_flight.call();
        let result = mrtr::call_tool(&conn, span.clone(), params).await?;
        if result.is_error == Some(true) {
            trace::record_error_type(&span, "tool_error");
        }
        if result.structured_content.is_some()
            && let Some(tools) = self.cache.get()
            && let Some(tool) = tools.iter().find(|tool| tool.name == name)
        {
            check_structured_content(tool, &result)?;
        }
        call_result_to_value(name, result)
    }

    /// The tool list: from the cache unless `refresh`, else all pages from the server.
    pub(crate) async fn list(&self, refresh: bool) -> Result<Arc<Vec<Tool>>, ToolError> {
        // A listing with a `ttlMs` is reused until it runs out, then asked for again.
        if !refresh && let Some(tools) = self.cache.fresh() {
            return Ok(tools);
        }
        let conn = self.live().await?;
        let (tools, hint) = conn.list_tools_with_hint().await?;
        let tools = self.cache.store(&self.server, tools);
        self.cache.set_hint(hint);
        Ok(tools)
    }

    /// The connection for the next request: the current one while it lives; once the server
    /// has died, a new one — at most `restarts` times over the client's life (until the next
    /// `connect()`), one restart at a time however many calls notice.
    pub(crate) async fn live(&self) -> Result<Arc<Connection>, ToolError> {
        let conn = self.connection()?;
        if conn.is_alive() {
            return Ok(conn);
        }
        let Some(settings) = self.restart_settings() else {
            return Ok(conn); // no restarts: the request fails with how the server ended
        };
        let _one_at_a_time = self.restart_lock.lock().await;
        let current = self.connection()?;
        if !Arc::ptr_eq(&current, &conn) && current.is_alive() {
            return Ok(current); // another call restarted it meanwhile
        }
        let done = self.restarts.load(Ordering::Relaxed);
        if done >= settings.restarts {
            let ended = current.gone_error().await;
            return Err(ToolError::McpError(format!(
                "{ended}; it was restarted {done} time(s) already, the limit — call connect() \
                 to start it again"
            )));
        }
        self.restarts.store(done + 1, Ordering::Relaxed);
        let ended = current.gone_error().await;
        tracing::warn!(target: "agcore::mcp", server = %self.server, restart = otel_int(done + 1), limit = otel_int(settings.restarts), "restarting: {ended}");
        current.close().await;
        let fresh = Connection::open(&settings, self.cache.clone())
            .await
            .map_err(|failure| {
                ToolError::McpError(format!(
                    "MCP server '{}' could not be restarted (restart {} of {}): {}",
                    self.server,
                    done + 1,
                    settings.restarts,
                    failure.error
                ))
            })?;
        let fresh = Arc::new(fresh);
        if fresh.info.has_tools {
            let tools = fresh.list_tools().await?;
            self.cache.store(&self.server, tools);
        }
        renew(&self.subscriptions, &fresh).await;
        self.replace(fresh.clone());
        Ok(fresh)
    }
}

/// Open a connection, retrying by `settings.startup` on failures that may pass.
pub(crate) async fn open_with_retries(
    settings: &Settings,
    shared: &Shared,
) -> Result<Connection, ToolError> {
    let retry = settings.startup;
    let mut attempt = 0;
    loop {
        shared.attempts.store(attempt + 1, Ordering::Relaxed);
        match Connection::open(settings, shared.cache.clone()).await {
            Ok(conn) => return Ok(conn),
            Err(OpenFailure { error, permanent }) => {
                if permanent || attempt >= retry.retries {
                    return Err(if attempt == 0 {
                        error
                    } else {
                        tried(error, attempt + 1)
                    });
                }
                let delay = retry.delay(attempt);
                tracing::warn!(
                    target: "agcore::mcp",
                    server = %settings.server,
                    attempt = i64::from(attempt + 1),
                    retry_in_ms = otel_int(delay.as_millis()),
                    "{error}"
                );
                tokio::time::sleep(delay).await;
                attempt += 1;
            }
        }
    }
}

/// `error`, saying how many attempts it took.
fn tried(error: ToolError, attempts: u32) -> ToolError {
    let note = |message: String| format!("{message} (after {attempts} attempts)");
    match error {
        ToolError::McpError(message) => ToolError::McpError(note(message)),
        ToolError::McpTimeout(message) => ToolError::McpTimeout(note(message)),
        other => other,
    }
}

/// Subscribe a new session (after a restart) to every remembered URI.
async fn renew(subscriptions: &Subscriptions, conn: &Connection) {
    for uri in subscriptions.uris() {
        if let Err(error) = subscribe(conn, &uri).await {
            tracing::warn!(target: "agcore::mcp", server = %conn.server, uri, %error, "renewing a resource subscription failed");
        }
    }
}

/// `resources/subscribe` to `uri` on `conn`.
pub(crate) async fn subscribe(conn: &Connection, uri: &str) -> Result<(), ToolError> {
    conn.request(
        "resources/subscribe",
        uri,
        conn.peer.subscribe(SubscribeRequestParams::new(uri)),
    )
    .await
}
