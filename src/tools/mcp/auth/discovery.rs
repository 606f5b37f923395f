//! Authorization-server metadata for a challenge: rmcp's discovery, strict by RFC 8414 §3.3,
//! plus the 2025-03-26 fallback in which the issuer cannot be checked that way.
//!
//! RFC 8414 §3.3 has the client compare the metadata's `issuer` with the issuer identifier it
//! built the metadata URL from — that identifier must come from a trusted source, here the
//! protected resource's metadata (`authorization_servers`, RFC 9728). rmcp applies the check
//! to every metadata URL, including the one the 2025-03-26 spec has the client build from the
//! MCP server's own origin when the server publishes no protected-resource metadata. There,
//! the origin is not an issuer identifier anyone asserted; an authorization server at
//! `https://host/oauth` rightly answers `issuer: "https://host/oauth"` at
//! `https://host/.well-known/oauth-authorization-server`. So in that legacy path only, the
//! metadata's issuer is accepted when it lies on the MCP server's origin (the authorization
//! server the 2025-03-26 spec locates there), and refused otherwise. Whenever the issuer came
//! from protected-resource metadata, a mismatch stays an error.

use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, WWWAuthenticateParams,
};

/// A discovery document is small; anything larger is not one.
const MAX_METADATA_BYTES: usize = 256 * 1024;
/// Each legacy discovery request gets this long.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// The authorization-server metadata for `challenge` (a `WWW-Authenticate` value) of the MCP
/// endpoint `server_url`.
pub(crate) async fn authorization_metadata(
    manager: &AuthorizationManager,
    server_url: &str,
    challenge: &str,
) -> Result<AuthorizationMetadata, AuthError> {
    match manager
        .resolve_metadata_from_challenge(Some(challenge))
        .await
    {
        Ok(resolution) => Ok(resolution.metadata),
        Err(error @ AuthError::AuthorizationServerMismatch { .. }) => {
            match legacy_metadata(server_url, challenge).await {
                Some(metadata) => {
                    tracing::debug!(
                        target: "agcore::mcp",
                        url = %server_url,
                        issuer = ?metadata.issuer,
                        "2025-03-26 discovery: no protected-resource metadata, metadata at the server's origin"
                    );
                    Ok(metadata)
                }
                None => Err(error),
            }
        }
        Err(error) => Err(error),
    }
}

/// The metadata at the server's origin when the server publishes no protected-resource
/// metadata (2025-03-26) and its issuer lies on that origin; `None` otherwise.
async fn legacy_metadata(server_url: &str, challenge: &str) -> Option<AuthorizationMetadata> {
    let server = Url::parse(server_url).ok()?;
    // A challenge naming protected-resource metadata puts the issuer under RFC 8414's check.
    if WWWAuthenticateParams::parse(challenge, &server)
        .resource_metadata_url
        .is_some()
    {
        return None;
    }
    let http = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .ok()?;
    // Only a plain "not found" at every RFC 9728 location means there is no such metadata
    // (an answer, a challenge or an error might hide some).
    for url in protected_resource_urls(&server) {
        let status = http.get(url).send().await.ok()?.status();
        if status != reqwest::StatusCode::NOT_FOUND {
            return None;
        }
    }
    let metadata_url = at_origin(&server, "/.well-known/oauth-authorization-server");
    let body = get(&http, metadata_url).await?;
    let metadata: AuthorizationMetadata = serde_json::from_slice(&body).ok()?;
    let issuer = Url::parse(metadata.issuer.as_deref()?).ok()?;
    (issuer.origin() == server.origin()).then_some(metadata)
}

/// RFC 9728 §3.1's well-known URLs for `server`: path-inserted, then at the root.
fn protected_resource_urls(server: &Url) -> Vec<Url> {
    let path = server.path().trim_matches('/');
    let mut urls = Vec::new();
    if !path.is_empty() {
        urls.push(at_origin(
            server,
            &format!("/.well-known/oauth-protected-resource/{path}"),
        ));
    }
    urls.push(at_origin(server, "/.well-known/oauth-protected-resource"));
    urls
}

fn at_origin(server: &Url, path: &str) -> Url {
    let mut url = server.clone();
    url.set_path(path);
    url.set_query(None);
    url.set_fragment(None);
    url
}

/// The body of a `200` answer to a GET of `url`, at most [`MAX_METADATA_BYTES`].
async fn get(http: &reqwest::Client, url: Url) -> Option<Vec<u8>> {
    let mut response = http.get(url).send().await.ok()?;
    if response.status() != reqwest::StatusCode::OK {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_METADATA_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    Some(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wiremock::matchers::{method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};

    async fn discover(
        server: &MockServer,
        challenge: &str,
    ) -> Result<AuthorizationMetadata, AuthError> {
        let url = format!("{}/mcp", server.uri());
        let manager = AuthorizationManager::new(url.as_str()).await?;
        authorization_metadata(&manager, &url, challenge).await
    }

    fn metadata(issuer: &str) -> serde_json::Value {
        json!({
            "issuer": issuer,
            "authorization_endpoint": format!("{issuer}/authorize"),
            "token_endpoint": format!("{issuer}/token"),
            "registration_endpoint": format!("{issuer}/register"),
            "response_types_supported": ["code"],
            "code_challenge_methods_supported": ["S256"],
        })
    }

    async fn serve(server: &MockServer, at: &str, body: serde_json::Value) {
        Mock::given(method("GET"))
            .and(path(at))
            .respond_with(ResponseTemplate::new(200).set_body_json(body))
            .mount(server)
            .await;
    }

    #[tokio::test]
    async fn an_issuer_named_by_protected_resource_metadata_must_match() {
        let server = MockServer::start().await;
        let tenant = format!("{}/tenant1", server.uri());
        serve(
            &server,
            "/.well-known/oauth-protected-resource/mcp",
            json!({ "resource": format!("{}/mcp", server.uri()), "authorization_servers": [tenant] }),
        )
        .await;
        // The tenant's metadata claims the bare origin: a mix-up, refused.
        serve(
            &server,
            "/.well-known/oauth-authorization-server/tenant1",
            metadata(&server.uri()),
        )
        .await;
        serve(
            &server,
            "/.well-known/oauth-authorization-server",
            metadata(&server.uri()),
        )
        .await;
        let challenge = format!(
            "Bearer resource_metadata=\"{}/.well-known/oauth-protected-resource/mcp\"",
            server.uri()
        );
        let error = discover(&server, &challenge).await.unwrap_err();
        assert!(
            matches!(error, AuthError::AuthorizationServerMismatch { .. }),
            "{error:?}"
        );
        // Found through the well-known URL instead of the challenge: the same.
        let error = discover(&server, "Bearer").await.unwrap_err();
        assert!(
            matches!(error, AuthError::AuthorizationServerMismatch { .. }),
            "{error:?}"
        );
    }

    #[tokio::test]
    async fn without_protected_resource_metadata_an_issuer_on_the_servers_origin_is_accepted() {
        let server = MockServer::start().await;
        let issuer = format!("{}/oauth", server.uri());
        serve(
            &server,
            "/.well-known/oauth-authorization-server",
            metadata(&issuer),
        )
        .await;
        let found = discover(&server, "Bearer").await.unwrap();
        assert_eq!(found.issuer.as_deref(), Some(issuer.as_str()));
        assert_eq!(found.token_endpoint, format!("{issuer}/token"));
    }

    #[tokio::test]
    async fn without_protected_resource_metadata_an_issuer_elsewhere_is_refused() {
        let server = MockServer::start().await;
        serve(
            &server,
            "/.well-known/oauth-authorization-server",
            metadata("https://other.example"),
        )
        .await;
        let error = discover(&server, "Bearer").await.unwrap_err();
        assert!(
            matches!(error, AuthError::AuthorizationServerMismatch { .. }),
            "{error:?}"
        );
    }
}
