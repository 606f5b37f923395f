//! Cross-app access (MCP's Enterprise-Managed Authorization extension, SEP-990): the user's ID
//! token from the enterprise identity provider is exchanged there for an identity assertion
//! authorization grant (ID-JAG, RFC 8693 token exchange), which the MCP server's authorization
//! server then redeems for an access token (RFC 7523 JWT bearer grant). No browser is involved:
//! the enterprise IdP decides, by policy, which applications the user may reach.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use reqwest::Url;
use rmcp::transport::auth::{
    AuthError, AuthorizationManager, AuthorizationMetadata, CredentialStore,
    InMemoryCredentialStore, OAuthClientConfig, OAuthTokenResponse, StoredCredentials,
};
use serde::Deserialize;

use crate::tools::mcp::auth::dpop_token_http::DpopTokenHttp;
use crate::tools::mcp::auth::store::SharedCredentialStore;

const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const GRANT_JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
const TOKEN_TYPE_ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
const TOKEN_TYPE_ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// Token responses are small; anything larger is refused.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// An ID token file larger than this is not an ID token.
const MAX_ID_TOKEN_BYTES: u64 = 64 * 1024;
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// rmcp's client needs a redirect URI; the JWT bearer grant never uses one.
const UNUSED_REDIRECT_URI: &str = "http://127.0.0.1/unused";

/// Where the user's ID token (issued by the enterprise IdP) comes from. It is read at each
/// authorization, so a file or variable that an SSO helper keeps fresh is followed.
#[derive(Clone, PartialEq, Eq)]
pub enum IdTokenSource {
    /// The token itself.
    Value(String),
    /// A file holding the token (surrounding whitespace ignored), at most 64 KiB.
    File(PathBuf),
    /// An environment variable holding the token.
    Env(String),
}

impl fmt::Debug for IdTokenSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IdTokenSource::Value(_) => f.write_str("Value(<redacted>)"),
            IdTokenSource::File(path) => f.debug_tuple("File").field(path).finish(),
            IdTokenSource::Env(name) => f.debug_tuple("Env").field(name).finish(),
        }
    }
}

impl IdTokenSource {
    pub(crate) async fn read(&self) -> Result<String, AuthError> {
        let failed = |what: String| AuthError::AuthorizationFailed(what);
        let token = match self {
            IdTokenSource::Value(token) => token.clone(),
            IdTokenSource::File(path) => {
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| {
                        failed(format!(
                            "cannot read the ID token file {}: {e}",
                            path.display()
                        ))
                    })?
                    .len();
                if size > MAX_ID_TOKEN_BYTES {
                    return Err(failed(format!(
                        "the ID token file {} is larger than {MAX_ID_TOKEN_BYTES} bytes",
                        path.display()
                    )));
                }
                tokio::fs::read_to_string(path).await.map_err(|e| {
                    failed(format!(
                        "cannot read the ID token file {}: {e}",
                        path.display()
                    ))
                })?
            }
            IdTokenSource::Env(name) => std::env::var(name)
                .map_err(|_| failed(format!("the ID token variable {name} is not set")))?,
        };
        let token = token.trim();
        if token.is_empty() {
            return Err(failed("the ID token is empty".into()));
        }
        Ok(token.to_owned())
    }
}

/// A client's ID and, for a confidential client, its secret.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthClient {
    /// The client ID.
    pub client_id: String,
    /// The client secret (none: a public client, identified by `client_id` in the body).
    pub client_secret: Option<String>,
}

impl fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .field(
                "client_secret",
                &self.client_secret.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

impl OAuthClient {
    /// A client with a secret.
    pub fn confidential(client_id: impl Into<String>, client_secret: impl Into<String>) -> Self {
        OAuthClient {
            client_id: client_id.into(),
            client_secret: Some(client_secret.into()),
        }
    }

    /// A client without a secret.
    pub fn public(client_id: impl Into<String>) -> Self {
        OAuthClient {
            client_id: client_id.into(),
            client_secret: None,
        }
    }
}

/// The settings of cross-app access: the IdP's token endpoint and this application's client
/// there, where the ID token comes from, and this application's client at the MCP server's
/// authorization server (found by discovery, like every other flow).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct CrossAppAccess {
    /// The enterprise IdP's token endpoint (RFC 8693 token exchange).
    pub idp_token_endpoint: String,
    /// This application's client at the IdP (a secret is sent as HTTP Basic).
    pub idp_client: OAuthClient,
    /// The user's ID token.
    pub id_token: IdTokenSource,
    /// This application's client at the MCP server's authorization server
    /// (`client_secret_basic` or `client_secret_post`, as its metadata allows).
    pub client: OAuthClient,
}

impl CrossAppAccess {
    /// Settings from their parts.
    pub fn new(
        idp_token_endpoint: impl Into<String>,
        idp_client: OAuthClient,
        id_token: IdTokenSource,
        client: OAuthClient,
    ) -> Self {
        CrossAppAccess {
            idp_token_endpoint: idp_token_endpoint.into(),
            idp_client,
            id_token,
            client,
        }
    }
}

/// A token endpoint's answer: the token response, or an OAuth error.
#[derive(Deserialize)]
struct ExchangeAnswer {
    access_token: Option<String>,
    issued_token_type: Option<String>,
    error: Option<String>,
    error_description: Option<String>,
}

/// Run cross-app access for the MCP endpoint `server_url` with its authorization server's
/// `metadata` (discovered on `manager`), and return a manager holding the access token (saved
/// in `store`, or in memory). With `dpop`, the redemption at the MCP server's authorization
/// server carries a proof; the IdP's token exchange never does (its token is not the MCP
/// server's to bind).
pub(crate) async fn authorize(
    mut manager: AuthorizationManager,
    server_url: &str,
    metadata: AuthorizationMetadata,
    config: &CrossAppAccess,
    scopes: &[String],
    store: Option<&SharedCredentialStore>,
    dpop: Option<&DpopTokenHttp>,
) -> Result<AuthorizationManager, AuthError> {
    // The ID-JAG's audience is the authorization server, named by its issuer identifier.
    let issuer = metadata.issuer.clone().ok_or_else(|| {
        AuthError::MetadataError("cross-app access needs the authorization server's issuer".into())
    })?;
    manager.set_metadata(metadata.clone());
    let scopes = if scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        scopes.to_vec()
    };
    let scope = scopes.join(" ");
    let http = token_http()?;

    // RFC 8693 at the IdP: the ID token for an ID-JAG naming this authorization server and
    // this MCP server (RFC 8707 resource).
    let id_token = config.id_token.read().await?;
    let mut form = vec![
        ("grant_type", GRANT_TOKEN_EXCHANGE),
        ("requested_token_type", TOKEN_TYPE_ID_JAG),
        ("subject_token", id_token.as_str()),
        ("subject_token_type", TOKEN_TYPE_ID_TOKEN),
        ("audience", issuer.as_str()),
        ("resource", server_url),
    ];
    if !scope.is_empty() {
        form.push(("scope", scope.as_str()));
    }
    let endpoint = checked_endpoint(&config.idp_token_endpoint, "IdP token endpoint")?;
    let answer = post(&http, endpoint, form, &config.idp_client, true, None).await?;
    if let Some(issued) = &answer.issued_token_type
        && issued != TOKEN_TYPE_ID_JAG
    {
        return Err(AuthError::TokenExchangeFailed(format!(
            "the IdP issued a {issued}, not an ID-JAG"
        )));
    }
    let grant = answer
        .access_token
        .ok_or_else(|| AuthError::TokenExchangeFailed("the IdP answered no ID-JAG".into()))?;

    // RFC 7523 at the MCP server's authorization server: the ID-JAG for an access token.
    let grant = JwtBearerGrant {
        server_url,
        metadata: &metadata,
        issuer,
        assertion: &grant,
        client: &config.client,
        scopes,
    };
    redeem(manager, &http, grant, store, dpop).await
}

/// An RFC 7523 JWT bearer grant at the MCP server's authorization server.
pub(crate) struct JwtBearerGrant<'a> {
    /// The MCP endpoint (the `resource`).
    pub server_url: &'a str,
    /// The authorization server's metadata.
    pub metadata: &'a AuthorizationMetadata,
    /// Its issuer identifier (kept with the token).
    pub issuer: String,
    /// The JWT to redeem.
    pub assertion: &'a str,
    /// This application's client there.
    pub client: &'a OAuthClient,
    /// The scopes to ask for (may be empty).
    pub scopes: Vec<String>,
}

/// Redeem `grant` and return `manager` holding the access token (saved in `store`, or in
/// memory); with `dpop`, the token request carries a proof (and answers a nonce challenge).
pub(crate) async fn redeem(
    mut manager: AuthorizationManager,
    http: &reqwest::Client,
    grant: JwtBearerGrant<'_>,
    store: Option<&SharedCredentialStore>,
    dpop: Option<&DpopTokenHttp>,
) -> Result<AuthorizationManager, AuthError> {
    let JwtBearerGrant {
        server_url,
        metadata,
        issuer,
        assertion,
        client,
        scopes,
    } = grant;
    let scope = scopes.join(" ");
    let mut form = vec![
        ("grant_type", GRANT_JWT_BEARER),
        ("assertion", assertion),
        ("resource", server_url),
    ];
    if !scope.is_empty() {
        form.push(("scope", scope.as_str()));
    }
    let endpoint = checked_endpoint(&metadata.token_endpoint, "token endpoint")?;
    let basic = uses_basic(metadata);
    let (token, granted) = post_for_token(http, endpoint, form, client, basic, dpop).await?;

    let mut config = OAuthClientConfig::new(client.client_id.clone(), UNUSED_REDIRECT_URI)
        .with_scopes(scopes.clone());
    if let Some(secret) = &client.client_secret {
        config = config.with_client_secret(secret.clone());
    }
    manager.configure_client(config)?;
    let store = store
        .cloned()
        .unwrap_or_else(|| SharedCredentialStore(Arc::new(InMemoryCredentialStore::new())));
    manager.set_credential_store(store.clone());
    let granted = granted.unwrap_or(scopes);
    let received = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .ok();
    store
        .save(
            StoredCredentials::new(client.client_id.clone(), Some(token), granted, received)
                .with_issuer(Some(issuer)),
        )
        .await?;
    Ok(manager)
}

/// The HTTP client for token requests: no redirects, bounded in time.
pub(crate) fn token_http() -> Result<reqwest::Client, AuthError> {
    reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(REQUEST_TIMEOUT)
        .build()
        .map_err(|e| AuthError::InternalError(e.to_string()))
}

/// Whether the client authenticates with HTTP Basic: RFC 8414's default when the metadata
/// names no methods, and whenever it lists `client_secret_basic`.
fn uses_basic(metadata: &AuthorizationMetadata) -> bool {
    match metadata
        .additional_fields
        .get("token_endpoint_auth_methods_supported")
        .and_then(|methods| methods.as_array())
    {
        None => true,
        Some(methods) => {
            methods
                .iter()
                .any(|m| m.as_str() == Some("client_secret_basic"))
                || !methods
                    .iter()
                    .any(|m| m.as_str() == Some("client_secret_post"))
        }
    }
}

/// `url` when it is HTTPS, or HTTP to a loopback host: tokens never cross a network in clear.
fn checked_endpoint(url: &str, what: &str) -> Result<Url, AuthError> {
    let parsed = Url::parse(url)
        .map_err(|e| AuthError::MetadataError(format!("the {what} {url} is not a URL: {e}")))?;
    let loopback = match parsed.host() {
        Some(url::Host::Domain(host)) => host == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    };
    if parsed.scheme() == "https" || (parsed.scheme() == "http" && loopback) {
        Ok(parsed)
    } else {
        Err(AuthError::MetadataError(format!(
            "the {what} {url} is neither HTTPS nor on this machine"
        )))
    }
}

/// RFC 6749 §2.3.1: the Basic credentials are the form-encoded ID and secret.
fn basic_credentials(client: &OAuthClient, secret: &str) -> (String, String) {
    let encode =
        |text: &str| url::form_urlencoded::byte_serialize(text.as_bytes()).collect::<String>();
    (encode(&client.client_id), encode(secret))
}

/// POST `form` to a token endpoint with the client's authentication (and, with `dpop`, a
/// proof), returning the raw body of a success or the error as
/// [`AuthError::TokenExchangeFailed`].
async fn post_raw(
    http: &reqwest::Client,
    endpoint: Url,
    mut form: Vec<(&str, &str)>,
    client: &OAuthClient,
    basic: bool,
    dpop: Option<&DpopTokenHttp>,
) -> Result<Vec<u8>, AuthError> {
    let mut request = http.post(endpoint.clone());
    match &client.client_secret {
        Some(secret) if basic => {
            let (id, secret) = basic_credentials(client, secret);
            request = request.basic_auth(id, Some(secret));
        }
        Some(secret) => {
            form.push(("client_id", client.client_id.as_str()));
            form.push(("client_secret", secret.as_str()));
        }
        None => form.push(("client_id", client.client_id.as_str())),
    }
    let body = url::form_urlencoded::Serializer::new(String::new())
        .extend_pairs(form)
        .finish();
    let failed = |e: &dyn fmt::Display| AuthError::TokenExchangeFailed(format!("{endpoint}: {e}"));
    let request = request
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .header(reqwest::header::ACCEPT, "application/json")
        .body(body)
        .build()
        .map_err(|e| failed(&e))?;
    let (status, bytes) = match dpop {
        None => send_plain(http, request).await,
        Some(dpop) => send_with_proof(dpop, request).await,
    }
    .map_err(|e| failed(&e))?;
    if !status.is_success() {
        let answer: Option<ExchangeAnswer> = serde_json::from_slice(&bytes).ok();
        let reason = answer
            .map(|a| {
                let error = a.error.unwrap_or_default();
                match a.error_description {
                    Some(description) => format!("{error}: {description}"),
                    None => error,
                }
            })
            .filter(|reason| !reason.is_empty())
            .unwrap_or_else(|| "no OAuth error in the answer".into());
        return Err(AuthError::TokenExchangeFailed(format!(
            "{endpoint} answered {status}: {}",
            crate::tools::mcp::auth::redact(&reason)
        )));
    }
    Ok(bytes)
}

/// Why a token request got no complete answer.
#[derive(Debug, thiserror::Error)]
enum SendError {
    #[error("{0}")]
    Http(#[from] reqwest::Error),
    #[error("{0}")]
    Proof(rmcp::transport::auth::OAuthHttpClientError),
    #[error("cannot build the request: {0}")]
    Request(#[from] http::Error),
    #[error("the answer is larger than {MAX_RESPONSE_BYTES} bytes")]
    TooLarge,
}

/// Send `request` as it is; the status and the body (bounded).
async fn send_plain(
    http: &reqwest::Client,
    request: reqwest::Request,
) -> Result<(reqwest::StatusCode, Vec<u8>), SendError> {
    let mut response = http.execute(request).await?;
    let status = response.status();
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
            return Err(SendError::TooLarge);
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok((status, bytes))
}

/// Send `request` with a DPoP proof (the same client that adds them to rmcp's token
/// requests); the status and the body (bounded).
async fn send_with_proof(
    dpop: &DpopTokenHttp,
    request: reqwest::Request,
) -> Result<(reqwest::StatusCode, Vec<u8>), SendError> {
    let mut builder = http::Request::builder()
        .method(request.method().clone())
        .uri(request.url().as_str());
    for (name, value) in request.headers() {
        builder = builder.header(name, value);
    }
    let body = request
        .body()
        .and_then(reqwest::Body::as_bytes)
        .unwrap_or_default()
        .to_vec();
    let response = dpop
        .token_request(builder.body(body)?)
        .await
        .map_err(SendError::Proof)?;
    if response.body().len() > MAX_RESPONSE_BYTES {
        return Err(SendError::TooLarge);
    }
    Ok((response.status(), response.into_body()))
}

async fn post(
    http: &reqwest::Client,
    endpoint: Url,
    form: Vec<(&str, &str)>,
    client: &OAuthClient,
    basic: bool,
    dpop: Option<&DpopTokenHttp>,
) -> Result<ExchangeAnswer, AuthError> {
    let body = post_raw(http, endpoint.clone(), form, client, basic, dpop).await?;
    serde_json::from_slice(&body).map_err(|e| {
        AuthError::TokenExchangeFailed(format!("{endpoint}: not a token response: {e}"))
    })
}

async fn post_for_token(
    http: &reqwest::Client,
    endpoint: Url,
    form: Vec<(&str, &str)>,
    client: &OAuthClient,
    basic: bool,
    dpop: Option<&DpopTokenHttp>,
) -> Result<(OAuthTokenResponse, Option<Vec<String>>), AuthError> {
    #[derive(Deserialize)]
    struct Scope {
        scope: Option<String>,
    }
    let body = post_raw(http, endpoint.clone(), form, client, basic, dpop).await?;
    let not_token = |e: serde_json::Error| {
        AuthError::TokenExchangeFailed(format!("{endpoint}: not a token response: {e}"))
    };
    let token = serde_json::from_slice(&body).map_err(not_token)?;
    // RFC 6749 §5.1: `scope` is sent when the granted scopes differ from those asked for.
    let granted = serde_json::from_slice::<Scope>(&body)
        .ok()
        .and_then(|s| s.scope)
        .map(|scope| scope.split_whitespace().map(str::to_owned).collect());
    Ok((token, granted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn metadata(methods: Option<&[&str]>) -> AuthorizationMetadata {
        let mut value = serde_json::json!({
            "authorization_endpoint": "https://as.example/authorize",
            "token_endpoint": "https://as.example/token",
        });
        if let Some(methods) = methods {
            value["token_endpoint_auth_methods_supported"] = serde_json::json!(methods);
        }
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn client_authentication_follows_the_metadata() {
        assert!(uses_basic(&metadata(None)), "RFC 8414's default");
        assert!(uses_basic(&metadata(Some(&["client_secret_basic"]))));
        assert!(uses_basic(&metadata(Some(&[
            "client_secret_post",
            "client_secret_basic"
        ]))));
        assert!(!uses_basic(&metadata(Some(&["client_secret_post"]))));
    }

    #[test]
    fn tokens_go_only_to_https_or_this_machine() {
        assert!(checked_endpoint("https://idp.example/token", "x").is_ok());
        assert!(checked_endpoint("http://127.0.0.1:9/token", "x").is_ok());
        assert!(checked_endpoint("http://localhost:9/token", "x").is_ok());
        assert!(checked_endpoint("http://idp.example/token", "x").is_err());
        assert!(checked_endpoint("file:///etc/passwd", "x").is_err());
    }

    #[test]
    fn basic_credentials_are_form_encoded() {
        let client = OAuthClient::confidential("a b:c", "s&t");
        assert_eq!(
            basic_credentials(&client, "s&t"),
            ("a+b%3Ac".to_owned(), "s%26t".to_owned())
        );
    }

    #[tokio::test]
    async fn id_tokens_are_read_trimmed_and_never_shown() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("id_token");
        std::fs::write(&file, "eyJ.secret.token\n").unwrap();
        assert_eq!(
            IdTokenSource::File(file).read().await.unwrap(),
            "eyJ.secret.token"
        );
        let value = IdTokenSource::Value("eyJ.secret.token".into());
        assert!(!format!("{value:?}").contains("secret.token"));
        let config = CrossAppAccess::new(
            "https://idp.example/token",
            OAuthClient::confidential("idp-client", "idp-secret"),
            value,
            OAuthClient::confidential("mcp-client", "mcp-secret"),
        );
        let shown = format!("{:?}", McpAuthShown(&config));
        assert!(
            !shown.contains("idp-secret")
                && !shown.contains("mcp-secret")
                && !shown.contains("secret.token"),
            "{shown}"
        );
        assert!(
            IdTokenSource::Env("AGCORE_TEST_NO_SUCH_VARIABLE".into())
                .read()
                .await
                .is_err()
        );
        std::fs::write(dir.path().join("empty"), "  \n").unwrap();
        assert!(
            IdTokenSource::File(dir.path().join("empty"))
                .read()
                .await
                .is_err()
        );
    }

    /// The config as `McpAuth` shows it.
    struct McpAuthShown<'a>(&'a CrossAppAccess);

    impl fmt::Debug for McpAuthShown<'_> {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            let auth = crate::tools::mcp::auth::McpAuth::cross_app_access(self.0.clone());
            write!(f, "{auth:?}")
        }
    }
}
