//! [`McpCrossAppConfig`]: cross-app access in an `mcpServers` entry (`"crossAppAccess"`).
//!
//! ```json
//! {"mcpServers": {"docs": {"url": "https://mcp.example.com/mcp", "crossAppAccess": {
//!   "idpTokenEndpoint": "https://sso.example.com/oauth2/v1/token",
//!   "idpClientId": "agcore-at-the-idp", "idpClientSecretEnv": "IDP_CLIENT_SECRET",
//!   "idToken": {"file": "/home/me/.cache/sso/id_token"},
//!   "clientId": "agcore-at-docs", "clientSecretEnv": "DOCS_CLIENT_SECRET",
//!   "scopes": ["docs.read"]}}}}
//! ```
//!
//! Secrets are never written in the file: they are named environment variables, read when the
//! client is made. The ID token comes from a file (read at each authorization, so an SSO helper
//! can keep it fresh) or from a variable (`{"env": "ID_TOKEN"}`).

use std::path::PathBuf;

use serde::Deserialize;

use crate::tools::mcp::auth::{CrossAppAccess, IdTokenSource, McpAuth, OAuthClient};
use crate::tools::mcp::config_error::McpConfigError;

/// Where the user's ID token is, in a config file.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub enum McpIdTokenConfig {
    /// A file holding the token.
    File(PathBuf),
    /// An environment variable holding the token.
    Env(String),
}

/// An entry's `crossAppAccess`: see the [module docs](self).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct McpCrossAppConfig {
    /// The enterprise IdP's token endpoint.
    pub idp_token_endpoint: String,
    /// This application's client ID at the IdP.
    pub idp_client_id: String,
    /// The variable holding its secret at the IdP (absent: a public client).
    #[serde(default)]
    pub idp_client_secret_env: Option<String>,
    /// Where the user's ID token is.
    pub id_token: McpIdTokenConfig,
    /// This application's client ID at the MCP server's authorization server.
    pub client_id: String,
    /// The variable holding its secret there (absent: a public client).
    #[serde(default)]
    pub client_secret_env: Option<String>,
    /// Scopes to ask for (absent: from the server's challenge or metadata).
    #[serde(default)]
    pub scopes: Vec<String>,
}

impl McpCrossAppConfig {
    /// The names of the environment variables holding its secrets (for withholding them from
    /// stdio servers).
    pub fn secret_env_names(&self) -> Vec<String> {
        let token = match &self.id_token {
            McpIdTokenConfig::Env(name) => Some(name.clone()),
            McpIdTokenConfig::File(_) => None,
        };
        [
            self.idp_client_secret_env.clone(),
            self.client_secret_env.clone(),
            token,
        ]
        .into_iter()
        .flatten()
        .collect()
    }

    /// The [`McpAuth`] these settings describe, with the secrets read from the environment.
    ///
    /// # Errors
    /// [`McpConfigError::Invalid`] naming a secret variable that is not set.
    pub fn to_auth(&self, server: &str) -> Result<McpAuth, McpConfigError> {
        let secret = |name: &Option<String>| -> Result<Option<String>, McpConfigError> {
            let Some(name) = name else {
                return Ok(None);
            };
            match std::env::var(name) {
                Ok(value) if !value.is_empty() => Ok(Some(value)),
                _ => Err(McpConfigError::Invalid {
                    server: server.to_owned(),
                    reason: format!("`crossAppAccess` names the variable {name}, which is not set"),
                }),
            }
        };
        let client = |id: &str, secret: Option<String>| OAuthClient {
            client_id: id.to_owned(),
            client_secret: secret,
        };
        let id_token = match &self.id_token {
            McpIdTokenConfig::File(path) => IdTokenSource::File(path.clone()),
            McpIdTokenConfig::Env(name) => IdTokenSource::Env(name.clone()),
        };
        let config = CrossAppAccess::new(
            self.idp_token_endpoint.clone(),
            client(&self.idp_client_id, secret(&self.idp_client_secret_env)?),
            id_token,
            client(&self.client_id, secret(&self.client_secret_env)?),
        );
        Ok(McpAuth::cross_app_access(config).with_scopes(self.scopes.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::mcp::McpServersConfig;

    fn config(entry: serde_json::Value) -> McpServersConfig {
        let json = serde_json::json!({"mcpServers": {"docs": entry}});
        McpServersConfig::parse(&json.to_string()).unwrap()
    }

    fn cross_app(secret_env: &str) -> serde_json::Value {
        serde_json::json!({
            "idpTokenEndpoint": "https://sso.example/token",
            "idpClientId": "at-idp",
            "idToken": {"file": "/run/sso/id_token"},
            "clientId": "at-docs",
            "clientSecretEnv": secret_env,
            "scopes": ["docs.read"],
        })
    }

    #[test]
    fn an_entry_becomes_cross_app_access_with_secrets_from_the_environment() {
        // PATH stands in for a secret variable: always set, and reading it changes nothing.
        let servers = config(
            serde_json::json!({"url": "https://mcp.example/mcp", "crossAppAccess": cross_app("PATH")}),
        );
        assert!(servers.client("docs").is_ok());
        assert_eq!(servers.secret_env_names(), ["PATH"]);
        let entry = servers.servers["docs"].cross_app_access.clone().unwrap();
        let McpAuth::CrossAppAccess { config, scopes, .. } = entry.to_auth("docs").unwrap() else {
            panic!("not cross-app access")
        };
        assert_eq!(scopes, ["docs.read"]);
        assert_eq!(config.idp_token_endpoint, "https://sso.example/token");
        assert_eq!(config.idp_client, OAuthClient::public("at-idp"));
        assert_eq!(
            config.id_token,
            IdTokenSource::File("/run/sso/id_token".into())
        );
        assert_eq!(config.client.client_id, "at-docs");
        assert_eq!(config.client.client_secret, std::env::var("PATH").ok());
    }

    #[test]
    fn an_unset_secret_variable_or_a_stdio_server_is_an_error() {
        let servers = config(serde_json::json!({"url": "https://mcp.example/mcp",
            "crossAppAccess": cross_app("AGCORE_TEST_NO_SUCH_SECRET")}));
        let error = servers.client("docs").unwrap_err().to_string();
        assert!(error.contains("AGCORE_TEST_NO_SUCH_SECRET"), "{error}");
        let servers =
            config(serde_json::json!({"command": "server", "crossAppAccess": cross_app("PATH")}));
        let error = servers.client("docs").unwrap_err().to_string();
        assert!(error.contains("for HTTP servers"), "{error}");
        // A token written in the file is not a source.
        let mut literal = cross_app("PATH");
        literal["idToken"] = serde_json::json!({"value": "eyJ..."});
        let json = serde_json::json!({"mcpServers": {"docs": {"url": "https://x/mcp", "crossAppAccess": literal}}});
        assert!(McpServersConfig::parse(&json.to_string()).is_err());
    }
}
