//! Settings every command reads the same way — the arguments, then `agcore.toml`, then the
//! environment: the config itself, the model's API, name, base URL and API key variable
//! ([`Target`]), the fallback models, the reasoning effort, the secrets no tool may see, and
//! the MCP servers.

use crate::cli::{ModelArgs, ToolArgs};
use crate::config::AgcoreConfig;
use crate::layers::Loaded;
use agcore::tools::mcp::McpServersConfig;

pub use crate::provider::{Api, Reasoning, api_named, split_provider};

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

/// One model to talk to: its API, name, server and key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The API spoken.
    pub api: Api,
    /// The provider name tools and spans see: the API's, or the config's own name for an
    /// OpenAI-compatible server (`ollama`).
    pub provider: String,
    /// The model name sent (without a `PROVIDER:` prefix).
    pub model: String,
    /// The API's base URL.
    pub base_url: String,
    /// The variables that may hold the key, in order (the first one set is used).
    pub key_variables: Vec<String>,
}

impl Target {
    /// The API key: the first of the key variables that was set.
    pub fn key<'a>(&self, secrets: &'a crate::secrets::Secrets) -> Option<&'a str> {
        self.key_variables.iter().find_map(|name| secrets.get(name))
    }
}

/// The model the arguments (then the config, then the environment) describe: `--provider`,
/// else the `PROVIDER:` prefix of the model name, else `[model] provider`, else
/// `AGCORE_PROVIDER`, else `openai`; `--base-url`, else `[model] base_url`, else (OpenAI APIs)
/// `OPENAI_BASE_URL`, else the vendor's URL; `--api-key-env`, else `[model] api_key_env`, else
/// the API's variables.
pub fn target(args: &ModelArgs, config: &AgcoreConfig) -> anyhow::Result<Target> {
    target_with(args, config, env)
}

/// [`target`] reading the environment through `env`.
fn target_with(
    args: &ModelArgs,
    config: &AgcoreConfig,
    env: impl Fn(&str) -> Option<String>,
) -> anyhow::Result<Target> {
    let section = &config.model;
    let Some(named) = args
        .model
        .clone()
        .or_else(|| section.model.clone())
        .or_else(|| env("AGCORE_MODEL"))
    else {
        anyhow::bail!("no model: pass --model NAME, set AGCORE_MODEL, or set model in agcore.toml");
    };
    let (prefixed, model) = split_provider(&named);
    let flag = args
        .provider
        .as_deref()
        .map(|name| api_named(name, "--provider"))
        .transpose()?;
    if let (Some(flag), Some(prefixed)) = (flag, prefixed)
        && flag != prefixed
    {
        anyhow::bail!(
            "--provider {} and the model {} name different providers",
            flag.name(),
            agcore::display::escape_for_terminal(&named)
        );
    }
    let (api, provider) = match (flag.or(prefixed), section.provider.as_deref()) {
        (Some(api), _) => (api, api.name().to_owned()),
        // Any other name is today's meaning: an OpenAI-compatible server by that name.
        (None, Some(name)) => (Api::parse(name).unwrap_or(Api::Openai), name.to_owned()),
        (None, None) => {
            let api = match env("AGCORE_PROVIDER") {
                Some(name) => api_named(&name, "AGCORE_PROVIDER")?,
                None => Api::Openai,
            };
            (api, api.name().to_owned())
        }
    };
    let base_url = args
        .base_url
        .clone()
        .or_else(|| section.base_url.clone())
        .or_else(|| env(api.base_url_variable()))
        .unwrap_or_else(|| api.default_base_url().to_owned());
    let key_variables = match args
        .api_key_env
        .clone()
        .or_else(|| section.api_key_env.clone())
    {
        Some(name) => vec![name],
        None => api
            .key_variables()
            .iter()
            .map(|&name| name.to_owned())
            .collect(),
    };
    Ok(Target {
        api,
        provider,
        model: model.to_owned(),
        base_url,
        key_variables,
    })
}

/// The `[[model.fallback]]` entries as targets, in order. An entry's base URL and key
/// default to its own provider's, never to the main model's.
pub fn fallback_targets(config: &AgcoreConfig) -> anyhow::Result<Vec<Target>> {
    config
        .model
        .fallback
        .iter()
        .map(|entry| {
            let (prefixed, model) = split_provider(&entry.model);
            let named = entry
                .provider
                .as_deref()
                .map(|name| api_named(name, "[[model.fallback]] provider"))
                .transpose()?;
            if let (Some(named), Some(prefixed)) = (named, prefixed)
                && named != prefixed
            {
                anyhow::bail!(
                    "[[model.fallback]]: provider {} and the model {} name different providers",
                    named.name(),
                    agcore::display::escape_for_terminal(&entry.model)
                );
            }
            let api = named.or(prefixed).unwrap_or(Api::Openai);
            if model.is_empty() {
                anyhow::bail!("[[model.fallback]]: an entry without a model name");
            }
            Ok(Target {
                api,
                provider: api.name().to_owned(),
                model: model.to_owned(),
                base_url: entry
                    .base_url
                    .clone()
                    .unwrap_or_else(|| api.default_base_url().to_owned()),
                key_variables: match &entry.api_key_env {
                    Some(name) => vec![name.clone()],
                    None => api
                        .key_variables()
                        .iter()
                        .map(|&name| name.to_owned())
                        .collect(),
                },
            })
        })
        .collect()
}

/// The provider name tools are checked against: the model's (see [`target`]), else the
/// config's `[model] provider`, else `openai`.
pub fn provider(config: &AgcoreConfig) -> String {
    config
        .model
        .provider
        .clone()
        .unwrap_or_else(|| "openai".to_owned())
}

/// The AWS access key variables, withheld like API keys and given to Bedrock's signer.
pub const AWS_KEY_VARIABLES: [&str; 3] = [
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
];

/// Every variable that may hold an API key (and the AWS access keys), which neither `run_command` nor any stdio MCP
/// server gets to see: `OPENAI_API_KEY`, `ANTHROPIC_API_KEY`, `GEMINI_API_KEY`,
/// `GOOGLE_API_KEY`, the config's `model.api_key_env`, `--api-key-env` and each
/// `[[model.fallback]]` entry's `api_key_env`.
pub fn secret_env_names(config: &AgcoreConfig, model: Option<&ModelArgs>) -> Vec<String> {
    let mut names: Vec<String> = agcore::llm::providers::PROVIDERS
        .iter()
        .flat_map(|provider| provider.key_variables)
        .map(|&name| name.to_owned())
        .collect();
    // AWS keys sign Bedrock requests (see `setup::client_for`); no child needs them.
    names.extend(AWS_KEY_VARIABLES.iter().map(|&name| name.to_owned()));
    names.extend(config.model.api_key_env.clone());
    names.extend(model.and_then(|args| args.api_key_env.clone()));
    names.extend(
        config
            .model
            .fallback
            .iter()
            .filter_map(|entry| entry.api_key_env.clone()),
    );
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::provider::parse_reasoning;

    fn args(model: &str) -> ModelArgs {
        ModelArgs {
            model: Some(model.to_owned()),
            ..ModelArgs::default()
        }
    }

    fn resolve(args: &ModelArgs, toml: &str, vars: &[(&str, &str)]) -> anyhow::Result<Target> {
        let config = AgcoreConfig::parse(toml).unwrap();
        target_with(args, &config, |name| {
            vars.iter()
                .find(|(key, _)| *key == name)
                .map(|(_, value)| (*value).to_owned())
        })
    }

    #[test]
    fn the_provider_comes_from_the_flag_the_prefix_the_config_then_the_environment() {
        let target = resolve(&args("anthropic:claude-sonnet-4-5"), "", &[]).unwrap();
        assert_eq!(target.api, Api::Anthropic);
        assert_eq!(target.model, "claude-sonnet-4-5");
        assert_eq!(target.base_url, "https://api.anthropic.com/v1");
        assert_eq!(target.key_variables, ["ANTHROPIC_API_KEY"]);

        let flagged = ModelArgs {
            provider: Some("gemini".to_owned()),
            ..args("gemini-2.5-flash")
        };
        let target = resolve(&flagged, "[model]\nprovider = \"anthropic\"\n", &[]).unwrap();
        assert_eq!(target.api, Api::Gemini);
        assert_eq!(
            target.base_url,
            "https://generativelanguage.googleapis.com/v1beta"
        );
        assert_eq!(target.key_variables, ["GEMINI_API_KEY", "GOOGLE_API_KEY"]);

        let target = resolve(
            &args("gpt-5"),
            "[model]\nprovider = \"openai-responses\"\n",
            &[("AGCORE_PROVIDER", "anthropic")],
        )
        .unwrap();
        assert_eq!(target.api, Api::OpenaiResponses);
        assert_eq!(target.base_url, "https://api.openai.com/v1");

        let target = resolve(
            &args("gpt-5"),
            "",
            &[("AGCORE_PROVIDER", "openai-responses")],
        )
        .unwrap();
        assert_eq!(target.api, Api::OpenaiResponses);
        assert_eq!(target.provider, "openai-responses");
    }

    #[test]
    fn a_colon_that_names_no_provider_is_part_of_the_model_name() {
        let target = resolve(&args("qwen3:8b"), "", &[]).unwrap();
        assert_eq!(target.api, Api::Openai);
        assert_eq!(target.model, "qwen3:8b");
        // Today's free-form provider names stay OpenAI-compatible servers by that name.
        let target = resolve(&args("qwen3:8b"), "[model]\nprovider = \"ollama\"\n", &[]).unwrap();
        assert_eq!(
            (target.api, target.provider.as_str()),
            (Api::Openai, "ollama")
        );
    }

    #[test]
    fn contradictions_and_unknown_names_are_errors() {
        let both = ModelArgs {
            provider: Some("gemini".to_owned()),
            ..args("anthropic:claude")
        };
        let error = resolve(&both, "", &[]).unwrap_err().to_string();
        assert!(error.contains("different providers"), "{error}");
        let error = resolve(&args("m"), "", &[("AGCORE_PROVIDER", "antropic")])
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("AGCORE_PROVIDER") && error.contains("anthropic, gemini"),
            "{error}"
        );
        let error = resolve(&ModelArgs::default(), "", &[])
            .unwrap_err()
            .to_string();
        assert!(error.starts_with("no model"), "{error}");
    }

    #[test]
    fn openai_base_url_applies_to_the_openai_apis_only() {
        let vars = [("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")];
        let target = resolve(&args("m"), "", &vars).unwrap();
        assert_eq!(target.base_url, "http://127.0.0.1:8080/v1");
        let target = resolve(&args("anthropic:m"), "", &vars).unwrap();
        assert_eq!(target.base_url, "https://api.anthropic.com/v1");
        let flagged = ModelArgs {
            base_url: Some("http://127.0.0.1:9/v1".to_owned()),
            api_key_env: Some("MY_KEY".to_owned()),
            ..args("anthropic:m")
        };
        let target = resolve(&flagged, "", &vars).unwrap();
        assert_eq!(target.base_url, "http://127.0.0.1:9/v1");
        assert_eq!(target.key_variables, ["MY_KEY"]);
    }

    #[test]
    fn fallback_entries_use_their_own_provider_s_defaults() {
        let config = AgcoreConfig::parse(
            "[model]\nmodel = \"local\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n\
             [[model.fallback]]\nprovider = \"anthropic\"\nmodel = \"claude-haiku-4-5\"\n\
             [[model.fallback]]\nmodel = \"gemini:gemini-2.5-flash\"\napi_key_env = \"MY_GEMINI\"\n\
             base_url = \"http://127.0.0.1:9/v1beta\"\n",
        )
        .unwrap();
        let targets = fallback_targets(&config).unwrap();
        assert_eq!(targets.len(), 2);
        assert_eq!(targets[0].api, Api::Anthropic);
        assert_eq!(targets[0].base_url, "https://api.anthropic.com/v1");
        assert_eq!(targets[0].key_variables, ["ANTHROPIC_API_KEY"]);
        assert_eq!(targets[1].api, Api::Gemini);
        assert_eq!(targets[1].model, "gemini-2.5-flash");
        assert_eq!(targets[1].base_url, "http://127.0.0.1:9/v1beta");
        let names = secret_env_names(&config, None);
        for name in [
            "ANTHROPIC_API_KEY",
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "MY_GEMINI",
            "OPENAI_API_KEY",
            "AWS_BEARER_TOKEN_BEDROCK",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_SESSION_TOKEN",
        ] {
            assert!(
                names.iter().any(|n| n == name),
                "{name} not withheld: {names:?}"
            );
        }
        let bad = AgcoreConfig::parse("[[model.fallback]]\nprovider = \"cohere\"\nmodel = \"x\"\n")
            .unwrap();
        assert!(fallback_targets(&bad).is_err());
        assert!(AgcoreConfig::parse("[[model.fallback]]\nmodel = \"x\"\nkey = \"y\"\n").is_err());
    }

    #[test]
    fn reasoning_takes_an_effort_or_a_budget() {
        assert_eq!(parse_reasoning("off"), Ok(Reasoning::Off));
        assert_eq!(parse_reasoning("high"), Ok(Reasoning::High));
        assert_eq!(parse_reasoning("8000"), Ok(Reasoning::Budget(8000)));
        assert!(parse_reasoning("0").is_err());
        assert!(parse_reasoning("max").is_err());
        let config = AgcoreConfig::parse("[model]\nreasoning = 2048\n").unwrap();
        assert_eq!(config.model.reasoning, Some(Reasoning::Budget(2048)));
        let config = AgcoreConfig::parse("[model]\nreasoning = \"low\"\n").unwrap();
        assert_eq!(config.model.reasoning, Some(Reasoning::Low));
        assert!(AgcoreConfig::parse("[model]\nreasoning = \"lots\"\n").is_err());
    }
}
