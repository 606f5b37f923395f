//! Gemini's error bodies (`{"error": {"code", "message", "status", "details"}}`, Google's
//! `google.rpc.Status`) as typed [`ProviderError`]s, for an HTTP status and inside a stream.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::transport::{retry_after, truncate};

/// The longest wait a `RetryInfo.retryDelay` may ask for (the retry policy caps it again).
const MAX_RETRY_DELAY: Duration = Duration::from_secs(3600);

/// What Gemini says when the prompt does not fit: "The input token count (1200000) exceeds
/// the maximum number of tokens allowed (1048576)." Matched lowercased.
const CONTEXT_LENGTH_MARKERS: &[&str] = &[
    "input token count",
    "exceeds the maximum number of tokens",
    "prompt is too long",
    "context window",
];

/// The parts of a Gemini error object this client reads.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct GeminiError {
    /// `code`: the HTTP status it stands for.
    pub(crate) code: Option<u16>,
    /// `message`, cut and stripped for display.
    pub(crate) message: String,
    /// `status`: the RPC status name (`RESOURCE_EXHAUSTED`, `INVALID_ARGUMENT`, ...).
    pub(crate) status: Option<String>,
    /// `RetryInfo.retryDelay` from `details`.
    pub(crate) retry_delay: Option<Duration>,
    /// The `ErrorInfo.reason`s from `details` (`API_KEY_INVALID`, ...).
    pub(crate) reasons: Vec<String>,
}

impl GeminiError {
    /// Read an error object (the value of `"error"`); anything missing stays empty.
    pub(crate) fn from_object(error: &Value) -> GeminiError {
        let message = match error {
            Value::String(text) => text.clone(),
            _ => error
                .get("message")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .unwrap_or_else(|| error.to_string()),
        };
        let code = error.get("code").and_then(|code| match code {
            Value::Number(code) => code.as_u64(),
            Value::String(code) => code.trim().parse().ok(),
            _ => None,
        });
        let mut parsed = GeminiError {
            code: code.and_then(|code| u16::try_from(code).ok()),
            message: truncate(&message),
            status: error
                .get("status")
                .and_then(Value::as_str)
                .map(str::to_owned),
            ..GeminiError::default()
        };
        for detail in error
            .get("details")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let kind = detail.get("@type").and_then(Value::as_str).unwrap_or("");
            if kind.ends_with("google.rpc.RetryInfo") {
                parsed.retry_delay = detail
                    .get("retryDelay")
                    .and_then(Value::as_str)
                    .and_then(parse_duration);
            } else if kind.ends_with("google.rpc.ErrorInfo")
                && let Some(reason) = detail.get("reason").and_then(Value::as_str)
            {
                parsed.reasons.push(reason.to_owned());
            }
        }
        parsed
    }

    /// Whether the message says the prompt does not fit the context window.
    fn is_context_length(&self) -> bool {
        let message = self.message.to_ascii_lowercase();
        CONTEXT_LENGTH_MARKERS
            .iter()
            .any(|marker| message.contains(marker))
    }

    /// The typed error for this object sent with HTTP `status` (the transport's headers for
    /// `Retry-After`).
    pub(crate) fn into_provider_error(self, status: u16, headers: &HeaderMap) -> ProviderError {
        let retry = retry_after(headers).or(self.retry_delay);
        let message = self.message.clone();
        let invalid_key = self
            .reasons
            .iter()
            .any(|reason| reason == "API_KEY_INVALID" || reason == "API_KEY_EXPIRED");
        match status {
            // Gemini answers a wrong key with 400 INVALID_ARGUMENT + ErrorInfo API_KEY_INVALID.
            _ if invalid_key => ProviderError::Authentication { status, message },
            401 | 403 => ProviderError::Authentication { status, message },
            429 => ProviderError::RateLimited {
                retry_after: retry,
                retries: 0,
                message,
            },
            400 | 413 if self.is_context_length() => {
                ProviderError::ContextLengthExceeded { message }
            }
            400 | 404 | 422 => ProviderError::BadRequest { status, message },
            500..=599 => ProviderError::Server {
                status,
                retries: 0,
                retry_after: retry,
                message,
            },
            _ => ProviderError::Http { status, message },
        }
    }
}

/// The typed error for a non-success HTTP status with its headers and body.
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
    let error = match serde_json::from_slice::<Value>(body) {
        // Gemini's error body; some proxies send a list of them.
        Ok(value) => {
            let value = match &value {
                Value::Array(items) => items.first().cloned().unwrap_or(Value::Null),
                _ => value,
            };
            match value.get("error") {
                Some(error) => GeminiError::from_object(error),
                None => GeminiError {
                    message: truncate(String::from_utf8_lossy(body).trim()),
                    ..GeminiError::default()
                },
            }
        }
        Err(_) => GeminiError {
            message: truncate(String::from_utf8_lossy(body).trim()),
            ..GeminiError::default()
        },
    };
    error.into_provider_error(status, headers)
}

/// The typed error for an `{"error": ...}` object inside a 200 stream (or a 200 body): typed
/// like the HTTP status its `code` names, so a retryable one (500, 503, 429) is retried;
/// else [`ProviderError::Stream`].
pub(crate) fn embedded_error(error: &Value) -> ProviderError {
    let parsed = GeminiError::from_object(error);
    if parsed.is_context_length() {
        return ProviderError::ContextLengthExceeded {
            message: parsed.message,
        };
    }
    let status = parsed
        .code
        .filter(|code| (400..600).contains(code))
        .or_else(|| status_of(parsed.status.as_deref()?));
    match status {
        Some(status) => parsed.into_provider_error(status, &HeaderMap::new()),
        None => ProviderError::Stream(parsed.message),
    }
}

/// The HTTP status of an RPC status name, for an error object without a numeric `code`.
fn status_of(status: &str) -> Option<u16> {
    Some(match status {
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "UNAUTHENTICATED" => 401,
        "PERMISSION_DENIED" => 403,
        "NOT_FOUND" => 404,
        "RESOURCE_EXHAUSTED" => 429,
        "INTERNAL" | "UNKNOWN" | "DATA_LOSS" => 500,
        "UNAVAILABLE" => 503,
        "DEADLINE_EXCEEDED" => 504,
        _ => return None,
    })
}

/// A protobuf JSON `Duration` (`"12s"`, `"0.5s"`, `"1.000340012s"`), capped.
fn parse_duration(text: &str) -> Option<Duration> {
    let seconds: f64 = text.trim().strip_suffix('s')?.parse().ok()?;
    if !seconds.is_finite() || seconds < 0.0 {
        return None;
    }
    Some(Duration::from_secs_f64(
        seconds.min(MAX_RETRY_DELAY.as_secs_f64()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(value: Value) -> Vec<u8> {
        value.to_string().into_bytes()
    }

    #[test]
    fn retry_info_is_honoured_on_429() {
        let error = status_error(
            429,
            &HeaderMap::new(),
            &body(serde_json::json!({"error": {
                "code": 429,
                "message": "You exceeded your current quota, please check your plan and billing details.",
                "status": "RESOURCE_EXHAUSTED",
                "details": [
                    {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []},
                    {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "12s"}
                ]
            }})),
        );
        match error {
            ProviderError::RateLimited { retry_after, .. } => {
                assert_eq!(retry_after, Some(Duration::from_secs(12)));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse_duration("0.5s"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("99999999s"), Some(MAX_RETRY_DELAY));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("12"), None);
    }

    #[test]
    fn context_overflow_bad_requests_and_invalid_keys_are_typed() {
        let overflow = status_error(
            400,
            &HeaderMap::new(),
            &body(serde_json::json!({"error": {
                "code": 400,
                "message": "The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).",
                "status": "INVALID_ARGUMENT"
            }})),
        );
        assert!(matches!(
            overflow,
            ProviderError::ContextLengthExceeded { .. }
        ));
        let bad = status_error(
            400,
            &HeaderMap::new(),
            &body(serde_json::json!({"error": {
                "code": 400,
                "message": "Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.",
                "status": "INVALID_ARGUMENT"
            }})),
        );
        assert!(matches!(bad, ProviderError::BadRequest { status: 400, .. }));
        let key = status_error(
            400,
            &HeaderMap::new(),
            &body(serde_json::json!({"error": {
                "code": 400,
                "message": "API key not valid. Please pass a valid API key.",
                "status": "INVALID_ARGUMENT",
                "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}]
            }})),
        );
        assert!(matches!(
            key,
            ProviderError::Authentication { status: 400, .. }
        ));
        let server = status_error(503, &HeaderMap::new(), b"<html>upstream down</html>");
        assert!(matches!(server, ProviderError::Server { status: 503, .. }));
    }

    #[test]
    fn an_error_inside_the_stream_is_typed_by_its_code() {
        let internal = embedded_error(&serde_json::json!({
            "code": 500, "message": "An internal error has occurred.", "status": "INTERNAL"
        }));
        assert!(matches!(
            internal,
            ProviderError::Server { status: 500, .. }
        ));
        let unavailable =
            embedded_error(&serde_json::json!({"message": "overloaded", "status": "UNAVAILABLE"}));
        assert!(matches!(
            unavailable,
            ProviderError::Server { status: 503, .. }
        ));
        let other = embedded_error(&serde_json::json!({"message": "strange"}));
        assert!(matches!(other, ProviderError::Stream(_)));
    }
}
