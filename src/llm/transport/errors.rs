//! What every backend's errors share: a cut server message, the wait a server asked for, and
//! the typed error of a request that failed before its response arrived.

use std::time::{Duration, SystemTime};

use reqwest::header::HeaderMap;

use crate::llm::error::{ProviderError, TimeoutKind};

/// The longest server message kept in an error (the body of an HTML error page can be huge).
const MAX_MESSAGE_CHARS: usize = 500;

/// How much of an error body is read: enough for any real server's JSON error (a cut body
/// that no longer parses still yields its text, cut to 500 characters).
pub const MAX_ERROR_BODY_BYTES: usize = 64 * 1024;

/// Cut a message to [`MAX_MESSAGE_CHARS`] characters (on a character boundary).
pub fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_MESSAGE_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

/// How long the server asked us to wait: `retry-after-ms` (OpenAI, Azure), else `Retry-After`
/// in seconds or as an HTTP date.
pub fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|value| value.to_str().ok());
    if let Some(millis) = header("retry-after-ms").and_then(|v| v.trim().parse::<f64>().ok()) {
        return duration_from_secs(millis / 1000.0);
    }
    let value = header("retry-after")?.trim();
    if let Ok(seconds) = value.parse::<f64>() {
        return duration_from_secs(seconds);
    }
    let date = httpdate::parse_http_date(value).ok()?;
    Some(
        date.duration_since(SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn duration_from_secs(seconds: f64) -> Option<Duration> {
    Duration::try_from_secs_f64(seconds).ok()
}

/// The typed error for a transport failure before the response arrived.
pub fn send_error(
    error: &reqwest::Error,
    connect_timeout: Duration,
    request_timeout: Duration,
) -> ProviderError {
    if error.is_timeout() {
        if error.is_connect() {
            return ProviderError::Timeout {
                what: TimeoutKind::Connect,
                limit: connect_timeout,
                retries: 0,
            };
        }
        return ProviderError::Timeout {
            what: TimeoutKind::Request,
            limit: request_timeout,
            retries: 0,
        };
    }
    if error.is_builder() {
        return ProviderError::Other(format!("invalid request: {}", error_chain(error)));
    }
    ProviderError::Connection {
        retries: 0,
        message: error_chain(error),
    }
}

/// An error and its sources on one line (reqwest's own message hides the cause).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            if let Ok(value) = HeaderValue::from_str(value) {
                map.insert(*name, value);
            }
        }
        map
    }

    #[test]
    fn retry_after_reads_seconds_milliseconds_and_dates() {
        assert_eq!(
            retry_after(&headers(&[("retry-after", "2")])),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            retry_after(&headers(&[("retry-after", "1"), ("retry-after-ms", "250")])),
            Some(Duration::from_millis(250))
        );
        let later = SystemTime::now() + Duration::from_secs(120);
        let date = httpdate::fmt_http_date(later);
        let wait = retry_after(&headers(&[("retry-after", &date)])).unwrap();
        assert!(wait > Duration::from_secs(100) && wait <= Duration::from_secs(120));
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
        assert_eq!(
            retry_after(&headers(&[("retry-after", &past)])),
            Some(Duration::ZERO)
        );
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
        assert_eq!(retry_after(&HeaderMap::new()), None);
    }
}
