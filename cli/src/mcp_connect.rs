//! Starting the configured MCP servers the way every command does: the model's secrets
//! withheld, elicitations and sampling answered in the terminal, stored OAuth credentials used.

use agcore::tools::ToolError;
use agcore::tools::mcp::{McpClient, McpServersConfig, connect_all};
use anyhow::bail;

use crate::cli::McpSourceArgs;
use crate::layers::Loaded;
use crate::settings::{mcp_servers, secret_env_names};

/// `client` with every variable of `withheld` kept from its (stdio) server, answering
/// elicitations in the terminal and offering the current directory as its root.
pub fn withholding(client: McpClient, withheld: &[String]) -> McpClient {
    let mut client = withheld
        .iter()
        .fold(client, |client, name| client.without_env(name.clone()));
    // agcore is its own sandbox helper for the servers it starts.
    if let Ok(helper) = crate::sandbox_cmd::helper() {
        client = client.with_sandbox_helper(helper);
    }
    crate::mcp_progress::attach(crate::elicit::interactive(client))
}

/// Start every enabled server of `servers` concurrently, none of them seeing `withheld`; in
/// restricted mode each one read-only without network, whatever its own sandbox says.
pub async fn connect_servers(
    servers: &McpServersConfig,
    withheld: &[String],
    restricted: bool,
) -> Vec<(String, Result<McpClient, ToolError>)> {
    // Nor the secrets of the entries' `crossAppAccess`.
    let withheld: Vec<String> = withheld
        .iter()
        .cloned()
        .chain(servers.secret_env_names())
        .collect();
    let clients = servers
        .clients()
        .into_iter()
        .map(|(name, client)| {
            let client = client.map(|client| {
                let entry = servers.servers.get(&name);
                let client = withholding(crate::sampling::interactive(client, entry), &withheld)
                    .with_restricted_sandbox(restricted);
                if entry.is_some_and(|entry| entry.cross_app_access.is_some()) {
                    client
                } else {
                    crate::mcp_login::with_stored_auth(client, &name)
                }
            });
            (name, client)
        })
        .collect();
    connect_all(clients).await
}

/// The configured servers and the variables none of them may see (the model's API key).
/// `loaded` follows the trust rule of every command: an untrusted ./agcore.toml starts nothing.
pub(crate) fn servers(
    source: &McpSourceArgs,
    loaded: &Loaded,
) -> anyhow::Result<(McpServersConfig, Vec<String>)> {
    let servers = mcp_servers(loaded, source.mcp_config.as_deref())?;
    if servers.servers.is_empty() {
        bail!(
            "no MCP servers configured: pass --mcp-config FILE (an mcpServers JSON) or add [mcp] to agcore.toml"
        );
    }
    Ok((servers, secret_env_names(&loaded.config, None)))
}
