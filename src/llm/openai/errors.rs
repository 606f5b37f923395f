//! Mapping HTTP failures of an OpenAI-compatible server to typed [`ProviderError`]s, so
//! [`crate::llm::RetryPolicy::is_retryable`] can decide what to retry.

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::transport::{retry_after, truncate};

/// Phrases servers use when the prompt does not fit the context window (OpenAI, Azure, vLLM,
/// DeepSeek, Groq, Mistral, llama.cpp, Anthropic-compatible proxies). Matched lowercased.
const CONTEXT_LENGTH_MARKERS: &[&str] = &[
    "context_length_exceeded",
    "maximum context length",
    "context window",
    "context length",
    "exceed_context_size_error",
    "exceeds the available context size",
    "prompt is too long",
    "input is too long",
    "reduce the length of the messages",
    "too many tokens",
];

/// The typed error for a non-success HTTP status with its headers and body.
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
    let (message, code) = server_message(body);
    match status {
        401 | 403 => ProviderError::Authentication { status, message },
        // OpenAI's "You exceeded your current quota" is a billing state, not a rate limit:
        // retrying cannot help, so it is not a `RateLimited` (which is retried).
        429 if code.as_deref() == Some("insufficient_quota") => {
            ProviderError::Http { status, message }
        }
        429 => ProviderError::RateLimited {
            retry_after: retry_after(headers),
            retries: 0,
            message,
        },
        400 | 413 | 422 if is_context_length(&message, code.as_deref()) => {
            ProviderError::ContextLengthExceeded { message }
        }
        400 | 404 | 422 => ProviderError::BadRequest { status, message },
        500..=599 => ProviderError::Server {
            status,
            retries: 0,
            retry_after: retry_after(headers),
            message,
        },
        _ => ProviderError::Http { status, message },
    }
}

/// The typed error for an `{"error": ...}` object a server sent with status 200 or inside a stream.
pub(crate) fn error_object_message(error: &Value) -> String {
    match error {
        Value::String(text) => text.clone(),
        Value::Object(object) => object
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| truncate(&error.to_string())),
        other => truncate(&other.to_string()),
    }
}

/// The typed error for an error object inside a stream (an `{"error": ...}` chunk, an
/// `event: error`, llama.cpp's `error:` line): [`ProviderError::ContextLengthExceeded`] when it says
/// the prompt does not fit (llama.cpp reports that mid-stream), else [`ProviderError::Stream`].
pub(crate) fn stream_error(error: &Value) -> ProviderError {
    let message = error_object_message(error);
    let code = ["code", "type"]
        .iter()
        .filter_map(|key| error.get(key).and_then(Value::as_str))
        .find(|code| is_context_length("", Some(code)));
    if is_context_length(&message, code) {
        ProviderError::ContextLengthExceeded { message }
    } else if let Some(status) = embedded_status(error) {
        // Typed like the same HTTP status, so a first-event error is retried like one.
        let body = serde_json::json!({ "error": error }).to_string();
        status_error(status, &HeaderMap::new(), body.as_bytes())
    } else {
        ProviderError::Stream(message)
    }
}

/// The HTTP status an error object sent with HTTP 200 (or inside a stream) stands for: its
/// `code` when that is an HTTP error status (llama.cpp `500`, OpenRouter `502`, `"503"`), else
/// what its `type`/`code` name says (OpenAI's `server_error` is a 500).
pub(crate) fn embedded_status(error: &Value) -> Option<u16> {
    let numeric = error.get("code").and_then(|code| match code {
        Value::Number(code) => code.as_u64(),
        Value::String(code) => code.trim().parse().ok(),
        _ => None,
    });
    if let Some(status) = numeric.and_then(|code| u16::try_from(code).ok()) {
        return (400..600).contains(&status).then_some(status);
    }
    ["type", "code"]
        .iter()
        .filter_map(|key| error.get(key).and_then(Value::as_str))
        .find_map(|name| match name {
            "server_error" | "internal_error" | "internal_server_error" | "api_error" => Some(500),
            "service_unavailable" | "overloaded" | "overloaded_error" => Some(503),
            "rate_limit_exceeded" | "rate_limit_error" | "too_many_requests" => Some(429),
            _ => None,
        })
}

/// Whether an error message or code says the context window was exceeded.
pub(crate) fn is_context_length(message: &str, code: Option<&str>) -> bool {
    let message = message.to_ascii_lowercase();
    let code = code.unwrap_or_default().to_ascii_lowercase();
    CONTEXT_LENGTH_MARKERS
        .iter()
        .any(|marker| message.contains(marker) || code.contains(marker))
}

/// The server's message and error code from an error body: `{"error":{"message","code"|"type"}}`,
/// `{"error":"text"}`, `{"detail":...}` (FastAPI), `{"message":...}`, or the body text itself.
pub(crate) fn server_message(body: &[u8]) -> (String, Option<String>) {
    let text = String::from_utf8_lossy(body);
    let Ok(value) = serde_json::from_slice::<Value>(body) else {
        return (truncate(text.trim()), None);
    };
    if let Some(error) = value.get("error") {
        let code = ["code", "type"].iter().find_map(|key| {
            error.get(key).and_then(|code| match code {
                Value::String(code) => Some(code.clone()),
                Value::Number(code) => Some(code.to_string()),
                _ => None,
            })
        });
        return (truncate(&error_object_message(error)), code);
    }
    if let Some(detail) = value.get("detail") {
        return (truncate(&detail_text(detail)), None);
    }
    if let Some(message) = value.get("message").and_then(Value::as_str) {
        return (truncate(message), None);
    }
    (truncate(text.trim()), None)
}

/// FastAPI's `detail` is a string or a list of `{"loc","msg","type"}` objects.
fn detail_text(detail: &Value) -> String {
    match detail {
        Value::String(text) => text.clone(),
        Value::Array(items) => items
            .iter()
            .map(|item| {
                item.get("msg")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
                    .unwrap_or_else(|| item.to_string())
            })
            .collect::<Vec<_>>()
            .join("; "),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn statuses_map_to_their_variants() {
        let body = br#"{"error":{"message":"nope","type":"invalid_request_error"}}"#;
        let empty = HeaderMap::new();
        assert!(matches!(
            status_error(401, &empty, body),
            ProviderError::Authentication { status: 401, .. }
        ));
        assert!(matches!(
            status_error(403, &empty, body),
            ProviderError::Authentication { status: 403, .. }
        ));
        assert!(matches!(
            status_error(404, &empty, body),
            ProviderError::BadRequest { status: 404, .. }
        ));
        assert!(matches!(
            status_error(422, &empty, body),
            ProviderError::BadRequest { status: 422, .. }
        ));
        assert!(matches!(
            status_error(409, &empty, body),
            ProviderError::Http { status: 409, .. }
        ));
        assert!(matches!(
            status_error(503, &empty, body),
            ProviderError::Server {
                status: 503,
                retries: 0,
                ..
            }
        ));
    }

    #[test]
    fn an_exhausted_quota_429_is_not_a_retryable_rate_limit() {
        let body = br#"{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}"#;
        let error = status_error(429, &HeaderMap::new(), body);
        assert!(
            matches!(&error, ProviderError::Http { status: 429, message } if message.contains("quota")),
            "{error:?}"
        );
        assert!(!crate::llm::RetryPolicy::is_retryable(&error));
        let plain = br#"{"error":{"message":"Rate limit reached","type":"requests","code":"rate_limit_exceeded"}}"#;
        assert!(matches!(
            status_error(429, &HeaderMap::new(), plain),
            ProviderError::RateLimited { .. }
        ));
    }

    #[test]
    fn a_context_length_error_inside_a_stream_keeps_its_kind() {
        let llama = serde_json::json!({"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"});
        assert!(matches!(
            stream_error(&llama),
            ProviderError::ContextLengthExceeded { message } if message.contains("context size")
        ));
        let coded = serde_json::json!({"message": "too long", "code": "context_length_exceeded"});
        assert!(matches!(
            stream_error(&coded),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            stream_error(&serde_json::json!({"message": "overloaded"})),
            ProviderError::Stream(message) if message == "overloaded"
        ));
    }

    #[test]
    fn a_503_keeps_its_retry_after() {
        assert!(matches!(
            status_error(503, &headers(&[("retry-after", "5")]), b"overloaded"),
            ProviderError::Server {
                status: 503,
                retry_after: Some(wait),
                ..
            } if wait == std::time::Duration::from_secs(5)
        ));
    }

    #[test]
    fn context_length_errors_of_several_servers_are_recognised() {
        let empty = HeaderMap::new();
        for body in [
            // OpenAI / Azure
            &br#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}"#[..],
            // llama.cpp
            br#"{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error","n_prompt_tokens":5000,"n_ctx":4096}}"#,
            // vLLM
            br#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}"#,
        ] {
            assert!(
                matches!(
                    status_error(400, &empty, body),
                    ProviderError::ContextLengthExceeded { .. }
                ),
                "{}",
                String::from_utf8_lossy(body)
            );
        }
    }

    #[test]
    fn messages_are_extracted_from_every_body_shape() {
        assert_eq!(server_message(br#"{"error":{"message":"m1"}}"#).0, "m1");
        assert_eq!(server_message(br#"{"error":"m2"}"#).0, "m2");
        assert_eq!(server_message(br#"{"detail":"m3"}"#).0, "m3");
        assert_eq!(
            server_message(br#"{"detail":[{"loc":["body"],"msg":"field required","type":"x"}]}"#).0,
            "field required"
        );
        assert_eq!(server_message(b"  Bad Gateway\n").0, "Bad Gateway");
        let long = "é".repeat(2000);
        let cut = server_message(long.as_bytes()).0;
        assert_eq!(cut.chars().count(), 500 + 1);
    }
}
