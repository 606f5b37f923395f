//! [`ProviderError`]: why one model request failed; [`ErrorKind`], the kinds of every error
//! of a model call or a run.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Why one model request failed: what a [`crate::llm::ChatModel`] (and the retry around it)
/// returns. The run's own reasons to stop (`max_turns`, a usage limit, the journal, ...) are
/// not here: they are the conversation's, `crate::run::LlmError`, which converts every
/// provider error 1:1 (`From`), so matching on `LlmError::RateLimited` and the like works
/// whichever layer the error came from.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProviderError {
    /// An HTTP error status not covered by a more specific variant.
    #[error("HTTP {status}: {message}")]
    Http {
        /// The status code.
        status: u16,
        /// The server's error message (or body excerpt).
        message: String,
    },
    /// 401/403: the API key is missing, wrong or lacks access.
    #[error("authentication failed (HTTP {status}): {message}")]
    Authentication {
        /// 401 or 403.
        status: u16,
        /// The server's error message.
        message: String,
    },
    /// 429 after all retries.
    #[error("rate limited (HTTP 429){}: {message}", retry_note(*retries))]
    RateLimited {
        /// The last `Retry-After` the server asked for.
        retry_after: Option<Duration>,
        /// How many retries were made.
        retries: u32,
        /// The server's error message.
        message: String,
    },
    /// The prompt (history + tools) does not fit the model's context window.
    #[error("context length exceeded: {message}")]
    ContextLengthExceeded {
        /// The server's error message.
        message: String,
    },
    /// 400/404/422: the server rejected the request; retrying will not help.
    #[error("bad request (HTTP {status}): {message}")]
    BadRequest {
        /// The status code.
        status: u16,
        /// The server's error message.
        message: String,
    },
    /// 5xx after all retries.
    #[error("server error (HTTP {status}){}: {message}", retry_note(*retries))]
    Server {
        /// The status code.
        status: u16,
        /// How many retries were made.
        retries: u32,
        /// The last `Retry-After` the server asked for (503 "overloaded" replies send one).
        retry_after: Option<Duration>,
        /// The server's error message.
        message: String,
    },
    /// Connecting, the whole request, or the wait for more of a streamed reply took too long.
    #[error("timed out: {what} took longer than {limit:?}{}", retry_note(*.retries))]
    Timeout {
        /// What timed out.
        what: TimeoutKind,
        /// The limit.
        limit: Duration,
        /// How many retries were made (connect and request timeouts are retried).
        retries: u32,
    },
    /// The connection failed (after retries).
    #[error("connection failed{}: {message}", retry_note(*retries))]
    Connection {
        /// How many retries were made.
        retries: u32,
        /// The transport error.
        message: String,
    },
    /// The stream broke: an `error` object inside it, or it ended without a finish chunk or `[DONE]`.
    #[error("stream error: {0}")]
    Stream(String),
    /// The server's reply could not be decoded.
    #[error("could not decode the server's reply: {0}")]
    Decode(String),
    /// The call was cancelled.
    #[error("cancelled")]
    Cancelled,
    /// The server redirected the request to another origin (scheme, host or port). Not
    /// followed: the API key, the configured headers and the conversation go only to the
    /// configured server's origin. Not retried.
    #[error(
        "the server at {from} redirected the request to {to}, another origin; not followed, so the API key and configured headers stay with {from} (set the base URL to the new address if it is trusted)"
    )]
    CrossOriginRedirect {
        /// The origin the request was sent to (`https://host:port`).
        from: String,
        /// The origin the server redirected to.
        to: String,
    },
    /// The server's reply went over a limit of the client ([`ResponseLimit`]): an event, the
    /// body or the assembled message too large, too many tool calls, or no end within the
    /// deadline. Nothing of the reply is kept; never retried (the server would do it again).
    #[error("the server's reply went over a limit: {limit}")]
    ResponseLimitExceeded {
        /// The limit and its configured value.
        limit: ResponseLimit,
    },
    /// The request turned on a hosted tool its API does not have (see
    /// [`crate::llm::hosted`]); never sent, never retried.
    #[error(transparent)]
    UnsupportedHostedTool(#[from] crate::llm::hosted::UnsupportedHostedTool),
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// `" after N retries"` when there were retries, else nothing.
fn retry_note(retries: u32) -> String {
    match retries {
        0 => String::new(),
        1 => " after 1 retry".to_owned(),
        n => format!(" after {n} retries"),
    }
}

/// Which limit an [`LlmError::ResponseLimitExceeded`] hit, with its configured value.
///
/// Set on [`crate::llm::OpenAiConfig`] (`with_max_event_bytes`, `with_max_response_bytes`,
/// `with_response_deadline`) and [`crate::llm::ReplyLimits`] (message bytes, tool calls).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ResponseLimit {
    /// One server-sent event (or one line of it) was longer than this many bytes.
    EventBytes(usize),
    /// The response body was longer than this many bytes.
    ResponseBytes(usize),
    /// The assembled message (text, reasoning, refusal and tool-call arguments together) was
    /// longer than this many bytes.
    MessageBytes(usize),
    /// The message started more tool calls than this.
    ToolCalls(usize),
    /// The reply did not end within this time after the request was sent (keep-alives and
    /// comments do not extend it).
    Deadline(Duration),
}

impl std::fmt::Display for ResponseLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResponseLimit::EventBytes(max) => {
                write!(
                    f,
                    "a server-sent event longer than {max} bytes (max_event_bytes)"
                )
            }
            ResponseLimit::ResponseBytes(max) => {
                write!(
                    f,
                    "a response body longer than {max} bytes (max_response_bytes)"
                )
            }
            ResponseLimit::MessageBytes(max) => write!(
                f,
                "an assembled message longer than {max} bytes (max_message_bytes)"
            ),
            ResponseLimit::ToolCalls(max) => {
                write!(
                    f,
                    "more than {max} tool calls in one message (max_tool_calls)"
                )
            }
            ResponseLimit::Deadline(limit) => write!(
                f,
                "no complete reply within {limit:?} of the request (response_deadline)"
            ),
        }
    }
}

/// What an [`LlmError::Timeout`] was waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TimeoutKind {
    /// Establishing the connection.
    Connect,
    /// The whole request (headers, or the whole reply when not streaming).
    Request,
    /// The wait for progress of a stream (keep-alives do not count).
    StreamIdle,
}

impl std::fmt::Display for TimeoutKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TimeoutKind::Connect => "connecting",
            TimeoutKind::Request => "the request",
            TimeoutKind::StreamIdle => "waiting for more of the streamed reply",
        })
    }
}

/// The kind of an error — of one model request ([`ProviderError`]) or of the run around it
/// (`crate::run::LlmError`) —, as carried by [`crate::llm::StreamEvent::Error`] and the CLI's
/// `--json` error line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ErrorKind {
    /// `LlmError::Http`.
    Http,
    /// `LlmError::Authentication`.
    Authentication,
    /// `LlmError::RateLimited`.
    RateLimited,
    /// `LlmError::ContextLengthExceeded`.
    ContextLengthExceeded,
    /// `LlmError::BadRequest`.
    BadRequest,
    /// `LlmError::Server`.
    Server,
    /// `LlmError::Timeout`.
    Timeout,
    /// `LlmError::Connection`.
    Connection,
    /// `LlmError::Stream`.
    Stream,
    /// `LlmError::Decode`.
    Decode,
    /// `LlmError::MaxTurnsExceeded`.
    MaxTurnsExceeded,
    /// `LlmError::RepeatedToolCall`.
    RepeatedToolCall,
    /// `LlmError::TruncatedToolCalls`.
    TruncatedToolCalls,
    /// `LlmError::Cancelled`.
    Cancelled,
    /// `LlmError::CrossOriginRedirect`.
    CrossOriginRedirect,
    /// `LlmError::ResponseLimitExceeded`.
    ResponseLimitExceeded,
    /// `LlmError::Journal`.
    Journal,
    /// `LlmError::NotPending`.
    NotPending,
    /// `LlmError::UsageLimitExceeded`.
    UsageLimitExceeded,
    /// `LlmError::GuardrailTripped`.
    GuardrailTripped,
    /// `LlmError::UnsupportedHostedTool`.
    UnsupportedHostedTool,
    /// `LlmError::Other`.
    Other,
}

impl ProviderError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            ProviderError::Http { .. } => ErrorKind::Http,
            ProviderError::Authentication { .. } => ErrorKind::Authentication,
            ProviderError::RateLimited { .. } => ErrorKind::RateLimited,
            ProviderError::ContextLengthExceeded { .. } => ErrorKind::ContextLengthExceeded,
            ProviderError::BadRequest { .. } => ErrorKind::BadRequest,
            ProviderError::Server { .. } => ErrorKind::Server,
            ProviderError::Timeout { .. } => ErrorKind::Timeout,
            ProviderError::Connection { .. } => ErrorKind::Connection,
            ProviderError::Stream(_) => ErrorKind::Stream,
            ProviderError::Decode(_) => ErrorKind::Decode,
            ProviderError::Cancelled => ErrorKind::Cancelled,
            ProviderError::CrossOriginRedirect { .. } => ErrorKind::CrossOriginRedirect,
            ProviderError::ResponseLimitExceeded { .. } => ErrorKind::ResponseLimitExceeded,
            ProviderError::UnsupportedHostedTool(_) => ErrorKind::UnsupportedHostedTool,
            ProviderError::Other(_) => ErrorKind::Other,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let text = serde_json::to_value(self)
            .ok()
            .and_then(|value| value.as_str().map(str::to_owned))
            .unwrap_or_default();
        f.write_str(&text)
    }
}
