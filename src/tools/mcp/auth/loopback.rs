//! [`LoopbackAuthorizer`]: the user authorizes in a browser; the redirect comes back to a
//! listener on `127.0.0.1` (RFC 8252 §7.3, native apps).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::Mutex;

use crate::tools::mcp::auth::authorizer::Authorizer;

/// The path of the redirect URI.
const CALLBACK_PATH: &str = "/callback";
/// The most bytes read of a request to the listener.
const MAX_REQUEST_BYTES: usize = 8 * 1024;
/// The most requests (favicons, probes) answered while waiting for the redirect.
const MAX_REQUESTS: usize = 32;

/// Shows the authorization URL to the user (print it, open a browser).
pub type ShowUrl = Arc<dyn Fn(&str) + Send + Sync>;

/// An [`Authorizer`] that shows the authorization URL and waits (bounded) for the browser's
/// redirect to `http://127.0.0.1:PORT/callback`.
pub struct LoopbackAuthorizer {
    listener: Mutex<TcpListener>,
    redirect_uri: String,
    show: ShowUrl,
    timeout: Duration,
}

impl fmt::Debug for LoopbackAuthorizer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LoopbackAuthorizer")
            .field("redirect_uri", &self.redirect_uri)
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl LoopbackAuthorizer {
    /// Listen on `127.0.0.1:port` (0: any free port), waiting up to `timeout` for the
    /// redirect; `show` gets the authorization URL.
    pub async fn bind(port: u16, timeout: Duration, show: ShowUrl) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = listener.local_addr()?.port();
        Ok(LoopbackAuthorizer {
            listener: Mutex::new(listener),
            redirect_uri: format!("http://127.0.0.1:{port}{CALLBACK_PATH}"),
            show,
            timeout,
        })
    }

    /// The redirect URI to register (`http://127.0.0.1:PORT/callback`).
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    async fn wait(&self) -> Result<String, String> {
        let listener = self.listener.lock().await;
        for _ in 0..MAX_REQUESTS {
            let (mut socket, _) = listener
                .accept()
                .await
                .map_err(|error| format!("the loopback listener failed: {error}"))?;
            let mut buf = vec![0u8; MAX_REQUEST_BYTES];
            let mut len = 0;
            // Read until the end of the request line (or the buffer is full).
            while len < buf.len() && !buf[..len].contains(&b'\n') {
                match tokio::time::timeout(Duration::from_secs(10), socket.read(&mut buf[len..]))
                    .await
                {
                    Ok(Ok(0)) | Err(_) => break,
                    Ok(Ok(n)) => len += n,
                    Ok(Err(_)) => break,
                }
            }
            let head = String::from_utf8_lossy(&buf[..len]);
            let target = head
                .lines()
                .next()
                .and_then(|line| line.strip_prefix("GET "))
                .and_then(|rest| rest.split(' ').next())
                .unwrap_or("");
            if target.split('?').next() == Some(CALLBACK_PATH) {
                let _ = socket
                    .write_all(
                        response(
                            "200 OK",
                            "Authorization finished; you can close this window.",
                        )
                        .as_bytes(),
                    )
                    .await;
                let origin = self.redirect_uri.trim_end_matches(CALLBACK_PATH);
                return Ok(format!("{origin}{target}"));
            }
            let _ = socket
                .write_all(response("404 Not Found", "Not found.").as_bytes())
                .await;
        }
        Err(format!(
            "no redirect to {} among {MAX_REQUESTS} requests",
            self.redirect_uri
        ))
    }
}

fn response(status: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[async_trait]
impl Authorizer for LoopbackAuthorizer {
    async fn authorize(&self, authorization_url: &str) -> Result<String, String> {
        (self.show)(authorization_url);
        tokio::time::timeout(self.timeout, self.wait())
            .await
            .map_err(|_| {
                format!(
                    "no authorization redirect reached {} within {}s",
                    self.redirect_uri,
                    self.timeout.as_secs()
                )
            })?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_callback_and_ignores_other_paths() {
        let shown = Arc::new(std::sync::Mutex::new(String::new()));
        let seen = shown.clone();
        let authorizer = LoopbackAuthorizer::bind(
            0,
            Duration::from_secs(20),
            Arc::new(move |url: &str| *seen.lock().unwrap() = url.to_owned()),
        )
        .await
        .unwrap();
        let redirect = authorizer.redirect_uri().to_owned();
        assert!(redirect.starts_with("http://127.0.0.1:") && redirect.ends_with("/callback"));
        let browser = tokio::spawn(async move {
            let http = reqwest::Client::new();
            let origin = redirect.trim_end_matches("/callback").to_owned();
            let missing = http
                .get(format!("{origin}/favicon.ico"))
                .send()
                .await
                .unwrap();
            assert_eq!(missing.status(), 404);
            let done = http
                .get(format!("{redirect}?code=c9&state=s9"))
                .send()
                .await
                .unwrap();
            assert_eq!(done.status(), 200);
        });
        let url = authorizer
            .authorize("https://as.example/authorize?x=1")
            .await
            .unwrap();
        browser.await.unwrap();
        assert!(url.ends_with("/callback?code=c9&state=s9"), "{url}");
        assert_eq!(*shown.lock().unwrap(), "https://as.example/authorize?x=1");
    }

    #[tokio::test]
    async fn gives_up_after_the_timeout() {
        let authorizer =
            LoopbackAuthorizer::bind(0, Duration::from_millis(200), Arc::new(|_: &str| {}))
                .await
                .unwrap();
        let error = authorizer
            .authorize("https://as.example/a")
            .await
            .unwrap_err();
        assert!(error.contains("within 0s"), "{error}");
    }
}
