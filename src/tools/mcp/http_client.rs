//! The HTTP client of streamable-HTTP MCP sessions, with and without OAuth: the one rmcp's
//! `from_config` builds (private there), so wrapping the transport (trace headers, OAuth) keeps
//! its behaviour.

/// The reqwest client rmcp's `from_config` would build: no idle pooling (rmcp: avoids
/// delayed-ACK stalls), and only same-origin 307/308 redirects followed, at most 10 (a
/// cross-origin one would replay the session id and headers to another host).
pub(crate) fn mcp_http_client() -> Result<reqwest::Client, reqwest::Error> {
    reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .redirect(reqwest::redirect::Policy::custom(|attempt| {
            let keeps_body = matches!(
                attempt.status(),
                reqwest::StatusCode::TEMPORARY_REDIRECT | reqwest::StatusCode::PERMANENT_REDIRECT
            );
            let same_origin = attempt
                .previous()
                .first()
                .is_some_and(|first| first.origin() == attempt.url().origin());
            if !keeps_body || !same_origin {
                attempt.stop()
            } else if attempt.previous().len() > 10 {
                attempt.error("exceeded 10 redirects")
            } else {
                attempt.follow()
            }
        }))
        .build()
}
