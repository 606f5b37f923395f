//! `agcore.toml`: provider, permissions, profiles, built-in tools and MCP servers in one file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use agcore::tools::ToolsConfig;
use agcore::tools::mcp::{McpServerConfig, McpServersConfig};
use serde::Deserialize;

/// The file `agcore` reads when `--config` is not given and it exists.
pub const DEFAULT_CONFIG_FILE: &str = "agcore.toml";

/// Why the config file could not be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("could not read config file {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The file is not valid TOML or has unknown or mistyped keys.
    #[error("invalid config file {path}: {message}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column.
        message: String,
    },
    /// An agent's file is outside the config file's directory.
    #[error(
        "config file {path}: [agents.{agent}] {key} = {file:?} is outside the config file's \
         directory; an agent's files must be inside it (trusting the config trusts them)"
    )]
    OutsideConfigDirectory {
        /// The config file.
        path: PathBuf,
        /// The agent.
        agent: String,
        /// `instructions_file` or `output_schema`.
        key: &'static str,
        /// The file, absolute.
        file: PathBuf,
    },
    /// The `mcpServers` JSON it points to could not be used.
    #[error("config file {path}: {source}")]
    Mcp {
        /// The config file.
        path: PathBuf,
        /// The MCP config error.
        source: agcore::tools::mcp::McpConfigError,
    },
}

/// The whole file. Every section is optional; unknown keys are errors.
///
/// ```toml
/// [model]
/// provider = "openai"                     # or openai-responses, anthropic, gemini
/// base_url = "http://127.0.0.1:8080/v1"   # any OpenAI-compatible server
/// model = "qwen2.5-7b-instruct"
/// api_key_env = "OPENAI_API_KEY"          # the variable holding the key (optional)
/// system = "You are a careful coding assistant."   # a template: {{ name }} from --var name=...
/// base_instructions = "You are terse."     # replaces agcore's own ("" leaves them out)
/// max_turns = 10
/// accepts_images = false                  # true: images from MCP tools are sent to the model
/// propagate_trace_context = false         # true: traceparent to the model server (when exporting)
/// request_timeout = 600                   # seconds for a request (a stream: until its headers)
/// stream_idle_timeout = 300               # seconds a streamed reply may stall
/// response_deadline = 900                 # seconds for a whole streamed reply
/// reasoning = "medium"                    # off, low, medium, high, or a budget in tokens
///
/// [[model.fallback]]                      # tried in order when the model fails before output
/// provider = "anthropic"
/// model = "claude-sonnet-4-5"
/// api_key_env = "ANTHROPIC_API_KEY"       # default: the provider's variable
///
/// [builtin]
/// enabled = true                          # read_file, list_directory, search_files, write_file, ...
/// root = "."                              # the workspace the built-in tools are confined to
/// allow_private_network = false           # true lets fetch_url reach 127.0.0.1, 10.x, 169.254.x ...
///
/// [tools]                                 # permissions, approvals, profiles, restricted mode
/// profile = "write"
/// ask = ["write"]
/// [tools.permissions]
/// allowed = ["read", "network"]
/// denied = ["delete", "shell"]
///
/// [mcp]
/// config = "mcp.json"                     # an mcpServers JSON file (relative to this file)
/// [mcp.servers.time]                      # or servers inline, same fields as mcpServers entries
/// command = "uvx"
/// args = ["mcp-server-time"]
///
/// [session]
/// store = "sqlite:/home/me/agcore.db"      # or postgres://...; where --session conversations go
/// statement_timeout = 30                  # seconds a PostgreSQL store waits (connect_timeout: 5)
/// lease = 30                              # seconds a PostgreSQL session lease lasts unrenewed
///
/// [context]                               # see docs/9-context.md
/// threshold = 0.8                         # compact above 80 % of the window
/// keep_last_turns = 2
///
/// [limits]                                # a budget per prompt (run), all optional
/// max_requests = 20
/// max_total_tokens = 200000
/// max_cost = 0.50                         # USD, at the price of the model below
///
/// [agents.researcher]                     # a team of agents: see docs/14-teams.md
/// description = "Finds facts in the workspace and cites the file."
/// instructions = "You are a careful researcher."   # or instructions_file (a template)
/// tools = ["read_file", "search_files"]   # profile entries (kind:read, mcp:NAME, ...)
/// [agents.main]
/// instructions = "You lead. Delegate research to the researcher."
/// agents = ["researcher"]                 # offered as tools (`agcore run --agent main`)
///
/// [prices."gpt-4o-mini"]                  # USD per million tokens
/// input = 0.15
/// cached_input = 0.075
/// output = 0.60
/// ```
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgcoreConfig {
    /// Where the model is.
    #[serde(default)]
    pub model: ModelSection,
    /// Built-in tools.
    #[serde(default)]
    pub builtin: BuiltinSection,
    /// Permissions, approvals, profiles, restricted mode, flags.
    #[serde(default)]
    pub tools: ToolsConfig,
    /// MCP servers.
    #[serde(default)]
    pub mcp: McpSection,
    /// Stored conversations (`--session`).
    #[serde(default)]
    pub session: SessionSection,
    /// The context engine (compaction).
    #[serde(default)]
    pub context: ContextSection,
    /// A usage budget per prompt (`--max-requests`, `--max-total-tokens`, `--max-cost`).
    #[serde(default)]
    pub limits: agcore::llm::UsageLimits,
    /// Prices per model name, USD per million tokens (for the cost in the usage line and
    /// `max_cost`).
    #[serde(default)]
    pub prices: BTreeMap<String, agcore::llm::Prices>,
    /// Commands run at the points of a run (see `hooks.rs`); only from trusted files.
    #[serde(default)]
    pub hooks: crate::hooks::HooksSection,
    /// A team of agents (`[agents.NAME]`, see `agents_config.rs`), run with `--agent NAME`.
    #[serde(default)]
    pub agents: BTreeMap<String, crate::agents_config::AgentSection>,
    /// `agcore restate serve`: who the endpoint serves.
    #[serde(default)]
    pub restate: RestateSection,
}

/// `[restate]`: the Restate endpoint (`agcore restate serve`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RestateSection {
    /// Restate's request identity public keys (`publickeyv1_…`): only requests Restate signed
    /// with one of them are served (added to `--identity-key`).
    #[serde(default)]
    pub identity_keys: Vec<String>,
}

/// `[context]`: when the conversation is compacted to fit the model's window.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextSection {
    /// Whether the context engine runs (default true).
    pub enabled: Option<bool>,
    /// Compact above this fraction of the usable window (default 0.8).
    pub threshold: Option<f32>,
    /// The newest turns never compacted (default 2).
    pub keep_last_turns: Option<usize>,
    /// The model that writes summaries (default: the conversation's).
    pub summary_model: Option<String>,
    /// Bytes of a tool's output the model reads (default 32 KiB).
    pub tool_output_limit: Option<usize>,
    /// Ask the server for its window when none is configured and the model is not a known
    /// one (default true).
    pub discover: Option<bool>,
    /// Keep tool outputs over their limit whole under `$XDG_DATA_HOME/agcore/outputs` and
    /// offer the `read_output` tool to page them (default false: they are cut).
    pub keep_large_outputs: Option<bool>,
    /// Output limits of single tools, in bytes (`read_file = 65536`).
    #[serde(default)]
    pub tool_output_limits: BTreeMap<String, usize>,
}

/// `[session]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionSection {
    /// The session store: `sqlite:PATH` or `postgres://...` (default: SQLite under the data
    /// directory). Where conversations are written, so only a trusted config may set it.
    pub store: Option<String>,
    /// Seconds a PostgreSQL store waits for a new connection (default 5).
    pub connect_timeout: Option<f64>,
    /// Seconds a PostgreSQL store waits for one operation's statements (default 30): a frozen
    /// server fails the run with an error naming the operation instead of hanging it.
    pub statement_timeout: Option<f64>,
    /// Seconds a PostgreSQL session lease lasts without renewal (default 30): a worker paused
    /// longer loses the session to the next one, and its commits are refused from then on.
    pub lease: Option<f64>,
}

/// `[model]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelSection {
    /// Base URL of the OpenAI-compatible server.
    pub base_url: Option<String>,
    /// Model name.
    pub model: Option<String>,
    /// The environment variable holding the API key.
    pub api_key_env: Option<String>,
    /// The user's system prompt, a minijinja template (variables from `--var`).
    pub system: Option<String>,
    /// agcore's base instructions, replaced (`""`: none).
    pub base_instructions: Option<String>,
    /// Most model requests per prompt.
    pub max_turns: Option<u32>,
    /// The model API: `openai` (chat completions), `openai-responses`, `anthropic` or
    /// `gemini` (default `openai`). Any other name is an OpenAI-compatible server reported
    /// under that name (`ollama`, `llama.cpp`), for tools that support only some providers.
    pub provider: Option<String>,
    /// Whether the model reads images: then images an MCP tool returns are sent to it
    /// (default: false — the tool message says an image was returned and not shown).
    pub accepts_images: Option<bool>,
    /// The model's context window in tokens (default: asked of the server, else a table of
    /// well-known models, else 8,192).
    pub context_window: Option<u32>,
    /// Send the W3C `traceparent` of each request's span to the model server when traces are
    /// exported (default false: the server is usually a third party).
    pub propagate_trace_context: Option<bool>,
    /// Seconds a non-streaming request may take, and a streaming one until its headers
    /// (default 600).
    pub request_timeout: Option<Seconds>,
    /// Seconds a streamed reply may go without progress (default 300; keep-alives do not
    /// count).
    pub stream_idle_timeout: Option<Seconds>,
    /// Seconds from sending a streaming request to the reply's end, whatever arrives
    /// (default 900).
    pub response_deadline: Option<Seconds>,
    /// Reasoning effort: `"off"`, `"low"`, `"medium"`, `"high"`, or a budget in tokens
    /// (`8000`) — like `--reasoning`.
    pub reasoning: Option<crate::provider::Reasoning>,
    /// Tools the provider runs itself (`"web_search"`, `"code_execution"`, ..., or a table
    /// with the tool's options) — like `--hosted-tool`. Each passes the tools' gates
    /// (restricted mode hides web search and code execution).
    #[serde(default)]
    pub hosted_tools: Vec<HostedToolSetting>,
    /// Hosted tools per provider (`[model.hosted_tools_by_provider] anthropic = [...]`),
    /// instead of `hosted_tools` for that provider.
    #[serde(default)]
    pub hosted_tools_by_provider: std::collections::BTreeMap<String, Vec<HostedToolSetting>>,
    /// The AWS region of a `bedrock` model (default: `AWS_REGION`, else `AWS_DEFAULT_REGION`).
    pub region: Option<String>,
    /// The AWS shared-config profile whose credentials sign `bedrock` requests (default:
    /// `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// Models tried in order when the model fails (retryably) before any output
    /// (`[[model.fallback]]`); each has a circuit breaker.
    #[serde(default)]
    pub fallback: Vec<FallbackSection>,
}

/// One entry of `hosted_tools`: a name, or a table with the tool's options.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum HostedToolSetting {
    /// `"web_search"`: the tool with its default options.
    Name(String),
    /// `{ type = "web_search", max_uses = 3 }`.
    Tool(agcore::llm::hosted::HostedTool),
}

/// One `[[model.fallback]]` entry: a model of any provider. Its base URL and key variable
/// default to its provider's (not to the main model's).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FallbackSection {
    /// `openai`, `openai-responses`, `anthropic` or `gemini` (default: the `PROVIDER:` prefix of
    /// `model`, else `openai`).
    pub provider: Option<String>,
    /// The model name (or `PROVIDER:NAME`).
    pub model: String,
    /// The API's base URL (default: the provider's public URL).
    pub base_url: Option<String>,
    /// The environment variable holding its API key (default: the provider's).
    pub api_key_env: Option<String>,
}

/// A time limit in the config: a number of seconds greater than 0 (`300`, `0.5`). Zero, a
/// negative number, a number too large for a duration and anything but a number are errors
/// of the config file, naming the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seconds(pub std::time::Duration);

/// Why a value is not [`Seconds`].
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("invalid value {value}: expected a number of seconds greater than 0 (e.g. 300 or 0.5)")]
pub struct SecondsError {
    /// The value as written.
    pub value: String,
}

impl Seconds {
    /// `value` seconds, if it is a usable time limit.
    pub fn new(value: f64) -> Result<Self, SecondsError> {
        let invalid = || SecondsError {
            value: value.to_string(),
        };
        if value.is_nan() || value <= 0.0 {
            return Err(invalid());
        }
        std::time::Duration::try_from_secs_f64(value)
            .ok()
            // A limit beyond about 136 years is a typo, not a limit.
            .filter(|duration| duration.as_secs() <= u64::from(u32::MAX))
            .map(Seconds)
            .ok_or_else(invalid)
    }
}

impl<'de> Deserialize<'de> for Seconds {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;

        impl serde::de::Visitor<'_> for Visitor {
            type Value = Seconds;

            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a number of seconds greater than 0")
            }

            fn visit_i64<E: serde::de::Error>(self, value: i64) -> Result<Seconds, E> {
                // Seconds as f64 are exact far beyond any sane limit.
                #[allow(clippy::cast_precision_loss)]
                Seconds::new(value as f64).map_err(E::custom)
            }

            fn visit_u64<E: serde::de::Error>(self, value: u64) -> Result<Seconds, E> {
                #[allow(clippy::cast_precision_loss)]
                Seconds::new(value as f64).map_err(E::custom)
            }

            fn visit_f64<E: serde::de::Error>(self, value: f64) -> Result<Seconds, E> {
                Seconds::new(value).map_err(E::custom)
            }
        }

        deserializer.deserialize_any(Visitor)
    }
}

/// `[builtin]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BuiltinSection {
    /// Register the built-in tools.
    #[serde(default)]
    pub enabled: bool,
    /// The workspace root (default: the current directory).
    pub root: Option<PathBuf>,
    /// Let `fetch_url` reach loopback, private and link-local addresses (default: refused, so
    /// a prompt-injected page cannot make the model fetch cloud metadata or local services).
    #[serde(default)]
    pub allow_private_network: bool,
}

/// `[mcp]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct McpSection {
    /// An `mcpServers` JSON file, relative to the config file.
    pub config: Option<PathBuf>,
    /// Servers given inline.
    #[serde(default)]
    pub servers: BTreeMap<String, McpServerConfig>,
}

impl AgcoreConfig {
    /// Parse TOML text.
    pub fn parse(text: &str) -> Result<Self, String> {
        toml::from_str(text).map_err(|error| error.to_string().trim().to_owned())
    }

    /// Every MCP server of the config: the referenced JSON file's, then the inline ones. The
    /// JSON file's text comes from `files` (read once, when its config file was read and
    /// fingerprinted), so what runs is what was trusted.
    pub fn mcp_servers(
        &self,
        origin: Option<&Path>,
        files: &BTreeMap<PathBuf, String>,
    ) -> Result<McpServersConfig, ConfigError> {
        let mut servers = match &self.mcp.config {
            Some(file) => {
                let origin = origin.unwrap_or(file).to_owned();
                let text = files.get(file).ok_or_else(|| ConfigError::Mcp {
                    path: origin.clone(),
                    source: agcore::tools::mcp::McpConfigError::Io {
                        path: file.clone(),
                        source: std::io::Error::from(std::io::ErrorKind::NotFound),
                    },
                })?;
                McpServersConfig::parse(text).map_err(|source| ConfigError::Mcp {
                    path: origin,
                    source,
                })?
            }
            None => McpServersConfig::default(),
        };
        for (name, server) in &self.mcp.servers {
            servers.servers.insert(name.clone(), server.clone());
        }
        Ok(servers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_documented_example_parses() {
        let text = include_str!("../../agcore.example.toml");
        let config = AgcoreConfig::parse(text).unwrap();
        assert!(config.builtin.enabled);
        assert!(config.model.base_url.is_some());
        assert!(!config.mcp.servers.is_empty());
        assert_eq!(config.tools.rules.len(), 1);
        assert!(config.prices.contains_key("gpt-4o-mini"));
    }

    #[test]
    fn unknown_keys_are_errors_with_a_location() {
        let error = AgcoreConfig::parse("[model]\nmodle = \"x\"\n").unwrap_err();
        assert!(error.contains("modle"), "{error}");
        let error = AgcoreConfig::parse("[tools]\nrestricted = \"yes\"\n").unwrap_err();
        assert!(
            error.contains("restricted") || error.contains("bool"),
            "{error}"
        );
    }

    #[test]
    fn private_network_access_is_off_unless_the_config_says_so() {
        assert!(
            !AgcoreConfig::parse("[builtin]\nenabled = true\n")
                .unwrap()
                .builtin
                .allow_private_network
        );
        let config = AgcoreConfig::parse("[builtin]\nallow_private_network = true\n").unwrap();
        assert!(config.builtin.allow_private_network);
    }

    #[test]
    fn an_empty_file_is_the_default() {
        let config = AgcoreConfig::parse("").unwrap();
        assert!(!config.builtin.enabled);
        assert!(config.tools.permissions.is_none());
    }
}
