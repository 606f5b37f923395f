//! [`McpAuth`]: how a client proves who it is to an MCP server's authorization server.

use std::fmt;
use std::sync::Arc;

use crate::tools::mcp::auth::authorizer::{Authorizer, RedirectAuthorizer};
use crate::tools::mcp::auth::cross_app::CrossAppAccess;
use crate::tools::mcp::auth::store::SharedCredentialStore;
use crate::tools::mcp::auth::workload::WorkloadIdentity;

/// How the client is known to the authorization server in the authorization-code flow.
#[derive(Clone, PartialEq, Eq)]
pub enum ClientIdentity {
    /// Register on demand: a client ID metadata document when the server supports it and
    /// `metadata_url` is set, else dynamic client registration (RFC 7591) as `client_name`.
    Dynamic {
        /// The `client_name` sent to the registration endpoint.
        client_name: String,
        /// The HTTPS URL of this client's ID metadata document, used as its `client_id`.
        metadata_url: Option<String>,
    },
    /// A client registered with the authorization server out of band.
    Preregistered {
        /// The client ID.
        client_id: String,
        /// The secret of a confidential client (`client_secret_basic` or `_post`).
        client_secret: Option<String>,
    },
}

impl fmt::Debug for ClientIdentity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientIdentity::Dynamic {
                client_name,
                metadata_url,
            } => f
                .debug_struct("Dynamic")
                .field("client_name", client_name)
                .field("metadata_url", metadata_url)
                .finish(),
            ClientIdentity::Preregistered {
                client_id,
                client_secret,
            } => f
                .debug_struct("Preregistered")
                .field("client_id", client_id)
                .field(
                    "client_secret",
                    &client_secret.as_ref().map(|_| "<redacted>"),
                )
                .finish(),
        }
    }
}

/// The signing algorithm of a `private_key_jwt` client assertion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JwtAlgorithm {
    /// RSASSA-PKCS1-v1_5 with SHA-256.
    Rs256,
    /// RSASSA-PKCS1-v1_5 with SHA-384.
    Rs384,
    /// RSASSA-PKCS1-v1_5 with SHA-512.
    Rs512,
    /// ECDSA P-256 with SHA-256.
    Es256,
    /// ECDSA P-384 with SHA-384.
    Es384,
}

impl JwtAlgorithm {
    /// The algorithm for a JOSE name (`"ES256"`, ...), or `None`.
    pub fn from_name(name: &str) -> Option<Self> {
        Some(match name {
            "RS256" => JwtAlgorithm::Rs256,
            "RS384" => JwtAlgorithm::Rs384,
            "RS512" => JwtAlgorithm::Rs512,
            "ES256" => JwtAlgorithm::Es256,
            "ES384" => JwtAlgorithm::Es384,
            _ => return None,
        })
    }

    pub(crate) fn to_rmcp(self) -> rmcp::transport::auth::JwtSigningAlgorithm {
        use rmcp::transport::auth::JwtSigningAlgorithm as Alg;
        match self {
            JwtAlgorithm::Rs256 => Alg::RS256,
            JwtAlgorithm::Rs384 => Alg::RS384,
            JwtAlgorithm::Rs512 => Alg::RS512,
            JwtAlgorithm::Es256 => Alg::ES256,
            JwtAlgorithm::Es384 => Alg::ES384,
        }
    }
}

/// Credentials of a machine client (the `client_credentials` grant).
#[derive(Clone, PartialEq, Eq)]
pub enum ClientCredentials {
    /// A client secret, sent as HTTP Basic or in the body, whichever the server supports.
    Secret {
        /// The client ID.
        client_id: String,
        /// The client secret.
        client_secret: String,
    },
    /// A JWT assertion signed with a private key (RFC 7523, `private_key_jwt`).
    PrivateKeyJwt {
        /// The client ID (the assertion's `iss` and `sub`).
        client_id: String,
        /// The private key, PEM (PKCS#8).
        private_key_pem: String,
        /// The signing algorithm.
        algorithm: JwtAlgorithm,
    },
}

impl fmt::Debug for ClientCredentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientCredentials::Secret { client_id, .. } => f
                .debug_struct("Secret")
                .field("client_id", client_id)
                .field("client_secret", &"<redacted>")
                .finish(),
            ClientCredentials::PrivateKeyJwt {
                client_id,
                algorithm,
                ..
            } => f
                .debug_struct("PrivateKeyJwt")
                .field("client_id", client_id)
                .field("private_key_pem", &"<redacted>")
                .field("algorithm", algorithm)
                .finish(),
        }
    }
}

/// How a client authorizes to an OAuth-protected streamable-HTTP MCP server.
///
/// ```
/// use agcore::tools::mcp::auth::{ClientIdentity, McpAuth};
///
/// // A public client registering itself, taking the user through the browser.
/// let auth = McpAuth::authorization_code("http://127.0.0.1:8765/callback")
///     .with_identity(ClientIdentity::Preregistered {
///         client_id: "my-app".into(),
///         client_secret: None,
///     });
/// # let _ = auth;
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum McpAuth {
    /// The authorization-code flow with PKCE.
    AuthorizationCode {
        /// Where the authorization server sends the user back (`code`, `state`).
        redirect_uri: String,
        /// How the client is known to the authorization server.
        identity: ClientIdentity,
        /// Scopes to ask for; empty: from the challenge, else `scopes_supported`, else none.
        scopes: Vec<String>,
        /// Takes the user to the authorization URL and returns the redirect.
        authorizer: Arc<dyn Authorizer>,
        /// Where tokens are kept between runs (none: in memory only).
        store: Option<SharedCredentialStore>,
    },
    /// The `client_credentials` grant of a machine client.
    ClientCredentials {
        /// The client's credentials.
        credentials: ClientCredentials,
        /// Scopes to ask for (none by default).
        scopes: Vec<String>,
        /// Where tokens are kept between runs (none: in memory only).
        store: Option<SharedCredentialStore>,
    },
    /// Cross-app access (Enterprise-Managed Authorization): the user's ID token exchanged at
    /// the enterprise IdP for an ID-JAG (RFC 8693), redeemed at the MCP server's authorization
    /// server (RFC 7523 JWT bearer grant).
    CrossAppAccess {
        /// The IdP, the ID token and the clients.
        config: CrossAppAccess,
        /// Scopes to ask for; empty: from the challenge, else `scopes_supported`, else none.
        scopes: Vec<String>,
        /// Where tokens are kept between runs (none: in memory only).
        store: Option<SharedCredentialStore>,
    },
    /// Workload identity federation: the workload's platform-issued JWT redeemed at the MCP
    /// server's authorization server (RFC 7523 JWT bearer grant), once per challenge.
    WorkloadIdentity {
        /// The client and where its JWT is read.
        identity: WorkloadIdentity,
        /// Scopes to ask for; empty: from the challenge, else `scopes_supported`, else none.
        scopes: Vec<String>,
        /// Where tokens are kept between runs (none: in memory only).
        store: Option<SharedCredentialStore>,
    },
}

impl McpAuth {
    /// The authorization-code flow redirecting to `redirect_uri`, registering dynamically as
    /// `agcore`, following the authorization URL with [`RedirectAuthorizer`] (for servers that
    /// redirect at once; give an interactive [`Authorizer`] with
    /// [`with_authorizer`](Self::with_authorizer)).
    pub fn authorization_code(redirect_uri: impl Into<String>) -> Self {
        McpAuth::AuthorizationCode {
            redirect_uri: redirect_uri.into(),
            identity: ClientIdentity::Dynamic {
                client_name: "agcore".into(),
                metadata_url: None,
            },
            scopes: Vec::new(),
            authorizer: Arc::new(RedirectAuthorizer::new()),
            store: None,
        }
    }

    /// The `client_credentials` grant with `credentials`.
    pub fn client_credentials(credentials: ClientCredentials) -> Self {
        McpAuth::ClientCredentials {
            credentials,
            scopes: Vec::new(),
            store: None,
        }
    }

    /// Cross-app access with `config`.
    pub fn cross_app_access(config: CrossAppAccess) -> Self {
        McpAuth::CrossAppAccess {
            config,
            scopes: Vec::new(),
            store: None,
        }
    }

    /// Workload identity federation with `identity`.
    pub fn workload_identity(identity: WorkloadIdentity) -> Self {
        McpAuth::WorkloadIdentity {
            identity,
            scopes: Vec::new(),
            store: None,
        }
    }

    /// Set the client identity (authorization-code flow only).
    pub fn with_identity(mut self, new: ClientIdentity) -> Self {
        if let McpAuth::AuthorizationCode { identity, .. } = &mut self {
            *identity = new;
        }
        self
    }

    /// Set the authorizer (authorization-code flow only).
    pub fn with_authorizer(mut self, new: Arc<dyn Authorizer>) -> Self {
        if let McpAuth::AuthorizationCode { authorizer, .. } = &mut self {
            *authorizer = new;
        }
        self
    }

    /// Keep the client ID and tokens in `new` (loaded before the first request, saved after
    /// each authorization and refresh).
    pub fn with_store(mut self, new: Arc<dyn rmcp::transport::auth::CredentialStore>) -> Self {
        match &mut self {
            McpAuth::AuthorizationCode { store, .. }
            | McpAuth::ClientCredentials { store, .. }
            | McpAuth::CrossAppAccess { store, .. }
            | McpAuth::WorkloadIdentity { store, .. } => {
                *store = Some(SharedCredentialStore(new));
            }
        }
        self
    }

    /// The credential store, if any.
    pub(crate) fn store(&self) -> Option<&SharedCredentialStore> {
        match self {
            McpAuth::AuthorizationCode { store, .. }
            | McpAuth::ClientCredentials { store, .. }
            | McpAuth::CrossAppAccess { store, .. }
            | McpAuth::WorkloadIdentity { store, .. } => store.as_ref(),
        }
    }

    /// Ask for these scopes instead of choosing them from the server's metadata.
    pub fn with_scopes<I, S>(mut self, new: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let new: Vec<String> = new.into_iter().map(Into::into).collect();
        match &mut self {
            McpAuth::AuthorizationCode { scopes, .. }
            | McpAuth::ClientCredentials { scopes, .. }
            | McpAuth::CrossAppAccess { scopes, .. }
            | McpAuth::WorkloadIdentity { scopes, .. } => {
                *scopes = new;
            }
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_secrets() {
        let auth = McpAuth::authorization_code("http://127.0.0.1:1/cb").with_identity(
            ClientIdentity::Preregistered {
                client_id: "id".into(),
                client_secret: Some("hunter2".into()),
            },
        );
        let machine = McpAuth::client_credentials(ClientCredentials::Secret {
            client_id: "m2m".into(),
            client_secret: "hunter3".into(),
        });
        let text = format!("{auth:?} {machine:?}");
        assert!(
            !text.contains("hunter2") && !text.contains("hunter3"),
            "{text}"
        );
        assert!(
            text.contains("m2m") && text.contains("<redacted>"),
            "{text}"
        );
    }

    #[test]
    fn jwt_algorithms_by_name() {
        assert_eq!(JwtAlgorithm::from_name("ES256"), Some(JwtAlgorithm::Es256));
        assert_eq!(JwtAlgorithm::from_name("HS256"), None);
    }
}
