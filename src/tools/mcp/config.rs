//! [`McpServersConfig`]: the de-facto standard `mcpServers` JSON (Claude Desktop, Cursor, VS
//! Code) as clients, started concurrently.
//!
//! ```json
//! {"mcpServers": {
//!   "time":  {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}, "cwd": "/tmp"},
//!   "remote": {"type": "http", "url": "https://mcp.example.com/mcp",
//!              "headers": {"Authorization": "Bearer s3cret"}}
//! }}
//! ```
//!
//! `type` is optional (`stdio` when there is a `command`, `http` when there is a `url`);
//! `streamable-http` and `streamableHttp` mean `http`. Servers with `"disabled": true` are
//! skipped. agcore also reads `timeout` (seconds per request), `connectTimeout` (seconds), and
//! what the user says about the server's tools' permissions (see
//! [`McpToolAdapter`](crate::tools::mcp::McpToolAdapter)):
//!
//! ```json
//! {"mcpServers": {"time": {"command": "uvx", "args": ["mcp-server-time"],
//!   "toolPermissions": {"get_current_time": ["read"], "convert_time": ["read"]}},
//!  "third-party": {"url": "https://mcp.example.com/mcp", "trustAnnotations": false}}}
//! ```
//!
//! `toolPermissions` names a tool's exact permissions; `defaultPermissions` replaces the spec's
//! default (`write` + `delete`) for tools that say neither read-only nor destructive;
//! `trustAnnotations: false` ignores the server's hints (every tool counts as unannotated).
//!
//! `deferLoading: true` defers every tool of the server: the model is offered `tool_search`
//! instead of their schemas and loads the ones it needs ([`crate::tools::deferred`];
//! [`McpServersConfig::deferred_tools`] gives the registry's entries).
//!
//! Recovery (see [`McpRetry`]): `startupRetries` (default 2) and `startupBackoffMs` (default
//! 500, doubling) for a server that fails to start; `restarts` (default 3, `0` for never) for a
//! server that dies — it is started again on the next call.
//!
//! `include` / `exclude` choose the server's tools ([`McpToolFilter`]; names on the server, `*`
//! as a wildcard): `{"command": "npx", "args": [...], "exclude": ["get_env", "trigger-*"]}`.
//!
//! `crossAppAccess` authorizes to an HTTP server with the user's enterprise ID token
//! ([`McpCrossAppConfig`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use indexmap::IndexMap;
use serde::Deserialize;

use crate::tools::error::ToolError;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::config_error::McpConfigError;
use crate::tools::mcp::cross_app_config::McpCrossAppConfig;
use crate::tools::mcp::filter::McpToolFilter;
use crate::tools::mcp::recovery::McpRetry;
use crate::tools::mcp::transport::McpTransport;
use crate::tools::permission::Permission;
use crate::tools::profile::ProfileEntry;

/// One server's entry.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
#[serde(rename_all = "camelCase")]
pub struct McpServerConfig {
    /// `stdio`, `http`, `streamable-http` or `streamableHttp`; inferred when absent.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// The program of a stdio server.
    #[serde(default)]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The working directory.
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// The URL of an HTTP server.
    #[serde(default)]
    pub url: Option<String>,
    /// HTTP headers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Skip this server.
    #[serde(default)]
    pub disabled: bool,
    /// Per-request timeout in seconds.
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The OS sandbox of a stdio server, e.g. `{"mode": "read-only", "network": "off"}`
    /// (absent: [`crate::tools::sandbox::SandboxPolicy::for_mcp_servers`], `workspace-write` with
    /// the network on).
    #[serde(default)]
    pub sandbox: Option<crate::tools::sandbox::SandboxPolicy>,
    /// Connect timeout in seconds.
    #[serde(default)]
    pub connect_timeout: Option<u64>,
    /// Whether the server's tool annotations count (absent: yes); `false` treats every tool
    /// as unannotated (writing, destructive, open-world). See
    /// [`McpClient::with_trusted_annotations`].
    #[serde(default, alias = "trust_annotations")]
    pub trust_annotations: Option<bool>,
    /// Permissions of tools that say neither `readOnlyHint` nor `destructiveHint` (absent: the
    /// spec's defaults, `write` + `delete`). See [`McpClient::with_default_permissions`].
    #[serde(default, alias = "default_permissions")]
    pub default_permissions: Vec<Permission>,
    /// Whether the server's tools are deferred: found with `tool_search` instead of sent with
    /// every request ([`crate::tools::deferred`]). Off by default.
    #[serde(default, alias = "defer_loading")]
    pub defer_loading: bool,
    /// Exact permissions per tool (its name on the server), e.g.
    /// `{"get_current_time": ["read"]}`; wins over annotations. See
    /// [`McpClient::with_tool_permissions`].
    #[serde(default, alias = "tool_permissions")]
    pub tool_permissions: BTreeMap<String, Vec<Permission>>,
    /// Only these tools (names on the server, `*` as a wildcard) are registered; absent: all.
    /// See [`McpToolFilter`].
    #[serde(default, alias = "includeTools", alias = "include_tools")]
    pub include: Option<Vec<String>>,
    /// These tools are not registered (wins over `include`). See [`McpToolFilter`].
    #[serde(default, alias = "excludeTools", alias = "exclude_tools")]
    pub exclude: Vec<String>,
    /// How many times a server that fails to start is tried again (absent:
    /// [`CONFIG_STARTUP_RETRIES`]; a program that cannot be started at all is not retried).
    #[serde(default, alias = "startup_retries")]
    pub startup_retries: Option<u32>,
    /// The wait before the first retry in milliseconds, doubling after each (absent: 500).
    #[serde(default, alias = "startup_backoff_ms")]
    pub startup_backoff_ms: Option<u64>,
    /// Whether the server may ask the application's model for completions
    /// (`sampling/createMessage`). The library only records it: the application supplies the
    /// [`Sampler`](crate::tools::mcp::Sampler) (the CLI: after asking the user, each time).
    #[serde(default, alias = "allow_sampling")]
    pub allow_sampling: bool,
    /// The most tokens the server's sampling may spend in one session (the application's rule;
    /// the CLI's default is 4096).
    #[serde(default, alias = "sampling_token_budget")]
    pub sampling_token_budget: Option<u32>,
    /// Whether the model gets this server's prompts as tools (`<server>__list_prompts`,
    /// `<server>__get_prompt`; see [`McpClient::prompt_tools`]). Off by default: MCP prompts
    /// are for the user to choose.
    #[serde(default, alias = "prompt_tools")]
    pub prompt_tools: bool,
    /// How many times a server that died is started again on the next call (absent:
    /// [`CONFIG_RESTARTS`]; 0: never).
    #[serde(default)]
    pub restarts: Option<u32>,
    /// Cross-app access for an HTTP server (see [`McpCrossAppConfig`]).
    #[serde(default, alias = "cross_app_access")]
    pub cross_app_access: Option<McpCrossAppConfig>,
    /// The protocol version to ask for (absent: [`DEFAULT_PROTOCOL_VERSION`](crate::tools::mcp::DEFAULT_PROTOCOL_VERSION));
    /// `2026-07-28` starts the session with `server/discover` (see
    /// [`McpClient::with_protocol_version`]).
    #[serde(default, alias = "protocol_version")]
    pub protocol_version: Option<String>,
}

/// Retries of a failed start for a configured server that does not say (`startupRetries`).
pub const CONFIG_STARTUP_RETRIES: u32 = 2;

/// Restarts of a configured server that died, when its entry does not say (`restarts`).
pub const CONFIG_RESTARTS: u32 = 3;

impl McpServerConfig {
    /// A client for this entry (not yet connected).
    ///
    /// # Errors
    /// [`McpConfigError::Invalid`] when the entry has neither `command` nor `url`, or an
    /// unsupported `type` (e.g. the legacy `sse`).
    pub fn to_client(&self, server: &str) -> Result<McpClient, McpConfigError> {
        let invalid = |reason: &str| McpConfigError::Invalid {
            server: server.to_owned(),
            reason: reason.to_owned(),
        };
        let kind = match self.kind.as_deref() {
            Some(kind) => kind.to_owned(),
            None if self.command.is_some() => "stdio".to_owned(),
            None if self.url.is_some() => "http".to_owned(),
            None => return Err(invalid("it has neither `command` nor `url`")),
        };
        let transport = match kind.as_str() {
            "stdio" => McpTransport::Stdio {
                command: self
                    .command
                    .clone()
                    .ok_or_else(|| invalid("a stdio server needs `command`"))?,
                args: self.args.clone(),
            },
            "http" | "streamable-http" | "streamableHttp" | "streamable_http" => {
                McpTransport::Http {
                    url: self
                        .url
                        .clone()
                        .ok_or_else(|| invalid("an HTTP server needs `url`"))?,
                    headers: self.headers.clone(),
                }
            }
            other => {
                return Err(invalid(&format!(
                    "transport type '{other}' is not supported; use stdio or http (streamable HTTP)"
                )));
            }
        };
        let mut client = McpClient::new(server, transport).with_envs(self.env.clone());
        if let Some(cwd) = &self.cwd {
            client = client.with_cwd(cwd);
        }
        if let Some(secs) = self.timeout {
            client = client.with_timeout(secs);
        }
        client = client.with_sandbox_policy(
            self.sandbox
                .clone()
                .unwrap_or_else(crate::tools::sandbox::SandboxPolicy::for_mcp_servers),
        );
        if let Some(version) = &self.protocol_version {
            client = client.with_protocol_version(version.clone());
        }
        if let Some(secs) = self.connect_timeout {
            client = client.with_connect_timeout(Duration::from_secs(secs));
        }
        if let Some(trust) = self.trust_annotations {
            client = client.with_trusted_annotations(trust);
        }
        if !self.default_permissions.is_empty() {
            client = client.with_default_permissions(self.default_permissions.clone());
        }
        for (tool, permissions) in &self.tool_permissions {
            client = client.with_tool_permissions(tool.clone(), permissions.clone());
        }
        client = client
            .with_startup_retry(McpRetry::new(
                self.startup_retries.unwrap_or(CONFIG_STARTUP_RETRIES),
                Duration::from_millis(self.startup_backoff_ms.unwrap_or(500)),
            ))
            .with_restarts(self.restarts.unwrap_or(CONFIG_RESTARTS));
        if self.include.is_some() || !self.exclude.is_empty() {
            client = client.with_tool_filter(McpToolFilter {
                include: self.include.clone(),
                exclude: self.exclude.clone(),
            });
        }
        if let Some(cross_app) = &self.cross_app_access {
            if !matches!(client.transport(), McpTransport::Http { .. }) {
                return Err(invalid("`crossAppAccess` is for HTTP servers"));
            }
            client = client.with_auth(cross_app.to_auth(server)?);
        }
        Ok(client)
    }
}

/// An `mcpServers` file: server name → entry, in file order.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Default)]
pub struct McpServersConfig {
    /// The servers, in file order.
    #[serde(rename = "mcpServers", alias = "servers", default)]
    pub servers: IndexMap<String, McpServerConfig>,
}

impl McpServersConfig {
    /// The registry entries (`mcp:<server>`) that defer the tools of every enabled server with
    /// `"deferLoading": true`, for [`ToolRegistry::with_deferred_tools`].
    ///
    /// [`ToolRegistry::with_deferred_tools`]: crate::tools::ToolRegistry::with_deferred_tools
    pub fn deferred_tools(&self) -> Vec<ProfileEntry> {
        self.servers
            .iter()
            .filter(|(_, entry)| entry.defer_loading && !entry.disabled)
            .map(|(name, _)| ProfileEntry::McpServer(name.clone()))
            .collect()
    }
}

impl McpServersConfig {
    /// Read and parse a file.
    ///
    /// # Errors
    /// [`McpConfigError::Io`] or [`McpConfigError::Parse`].
    pub fn load(path: impl AsRef<Path>) -> Result<Self, McpConfigError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| McpConfigError::Io {
            path: path.to_owned(),
            source,
        })?;
        serde_json::from_str(&text).map_err(|source| McpConfigError::Parse {
            path: Some(path.to_owned()),
            source,
        })
    }

    /// Parse JSON text.
    ///
    /// # Errors
    /// [`McpConfigError::Parse`].
    pub fn parse(text: &str) -> Result<Self, McpConfigError> {
        serde_json::from_str(text).map_err(|source| McpConfigError::Parse { path: None, source })
    }

    /// The environment variables that hold the secrets of the enabled servers' entries
    /// (`crossAppAccess`), which no stdio server should inherit.
    pub fn secret_env_names(&self) -> Vec<String> {
        self.enabled()
            .filter_map(|(_, entry)| entry.cross_app_access.as_ref())
            .flat_map(McpCrossAppConfig::secret_env_names)
            .collect()
    }

    /// The names of the enabled servers, in file order.
    pub fn server_names(&self) -> Vec<String> {
        self.enabled().map(|(name, _)| name.clone()).collect()
    }

    fn enabled(&self) -> impl Iterator<Item = (&String, &McpServerConfig)> {
        self.servers.iter().filter(|(_, entry)| !entry.disabled)
    }

    /// A client for one server (not yet connected).
    ///
    /// # Errors
    /// [`McpConfigError::Invalid`] for an unknown server or an unusable entry.
    pub fn client(&self, server: &str) -> Result<McpClient, McpConfigError> {
        self.servers
            .get(server)
            .ok_or_else(|| McpConfigError::Invalid {
                server: server.to_owned(),
                reason: format!(
                    "no such server; the config has: {}",
                    self.server_names().join(", ")
                ),
            })?
            .to_client(server)
    }

    /// Clients for every enabled server (not yet connected), in file order.
    pub fn clients(&self) -> Vec<(String, Result<McpClient, McpConfigError>)> {
        self.enabled()
            .map(|(name, entry)| (name.clone(), entry.to_client(name)))
            .collect()
    }

    /// Start and connect every enabled server concurrently. Each gets its own result, in
    /// file order; one failing server does not stop the others.
    pub async fn connect_all(&self) -> Vec<(String, Result<McpClient, ToolError>)> {
        connect_all(self.clients()).await
    }
}

/// Connect several clients concurrently; each gets its own result, in order.
pub async fn connect_all(
    clients: Vec<(String, Result<McpClient, McpConfigError>)>,
) -> Vec<(String, Result<McpClient, ToolError>)> {
    futures::future::join_all(clients.into_iter().map(|(name, client)| async move {
        let result = match client {
            Ok(mut client) => client.connect().await.map(|()| client),
            Err(error) => Err(error.into()),
        };
        (name, result)
    }))
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stdio_and_http_entries() {
        let config = McpServersConfig::parse(
            r#"{"mcpServers": {
                "time": {"command": "uvx", "args": ["mcp-server-time"], "env": {"TZ": "UTC"}},
                "web": {"type": "streamable-http", "url": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "Bearer x"}},
                "off": {"command": "x", "disabled": true}
            }}"#,
        )
        .unwrap();
        assert_eq!(config.server_names(), vec!["time", "web"]);
        let time = config.client("time").unwrap();
        assert_eq!(
            time.transport(),
            &McpTransport::Stdio {
                command: "uvx".into(),
                args: vec!["mcp-server-time".into()]
            }
        );
        let web = config.client("web").unwrap();
        assert!(
            matches!(web.transport(), McpTransport::Http { url, headers } if url.ends_with("/mcp") && headers.len() == 1)
        );
    }

    #[test]
    fn rejects_entries_without_command_or_url_and_legacy_sse() {
        let config = McpServersConfig::parse(
            r#"{"mcpServers": {"a": {}, "b": {"type": "sse", "url": "http://x"}}}"#,
        )
        .unwrap();
        let clients = config.clients();
        assert!(
            matches!(&clients[0].1, Err(McpConfigError::Invalid { server, .. }) if server == "a")
        );
        assert!(
            matches!(&clients[1].1, Err(McpConfigError::Invalid { reason, .. }) if reason.contains("sse"))
        );
    }

    #[test]
    fn include_and_exclude_become_the_clients_filter() {
        let config = McpServersConfig::parse(
            r#"{"mcpServers": {"e": {"command": "x", "include": ["get_*", "echo"], "exclude": ["get_env"]},
                               "f": {"command": "x", "exclude_tools": ["a"]}}}"#,
        )
        .unwrap();
        let filter = config.client("e").unwrap().tool_filter();
        assert!(filter.allows("echo") && filter.allows("get_sum"));
        assert!(!filter.allows("get_env") && !filter.allows("add"));
        assert!(!config.client("f").unwrap().tool_filter().allows("a"));
    }

    #[test]
    fn prompt_tools_are_off_unless_an_entry_asks() {
        let config = McpServersConfig::parse(
            r#"{"mcpServers": {"p": {"command": "x", "promptTools": true},
                               "q": {"command": "x", "prompt_tools": true},
                               "r": {"command": "x"}}}"#,
        )
        .unwrap();
        assert!(config.servers["p"].prompt_tools && config.servers["q"].prompt_tools);
        assert!(!config.servers["r"].prompt_tools);
    }

    #[test]
    fn parse_errors_say_where() {
        let error = McpServersConfig::parse("{\"mcpServers\": [").unwrap_err();
        assert!(error.to_string().contains("line 1"));
    }
}
