//! Settings every command reads the same way — the arguments, then `agcore.toml`, then the
//! environment: the config itself, the provider, the model's base URL and API key variable,
//! the secrets no tool may see, and the MCP servers.

use crate::cli::{ModelArgs, ToolArgs};
use crate::config::AgcoreConfig;
use crate::layers::Loaded;
use agcore::tools::mcp::McpServersConfig;

/// The default base URL when neither `--base-url`, the config, nor `OPENAI_BASE_URL` set one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The config by the trust rule of [`crate::layers`]: the user's file, then `--config` or —
/// when trusted and not `--restricted` — the workspace's `./agcore.toml`.
pub fn load_config(tool_args: &ToolArgs) -> anyhow::Result<Loaded> {
    let mut loaded = crate::layers::load(tool_args.config.as_deref(), tool_args.restricted)?;
    // The flags win over the file for every reader of the config (the registry, and the
    // system prompt's AGENTS.md).
    loaded.config.tools.restricted |= tool_args.restricted;
    if let Some(root) = &tool_args.workspace {
        loaded.config.builtin.root = Some(root.clone());
    }
    Ok(loaded)
}

/// The provider name tools are checked against.
pub fn provider(config: &AgcoreConfig) -> String {
    config
        .model
        .provider
        .clone()
        .unwrap_or_else(|| "openai".to_owned())
}

/// The base URL the arguments (then the config, then `OPENAI_BASE_URL`) name, else the default.
pub fn base_url(args: &ModelArgs, config: &AgcoreConfig) -> String {
    args.base_url
        .clone()
        .or_else(|| config.model.base_url.clone())
        .or_else(|| env("OPENAI_BASE_URL"))
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned())
}

/// The environment variable holding the model's API key: `--api-key-env`, then the config's
/// `model.api_key_env`, else `OPENAI_API_KEY`.
pub fn api_key_env(args: &ModelArgs, config: &AgcoreConfig) -> String {
    args.api_key_env
        .clone()
        .or_else(|| config.model.api_key_env.clone())
        .unwrap_or_else(|| "OPENAI_API_KEY".to_owned())
}

/// The environment variables that may hold the model's API key — `OPENAI_API_KEY`, the
/// config's `model.api_key_env` and `--api-key-env` — which neither `run_command` nor any stdio
/// MCP server gets to see.
pub fn secret_env_names(config: &AgcoreConfig, model: Option<&ModelArgs>) -> Vec<String> {
    let mut names = vec!["OPENAI_API_KEY".to_owned()];
    names.extend(config.model.api_key_env.clone());
    names.extend(model.and_then(|args| args.api_key_env.clone()));
    names.sort();
    names.dedup();
    names
}

/// The environment variable `name`, when set and not empty.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.is_empty())
}

/// The config's MCP servers, then those of the `--mcp-config` file (which win on a name clash).
pub fn mcp_servers(
    loaded: &Loaded,
    mcp_config: Option<&std::path::Path>,
) -> anyhow::Result<McpServersConfig> {
    let mut servers = loaded
        .config
        .mcp_servers(loaded.path.as_deref(), &loaded.mcp_files)?;
    if let Some(file) = mcp_config {
        servers
            .servers
            .extend(McpServersConfig::load(file)?.servers);
    }
    Ok(servers)
}
