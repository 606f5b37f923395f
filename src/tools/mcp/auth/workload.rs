//! Workload identity federation (the `io.modelcontextprotocol/auth/wif` extension): a workload
//! with no user and no client secret presents the JWT its platform issued it (a Kubernetes
//! service-account token, a cloud instance identity) to the MCP server's authorization server
//! with the RFC 7523 JWT bearer grant. One attempt per challenge: a refused assertion is an
//! error, never retried and never traded for another grant type.

use rmcp::transport::auth::{AuthError, AuthorizationManager, AuthorizationMetadata};

use crate::tools::mcp::auth::cross_app::{
    IdTokenSource, JwtBearerGrant, OAuthClient, redeem, token_http,
};
use crate::tools::mcp::auth::dpop_token_http::DpopTokenHttp;
use crate::tools::mcp::auth::store::SharedCredentialStore;

/// A workload's identity at the MCP server's authorization server.
#[derive(Clone, Debug)]
pub struct WorkloadIdentity {
    /// The client the authorization server knows the workload as (usually public: its
    /// `client_id` only).
    pub client: OAuthClient,
    /// Where the workload's JWT is read, at each authorization (platforms rotate them).
    pub assertion: IdTokenSource,
}

impl WorkloadIdentity {
    /// A workload known as `client`, presenting the JWT from `assertion`.
    pub fn new(client: OAuthClient, assertion: IdTokenSource) -> Self {
        WorkloadIdentity { client, assertion }
    }
}

/// Redeem the workload's JWT for an access token to the MCP endpoint `server_url` at the
/// authorization server of `metadata` (discovered on `manager`); with `dpop`, the token
/// request carries a proof.
pub(crate) async fn authorize(
    mut manager: AuthorizationManager,
    server_url: &str,
    metadata: AuthorizationMetadata,
    identity: &WorkloadIdentity,
    scopes: &[String],
    store: Option<&SharedCredentialStore>,
    dpop: Option<&DpopTokenHttp>,
) -> Result<AuthorizationManager, AuthError> {
    let issuer = metadata.issuer.clone().unwrap_or_default();
    manager.set_metadata(metadata.clone());
    let scopes = if scopes.is_empty() {
        manager.select_initial_scopes(&[]).await
    } else {
        scopes.to_vec()
    };
    let assertion = identity.assertion.read().await?;
    let grant = JwtBearerGrant {
        server_url,
        metadata: &metadata,
        issuer,
        assertion: &assertion,
        client: &identity.client,
        scopes,
    };
    redeem(manager, &token_http()?, grant, store, dpop).await
}
