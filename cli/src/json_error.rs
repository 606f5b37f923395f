//! The terminal error event of `agcore run --json`: every failed run ends with exactly one
//! `{"type":"error","kind":...,"message":...,"status":<HTTP status or null>,"retryable":bool}`
//! line on stdout — whether the error came before the stream, inside it, or from agcore itself.

use agcore::llm::{ErrorKind, LlmError, TimeoutKind};
use serde_json::{Value, json};

use crate::render::json_for_terminal;

/// The event for an error that ended the run: an [`LlmError`] anywhere in its chain gives the
/// kind, status and retryability; anything else (config, tools, I/O) is kind `other`.
pub fn for_error(error: &anyhow::Error, message: &str) -> Value {
    match error
        .chain()
        .find_map(|cause| cause.downcast_ref::<LlmError>())
    {
        Some(llm) => event(
            &llm.kind().to_string(),
            message,
            status_of(llm),
            llm.is_retryable(),
        ),
        None => event(&ErrorKind::Other.to_string(), message, None, false),
    }
}

/// The event for the stream's own [`agcore::llm::StreamEvent::Error`], which carries only the
/// kind and the message: the status is the `HTTP NNN` the message names for the HTTP kinds, and
/// retryability follows [`RetryPolicy::is_retryable`] for that kind.
pub fn for_stream_error(kind: ErrorKind, message: &str) -> Value {
    let status = match kind {
        ErrorKind::RateLimited => Some(429),
        ErrorKind::Http | ErrorKind::Authentication | ErrorKind::BadRequest | ErrorKind::Server => {
            http_status_in(message)
        }
        _ => None,
    };
    let retryable = match kind {
        ErrorKind::RateLimited | ErrorKind::Server | ErrorKind::Connection => true,
        ErrorKind::Http => matches!(status, Some(408 | 409)),
        ErrorKind::Timeout => !message.contains(&TimeoutKind::StreamIdle.to_string()),
        _ => false,
    };
    event(&kind.to_string(), message, status, retryable)
}

/// The event for a run the user cancelled (Ctrl-C).
pub fn cancelled() -> Value {
    let message = "cancelled by the user";
    event(&ErrorKind::Cancelled.to_string(), message, None, false)
}

/// Print `event` as one JSON line on stdout.
pub fn print(event: &Value) {
    println!("{}", json_for_terminal(event.to_string()));
}

fn event(kind: &str, message: &str, status: Option<u16>, retryable: bool) -> Value {
    json!({"type": "error", "kind": kind, "message": message, "status": status, "retryable": retryable})
}

/// The HTTP status of `error`, when it came from one.
fn status_of(error: &LlmError) -> Option<u16> {
    match error {
        LlmError::Http { status, .. }
        | LlmError::Authentication { status, .. }
        | LlmError::BadRequest { status, .. }
        | LlmError::Server { status, .. } => Some(*status),
        LlmError::RateLimited { .. } => Some(429),
        _ => None,
    }
}

/// The first `HTTP NNN` in `message` (how [`LlmError`]'s messages name the status).
fn http_status_in(message: &str) -> Option<u16> {
    message.match_indices("HTTP ").find_map(|(at, _)| {
        let digits = message.get(at + 5..at + 8)?;
        digits
            .parse::<u16>()
            .ok()
            .filter(|status| (100..600).contains(status))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_errors_status_and_retryability_match_the_errors_own() {
        let errors = [
            LlmError::Server {
                status: 503,
                retries: 3,
                retry_after: None,
                message: "overloaded".into(),
            },
            LlmError::Authentication {
                status: 401,
                message: "bad key".into(),
            },
            LlmError::Http {
                status: 408,
                message: "slow".into(),
            },
            LlmError::Stream("context size exceeded".into()),
            LlmError::Connection {
                retries: 1,
                message: "refused".into(),
            },
            LlmError::Timeout {
                what: TimeoutKind::StreamIdle,
                limit: std::time::Duration::from_secs(1),
                retries: 0,
            },
        ];
        for error in errors {
            let message = error.to_string();
            let kind = error.kind();
            let direct = for_error(&anyhow::Error::from(error), &message);
            assert_eq!(for_stream_error(kind, &message), direct, "{message}");
        }
    }
}
