//! [`AuthSession`]: the authorization state of one MCP server — runs a flow on a challenge and
//! holds rmcp's [`AuthClient`] (which adds the token to requests and refreshes it).
//!
//! DPoP (RFC 9449): an authorization-code flow whose authorization server advertises ES256 in
//! `dpop_signing_alg_values_supported` (or, advertising nothing, whose resource challenges
//! with the `DPoP` scheme), and a `client_credentials` grant for a resource challenging with
//! `DPoP` whose server takes ES256, run with a [`DpopBinding`]: its token requests carry proofs
//! ([`DpopTokenHttp`]) and its requests present a DPoP-bound token with proofs
//! ([`DpopHttpClient`]). The cross-app and workload-identity grants, whose token requests
//! agcore makes itself, decide as the authorization-code flow does and send theirs through
//! the same [`DpopTokenHttp`]. With a credential store, the key is kept with the tokens
//! ([`DpopKeyStore`]). Servers without DPoP see exactly what they saw before.

use std::sync::Arc;

use rmcp::transport::AuthClient;
use rmcp::transport::auth::{
    AuthError, AuthorizationCallback, AuthorizationManager, AuthorizationMetadata,
    AuthorizationRequest, AuthorizationSession, ClientCredentialsConfig, CredentialStore,
    OAuthState, WWWAuthenticateParams,
};
use tokio::sync::Mutex;

use crate::tools::mcp::auth::config::{ClientCredentials, ClientIdentity, McpAuth};
use crate::tools::mcp::auth::dpop::{DPOP_ALGORITHM, DpopKey};
use crate::tools::mcp::auth::dpop_binding::DpopBinding;
use crate::tools::mcp::auth::dpop_client::DpopHttpClient;
use crate::tools::mcp::auth::dpop_store::{DpopKeyStore, stored_key};
use crate::tools::mcp::auth::dpop_token_http::DpopTokenHttp;
use crate::tools::mcp::auth::redact::redact;
use crate::tools::mcp::auth::store::SharedCredentialStore;
use crate::tools::mcp::auth::{cross_app, discovery, workload};

/// The client rmcp's `AuthClient` sends with.
type Authorized = AuthClient<DpopHttpClient>;

/// The authorized HTTP client, replaced on each new authorization.
struct State {
    client: Option<Authorized>,
    /// Whether stored credentials were looked for (once, before the first request).
    loaded: bool,
    /// Bumped by every authorization, so that requests refused at the same time authorize once.
    generation: u64,
    /// The scopes the last authorization obtained: a step-up asks for them together with the
    /// challenged ones (SEP-2350), so the new token does not lose what the old one could do.
    granted_scopes: Vec<String>,
}

/// What a JWT bearer grant (cross-app access, workload identity) runs with.
struct JwtBearerSetup {
    /// The manager to hold the token (its refreshes carry proofs under DPoP).
    manager: AuthorizationManager,
    /// The authorization server's metadata, discovered on `manager`.
    metadata: AuthorizationMetadata,
    /// Where the token is saved (with the DPoP key under DPoP); none: in memory.
    store: Option<SharedCredentialStore>,
    /// Under DPoP: the binding and the client sending the token request with a proof.
    dpop: Option<(Arc<DpopBinding>, DpopTokenHttp)>,
}

/// The authorization state of one server.
pub(crate) struct AuthSession {
    /// The MCP endpoint (the protected resource).
    url: String,
    auth: McpAuth,
    /// The HTTP client the authorized requests are sent with.
    http: reqwest::Client,
    state: Mutex<State>,
    /// The DPoP key and nonces, from the first flow that used DPoP (or the credential store)
    /// on: one key per server, so re-authorizations bind to the same key.
    dpop: std::sync::Mutex<Option<Arc<DpopBinding>>>,
    /// Why the last authorization failed (redacted), until one succeeds: a failed flow is
    /// final for the connection attempt, never retried behind the user's back.
    failure: std::sync::Mutex<Option<String>>,
}

impl AuthSession {
    pub(crate) fn new(url: &str, auth: McpAuth, http: reqwest::Client) -> Self {
        AuthSession {
            url: url.to_owned(),
            auth,
            http,
            state: Mutex::new(State {
                client: None,
                loaded: false,
                generation: 0,
                granted_scopes: Vec::new(),
            }),
            dpop: std::sync::Mutex::new(None),
            failure: std::sync::Mutex::new(None),
        }
    }

    /// Why the last authorization flow failed, if it did (no secrets in it).
    pub(crate) fn failure(&self) -> Option<String> {
        self.failure
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// The current authorized client (none before the first challenge) and its generation.
    pub(crate) async fn current(&self) -> (Option<Authorized>, u64) {
        let mut state = self.state.lock().await;
        if !state.loaded {
            state.loaded = true;
            match self.stored_client().await {
                Ok(client) => state.client = client,
                // Unusable stored credentials only mean a new authorization when asked.
                Err(error) => tracing::debug!(
                    target: "agcore::mcp",
                    url = %self.url,
                    error = %redact(&error.to_string()),
                    "stored OAuth credentials not used"
                ),
            }
        }
        (state.client.clone(), state.generation)
    }

    /// An authorized client from the credential store, if it holds tokens.
    async fn stored_client(&self) -> Result<Option<Authorized>, AuthError> {
        let Some(store) = self.auth.store() else {
            return Ok(None);
        };
        // No tokens, nothing to discover (as `initialize_from_store` does).
        let Some(stored) = store.load().await? else {
            return Ok(None);
        };
        if stored.token_response.is_none() {
            return Ok(None);
        }
        let mut manager = self.manager().await?;
        // What `initialize_from_store` would discover, kept for a DPoP-bound token below.
        let metadata = manager.resolve_metadata().await?.metadata;
        manager.set_metadata(metadata.clone());
        if !manager.initialize_from_store().await? {
            return Ok(None);
        }
        if !token_type(&manager).await.eq_ignore_ascii_case("dpop") {
            let http = DpopHttpClient::new(self.http.clone(), None);
            return Ok(Some(AuthClient::new(http, manager)));
        }
        // A DPoP-bound token works only with the key kept next to it; without that key a new
        // authorization is the way on.
        let Some(key) = stored_key(&stored) else {
            return Ok(None);
        };
        let binding = Arc::new(DpopBinding::new(key));
        binding.set_token_type("DPoP");
        *self.dpop.lock().unwrap_or_else(|p| p.into_inner()) = Some(binding.clone());
        // Loaded again, without a second discovery, by the manager whose refreshes carry
        // proofs.
        let allowed = self.discovered_origins(&metadata, None);
        let mut manager = self.dpop_manager(binding.clone(), allowed).await?;
        manager.set_metadata(metadata);
        if !manager.initialize_from_store().await? {
            return Ok(None);
        }
        let http = DpopHttpClient::new(self.http.clone(), Some(binding));
        Ok(Some(AuthClient::new(http, manager)))
    }

    /// This server's DPoP state, made with a new key the first time.
    fn dpop_binding(&self) -> Result<Arc<DpopBinding>, AuthError> {
        let mut dpop = self.dpop.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(binding) = dpop.as_ref() {
            return Ok(binding.clone());
        }
        let key = DpopKey::generate().map_err(|e| AuthError::InternalError(e.to_string()))?;
        tracing::debug!(target: "agcore::mcp", url = %self.url, jkt = key.thumbprint(), "DPoP key made");
        let binding = Arc::new(DpopBinding::new(key));
        *dpop = Some(binding.clone());
        Ok(binding)
    }

    /// An rmcp manager whose OAuth requests carry proofs made with `binding`.
    async fn dpop_manager(
        &self,
        binding: Arc<DpopBinding>,
        allowed: Vec<url::Origin>,
    ) -> Result<AuthorizationManager, AuthError> {
        let store = match self.auth.store() {
            Some(store) => Some(DpopKeyStore::new(store.clone(), binding.key())?),
            None => None,
        };
        let http = DpopTokenHttp::new(binding, allowed).map_err(AuthError::HttpError)?;
        let mut manager =
            AuthorizationManager::new_with_oauth_http_client(self.url.as_str(), Arc::new(http))
                .await?;
        if let Some(store) = store {
            manager.set_credential_store(store);
        }
        Ok(manager)
    }

    /// The origins a DPoP manager may reach: the MCP server's, the resource metadata named by
    /// `challenge`, and those of the authorization server's endpoints in `metadata` — all
    /// found by a discovery on rmcp's address-filtering client.
    fn discovered_origins(
        &self,
        metadata: &AuthorizationMetadata,
        challenge: Option<&str>,
    ) -> Vec<url::Origin> {
        let mut urls = vec![
            Some(self.url.clone()),
            Some(metadata.authorization_endpoint.clone()),
            Some(metadata.token_endpoint.clone()),
            metadata.registration_endpoint.clone(),
            metadata.issuer.clone(),
        ];
        if let (Some(challenge), Ok(server)) = (challenge, url::Url::parse(&self.url)) {
            let params = WWWAuthenticateParams::parse(challenge, &server);
            urls.push(params.resource_metadata_url.map(String::from));
        }
        let mut origins = Vec::new();
        for url in urls.into_iter().flatten() {
            if let Ok(url) = url::Url::parse(&url)
                && url.origin().is_tuple()
                && !origins.contains(&url.origin())
            {
                origins.push(url.origin());
            }
        }
        origins
    }

    /// A fresh rmcp manager for this server, saving into the credential store if any.
    async fn manager(&self) -> Result<AuthorizationManager, AuthError> {
        let mut manager = AuthorizationManager::new(self.url.as_str()).await?;
        if let Some(store) = self.auth.store() {
            manager.set_credential_store(store.clone());
        }
        Ok(manager)
    }

    /// Authorize on `challenge` (a `WWW-Authenticate` value) unless another request already
    /// did since `seen` — then its token is used.
    pub(crate) async fn authorize(&self, challenge: &str, seen: u64) -> Result<(), AuthError> {
        let mut state = self.state.lock().await;
        if state.generation != seen {
            return Ok(());
        }
        let (manager, dpop) = match self.run_flow(challenge, &state.granted_scopes).await {
            Ok(outcome) => outcome,
            Err(error) => {
                // The flow's texts may quote token-endpoint answers or redirect URLs.
                let reason = redact(&error.to_string());
                *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = Some(reason.clone());
                return Err(AuthError::AuthorizationFailed(reason));
            }
        };
        *self.failure.lock().unwrap_or_else(|p| p.into_inner()) = None;
        state.granted_scopes = manager.get_current_scopes().await;
        if let Some(binding) = &dpop {
            // RFC 9449 §5: a server may still answer a proof with a bearer token.
            binding.set_token_type(&token_type(&manager).await);
        }
        let http = DpopHttpClient::new(self.http.clone(), dpop);
        state.client = Some(AuthClient::new(http, manager));
        state.generation += 1;
        tracing::debug!(target: "agcore::mcp", url = %self.url, "authorized");
        Ok(())
    }

    /// Run the configured flow; the DPoP state when it used DPoP.
    async fn run_flow(
        &self,
        challenge: &str,
        granted: &[String],
    ) -> Result<(AuthorizationManager, Option<Arc<DpopBinding>>), AuthError> {
        if let McpAuth::AuthorizationCode { authorizer, .. } = &self.auth
            && let Some(reason) = authorizer.declines()
        {
            return Err(AuthError::AuthorizationFailed(reason));
        }
        let mut manager = self.manager().await?;
        match &self.auth {
            McpAuth::AuthorizationCode {
                redirect_uri,
                identity,
                scopes,
                authorizer,
                ..
            } => {
                // Initial selection: the challenge's scopes, else the resource's
                // `scopes_supported`, else none — not their union, which would ask a
                // step-up server for everything up front.
                let mut request = AuthorizationRequest::new(redirect_uri.as_str())
                    .with_challenge(challenge)
                    .with_initial_scope_selection();
                match identity {
                    ClientIdentity::Dynamic {
                        client_name,
                        metadata_url,
                    } => {
                        request = request.with_client_name(client_name.as_str());
                        if let Some(url) = metadata_url {
                            request = request.with_client_metadata_url(url.as_str());
                        }
                    }
                    ClientIdentity::Preregistered {
                        client_id,
                        client_secret,
                    } => {
                        request = request.with_preregistered_client(client_id.as_str());
                        if let Some(secret) = client_secret {
                            request = request.with_client_secret(secret.as_str());
                        }
                    }
                }
                if !scopes.is_empty() {
                    request = request.with_scopes(scopes.iter().cloned());
                } else if !granted.is_empty() {
                    request = request.with_scopes(scope_union(granted, challenge));
                }
                let metadata =
                    discovery::authorization_metadata(&manager, &self.url, challenge).await?;
                let mut dpop = None;
                if uses_dpop(&metadata, challenge) {
                    // The discovery again on the manager whose token requests carry proofs,
                    // which keeps what discovery found (resource, scopes) for the flow; the
                    // first one ran on rmcp's client, which filters the addresses it reaches.
                    let binding = self.dpop_binding()?;
                    let allowed = self.discovered_origins(&metadata, Some(challenge));
                    manager = self.dpop_manager(binding.clone(), allowed).await?;
                    let metadata =
                        discovery::authorization_metadata(&manager, &self.url, challenge).await?;
                    manager.set_metadata(metadata);
                    dpop = Some(binding);
                } else {
                    manager.set_metadata(metadata);
                }
                let session = AuthorizationSession::new(manager, request)
                    .await
                    .map_err(|(_, error)| error)?;
                let mut oauth = OAuthState::Session(session);
                let url = oauth.get_authorization_url().await?;
                let redirect = authorizer
                    .authorize(&url)
                    .await
                    .map_err(AuthError::AuthorizationFailed)?;
                let callback = AuthorizationCallback::from_redirect_url(&redirect)?;
                oauth
                    .handle_callback_with_issuer(
                        &callback.code,
                        &callback.csrf_token,
                        callback.issuer.as_deref(),
                    )
                    .await?;
                let manager = oauth.into_authorization_manager().ok_or_else(|| {
                    AuthError::InternalError("the authorization flow did not complete".into())
                })?;
                Ok((manager, dpop))
            }
            McpAuth::ClientCredentials {
                credentials,
                scopes,
                ..
            } => {
                let config = self.client_credentials(credentials, scopes);
                let (manager, dpop) = self.dpop_if_demanded(manager, challenge).await?;
                let manager =
                    client_credentials_flow(OAuthState::Unauthorized(manager), config).await?;
                Ok((manager, dpop))
            }
            McpAuth::WorkloadIdentity {
                identity, scopes, ..
            } => {
                let setup = self.jwt_bearer_setup(manager, challenge).await?;
                let manager = workload::authorize(
                    setup.manager,
                    &self.url,
                    setup.metadata,
                    identity,
                    scopes,
                    setup.store.as_ref(),
                    setup.dpop.as_ref().map(|(_, http)| http),
                )
                .await?;
                Ok((manager, setup.dpop.map(|(binding, _)| binding)))
            }
            McpAuth::CrossAppAccess { config, scopes, .. } => {
                let setup = self.jwt_bearer_setup(manager, challenge).await?;
                let manager = cross_app::authorize(
                    setup.manager,
                    &self.url,
                    setup.metadata,
                    config,
                    scopes,
                    setup.store.as_ref(),
                    setup.dpop.as_ref().map(|(_, http)| http),
                )
                .await?;
                Ok((manager, setup.dpop.map(|(binding, _)| binding)))
            }
        }
    }

    /// For the grants whose token requests agcore makes (cross-app access, workload
    /// identity): the authorization server's metadata, discovered on `manager`; and when that
    /// server takes DPoP (decided as for the authorization-code flow), a manager whose
    /// refreshes carry proofs (the discovery run again on it, as there), the client sending
    /// the grant's token request with a proof, and a store keeping the key with the tokens.
    /// Any other server keeps `manager` and the store, and sees no request more.
    async fn jwt_bearer_setup(
        &self,
        manager: AuthorizationManager,
        challenge: &str,
    ) -> Result<JwtBearerSetup, AuthError> {
        let metadata = discovery::authorization_metadata(&manager, &self.url, challenge).await?;
        if !uses_dpop(&metadata, challenge) {
            return Ok(JwtBearerSetup {
                manager,
                metadata,
                store: self.auth.store().cloned(),
                dpop: None,
            });
        }
        let binding = self.dpop_binding()?;
        let allowed = self.discovered_origins(&metadata, Some(challenge));
        let manager = self.dpop_manager(binding.clone(), allowed.clone()).await?;
        let metadata = discovery::authorization_metadata(&manager, &self.url, challenge).await?;
        let http = DpopTokenHttp::new(binding.clone(), allowed).map_err(AuthError::HttpError)?;
        let store = match self.auth.store() {
            Some(store) => Some(SharedCredentialStore(Arc::new(DpopKeyStore::new(
                store.clone(),
                binding.key(),
            )?))),
            None => None,
        };
        Ok(JwtBearerSetup {
            manager,
            metadata,
            store,
            dpop: Some((binding, http)),
        })
    }

    /// For the `client_credentials` grant (whose discovery rmcp runs itself): when the
    /// resource challenges with the `DPoP` scheme and its authorization server takes ES256
    /// proofs, a manager whose token requests carry them. Any other server keeps `manager`
    /// untouched — not even a discovery more.
    async fn dpop_if_demanded(
        &self,
        manager: AuthorizationManager,
        challenge: &str,
    ) -> Result<(AuthorizationManager, Option<Arc<DpopBinding>>), AuthError> {
        if !is_dpop_challenge(challenge) {
            return Ok((manager, None));
        }
        // The discovery rmcp's grant makes, first on rmcp's address-filtering client.
        let metadata = manager.resolve_metadata().await?.metadata;
        if !uses_dpop(&metadata, challenge) {
            return Ok((manager, None));
        }
        let binding = self.dpop_binding()?;
        let allowed = self.discovered_origins(&metadata, Some(challenge));
        let manager = self.dpop_manager(binding.clone(), allowed).await?;
        Ok((manager, Some(binding)))
    }

    /// rmcp's settings for the `client_credentials` grant.
    fn client_credentials(
        &self,
        credentials: &ClientCredentials,
        scopes: &[String],
    ) -> ClientCredentialsConfig {
        // RFC 8707: the token is for this MCP endpoint.
        let resource = Some(self.url.clone());
        match credentials {
            ClientCredentials::Secret {
                client_id,
                client_secret,
            } => ClientCredentialsConfig::ClientSecret {
                client_id: client_id.clone(),
                client_secret: client_secret.clone(),
                scopes: scopes.to_vec(),
                resource,
            },
            ClientCredentials::PrivateKeyJwt {
                client_id,
                private_key_pem,
                algorithm,
            } => ClientCredentialsConfig::PrivateKeyJwt {
                client_id: client_id.clone(),
                signing_key: private_key_pem.clone().into_bytes(),
                signing_algorithm: algorithm.to_rmcp(),
                token_endpoint_audience: None,
                scopes: scopes.to_vec(),
                resource,
            },
        }
    }
}

/// Whether to use DPoP with an authorization server of `metadata` for a resource that
/// challenged with `challenge`: when the server lists ES256 among its DPoP algorithms, or lists
/// none and the resource asks for the `DPoP` scheme. A server listing only other algorithms
/// gets bearer tokens requested (agcore signs ES256 only).
fn uses_dpop(metadata: &AuthorizationMetadata, challenge: &str) -> bool {
    match metadata
        .additional_fields
        .get("dpop_signing_alg_values_supported")
        .and_then(serde_json::Value::as_array)
    {
        Some(algorithms) => algorithms
            .iter()
            .any(|algorithm| algorithm.as_str() == Some(DPOP_ALGORITHM)),
        None => is_dpop_challenge(challenge),
    }
}

/// Whether a `WWW-Authenticate` value challenges with the `DPoP` scheme.
fn is_dpop_challenge(challenge: &str) -> bool {
    challenge
        .trim_start()
        .get(..5)
        .is_some_and(|scheme| scheme.eq_ignore_ascii_case("dpop "))
}

/// The `token_type` of the manager's current token (empty without one).
async fn token_type(manager: &AuthorizationManager) -> String {
    // Read from the serialized answer: rmcp does not re-export the `oauth2` accessor trait.
    let Ok((_, Some(token))) = manager.get_credentials().await else {
        return String::new();
    };
    serde_json::to_value(&token)
        .ok()
        .and_then(|answer| answer.get("token_type")?.as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// The scopes granted before followed by those `challenge` (a `WWW-Authenticate` value) names
/// that are new, each once.
fn scope_union(granted: &[String], challenge: &str) -> Vec<String> {
    let mut scopes = granted.to_vec();
    for scope in challenged_scopes(challenge) {
        if !scopes.contains(&scope) {
            scopes.push(scope);
        }
    }
    scopes
}

/// The `scope="a b"` parameter of a `WWW-Authenticate` value, split (RFC 6750 §3).
fn challenged_scopes(challenge: &str) -> Vec<String> {
    let lower = challenge.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find("scope=") {
        let start = from + at;
        from = start + "scope=".len();
        // A parameter name starts the value or follows a separator (not `...-scope=`).
        let boundary = lower[..start]
            .chars()
            .next_back()
            .is_none_or(|c| c == ' ' || c == ',');
        if !boundary {
            continue;
        }
        let rest = &challenge[from..];
        let value = match rest.strip_prefix('"') {
            Some(quoted) => quoted.split('"').next().unwrap_or_default(),
            None => rest.split([',', ' ']).next().unwrap_or_default(),
        };
        return value.split_whitespace().map(str::to_owned).collect();
    }
    Vec::new()
}

/// Run rmcp's `client_credentials` grant. Its `private_key_jwt` future holds a non-`Send`
/// form serializer across an await (rmcp 3.11), so it runs on a blocking thread driven by the
/// current runtime instead of inside the transport's `Send` futures.
async fn client_credentials_flow(
    mut oauth: OAuthState,
    config: ClientCredentialsConfig,
) -> Result<AuthorizationManager, AuthError> {
    let handle = tokio::runtime::Handle::current();
    let task = tokio::task::spawn_blocking(move || {
        handle.block_on(async move {
            oauth.authenticate_client_credentials(config).await?;
            Ok::<_, AuthError>(oauth.into_authorization_manager())
        })
    });
    let manager = task.await.map_err(|error| {
        AuthError::InternalError(format!("the client credentials task failed: {error}"))
    })??;
    manager.ok_or_else(|| {
        AuthError::InternalError("the client credentials grant did not complete".into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_up_keeps_the_granted_scopes_and_adds_the_challenged_ones() {
        let challenge = r#"Bearer error="insufficient_scope", scope="mcp:write mcp:basic", resource_metadata="https://x/.well-known/oauth-protected-resource""#;
        assert_eq!(
            scope_union(&["mcp:basic".to_owned()], challenge),
            ["mcp:basic", "mcp:write"]
        );
        assert_eq!(challenged_scopes("Bearer scope=read"), ["read"]);
        assert!(challenged_scopes(r#"Bearer x-scope="no""#).is_empty());
    }
}
