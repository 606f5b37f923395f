//! OAuth 2.1 for streamable-HTTP MCP servers, on rmcp's `auth` support.
//!
//! Give a client an [`McpAuth`] with
//! [`McpClient::with_auth`](crate::tools::mcp::McpClient::with_auth). Nothing happens until a
//! server answers `401` (or `403 insufficient_scope`): then the challenge's
//! `WWW-Authenticate` header drives discovery — protected-resource metadata (RFC 9728, from the
//! header or the well-known URLs), authorization-server metadata (RFC 8414 / OpenID discovery,
//! with the 2025-03-26 fallbacks) — then registration (pre-registered client, client ID
//! metadata document, or dynamic registration, RFC 7591), the authorization-code flow with
//! PKCE S256 and the `resource` parameter (RFC 8707), and the token exchange. The request that
//! was refused is then sent again with the token. Scopes come from the challenge, else from
//! `scopes_supported`, and are omitted when neither names any; a `403 insufficient_scope`
//! re-authorizes with the scopes it asks for, at most [`MAX_AUTHORIZATIONS_PER_REQUEST`]
//! times per request. Tokens refresh on their own (rmcp's `AuthClient`) and, with
//! [`McpAuth::with_store`] (e.g. a [`FileCredentialStore`], mode `0600`), outlive the process.
//!
//! Machine clients use [`McpAuth::client_credentials`] (`client_secret_basic` /
//! `client_secret_post`, or `private_key_jwt`, RFC 7523). Enterprise users without a browser
//! flow use [`McpAuth::cross_app_access`]: their IdP's ID token is exchanged for an ID-JAG
//! (RFC 8693), which the authorization server redeems (RFC 7523 JWT bearer grant). A workload
//! with a platform-issued JWT and no user uses [`McpAuth::workload_identity`] (the same grant,
//! its JWT as the assertion).
//!
//! An authorization server that advertises DPoP (RFC 9449, ES256 in
//! `dpop_signing_alg_values_supported`) gets a proof with each token request of the
//! authorization-code flow (and of the `client_credentials` grant when the MCP server
//! challenges with `DPoP`), and the MCP server the DPoP-bound token as `Authorization: DPoP`
//! with a fresh proof per request; both may demand their nonce (answered once per challenge).
//! The P-256 key is one per server, kept with the stored credentials when there is a store.
//!
//! Tokens, secrets and DPoP keys never appear in `Debug` output, logs or error texts
//! ([`redact`]).

mod authorizer;
mod config;
mod cross_app;
mod discovery;
mod dpop;
mod dpop_binding;
mod dpop_client;
mod dpop_store;
mod dpop_token_http;
mod http;
mod loopback;
mod redact;
mod session;
mod store;
mod workload;

pub use authorizer::{Authorizer, RedirectAuthorizer};
pub use config::{ClientCredentials, ClientIdentity, JwtAlgorithm, McpAuth};
pub use cross_app::{CrossAppAccess, IdTokenSource, OAuthClient};
pub use loopback::{LoopbackAuthorizer, ShowUrl};
pub use redact::redact;
pub use rmcp::transport::auth::{CredentialStore, StoredCredentials};
pub use store::{FileCredentialStore, SharedCredentialStore};
pub use workload::WorkloadIdentity;

pub(crate) use http::OAuthHttpClient;

/// How many authorizations one request may trigger before its `401`/`403` is returned as an
/// error: a server whose scope demand can never be met must not loop forever.
pub const MAX_AUTHORIZATIONS_PER_REQUEST: u32 = 3;
