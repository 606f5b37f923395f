//! MCP client spans on the OpenTelemetry MCP conventions, and W3C trace context for the
//! server: one `client` span per request agcore sends (`{mcp.method.name} {target}`, the
//! target a tool or prompt name; `mcp.method.name`, `mcp.session.id` on streamable HTTP,
//! `gen_ai.tool.name` for `tools/call`, `mcp.resource.uri` for `resources/read`,
//! `network.transport` (`pipe` for stdio, `tcp` for HTTP), `server.address`/`server.port`,
//! `error.type` on failure). A `tools/call` made by the tool loop runs inside its
//! `execute_tool` span, so its span is that span's child.
//!
//! The span's `traceparent` (from [`crate::vocab::trace_context`], when the application
//! installed a provider) goes in the request's `params._meta` (SEP-414, what the conventions
//! recommend), and on streamable HTTP also in the `traceparent` header of the POST that
//! carries it ([`TraceHeaders`]).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use futures::stream::BoxStream;
use reqwest::header::{HeaderName, HeaderValue};
use rmcp::model::{ClientJsonRpcMessage, ClientRequest, JsonRpcMessage, RequestMetaObject};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use tracing::Span;
use tracing::field::Empty;

use crate::tools::error::ToolError;
use crate::tools::mcp::transport::McpTransport;
use crate::vocab::trace_context::{TRACEPARENT, current_traceparent};

/// What every span of one session says about where it goes.
#[derive(Debug, Clone, Default)]
pub(crate) struct Peer {
    transport: &'static str,
    address: Option<String>,
    port: Option<u16>,
    /// The streamable-HTTP session id, as the HTTP client last sent it.
    pub(crate) session: Arc<SessionId>,
}

impl Peer {
    /// The peer `transport` reaches.
    pub(crate) fn of(transport: &McpTransport) -> Self {
        match transport {
            McpTransport::Stdio { .. } => Peer {
                transport: "pipe",
                ..Peer::default()
            },
            McpTransport::Http { url, .. } => {
                let parsed = reqwest::Url::parse(url).ok();
                Peer {
                    transport: "tcp",
                    address: parsed
                        .as_ref()
                        .and_then(|url| url.host_str().map(str::to_owned)),
                    port: parsed
                        .as_ref()
                        .and_then(reqwest::Url::port_or_known_default),
                    session: Arc::default(),
                }
            }
        }
    }

    /// The client span of `method` (`target`: the tool, prompt or resource it is about).
    pub(crate) fn span(&self, server: &str, method: &str, target: &str) -> Span {
        // Tool and prompt names are low-cardinality targets; a resource URI is not.
        let named = matches!(method, "tools/call" | "prompts/get") && !target.is_empty();
        let name = if named {
            format!("{method} {target}")
        } else {
            method.to_owned()
        };
        let span = tracing::info_span!(
            target: "agcore::mcp",
            "mcp",
            otel.name = name,
            otel.kind = "client",
            otel.status_code = Empty,
            mcp.method.name = method,
            mcp.session.id = Empty,
            agcore.mcp.server = server,
            gen_ai.operation.name = (method == "tools/call").then_some("execute_tool"),
            gen_ai.tool.name = (method == "tools/call").then_some(target),
            gen_ai.prompt.name = (method == "prompts/get").then_some(target),
            mcp.resource.uri = method.starts_with("resources/").then_some(target),
            network.transport = self.transport,
            server.address = self.address.as_deref(),
            server.port = self.port.map(i64::from),
            error.type = Empty,
        );
        self.record_session(&span);
        span
    }

    /// Record the session id on `span` (known once `initialize` was answered).
    pub(crate) fn record_session(&self, span: &Span) {
        if let Some(id) = self.session.get() {
            span.record("mcp.session.id", &*id);
        }
    }
}

/// `_meta` with `span`'s `traceparent`, when there is one to propagate.
pub(crate) fn meta(span: &Span) -> Option<RequestMetaObject> {
    if span.is_disabled() {
        return None;
    }
    let traceparent = span.in_scope(current_traceparent)?;
    let mut meta = RequestMetaObject::new();
    meta.set_traceparent(traceparent);
    Some(meta)
}

/// Mark `span` failed: `error.type` is the kind of `error`.
pub(crate) fn record_error(span: &Span, error: &ToolError) {
    let kind = match error {
        ToolError::McpTimeout(_) | ToolError::Timeout { .. } => "timeout",
        ToolError::Cancelled(_) => "cancelled",
        ToolError::McpError(_) => "mcp_error",
        ToolError::McpNotInitialized(_) => "not_initialized",
        ToolError::McpMessageTooLarge { .. } => "message_too_large",
        _ => "_OTHER",
    };
    record_error_type(span, kind);
}

/// Mark `span` failed with `kind` (`tool_error` for a `tools/call` result with `isError`).
pub(crate) fn record_error_type(span: &Span, kind: &str) {
    span.record("error.type", kind);
    span.record("otel.status_code", "ERROR");
}

/// The longest session id recorded (the spec's are UUIDs or hashes; a server could send more).
const MAX_SESSION_ID: usize = 256;

/// The session id a streamable-HTTP session was given.
#[derive(Debug, Default)]
pub(crate) struct SessionId(Mutex<Option<Arc<str>>>);

impl SessionId {
    fn get(&self) -> Option<Arc<str>> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn set(&self, id: Option<&Arc<str>>) {
        // The server chose it: a span attribute only when of a sane size.
        if let Some(id) = id.filter(|id| id.len() <= MAX_SESSION_ID) {
            let mut current = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if current.as_deref() != Some(&**id) {
                *current = Some(id.clone());
            }
        }
    }
}

/// The `traceparent` in a request's `params._meta`.
fn traceparent_of(message: &ClientJsonRpcMessage) -> Option<&str> {
    let JsonRpcMessage::Request(request) = message else {
        return None;
    };
    let meta = match &request.request {
        ClientRequest::CallToolRequest(r) => r.params.meta.as_ref(),
        ClientRequest::ReadResourceRequest(r) => r.params.meta.as_ref(),
        ClientRequest::InitializeRequest(r) => r.params.meta.as_ref(),
        ClientRequest::ListToolsRequest(r) => r.params.as_ref().and_then(|p| p.meta.as_ref()),
        ClientRequest::GetPromptRequest(r) => r.params.meta.as_ref(),
        _ => None,
    }?;
    meta.get_traceparent()
}

/// The headers of a POST carrying `message`: `traceparent` added when its `_meta` has one.
fn with_traceparent(
    message: &ClientJsonRpcMessage,
    mut headers: HashMap<HeaderName, HeaderValue>,
) -> HashMap<HeaderName, HeaderValue> {
    if let Some(value) = traceparent_of(message).and_then(|v| HeaderValue::from_str(v).ok()) {
        headers.insert(HeaderName::from_static(TRACEPARENT), value);
    }
    headers
}

/// A streamable-HTTP client that puts a request's `_meta.traceparent` in the `traceparent`
/// header of its POST (the HTTP requests are sent by rmcp's worker task, outside the request's
/// span, so the message carries the context) and remembers the session id for the spans.
#[derive(Clone)]
pub(crate) struct TraceHeaders<C> {
    inner: C,
    session: Arc<SessionId>,
}

impl<C> TraceHeaders<C> {
    pub(crate) fn new(inner: C, peer: &Peer) -> Self {
        TraceHeaders {
            inner,
            session: peer.session.clone(),
        }
    }
}

type Posted<E> = Result<StreamableHttpPostResponse, StreamableHttpError<E>>;
type Events<E> =
    Result<BoxStream<'static, Result<sse_stream::Sse, sse_stream::Error>>, StreamableHttpError<E>>;

impl<C: StreamableHttpClient + Sync> StreamableHttpClient for TraceHeaders<C> {
    type Error = C::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Posted<C::Error> {
        self.session.set(session_id.as_ref());
        let headers = with_traceparent(&message, custom_headers);
        self.inner
            .post_message(uri, message, session_id, auth_header, headers)
            .await
    }

    async fn post_message_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Posted<C::Error> {
        self.session.set(session_id.as_ref());
        let headers = with_traceparent(&message, custom_headers);
        self.inner
            .post_message_with_max_sse_event_size(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                max_sse_event_size,
            )
            .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        limits: StreamableHttpResponseLimits,
    ) -> Posted<C::Error> {
        self.session.set(session_id.as_ref());
        let headers = with_traceparent(&message, custom_headers);
        let posted = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id,
                auth_header,
                headers,
                limits,
            )
            .await;
        // `initialize`'s answer carries the session id the later requests send.
        if let Ok(
            StreamableHttpPostResponse::Json(_, Some(id))
            | StreamableHttpPostResponse::Sse(_, Some(id)),
        ) = &posted
        {
            self.session.set(Some(&Arc::from(id.as_str())));
        }
        posted
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Result<(), StreamableHttpError<C::Error>> {
        self.inner
            .delete_session(uri, session_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
    ) -> Events<C::Error> {
        self.inner
            .get_stream(uri, session_id, last_event_id, auth_header, custom_headers)
            .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HashMap<HeaderName, HeaderValue>,
        max_sse_event_size: usize,
    ) -> Events<C::Error> {
        self.inner
            .get_stream_with_max_sse_event_size(
                uri,
                session_id,
                last_event_id,
                auth_header,
                custom_headers,
                max_sse_event_size,
            )
            .await
    }
}
