//! One live MCP session: open it (bounded), send requests (bounded, failing fast when the
//! server is gone), map rmcp's errors to [`ToolError`], close it.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::Peer;
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitationCapability, FormElicitationCapability,
    Implementation, ProtocolVersion, RootsCapabilities, SamplingCapability, TASKS_EXTENSION_ID,
    Tool, UrlElicitationCapability,
};
use rmcp::service::{
    ClientInitializeError, ClientLifecycleMode, ClientServiceExt, RoleClient, RunningService,
    ServiceError,
};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::tools::error::ToolError;
use crate::tools::mcp::MAX_MESSAGE_BYTES;
use crate::tools::mcp::answers::Answers;
use crate::tools::mcp::auth::{McpAuth, OAuthHttpClient};
use crate::tools::mcp::elicitation::Elicitor;
use crate::tools::mcp::handler::{Handler, ToolCache};
use crate::tools::mcp::listing::{ListFailure, McpCacheHint, list_bounded_with_hint};
use crate::tools::mcp::negotiation::McpNegotiation;
use crate::tools::mcp::pending_cancels::PendingCancels;
use crate::tools::mcp::progress::ProgressCallback;
use crate::tools::mcp::recovery::McpRetry;
use crate::tools::mcp::roots::Roots;
use crate::tools::mcp::sampling::Sampler;
use crate::tools::mcp::stdio::{self, ChildHandle, StdioSpec};
use crate::tools::mcp::subscriptions::Subscriptions;
use crate::tools::mcp::trace::{self, TraceHeaders};
use crate::tools::mcp::transport::McpTransport;

/// How long a failure message waits for the exit status of a server whose stdout closed.
const EXIT_STATUS_WAIT: Duration = Duration::from_millis(500);

/// Everything needed to open a session.
#[derive(Clone)]
pub(crate) struct Settings {
    pub server: Arc<str>,
    pub transport: McpTransport,
    pub env: Vec<(String, String)>,
    pub env_remove: Vec<String>,
    pub cwd: Option<PathBuf>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    pub protocol_version: String,
    /// Which protocol generation to speak (2026-07-28 when the server does).
    pub negotiation: McpNegotiation,
    pub progress: Option<ProgressCallback>,
    /// OAuth for an HTTP server (none: only the configured headers).
    pub auth: Option<McpAuth>,
    pub elicitor: Option<Arc<dyn Elicitor>>,
    pub roots: Arc<Roots>,
    pub sampler: Option<Arc<dyn Sampler>>,
    /// How a failed start is retried.
    pub startup: McpRetry,
    /// How many times a server that died is started again (0: never).
    pub restarts: u32,
    /// Subscribed resources and where their updates go.
    pub subscriptions: Arc<Subscriptions>,
    /// The OS sandbox a stdio server runs in.
    pub sandbox: crate::tools::sandbox::Sandbox,
}

/// Why a session could not be opened, and whether trying again may help.
pub(crate) struct OpenFailure {
    pub error: ToolError,
    /// The program could not be started at all (not found, not executable).
    pub permanent: bool,
}

impl From<ToolError> for OpenFailure {
    fn from(error: ToolError) -> Self {
        OpenFailure {
            error,
            permanent: false,
        }
    }
}

/// What agcore declares: elicitation (form, and URL when the elicitor supports it) only with an
/// elicitor; sampling only with a sampler; roots (with `listChanged`) only when some are
/// configured.
#[allow(deprecated)] // roots: deprecated by SEP-2577 for the 2026 protocol; released servers use it.
fn capabilities(settings: &Settings) -> ClientCapabilities {
    let mut capabilities = ClientCapabilities::default();
    if let Some(elicitor) = &settings.elicitor {
        let mut elicitation = ElicitationCapability::new()
            .with_form(FormElicitationCapability::new().with_schema_validation(true));
        if elicitor.supports_url() {
            elicitation = elicitation.with_url(UrlElicitationCapability::new());
        }
        capabilities.elicitation = Some(elicitation);
    }
    if settings.sampler.is_some() {
        capabilities.sampling = Some(SamplingCapability::default());
    }
    if settings.roots.is_enabled() {
        let mut roots = RootsCapabilities::default();
        roots.list_changed = Some(true);
        capabilities.roots = Some(roots);
    }
    // A `tools/call` follows a task the server makes of it (see `tasks.rs`); tasks are an
    // extension of the 2026 protocol, declared when the session is sure to be one.
    if crate::tools::mcp::negotiation::is_stateless_version(&settings.protocol_version)
        || settings.negotiation == McpNegotiation::Stateless
    {
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(TASKS_EXTENSION_ID.to_owned(), Default::default());
    }
    capabilities
}

/// The server's self-description from `initialize` or `server/discover`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct McpServerInfo {
    /// `serverInfo.name`.
    pub name: String,
    /// `serverInfo.version`.
    pub version: String,
    /// The negotiated protocol version.
    pub protocol_version: String,
    /// Whether the session is stateless (2026-07-28: `server/discover`, no `initialize`).
    pub stateless: bool,
    /// The server's `instructions`, if any.
    pub instructions: Option<String>,
    /// Whether the server offers tools.
    pub has_tools: bool,
    /// Whether the server offers resources.
    pub has_resources: bool,
    /// Whether it takes resource subscriptions (`resources/subscribe`).
    pub can_subscribe: bool,
    /// Whether the server offers prompts.
    pub has_prompts: bool,
    /// Whether the server declared the skills extension (SEP-2640,
    /// `io.modelcontextprotocol/skills`) — see [`skills`](crate::tools::mcp::skills).
    pub has_skills: bool,
}

/// A live session.
pub(crate) struct Connection {
    pub(crate) server: Arc<str>,
    pub(crate) peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    /// Fires when the server's stdout ends or the process exits (stdio only).
    closed: CancellationToken,
    child: Option<ChildHandle>,
    pub(crate) request_timeout: Duration,
    pub(crate) info: McpServerInfo,
    /// Where the session's client spans go.
    pub(crate) trace: trace::Peer,
    /// What answers the server's questions (also those of a multi-round-trip call).
    pub(crate) answers: Arc<Answers>,
    /// The `tasks/cancel` requests of dropped calls still in flight.
    pub(crate) cancels: PendingCancels,
}

impl Connection {
    /// Start the transport and run initialize → initialized within the connect timeout.
    pub(crate) async fn open(
        settings: &Settings,
        cache: Arc<ToolCache>,
    ) -> Result<Self, OpenFailure> {
        let server = settings.server.clone();
        let protocol_version: ProtocolVersion =
            serde_json::from_value(serde_json::Value::String(settings.protocol_version.clone()))
                .map_err(|error| {
                    ToolError::McpError(format!(
                        "MCP server '{server}': invalid protocol version '{}': {error}",
                        settings.protocol_version
                    ))
                })?;
        let peer = trace::Peer::of(&settings.transport);
        let span = peer.span(&server, "initialize", "");
        let answers = Arc::new(Answers {
            server: server.clone(),
            elicitor: settings.elicitor.clone(),
            sampler: settings.sampler.clone(),
            roots: settings.roots.clone(),
            progress: settings.progress.clone(),
            in_flight: Default::default(),
        });
        let mut handler = Handler {
            info: ClientConfig::new(
                capabilities(settings),
                Implementation::new("agcore", env!("CARGO_PKG_VERSION")),
            )
            .with_protocol_version(protocol_version.clone()),
            server: server.clone(),
            cache,
            progress: settings.progress.clone(),
            request_timeout: settings.request_timeout,
            answers: answers.clone(),
            subscriptions: settings.subscriptions.clone(),
        };
        handler.info.meta = trace::meta(&span);
        let stdio = matches!(settings.transport, McpTransport::Stdio { .. });
        let lifecycle = settings.negotiation.lifecycle(&protocol_version, stdio);
        let fallback = settings.negotiation.http_fallback(&protocol_version);
        let closed = CancellationToken::new();
        let opened = async {
            match &settings.transport {
                McpTransport::Stdio { command, args } => {
                    let spec = StdioSpec {
                        command: command.clone(),
                        args: args.clone(),
                        env: settings.env.clone(),
                        env_remove: settings.env_remove.clone(),
                        cwd: settings.cwd.clone(),
                        sandbox: settings.sandbox.clone(),
                    };
                    let (service, child) =
                        open_stdio(settings, &spec, handler, lifecycle, &closed).await?;
                    Ok((service, Some(child)))
                }
                McpTransport::Http { url, headers } => {
                    let lifecycles = Lifecycles {
                        first: lifecycle,
                        fallback,
                    };
                    Ok((
                        open_http(settings, url, headers, handler, lifecycles, &peer).await?,
                        None,
                    ))
                }
            }
        }
        .instrument(span.clone())
        .await;
        peer.record_session(&span);
        let (service, child) = opened.inspect_err(|failure: &OpenFailure| {
            trace::record_error(&span, &failure.error);
        })?;
        drop(span);
        let info = match service.peer_info() {
            Some(init) => McpServerInfo {
                name: init
                    .server_info
                    .as_ref()
                    .map(|i| i.name.clone())
                    .unwrap_or_default(),
                version: init
                    .server_info
                    .as_ref()
                    .map(|i| i.version.clone())
                    .unwrap_or_default(),
                protocol_version: init.protocol_version.to_string(),
                stateless: !init.protocol_version.has_initialize(),
                instructions: init.instructions.clone(),
                has_tools: init.capabilities.tools.is_some(),
                has_resources: init.capabilities.resources.is_some(),
                can_subscribe: init
                    .capabilities
                    .resources
                    .as_ref()
                    .and_then(|resources| resources.subscribe)
                    .unwrap_or(false),
                has_prompts: init.capabilities.prompts.is_some(),
                has_skills: init.capabilities.supports_skills(),
            },
            None => McpServerInfo {
                name: server.to_string(),
                version: String::new(),
                protocol_version: settings.protocol_version.clone(),
                stateless: false,
                instructions: None,
                has_tools: true,
                has_resources: false,
                can_subscribe: false,
                has_prompts: false,
                has_skills: false,
            },
        };
        Ok(Connection {
            server,
            peer: service.peer().clone(),
            service: Mutex::new(Some(service)),
            closed,
            child,
            request_timeout: settings.request_timeout,
            info,
            trace: peer,
            answers,
            cancels: PendingCancels::default(),
        })
    }

    /// Whether the session still works.
    pub(crate) fn is_alive(&self) -> bool {
        !self.closed.is_cancelled() && !self.peer.is_transport_closed()
    }

    /// The child's process id (stdio only).
    pub(crate) fn pid(&self) -> Option<u32> {
        self.child.as_ref().and_then(ChildHandle::pid)
    }

    /// The server's last stderr lines (stdio only).
    pub(crate) fn stderr_lines(&self) -> Vec<String> {
        self.child
            .as_ref()
            .map(|child| child.stderr().lines())
            .unwrap_or_default()
    }

    /// Run one request within the request timeout. `method` and `target` name it in errors
    /// (`tools/call`, `'echo'`). A timed-out request is dropped, which makes rmcp send
    /// `notifications/cancelled`.
    ///
    /// Fails as soon as the server is gone without a per-call watch: when its stdout ends,
    /// rmcp's loop stops and drops every pending responder (`TransportClosed`, mapped to the
    /// exit status and stderr tail); when the process exits first, the supervisor kills its
    /// process group, which closes stdout.
    pub(crate) async fn request<T>(
        &self,
        method: &str,
        target: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ToolError> {
        self.request_in(self.span(method, target), method, target, request)
            .await
    }

    /// The client span of a request (to put its `traceparent` in the params first).
    pub(crate) fn span(&self, method: &str, target: &str) -> tracing::Span {
        self.trace.span(&self.server, method, target)
    }

    /// [`Connection::request`] in `span`, which records its failure.
    pub(crate) async fn request_in<T>(
        &self,
        span: tracing::Span,
        method: &str,
        target: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ToolError> {
        let result = self
            .send(method, target, request)
            .instrument(span.clone())
            .await;
        if let Err(error) = &result {
            trace::record_error(&span, error);
        }
        result
    }

    async fn send<T>(
        &self,
        method: &str,
        target: &str,
        request: impl Future<Output = Result<T, ServiceError>>,
    ) -> Result<T, ToolError> {
        if self.closed.is_cancelled() {
            return Err(self.failure(method, target).await);
        }
        let limit = self.request_timeout;
        let _counted = self.answers.in_flight.request();
        match tokio::time::timeout(limit, request).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(self.map_error(method, target, error).await),
            Err(_) => Err(ToolError::McpTimeout(format!(
                "MCP server '{}' did not answer {method}{} within {}; the request was cancelled",
                self.server,
                quoted(target),
                seconds(limit)
            ))),
        }
    }

    /// Every page of `tools/list`, within the request timeout and the listing bounds
    /// ([`McpListError`](crate::tools::mcp::McpListError)).
    pub(crate) async fn list_tools(&self) -> Result<Vec<Tool>, ToolError> {
        self.list_tools_with_hint().await.map(|(tools, _)| tools)
    }

    /// [`Connection::list_tools`] with the listing's cache hint.
    pub(crate) async fn list_tools_with_hint(
        &self,
    ) -> Result<(Vec<Tool>, Option<McpCacheHint>), ToolError> {
        // One span for the listing, all its pages.
        let span = self.span("tools/list", "");
        let meta = trace::meta(&span);
        let listed = self.list_pages(meta).instrument(span.clone()).await;
        if let Err(error) = &listed {
            trace::record_error(&span, error);
        }
        listed
    }

    async fn list_pages(
        &self,
        meta: Option<rmcp::model::RequestMetaObject>,
    ) -> Result<(Vec<Tool>, Option<McpCacheHint>), ToolError> {
        if self.closed.is_cancelled() {
            return Err(self.failure("tools/list", "").await);
        }
        let limit = self.request_timeout;
        let pages = list_bounded_with_hint(&self.server, |params| {
            let params = params.map(|mut params| {
                params.meta.clone_from(&meta);
                params
            });
            self.peer.list_tools(params)
        });
        match tokio::time::timeout(limit, pages).await {
            Ok(Ok(tools)) => Ok(tools),
            Ok(Err(ListFailure::Limit(error))) => Err(error.into()),
            Ok(Err(ListFailure::Request(error))) => {
                Err(self.map_error("tools/list", "", error).await)
            }
            Err(_) => Err(ToolError::McpTimeout(format!(
                "MCP server '{}' did not finish tools/list within {}; the request was cancelled",
                self.server,
                seconds(limit)
            ))),
        }
    }

    async fn map_error(&self, method: &str, target: &str, error: ServiceError) -> ToolError {
        let server = &self.server;
        let target_q = quoted(target);
        // Refused before sending: the session is fine, only this request fails.
        if let ServiceError::TransportSend(sent) = &error
            && let Some(bytes) = stdio::refused_size(sent)
        {
            return ToolError::McpMessageTooLarge {
                server: server.to_string(),
                method: method.to_owned(),
                bytes,
                limit: MAX_MESSAGE_BYTES,
            };
        }
        match error {
            ServiceError::McpError(data) if data.code.0 == stdio::OVERSIZED_CODE => {
                ToolError::McpError(format!(
                    "MCP server '{server}': {method}{target_q} failed: {}",
                    data.message
                ))
            }
            ServiceError::McpError(data) => ToolError::McpError(format!(
                "MCP server '{server}' rejected {method}{target_q}: {} (code {})",
                data.message, data.code.0
            )),
            ServiceError::Timeout { timeout } => ToolError::McpTimeout(format!(
                "MCP server '{server}' did not answer {method}{target_q} within {}",
                seconds(timeout)
            )),
            ServiceError::Cancelled { reason } if method == "tools/call" => {
                tracing::debug!(target: "agcore::mcp", %server, ?reason, "request cancelled");
                ToolError::Cancelled(target.to_owned())
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_)
                if self.child.is_some() =>
            {
                self.failure(method, target).await
            }
            other => ToolError::McpError(format!(
                "MCP server '{server}': {method}{target_q} failed: {other}"
            )),
        }
    }

    /// The error for a request made to a server that is gone: how it ended and its last
    /// stderr lines.
    async fn failure(&self, method: &str, target: &str) -> ToolError {
        match &self.child {
            Some(child) => ended(&self.server, child, &format!("{method}{}", quoted(target))).await,
            None => ToolError::McpError(format!(
                "MCP server '{}': the connection closed during {method}{}",
                self.server,
                quoted(target)
            )),
        }
    }

    /// How a session that is gone ended: `MCP server 'x' exited (exit status: 3); last stderr
    /// lines: ...` for a stdio server.
    pub(crate) async fn gone_error(&self) -> String {
        match &self.child {
            Some(child) => format!(
                "MCP server '{}' {}{}",
                self.server,
                child.describe_end(EXIT_STATUS_WAIT).await,
                child.stderr().quote()
            ),
            None => format!("MCP server '{}': the connection closed", self.server),
        }
    }

    /// Close the session: stop rmcp's loop (which closes the server's stdin), then wait for
    /// the process to exit — SIGTERM, then SIGKILL, if it does not.
    pub(crate) async fn close(&self) {
        // A task's `tasks/cancel` sent as its call was dropped goes out before the session ends.
        self.cancels.settle().await;
        let service = self
            .service
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut service) = service {
            let _ = service.close_with_timeout(Duration::from_secs(5)).await;
        }
        if let Some(child) = &self.child {
            child.shutdown().await;
        }
        self.closed.cancel();
    }
}

type Service = RunningService<RoleClient, Handler>;

/// Spawn a stdio server and run the handshake: bounded by the connect timeout, failing at once
/// (exit status, stderr tail) when the server exits or closes stdout first.
async fn open_stdio(
    settings: &Settings,
    spec: &StdioSpec,
    handler: Handler,
    lifecycle: ClientLifecycleMode,
    closed: &CancellationToken,
) -> Result<(Service, ChildHandle), OpenFailure> {
    let server = &settings.server;
    let (transport, child) =
        stdio::spawn(server, spec, closed.clone()).map_err(|error| OpenFailure {
            error: ToolError::McpError(format!(
                "MCP server '{server}': cannot start `{}`: {error}",
                settings.transport.describe()
            )),
            permanent: true,
        })?;
    let limit = settings.connect_timeout;
    let outcome = tokio::select! {
        outcome = tokio::time::timeout(limit, handler.serve_with_lifecycle(transport, lifecycle)) => outcome,
        () = closed.cancelled() => return Err(ended(server, &child, "initialize").await.into()),
    };
    match outcome {
        Ok(Ok(service)) => Ok((service, child)),
        Ok(Err(error)) if closed.is_cancelled() => {
            tracing::debug!(target: "agcore::mcp", %server, %error, "initialize failed");
            Err(ended(server, &child, "initialize").await.into())
        }
        Ok(Err(error)) => {
            // A server that exits at once can fail our first write (broken pipe) before its
            // stdout is seen to close: say how it ended, with its stderr, not the pipe error.
            if child.exit_status(EXIT_STATUS_WAIT).await.is_some() {
                tracing::debug!(target: "agcore::mcp", %server, %error, "initialize failed");
                return Err(ended(server, &child, "initialize").await.into());
            }
            Err(ToolError::McpError(format!(
                "MCP server '{server}' failed to initialize: {error}{}",
                child.stderr().quote()
            ))
            .into())
        }
        Err(_) => Err(ToolError::McpTimeout(format!(
            "MCP server '{server}' did not finish initialize within {}{}",
            seconds(limit),
            child.stderr().quote()
        ))
        .into()),
    }
}

/// The lifecycle to open an HTTP session with, and the one to try over a fresh connection
/// when that fails short of an authorization failure.
struct Lifecycles {
    first: ClientLifecycleMode,
    fallback: Option<ClientLifecycleMode>,
}

/// Open a streamable HTTP session and run the handshake (`server/discover` or `initialize`)
/// within the connect timeout, both attempts together.
async fn open_http(
    settings: &Settings,
    url: &str,
    headers: &BTreeMap<String, String>,
    handler: Handler,
    lifecycles: Lifecycles,
    peer: &trace::Peer,
) -> Result<Service, OpenFailure> {
    let server = &settings.server;
    let config = http_config(server, url, headers)?;
    let limit = settings.connect_timeout;
    let http = crate::tools::mcp::http_client::mcp_http_client().map_err(|error| {
        ToolError::McpError(format!(
            "MCP server '{server}': could not build the HTTP client: {error}"
        ))
    })?;
    let oauth = settings
        .auth
        .as_ref()
        .map(|auth| OAuthHttpClient::new(url, auth.clone(), http.clone()));
    let authorization = oauth.as_ref().map(OAuthHttpClient::session);
    let serve = |lifecycle: ClientLifecycleMode| {
        let handler = handler.clone();
        let config = config.clone();
        let oauth = oauth.clone();
        let http = http.clone();
        async move {
            match oauth {
                Some(oauth) => {
                    let client = TraceHeaders::new(oauth, peer);
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve_with_lifecycle(transport, lifecycle).await
                }
                None => {
                    let client = TraceHeaders::new(http, peer);
                    let transport = StreamableHttpClientTransport::with_client(client, config);
                    handler.serve_with_lifecycle(transport, lifecycle).await
                }
            }
        }
    };
    let attempts = async {
        let first = serve(lifecycles.first).await;
        match (first, lifecycles.fallback) {
            // A legacy server can refuse `server/discover` at the HTTP level (no session):
            // it gets the handshake it knows on a fresh connection. An authorization failure
            // is not a generation mismatch.
            (Err(error), Some(fallback))
                if !error.is_authorization_required()
                    && authorization
                        .as_ref()
                        .and_then(|session| session.failure())
                        .is_none() =>
            {
                tracing::debug!(target: "agcore::mcp", %server, %error, "server/discover failed; trying initialize");
                serve(fallback).await.map_err(|fallback| {
                    ClientInitializeError::LegacyFallbackFailed {
                        discover: Box::new(error),
                        fallback: Box::new(fallback),
                    }
                })
            }
            (outcome, _) => outcome,
        }
    };
    let outcome = tokio::time::timeout(limit, attempts).await;
    // A failed authorization is final: trying again would start a new one (a new browser
    // window to wait for) without the user asking.
    if let Ok(Err(_)) = &outcome
        && let Some(reason) = authorization.and_then(|session| session.failure())
    {
        return Err(OpenFailure {
            error: ToolError::McpAuthorization {
                server: server.to_string(),
                reason,
            },
            permanent: true,
        });
    }
    match outcome {
        Ok(Ok(service)) => Ok(service),
        Ok(Err(error)) => Err(ToolError::McpError(format!(
            "MCP server '{server}' at {url} failed to initialize: {error}"
        ))
        .into()),
        Err(_) => Err(ToolError::McpTimeout(format!(
            "MCP server '{server}' at {url} did not finish initialize within {}",
            seconds(limit)
        ))
        .into()),
    }
}

/// `MCP server 'x' exited (exit status: 3) during initialize; last stderr lines: ...`.
async fn ended(server: &str, child: &ChildHandle, during: &str) -> ToolError {
    let end = child.describe_end(EXIT_STATUS_WAIT).await;
    ToolError::McpError(format!(
        "MCP server '{server}' {end} during {during}{}",
        child.stderr().quote()
    ))
}

fn http_config(
    server: &str,
    url: &str,
    headers: &BTreeMap<String, String>,
) -> Result<StreamableHttpClientTransportConfig, ToolError> {
    use reqwest::header::{HeaderName, HeaderValue};
    // A session the server forgot (HTTP 404) is re-initialised and the failed request retried
    // once — rmcp's default, set here so agcore does not lose it if that default changes.
    let mut config =
        StreamableHttpClientTransportConfig::with_uri(url).reinit_on_expired_session(true);
    let mut custom = HashMap::new();
    for (name, value) in headers {
        if name.eq_ignore_ascii_case("authorization")
            && let Some(token) = value.strip_prefix("Bearer ")
        {
            config = config.auth_header(token);
            continue;
        }
        let invalid = |what: &str| {
            ToolError::McpError(format!(
                "MCP server '{server}': invalid HTTP header {what} '{name}'"
            ))
        };
        let header_name = HeaderName::from_bytes(name.as_bytes()).map_err(|_| invalid("name"))?;
        let header_value = HeaderValue::from_str(value).map_err(|_| invalid("value for"))?;
        custom.insert(header_name, header_value);
    }
    Ok(config.custom_headers(custom))
}

fn quoted(target: &str) -> String {
    if target.is_empty() {
        String::new()
    } else {
        format!(" '{target}'")
    }
}

fn seconds(limit: Duration) -> String {
    let secs = limit.as_secs_f64();
    if secs.fract() == 0.0 {
        format!("{secs:.0}s")
    } else {
        format!("{secs:.3}s")
    }
}
