//! Builds the model client and the cycle from arguments and the environment.

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use anyhow::{Context, bail};

use crate::cli::ModelArgs;

/// The default base URL when neither `--base-url` nor `OPENAI_BASE_URL` is set.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// A cycle for the model the arguments describe.
pub fn build_cycle(args: &ModelArgs) -> anyhow::Result<LlmCycle> {
    let base_url = args
        .base_url
        .clone()
        .or_else(|| {
            std::env::var("OPENAI_BASE_URL")
                .ok()
                .filter(|v| !v.is_empty())
        })
        .unwrap_or_else(|| DEFAULT_BASE_URL.to_owned());
    let Some(model) = args
        .model
        .clone()
        .or_else(|| std::env::var("AGCORE_MODEL").ok().filter(|v| !v.is_empty()))
    else {
        bail!("no model: pass --model NAME or set AGCORE_MODEL");
    };
    let mut config = OpenAiConfig::new(base_url);
    if let Ok(key) = std::env::var(&args.api_key_env)
        && !key.is_empty()
    {
        config = config.with_api_key(key);
    }
    let client = OpenAiClient::new(config).context("could not create the HTTP client")?;
    let mut cycle_config = CycleConfig::new(model);
    cycle_config.max_turns = args.max_turns;
    let mut cycle = LlmCycle::new(client, cycle_config);
    if let Some(system) = &args.system {
        cycle.set_system_prompt(system.clone());
    }
    Ok(cycle)
}
