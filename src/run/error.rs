//! [`LlmError`]: why a conversation's call (one request, or a whole tool loop) ended without
//! an answer — a provider's error or the run's own.

use crate::llm::error::{ErrorKind, ProviderError, ResponseLimit, TimeoutKind};
use crate::run::event::StreamEvent;
use crate::run::usage::{RunUsage, UsageLimit};
use crate::vocab::OpenaiChatMessage;
use std::time::Duration;

/// Why a call of a [`Conversation`](crate::run::Conversation) ended without an answer: a model
/// request that failed (every [`ProviderError`] has a variant of the same name and fields here,
/// converted by `From`), or one of the run's own reasons — `MaxTurnsExceeded`,
/// `RepeatedToolCall`, `TruncatedToolCalls`, `Journal`, `NotPending`, `UsageLimitExceeded`,
/// `GuardrailTripped`.
/// [`LlmError::from_provider`] tells which. Tool failures are *not* here: they are fed back to
/// the model as tool messages and the loop goes on (see [`crate::tools::ToolError`]).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LlmError {
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
    /// The tool loop made `max_turns` model requests without a final answer. The history holds
    /// every completed turn and is valid to continue from.
    #[error("the tool loop reached max_turns ({turns}) without a final answer")]
    MaxTurnsExceeded {
        /// The limit that was reached.
        turns: u32,
        /// The conversation so far (also in `Conversation::messages()`), valid to continue from.
        history: Vec<OpenaiChatMessage>,
    },
    /// The model requested the same tool with the same arguments in too many consecutive turns
    /// (identical calls within one turn count once).
    #[error("the model called '{tool}' with the same arguments in {times} turns in a row")]
    RepeatedToolCall {
        /// The tool.
        tool: String,
        /// In how many consecutive turns.
        times: u32,
    },
    /// The reply was cut at the token limit while it was calling tools: the calls were neither
    /// run nor stored (their arguments may be cut mid-JSON). Every call path returns it, with or
    /// without tools, streaming or not; the history keeps only completed turns.
    #[error(
        "the reply hit the token limit (finish_reason=length) while calling tools; calls not executed"
    )]
    TruncatedToolCalls,
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
    /// The run's journal (e.g. its session store) could not record a step: the run stopped
    /// before its next effect, so nothing happened that the journal does not know of.
    #[error("the run's journal failed: {message}")]
    Journal {
        /// What failed (the store's error).
        message: String,
    },
    /// A decision given to continue a suspended run names a call that does not wait for one.
    #[error("no approval is pending for tool call {call_id}")]
    NotPending {
        /// The call id of the decision.
        call_id: String,
    },
    /// The run crossed one of its [`crate::run::UsageLimits`] (checked before each model
    /// request and after each reply). The history holds every completed turn and is valid to
    /// continue from; a tool turn whose reply crossed a limit is not run.
    #[error("the run reached its usage limit {limit}; used so far: {usage}")]
    UsageLimitExceeded {
        /// The limit and its configured value.
        limit: UsageLimit,
        /// What the run spent, up to and including the reply that crossed the limit.
        usage: RunUsage,
        /// The conversation so far (also in `Conversation::messages()`), valid to continue from.
        history: Vec<OpenaiChatMessage>,
    },
    /// A guardrail of a team's agent stopped the run: an input check before the model saw the
    /// prompt, or an output check before the caller saw the answer (see
    /// [`crate::team::Guardrail`]). The history holds the committed turns.
    #[error("guardrail '{guardrail}' of agent '{agent}' stopped the run: {reason}")]
    GuardrailTripped {
        /// The agent's path in the team, e.g. `main/researcher`.
        agent: String,
        /// The guardrail's name.
        guardrail: String,
        /// Why it stopped the run.
        reason: String,
    },
    /// The request turned on a hosted tool its API does not have.
    #[error(transparent)]
    UnsupportedHostedTool(crate::llm::hosted::UnsupportedHostedTool),
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

impl From<ProviderError> for LlmError {
    fn from(error: ProviderError) -> Self {
        match error {
            ProviderError::Http { status, message } => LlmError::Http { status, message },
            ProviderError::Authentication { status, message } => {
                LlmError::Authentication { status, message }
            }
            ProviderError::RateLimited {
                retry_after,
                retries,
                message,
            } => LlmError::RateLimited {
                retry_after,
                retries,
                message,
            },
            ProviderError::ContextLengthExceeded { message } => {
                LlmError::ContextLengthExceeded { message }
            }
            ProviderError::BadRequest { status, message } => {
                LlmError::BadRequest { status, message }
            }
            ProviderError::Server {
                status,
                retries,
                retry_after,
                message,
            } => LlmError::Server {
                status,
                retries,
                retry_after,
                message,
            },
            ProviderError::Timeout {
                what,
                limit,
                retries,
            } => LlmError::Timeout {
                what,
                limit,
                retries,
            },
            ProviderError::Connection { retries, message } => {
                LlmError::Connection { retries, message }
            }
            ProviderError::Stream(message) => LlmError::Stream(message),
            ProviderError::Decode(message) => LlmError::Decode(message),
            ProviderError::Cancelled => LlmError::Cancelled,
            ProviderError::CrossOriginRedirect { from, to } => {
                LlmError::CrossOriginRedirect { from, to }
            }
            ProviderError::ResponseLimitExceeded { limit } => {
                LlmError::ResponseLimitExceeded { limit }
            }
            ProviderError::UnsupportedHostedTool(error) => LlmError::UnsupportedHostedTool(error),
            ProviderError::Other(message) => LlmError::Other(message),
        }
    }
}

impl LlmError {
    /// The kind of this error.
    pub fn kind(&self) -> ErrorKind {
        match self {
            LlmError::Http { .. } => ErrorKind::Http,
            LlmError::Authentication { .. } => ErrorKind::Authentication,
            LlmError::RateLimited { .. } => ErrorKind::RateLimited,
            LlmError::ContextLengthExceeded { .. } => ErrorKind::ContextLengthExceeded,
            LlmError::BadRequest { .. } => ErrorKind::BadRequest,
            LlmError::Server { .. } => ErrorKind::Server,
            LlmError::Timeout { .. } => ErrorKind::Timeout,
            LlmError::Connection { .. } => ErrorKind::Connection,
            LlmError::Stream(_) => ErrorKind::Stream,
            LlmError::Decode(_) => ErrorKind::Decode,
            LlmError::MaxTurnsExceeded { .. } => ErrorKind::MaxTurnsExceeded,
            LlmError::RepeatedToolCall { .. } => ErrorKind::RepeatedToolCall,
            LlmError::TruncatedToolCalls => ErrorKind::TruncatedToolCalls,
            LlmError::Cancelled => ErrorKind::Cancelled,
            LlmError::CrossOriginRedirect { .. } => ErrorKind::CrossOriginRedirect,
            LlmError::ResponseLimitExceeded { .. } => ErrorKind::ResponseLimitExceeded,
            LlmError::Journal { .. } => ErrorKind::Journal,
            LlmError::NotPending { .. } => ErrorKind::NotPending,
            LlmError::UsageLimitExceeded { .. } => ErrorKind::UsageLimitExceeded,
            LlmError::GuardrailTripped { .. } => ErrorKind::GuardrailTripped,
            LlmError::UnsupportedHostedTool(_) => ErrorKind::UnsupportedHostedTool,
            LlmError::Other(_) => ErrorKind::Other,
        }
    }

    /// Whether the failed request would be worth another attempt — the same rule as
    /// [`crate::llm::RetryPolicy::is_retryable`] for the provider's errors; the run's own
    /// reasons never are.
    pub fn is_retryable(&self) -> bool {
        match self {
            LlmError::RateLimited { .. }
            | LlmError::Server { .. }
            | LlmError::Connection { .. } => true,
            LlmError::Http { status, .. } => matches!(status, 408 | 409),
            LlmError::Timeout { what, .. } => *what != TimeoutKind::StreamIdle,
            _ => false,
        }
    }

    /// Whether the error came from the model request itself (a [`ProviderError`]) rather than
    /// from the run's own rules (turns, repeated calls, a truncated tool turn, the journal, a
    /// decision for no pending call, a usage limit).
    pub fn from_provider(&self) -> bool {
        !matches!(
            self,
            LlmError::MaxTurnsExceeded { .. }
                | LlmError::RepeatedToolCall { .. }
                | LlmError::TruncatedToolCalls
                | LlmError::Journal { .. }
                | LlmError::NotPending { .. }
                | LlmError::UsageLimitExceeded { .. }
                | LlmError::GuardrailTripped { .. }
        )
    }
}

impl StreamEvent {
    /// The [`StreamEvent::Error`] that ends a stream with `error`.
    pub fn from_error(error: &LlmError) -> Self {
        StreamEvent::Error {
            kind: error.kind(),
            message: error.to_string(),
        }
    }
}
