//! Anthropic's error bodies (`{"type":"error","error":{"type","message"}}`), as an HTTP status
//! or as an `error` event inside a 200 stream, mapped to typed [`ProviderError`]s so
//! [`crate::llm::RetryPolicy`] retries what is worth retrying: 429, 5xx and 529
//! (`overloaded_error`) are; 400s (`invalid_request_error`) are not, and a prompt that does not
//! fit is [`ProviderError::ContextLengthExceeded`].

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::transport::{retry_after, truncate};

/// What Anthropic says when the prompt does not fit the context window, lowercased:
/// `prompt is too long: 208310 tokens > 200000 maximum` and `input length and max_tokens
/// exceed context limit: 188240 + 21333 > 200000, ...`.
const CONTEXT_MARKERS: &[&str] = &[
    "prompt is too long",
    "exceed context limit",
    "context window",
    "context length",
];

/// The typed error of a non-success HTTP status with its headers and (the start of its) body.
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
    let (kind, message) = error_body(body);
    match status {
        401 | 403 => ProviderError::Authentication { status, message },
        429 => ProviderError::RateLimited {
            retry_after: retry_after(headers),
            retries: 0,
            message,
        },
        400 | 413 | 422 if is_context_overflow(&message) => {
            ProviderError::ContextLengthExceeded { message }
        }
        400 | 404 | 413 | 422 => ProviderError::BadRequest { status, message },
        // 529 is Anthropic's "overloaded": retried like any 5xx, honouring `retry-after`.
        500..=599 => ProviderError::Server {
            status,
            retries: 0,
            retry_after: retry_after(headers),
            message,
        },
        _ if kind.as_deref() == Some("overloaded_error") => ProviderError::Server {
            status: 529,
            retries: 0,
            retry_after: retry_after(headers),
            message,
        },
        _ => ProviderError::Http { status, message },
    }
}

/// The typed error of an `error` event inside a stream (HTTP 200): typed like the HTTP status
/// its `error.type` stands for, so an `overloaded_error` is retried like a 529.
pub(crate) fn event_error(data: &str) -> ProviderError {
    let (kind, message) = error_body(data.as_bytes());
    let status = match kind.as_deref() {
        Some("overloaded_error") => 529,
        Some("api_error") => 500,
        Some("timeout_error") => 504,
        Some("rate_limit_error") => 429,
        Some("invalid_request_error") => 400,
        Some("request_too_large") => 413,
        Some("not_found_error") => 404,
        Some("authentication_error") => 401,
        Some("permission_error") => 403,
        _ if is_context_overflow(&message) => 400,
        _ => return ProviderError::Stream(message),
    };
    status_error(status, &HeaderMap::new(), data.as_bytes())
}

/// Whether a message says the prompt (with `max_tokens`) does not fit the context window.
pub(crate) fn is_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    CONTEXT_MARKERS
        .iter()
        .any(|marker| message.contains(marker))
}

/// The `error.type` and the message (cut, control characters removed) of an error body; the
/// body's own text when it is not Anthropic's JSON (a proxy's HTML page).
fn error_body(body: &[u8]) -> (Option<String>, String) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (None, clean(String::from_utf8_lossy(body).trim()));
    };
    let error = value.get("error").unwrap_or(&value);
    let kind = error.get("type").and_then(Value::as_str).map(str::to_owned);
    let message = match error.get("message").and_then(Value::as_str) {
        Some(message) => message.to_owned(),
        None => match error {
            Value::String(text) => text.clone(),
            other => other.to_string(),
        },
    };
    (kind, clean(&message))
}

/// A server message safe to show: cut, without control characters (a terminal escape in an
/// error must not reach the user's terminal).
fn clean(text: &str) -> String {
    let shown: String = text
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    truncate(shown.trim())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(
                reqwest::header::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        map
    }

    #[test]
    fn statuses_map_to_their_kinds() {
        let body = |kind: &str, message: &str| {
            format!(
                r#"{{"type":"error","error":{{"type":"{kind}","message":"{message}"}},"request_id":"req_1"}}"#
            )
        };
        let overloaded = status_error(
            529,
            &headers(&[("retry-after", "3")]),
            body("overloaded_error", "Overloaded").as_bytes(),
        );
        assert!(matches!(
            &overloaded,
            ProviderError::Server { status: 529, retry_after: Some(wait), message, .. }
                if *wait == Duration::from_secs(3) && message == "Overloaded"
        ));
        assert!(crate::llm::RetryPolicy::is_retryable(&overloaded));
        let limited = status_error(
            429,
            &headers(&[("retry-after", "7")]),
            body(
                "rate_limit_error",
                "Number of request tokens has exceeded your per-minute rate limit",
            )
            .as_bytes(),
        );
        assert!(
            matches!(limited, ProviderError::RateLimited { retry_after: Some(wait), .. } if wait == Duration::from_secs(7))
        );
        let invalid = status_error(
            400,
            &HeaderMap::new(),
            body("invalid_request_error", "messages: roles must alternate").as_bytes(),
        );
        assert!(
            matches!(&invalid, ProviderError::BadRequest { status: 400, message } if message.contains("alternate"))
        );
        assert!(!crate::llm::RetryPolicy::is_retryable(&invalid));
        assert!(matches!(
            status_error(400, &HeaderMap::new(), body("invalid_request_error", "prompt is too long: 208310 tokens > 200000 maximum").as_bytes()),
            ProviderError::ContextLengthExceeded { message } if message.starts_with("prompt is too long")
        ));
        assert!(matches!(
            status_error(400, &HeaderMap::new(), body("invalid_request_error", "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, decrease input length or `max_tokens` and try again").as_bytes()),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            status_error(
                401,
                &HeaderMap::new(),
                body("authentication_error", "invalid x-api-key").as_bytes()
            ),
            ProviderError::Authentication { status: 401, .. }
        ));
        assert!(matches!(
            status_error(502, &HeaderMap::new(), b"<html>Bad Gateway</html>"),
            ProviderError::Server { status: 502, message, .. } if message == "<html>Bad Gateway</html>"
        ));
    }

    #[test]
    fn stream_error_events_are_typed_like_their_status() {
        let overloaded = event_error(
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        );
        assert!(matches!(
            overloaded,
            ProviderError::Server { status: 529, .. }
        ));
        assert!(matches!(
            event_error(
                r#"{"type":"error","error":{"type":"api_error","message":"Internal server error"}}"#
            ),
            ProviderError::Server { status: 500, .. }
        ));
        assert!(matches!(
            event_error(
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 1 tokens > 0 maximum"}}"#
            ),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            event_error(r#"{"type":"error","error":{"type":"something_new","message":"later"}}"#),
            ProviderError::Stream(message) if message == "later"
        ));
        assert!(matches!(event_error("not json"), ProviderError::Stream(m) if m == "not json"));
    }

    #[test]
    fn messages_are_cut_and_lose_control_characters() {
        let long = format!(
            r#"{{"type":"error","error":{{"type":"api_error","message":"\u001b[31m{}"}}}}"#,
            "é".repeat(2000)
        );
        let ProviderError::Server { message, .. } =
            status_error(500, &HeaderMap::new(), long.as_bytes())
        else {
            panic!("not a server error");
        };
        assert!(!message.contains('\u{1b}'));
        assert!(message.chars().count() <= 501);
    }
}
