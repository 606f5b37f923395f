//! [`DpopTokenHttp`]: the HTTP client of rmcp's OAuth state machine for a server that uses
//! DPoP. Token requests (a form with a `grant_type`: the code exchange, refreshes) get a proof
//! in the `DPoP` header; a `400 use_dpop_nonce` with a `DPoP-Nonce` is answered once with a
//! proof carrying that nonce (RFC 9449 §8). Every other request passes through unchanged.
//!
//! rmcp's own client filters the addresses discovered metadata may send it to; this one
//! instead reaches only the origins that filtered discovery already found (the MCP server, its
//! resource metadata, the authorization server's endpoints), redirects included — so a server
//! answering differently the second time cannot point it anywhere new.

use std::sync::Arc;
use std::time::Duration;

use rmcp::transport::auth::{
    OAuthHttpClient, OAuthHttpClientError, OAuthHttpClientFuture, OAuthHttpRedirectPolicy,
    OAuthHttpRequest,
};

use crate::tools::mcp::auth::dpop_binding::{
    DPOP_HEADER, DPOP_NONCE_HEADER, DpopBinding, USE_DPOP_NONCE,
};

/// An OAuth answer is small; anything larger is refused (rmcp's own bound).
const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Each OAuth request gets this long when rmcp suggests no timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// Redirects followed where rmcp allows them (discovery).
const MAX_REDIRECTS: usize = 10;

/// Why an OAuth request through [`DpopTokenHttp`] failed.
#[derive(Debug, thiserror::Error)]
enum TokenHttpError {
    #[error("the OAuth answer from {url} is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge { url: String },
    #[error("cannot build the OAuth response: {0}")]
    Response(#[from] http::Error),
    #[error("OAuth request to {url} refused: not an origin discovery found")]
    NotAllowed { url: String },
}

/// rmcp's [`OAuthHttpClient`] with DPoP proofs on token requests.
pub(crate) struct DpopTokenHttp {
    binding: Arc<DpopBinding>,
    allowed: Arc<Vec<url::Origin>>,
    follow: reqwest::Client,
    stop: reqwest::Client,
}

impl DpopTokenHttp {
    /// A client making proofs with `binding`, reaching only the `allowed` origins.
    pub(crate) fn new(
        binding: Arc<DpopBinding>,
        allowed: Vec<url::Origin>,
    ) -> Result<Self, reqwest::Error> {
        let allowed = Arc::new(allowed);
        let within = allowed.clone();
        let follow = reqwest::redirect::Policy::custom(move |attempt| {
            if !within.contains(&attempt.url().origin()) {
                let url = without_query(attempt.url());
                attempt.error(TokenHttpError::NotAllowed { url })
            } else if attempt.previous().len() > MAX_REDIRECTS {
                attempt.error(format!("more than {MAX_REDIRECTS} redirects"))
            } else {
                attempt.follow()
            }
        });
        let build = |policy| reqwest::Client::builder().redirect(policy).build();
        Ok(DpopTokenHttp {
            binding,
            allowed,
            follow: build(follow)?,
            stop: build(reqwest::redirect::Policy::none())?,
        })
    }

    async fn send(
        &self,
        request: http::Request<Vec<u8>>,
        client: &reqwest::Client,
        timeout: Duration,
    ) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
        let mut request = reqwest::Request::try_from(request)?;
        let url = without_query(request.url());
        if !self.allowed.contains(&request.url().origin()) {
            return Err(Box::new(TokenHttpError::NotAllowed { url }));
        }
        *request.timeout_mut() = Some(timeout);
        let mut response = client.execute(request).await?;
        let mut answer = http::Response::builder()
            .status(response.status())
            .version(response.version());
        for (name, value) in response.headers() {
            answer = answer.header(name, value);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await? {
            if body.len() + chunk.len() > MAX_RESPONSE_BYTES {
                return Err(Box::new(TokenHttpError::TooLarge { url }));
            }
            body.extend_from_slice(&chunk);
        }
        Ok(answer.body(body).map_err(TokenHttpError::from)?)
    }

    /// Send a token request with a proof; once more with the nonce a `use_dpop_nonce` answer
    /// gave.
    async fn send_token_request(
        &self,
        request: http::Request<Vec<u8>>,
        client: &reqwest::Client,
        timeout: Duration,
    ) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
        let url = request.uri().to_string();
        let (parts, body) = request.into_parts();
        let mut retried = false;
        loop {
            let proof = self.binding.proof("POST", &url, None)?;
            let mut attempt = http::Request::from_parts(parts.clone(), body.clone());
            attempt
                .headers_mut()
                .insert(DPOP_HEADER, http::HeaderValue::try_from(proof)?);
            let response = self.send(attempt, client, timeout).await?;
            let fresh = response
                .headers()
                .get(DPOP_NONCE_HEADER)
                .is_some_and(|nonce| self.binding.remember_nonce(&url, nonce.as_bytes()));
            if fresh && !retried && asks_for_nonce(&response) {
                retried = true;
                tracing::debug!(target: "agcore::mcp", %url, "token endpoint asked for a DPoP nonce");
                continue;
            }
            return Ok(response);
        }
    }
}

impl DpopTokenHttp {
    /// Send a token request agcore builds itself (the JWT bearer grant) with a proof and the
    /// nonce retry, following no redirects.
    pub(crate) async fn token_request(
        &self,
        request: http::Request<Vec<u8>>,
    ) -> Result<http::Response<Vec<u8>>, OAuthHttpClientError> {
        self.send_token_request(request, &self.stop, REQUEST_TIMEOUT)
            .await
    }
}

impl OAuthHttpClient for DpopTokenHttp {
    fn execute(&self, request: OAuthHttpRequest) -> OAuthHttpClientFuture<'_> {
        Box::pin(async move {
            let OAuthHttpRequest {
                request,
                redirect_policy,
                timeout,
                ..
            } = request;
            let client = match redirect_policy {
                OAuthHttpRedirectPolicy::Stop => &self.stop,
                _ => &self.follow,
            };
            let timeout = timeout.unwrap_or(REQUEST_TIMEOUT);
            if is_token_request(&request) {
                self.send_token_request(request, client, timeout).await
            } else {
                self.send(request, client, timeout).await
            }
        })
    }
}

/// `url` without query and fragment, for messages (a query may hold a code or a secret).
fn without_query(url: &url::Url) -> String {
    let mut url = url.clone();
    url.set_query(None);
    url.set_fragment(None);
    url.into()
}

/// A POST of a form naming a `grant_type`: only token requests have one.
fn is_token_request(request: &http::Request<Vec<u8>>) -> bool {
    let form = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/x-www-form-urlencoded"));
    request.method() == http::Method::POST
        && form
        && url::form_urlencoded::parse(request.body()).any(|(name, _)| name == "grant_type")
}

/// A `400` whose OAuth error is `use_dpop_nonce` (RFC 9449 §8).
fn asks_for_nonce(response: &http::Response<Vec<u8>>) -> bool {
    #[derive(serde::Deserialize)]
    struct OAuthError {
        error: Option<String>,
    }
    response.status() == http::StatusCode::BAD_REQUEST
        && serde_json::from_slice::<OAuthError>(response.body())
            .ok()
            .and_then(|answer| answer.error)
            .is_some_and(|error| error == USE_DPOP_NONCE)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: &str, content_type: &str, body: &str) -> http::Request<Vec<u8>> {
        http::Request::builder()
            .method(method)
            .uri("http://127.0.0.1:1/token")
            .header(http::header::CONTENT_TYPE, content_type)
            .body(body.as_bytes().to_vec())
            .unwrap()
    }

    #[test]
    fn only_form_posts_with_a_grant_type_are_token_requests() {
        let form = "application/x-www-form-urlencoded";
        assert!(is_token_request(&request(
            "POST",
            form,
            "grant_type=authorization_code&code=x"
        )));
        assert!(is_token_request(&request(
            "POST",
            "application/x-www-form-urlencoded; charset=utf-8",
            "code=x&grant_type=refresh_token"
        )));
        assert!(!is_token_request(&request(
            "POST",
            "application/json",
            r#"{"grant_type":"x"}"#
        )));
        assert!(!is_token_request(&request("POST", form, "my_grant_type=x")));
        assert!(!is_token_request(&request("GET", form, "grant_type=x")));
    }

    #[tokio::test]
    async fn a_request_outside_the_discovered_origins_is_refused_unsent() {
        use crate::tools::mcp::auth::dpop::DpopKey;
        let binding = Arc::new(DpopBinding::new(DpopKey::generate().unwrap()));
        let allowed = url::Url::parse("http://127.0.0.1:1/").unwrap().origin();
        let http = DpopTokenHttp::new(binding, vec![allowed]).unwrap();
        // Port 2 is another origin: refused before any connection (nothing listens there,
        // so a sent request would fail differently).
        let mut request = request("POST", "application/x-www-form-urlencoded", "grant_type=x");
        *request.uri_mut() = "http://127.0.0.1:2/token?code=secret".parse().unwrap();
        let error = http
            .send(request, &http.stop, REQUEST_TIMEOUT)
            .await
            .unwrap_err()
            .to_string();
        assert!(error.contains("not an origin discovery found"), "{error}");
        assert!(!error.contains("secret"), "{error}");
    }

    #[test]
    fn a_use_dpop_nonce_answer_is_a_400_with_that_error() {
        let answer = |status: u16, body: &str| {
            http::Response::builder()
                .status(status)
                .body(body.as_bytes().to_vec())
                .unwrap()
        };
        assert!(asks_for_nonce(&answer(
            400,
            r#"{"error":"use_dpop_nonce"}"#
        )));
        assert!(!asks_for_nonce(&answer(
            400,
            r#"{"error":"invalid_grant"}"#
        )));
        assert!(!asks_for_nonce(&answer(
            401,
            r#"{"error":"use_dpop_nonce"}"#
        )));
        assert!(!asks_for_nonce(&answer(400, "not json")));
    }
}
