//! The errors of the Responses API: HTTP statuses (OpenAI's error bodies, mapped like the
//! chat-completions client maps them) and the error objects a reply reports with HTTP 200 —
//! an `error` event, a `response.failed` event's `response.error`, a whole reply whose status
//! is `failed`.

use std::time::Duration;

use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::openai::errors::is_context_length;
use crate::llm::transport::truncate;

/// The typed error of a non-success HTTP status (OpenAI's `{"error": {...}}` bodies).
pub(crate) fn status_error(status: u16, headers: &HeaderMap, body: &[u8]) -> ProviderError {
    crate::llm::openai::errors::status_error(status, headers, body)
}

/// The typed error of an error object reported inside a successful reply
/// (`{"code", "message", ...}`, or an `{"error": {...}}` wrapper): typed like the HTTP status
/// its code stands for, so a server error is retried and a context overflow reaches the
/// context engine.
pub(crate) fn error_object(error: &Value) -> ProviderError {
    let error = match error.get("error") {
        Some(inner @ Value::Object(_)) => inner,
        _ => error,
    };
    let message = match error.get("message").and_then(Value::as_str) {
        Some(message) => truncate(message),
        None => truncate(&error.to_string()),
    };
    let code = text_field(error, "code");
    let kind = text_field(error, "type");
    let names = [code.as_deref(), kind.as_deref()];
    if names.iter().flatten().any(|name| is_context_length("", Some(name)))
        || is_context_length(&message, None)
    {
        return ProviderError::ContextLengthExceeded { message };
    }
    let status = names.iter().flatten().find_map(|name| status_of(name));
    match status {
        Some(429) if names.contains(&Some("insufficient_quota")) => ProviderError::Http {
            status: 429,
            message,
        },
        Some(429) => ProviderError::RateLimited {
            retry_after: asked_wait(&message),
            retries: 0,
            message,
        },
        Some(status @ 500..=599) => ProviderError::Server {
            status,
            retries: 0,
            retry_after: None,
            message,
        },
        Some(status @ 400..=499) => ProviderError::BadRequest { status, message },
        _ => ProviderError::Stream(match code {
            Some(code) => format!("{}: {message}", truncate(&code)),
            None => message,
        }),
    }
}

/// The error of a reply whose status is `failed` (its `error` object, else a plain message).
pub(crate) fn failed(response: &Value) -> ProviderError {
    match response.get("error") {
        Some(error @ Value::Object(_)) => error_object(error),
        _ => ProviderError::Stream("the response failed without an error object".to_owned()),
    }
}

/// A string or numeric field as text.
fn text_field(error: &Value, key: &str) -> Option<String> {
    match error.get(key)? {
        Value::String(text) => Some(text.clone()),
        Value::Number(number) => Some(number.to_string()),
        _ => None,
    }
}

/// The HTTP status an error code stands for: a numeric code that is an error status, or the
/// names OpenAI (and compatible servers) use.
fn status_of(name: &str) -> Option<u16> {
    if let Ok(status) = name.trim().parse::<u16>() {
        return (400..600).contains(&status).then_some(status);
    }
    match name {
        "server_error" | "internal_error" | "internal_server_error" | "api_error" => Some(500),
        "service_unavailable" | "overloaded" | "server_overloaded" | "overloaded_error" => {
            Some(503)
        }
        "rate_limit_exceeded" | "rate_limit_error" | "too_many_requests" | "insufficient_quota" => {
            Some(429)
        }
        "invalid_request_error" | "invalid_prompt" => Some(400),
        _ => None,
    }
}

/// The wait a rate-limit message asks for ("Please try again in 1.632s" / "in 250ms").
fn asked_wait(message: &str) -> Option<Duration> {
    let rest = &message[message.find("try again in ")? + "try again in ".len()..];
    let number_end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let number: f64 = rest[..number_end].parse().ok()?;
    let seconds = match &rest[number_end..] {
        unit if unit.starts_with("ms") => number / 1000.0,
        unit if unit.starts_with('s') => number,
        _ => return None,
    };
    Duration::try_from_secs_f64(seconds).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn error_codes_map_to_the_kinds_of_their_statuses() {
        assert!(matches!(
            error_object(&json!({"code": "server_error", "message": "boom"})),
            ProviderError::Server { status: 500, .. }
        ));
        assert!(matches!(
            error_object(&json!({"code": "context_length_exceeded", "message": "too long"})),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            error_object(&json!({"code": null, "message": "Your input exceeds the context window of this model. Please adjust your input and try again."})),
            ProviderError::ContextLengthExceeded { .. }
        ));
        assert!(matches!(
            error_object(&json!({"code": "invalid_prompt", "message": "flagged"})),
            ProviderError::BadRequest { status: 400, .. }
        ));
        assert!(matches!(
            error_object(&json!({"error": {"code": 502, "message": "upstream"}})),
            ProviderError::Server { status: 502, .. }
        ));
        assert!(matches!(
            error_object(&json!({"code": "something_new", "message": "m"})),
            ProviderError::Stream(message) if message == "something_new: m"
        ));
        assert!(matches!(
            error_object(&json!({"code": "insufficient_quota", "message": "quota"})),
            ProviderError::Http { status: 429, .. }
        ));
    }

    #[test]
    fn a_rate_limit_keeps_the_wait_its_message_asks_for() {
        let error = error_object(&json!({"code": "rate_limit_exceeded",
            "message": "Rate limit reached for gpt-5 on tokens per min (TPM). Please try again in 1.632s. Visit https://platform.openai.com/account/rate-limits to learn more."}));
        assert!(matches!(
            error,
            ProviderError::RateLimited { retry_after: Some(wait), .. } if wait == Duration::from_millis(1632)
        ));
        assert_eq!(asked_wait("try again in 250ms."), Some(Duration::from_millis(250)));
        assert_eq!(asked_wait("try again later"), None);
    }

    #[test]
    fn messages_are_cut_and_a_failure_without_an_object_is_a_stream_error() {
        let long = "x".repeat(5000);
        let ProviderError::Server { message, .. } =
            error_object(&json!({"code": "server_error", "message": long}))
        else {
            panic!("not a server error");
        };
        assert!(message.chars().count() < 600);
        assert!(matches!(
            failed(&json!({"status": "failed", "error": null})),
            ProviderError::Stream(_)
        ));
    }
}
