//! [`Authorizer`]: takes the user through the authorization URL and returns the redirect.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

/// How long [`RedirectAuthorizer`] waits for the authorization endpoint.
const REDIRECT_TIMEOUT: Duration = Duration::from_secs(30);

/// Takes the user through an authorization URL (a browser, a terminal prompt, a loopback
/// listener ...) and returns the URL the authorization server redirected to, carrying `code`
/// and `state` (and `iss`, RFC 9207).
#[async_trait]
pub trait Authorizer: Send + Sync + fmt::Debug {
    /// Authorize at `authorization_url`; the redirect URL, or why not (no secrets in it).
    async fn authorize(&self, authorization_url: &str) -> Result<String, String>;

    /// Why this authorizer will not authorize now (e.g. no user to ask), checked before any
    /// request to the authorization server — so no client gets registered in vain.
    fn declines(&self) -> Option<String> {
        None
    }
}

/// An [`Authorizer`] for authorization servers that redirect at once (automation, tests,
/// already-consented clients): a GET of the authorization URL that does not follow the
/// redirect and returns its `Location`.
#[derive(Debug, Clone)]
pub struct RedirectAuthorizer {
    http: reqwest::Client,
}

impl RedirectAuthorizer {
    /// A new authorizer with its own HTTP client (no redirects followed).
    pub fn new() -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REDIRECT_TIMEOUT)
            .build()
            .unwrap_or_default();
        RedirectAuthorizer { http }
    }
}

impl Default for RedirectAuthorizer {
    fn default() -> Self {
        Self::new()
    }
}

#[async_trait]
impl Authorizer for RedirectAuthorizer {
    async fn authorize(&self, authorization_url: &str) -> Result<String, String> {
        let base = reqwest::Url::parse(authorization_url)
            .map_err(|error| format!("invalid authorization URL: {error}"))?;
        let response =
            self.http.get(base.clone()).send().await.map_err(|error| {
                format!("authorization request failed: {}", error.without_url())
            })?;
        let status = response.status();
        let location = response
            .headers()
            .get(reqwest::header::LOCATION)
            .and_then(|value| value.to_str().ok())
            .filter(|_| status.is_redirection())
            .ok_or_else(|| {
                format!("the authorization endpoint answered HTTP {status} without a redirect")
            })?;
        // A relative Location is resolved against the authorization URL (RFC 9110 §10.2.2).
        base.join(location)
            .map(String::from)
            .map_err(|error| format!("invalid redirect location: {error}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A one-shot HTTP server answering `response` to the first request.
    async fn serve_once(response: &'static str) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 2048];
            let _ = socket.read(&mut buf).await;
            socket.write_all(response.as_bytes()).await.unwrap();
        });
        format!("http://{addr}/authorize?state=s1")
    }

    #[tokio::test]
    async fn returns_the_redirect_location_without_following_it() {
        let url = serve_once(
            "HTTP/1.1 302 Found\r\nLocation: http://127.0.0.1:1/cb?code=c1&state=s1\r\nContent-Length: 0\r\n\r\n",
        )
        .await;
        let redirect = tokio::time::timeout(
            Duration::from_secs(20),
            RedirectAuthorizer::new().authorize(&url),
        )
        .await
        .unwrap()
        .unwrap();
        assert_eq!(redirect, "http://127.0.0.1:1/cb?code=c1&state=s1");
    }

    #[tokio::test]
    async fn relative_locations_resolve_and_non_redirects_fail() {
        let url =
            serve_once("HTTP/1.1 302 Found\r\nLocation: /cb?code=c2\r\nContent-Length: 0\r\n\r\n")
                .await;
        let redirect = RedirectAuthorizer::new().authorize(&url).await.unwrap();
        assert!(redirect.ends_with("/cb?code=c2") && redirect.starts_with("http://127.0.0.1:"));
        let url = serve_once("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").await;
        let error = RedirectAuthorizer::new().authorize(&url).await.unwrap_err();
        assert!(error.contains("HTTP 200 OK without a redirect"), "{error}");
    }
}
