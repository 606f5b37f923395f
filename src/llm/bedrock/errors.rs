//! Bedrock's errors — an HTTP status with `x-amzn-ErrorType` and `{"message"}`, or an
//! exception frame inside a 200 stream — as typed [`ProviderError`]s, so
//! [`crate::llm::RetryPolicy`] retries what is worth retrying: `ThrottlingException` (429),
//! `ServiceUnavailableException` (503), `InternalServerException`,
//! `ModelStreamErrorException` and `ModelNotReadyException` are; `ValidationException` (400),
//! `AccessDeniedException` (403) and `ResourceNotFoundException` (404) are not, and an input
//! too long for the model is [`ProviderError::ContextLengthExceeded`].

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::transport::{retry_after, truncate};

/// What Bedrock says when the prompt does not fit, lowercased.
const CONTEXT_MARKERS: &[&str] = &[
    "input is too long",
    "prompt is too long",
    "too many input tokens",
    "context window",
    "context length",
];

/// The typed error of a non-success status with its headers and (the start of its) body.
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
    let kind = headers
        .get("x-amzn-errortype")
        .and_then(|value| value.to_str().ok())
        .map(|value| value.split(':').next().unwrap_or(value).to_owned());
    let (body_kind, message) = error_body(body);
    let kind = kind.or(body_kind);
    typed(status, kind.as_deref(), message, headers)
}

/// The typed error of an exception frame (`:exception-type` `name`) in a stream.
pub(crate) fn exception_error(name: &str, data: &str) -> ProviderError {
    let (_, message) = error_body(data.as_bytes());
    let kind = if name == "error" {
        serde_json::from_str::<Value>(data)
            .ok()
            .and_then(|value| value.get("code").and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_default()
    } else {
        name.to_owned()
    };
    let status = match kind.to_ascii_lowercase().as_str() {
        "throttlingexception" | "modelnotreadyexception" => 429,
        "validationexception" => 400,
        "accessdeniedexception" => 403,
        "resourcenotfoundexception" => 404,
        "modeltimeoutexception" => 408,
        "modelerrorexception" => 424,
        "serviceunavailableexception" => 503,
        "internalserverexception" | "modelstreamerrorexception" => 500,
        _ => return ProviderError::Stream(format!("{kind}: {message}")),
    };
    typed(status, Some(&kind), message, &HeaderMap::new())
}

fn typed(status: u16, kind: Option<&str>, message: String, headers: &HeaderMap) -> ProviderError {
    let message = match kind {
        Some(kind) if !kind.is_empty() => format!("{kind}: {message}"),
        _ => message,
    };
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
        400 | 404 | 413 | 422 | 424 => ProviderError::BadRequest { status, message },
        500..=599 => ProviderError::Server {
            status,
            retries: 0,
            retry_after: retry_after(headers),
            message,
        },
        _ => ProviderError::Http { status, message },
    }
}

fn is_context_overflow(message: &str) -> bool {
    let message = message.to_ascii_lowercase();
    CONTEXT_MARKERS
        .iter()
        .any(|marker| message.contains(marker))
}

/// The `__type` and the message (cut, control characters removed) of an error body; the body's
/// own text when it is not JSON (a proxy's page).
fn error_body(body: &[u8]) -> (Option<String>, String) {
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (None, clean(String::from_utf8_lossy(body).trim()));
    };
    let kind = value
        .get("__type")
        .and_then(Value::as_str)
        .map(|kind| kind.rsplit('#').next().unwrap_or(kind).to_owned());
    let message = ["message", "Message"]
        .iter()
        .find_map(|key| value.get(key).and_then(Value::as_str))
        .map_or_else(|| value.to_string(), str::to_owned);
    (kind, clean(&message))
}

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
    use crate::llm::RetryPolicy;

    fn headers(kind: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert("x-amzn-errortype", kind.parse().unwrap());
        map
    }

    #[test]
    fn throttling_is_retried_and_validation_is_not() {
        let throttled = status_error(
            429,
            &headers("ThrottlingException:http://internal.amazon.com/coral/com.amazon.bedrock/"),
            br#"{"message":"Too many requests, please wait before trying again."}"#,
        );
        assert!(
            matches!(&throttled, ProviderError::RateLimited { message, .. } if message.starts_with("ThrottlingException: Too many"))
        );
        assert!(RetryPolicy::is_retryable(&throttled));
        let invalid = status_error(
            400,
            &headers("ValidationException"),
            br#"{"message":"The model returned the following errors: messages: roles must alternate"}"#,
        );
        assert!(matches!(
            invalid,
            ProviderError::BadRequest { status: 400, .. }
        ));
        assert!(!RetryPolicy::is_retryable(&invalid));
        assert!(matches!(
            status_error(
                400,
                &headers("ValidationException"),
                br#"{"message":"Input is too long for requested model."}"#
            ),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            status_error(403, &HeaderMap::new(), br#"{"Message":"\u001b[31mThe security token included in the request is invalid."}"#),
            ProviderError::Authentication { status: 403, message } if !message.contains('\u{1b}')
        ));
        assert!(matches!(
            status_error(503, &HeaderMap::new(), b"<html>oops</html>"),
            ProviderError::Server { status: 503, .. }
        ));
    }

    #[test]
    fn stream_exceptions_are_typed_like_their_status() {
        assert!(matches!(
            exception_error("modelStreamErrorException", r#"{"message":"boom"}"#),
            ProviderError::Server { status: 500, .. }
        ));
        assert!(matches!(
            exception_error("validationException", r#"{"message":"bad"}"#),
            ProviderError::BadRequest { status: 400, .. }
        ));
        assert!(matches!(
            exception_error(
                "error",
                r#"{"code":"ThrottlingException","message":"slow"}"#
            ),
            ProviderError::RateLimited { .. }
        ));
        assert!(matches!(
            exception_error("somethingNewException", "{}"),
            ProviderError::Stream(_)
        ));
    }
}
