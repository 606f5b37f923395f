//! An error body that quotes the request's own credentials (a 401 "Incorrect API key provided:
//! sk-…", a proxy echoing the request headers) must not carry them into error texts, logs or
//! `--json` output: every sensitive header value of the request is masked in the body before
//! the body becomes an error.

use std::borrow::Cow;

use reqwest::header::HeaderMap;

/// What stands for a masked secret.
const MASK: &[u8] = b"<redacted>";

/// Secrets shorter than this are not masked: a short value (a scheme word, a version) would
/// mask ordinary text, and a key that short is no secret.
const MIN_SECRET_BYTES: usize = 8;

/// `body` with every sensitive value of `headers` (whole, and its credential after a scheme
/// such as `Bearer `) replaced by `<redacted>`.
pub(crate) fn mask_echoed_secrets<'b>(body: &'b [u8], headers: &HeaderMap) -> Cow<'b, [u8]> {
    let mut secrets: Vec<&[u8]> = Vec::new();
    for value in headers.values().filter(|value| value.is_sensitive()) {
        let whole = value.as_bytes();
        secrets.push(whole);
        if let Some(space) = whole.iter().position(|b| *b == b' ') {
            secrets.extend(whole.get(space + 1..));
        }
    }
    // Longest first, so a whole value goes before the credential inside it.
    secrets.sort_by_key(|secret| std::cmp::Reverse(secret.len()));
    secrets.retain(|secret| secret.len() >= MIN_SECRET_BYTES);
    let mut out = Cow::Borrowed(body);
    for secret in secrets {
        if find(&out, secret).is_some() {
            out = Cow::Owned(replace_all(&out, secret));
        }
    }
    out
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

fn replace_all(haystack: &[u8], needle: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut rest = haystack;
    while let Some(at) = find(rest, needle) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(MASK);
        rest = &rest[at + needle.len()..];
    }
    out.extend_from_slice(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{AUTHORIZATION, HeaderValue};

    #[test]
    fn sensitive_values_are_masked_and_others_kept() {
        let mut headers = HeaderMap::new();
        let mut bearer = HeaderValue::from_static("Bearer sk-secret-key-123");
        bearer.set_sensitive(true);
        headers.insert(AUTHORIZATION, bearer);
        let mut key = HeaderValue::from_static("azure-key-456789");
        key.set_sensitive(true);
        headers.insert("api-key", key);
        headers.insert("x-version", HeaderValue::from_static("2024-10-21-public"));
        let body = br#"{"error": "Incorrect API key provided: sk-secret-key-123 (azure-key-456789), header Bearer sk-secret-key-123, version 2024-10-21-public"}"#;
        let masked = mask_echoed_secrets(body, &headers);
        let text = String::from_utf8_lossy(&masked);
        assert!(
            !text.contains("sk-secret") && !text.contains("azure-key"),
            "{text}"
        );
        assert_eq!(text.matches("<redacted>").count(), 3, "{text}");
        assert!(text.contains("2024-10-21-public"));
        // Nothing to mask: the body is not copied.
        assert!(matches!(
            mask_echoed_secrets(b"plain", &headers),
            Cow::Borrowed(_)
        ));
    }
}
