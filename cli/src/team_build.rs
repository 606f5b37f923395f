//! The library's [`Team`] from the config's `[agents.NAME]` sections: instructions rendered like
//! `--system-file` (after agcore's base instructions and `AGENTS.md`), tools as profile
//! entries, an agent's own model (`PROVIDER:NAME` like `--model`), limits and output schema.

use std::path::Path;
use std::sync::Arc;

use agcore::display::escape_for_terminal;
use agcore::llm::{ChatModel, CycleConfig};
use agcore::run::OutputSchema;
use agcore::team::{Agent, HandoffHistory, ParentHistory, Team};
use anyhow::{Context, bail};
use serde_json::Value;

use crate::agents_config::{AgentSection, HandoffHistoryName, SchemaSource, validate};
use crate::cli::ModelArgs;
use crate::config::AgcoreConfig;
use crate::secrets::Secrets;
use crate::settings::{Target, split_provider, target};

/// The most bytes of an instructions or schema file read.
const FILE_LIMIT: u64 = 1024 * 1024;

/// What the agents share with the run: its arguments, config and keys, and the run's cycle
/// configuration (an agent without a model of its own uses the run's).
pub struct TeamInputs<'a> {
    /// The model arguments (`--var` for the templates, the run's model).
    pub args: &'a ModelArgs,
    /// The config.
    pub config: &'a AgcoreConfig,
    /// The API keys.
    pub secrets: &'a Secrets,
    /// The run's cycle configuration.
    pub run: &'a CycleConfig,
    /// Whether the instructions are rendered (`agcore agents list` shows no prompt, so it
    /// needs no `--var`).
    pub render_instructions: bool,
}

/// The team of the config, every agent built (its templates rendered, its files read); the
/// library's `team.check` names what no agent may refer to.
pub fn build_team(inputs: &TeamInputs<'_>) -> anyhow::Result<Team> {
    let agents = &inputs.config.agents;
    validate(agents)?;
    let mut team = Team::new();
    for (name, section) in agents {
        let agent = build_agent(name, section, inputs)
            .with_context(|| format!("[agents.{}]", escape_for_terminal(name)))?;
        team = team.with_agent(agent);
    }
    Ok(team)
}

fn build_agent(
    name: &str,
    section: &AgentSection,
    inputs: &TeamInputs<'_>,
) -> anyhow::Result<Agent> {
    let mut agent = Agent::new(name)
        .with_agents(section.agents.clone())
        .with_handoffs(section.handoffs.clone());
    if let Some(description) = &section.description {
        agent = agent.with_description(description.clone());
    }
    if inputs.render_instructions
        && let Some(instructions) = instructions(name, section, inputs.args, inputs.config)?
    {
        agent = agent.with_instructions(instructions);
    }
    if let Some(tools) = &section.tools {
        agent = agent.with_tools(tools.clone());
    }
    if let Some(turns) = section.max_turns {
        agent = agent.with_max_turns(turns);
    }
    if let Some(limits) = section.limits {
        agent = agent.with_usage_limits(limits);
    }
    if let Some(model) = &section.model {
        let (client, config) = agent_model(model, inputs)?;
        agent = agent.with_model(client, config);
    }
    if let Some(source) = &section.output_schema {
        agent = agent.with_output_schema(output_schema(name, source)?);
    }
    if let Some(messages) = section.parent_history {
        agent = agent.with_parent_history(match messages {
            0 => ParentHistory::None,
            n => ParentHistory::Last(n),
        });
    }
    if let Some(history) = section.handoff_history {
        agent = agent.with_handoff_history(match history {
            HandoffHistoryName::Full => HandoffHistory::Full,
            HandoffHistoryName::NoToolCalls => HandoffHistory::NoToolCalls,
            HandoffHistoryName::LastUserMessage => HandoffHistory::LastUserMessage,
        });
    }
    Ok(agent)
}

/// The agent's system prompt: agcore's base instructions and `AGENTS.md` as for any run, then
/// its `instructions` (or `instructions_file`) as the template; without either, the run's own
/// system prompt (`--system`, `model.system`).
pub fn instructions(
    name: &str,
    section: &AgentSection,
    args: &ModelArgs,
    config: &AgcoreConfig,
) -> anyhow::Result<Option<String>> {
    let user = match (&section.instructions, &section.instructions_file) {
        (Some(text), _) => Some((text.clone(), format!("[agents.{name}] instructions"))),
        (None, Some(file)) => Some((
            read_bounded(file, "instructions_file")?,
            format!("[agents.{name}] instructions_file {}", file.display()),
        )),
        (None, None) => None,
    };
    let composed = match user {
        Some(user) => crate::system_prompt::compose_with(args, config, Some(user))?,
        None => crate::system_prompt::compose(args, config)?,
    };
    Ok(composed.text)
}

/// The agent's own model: `NAME` (the run's API, server and key) or `PROVIDER:NAME` (that
/// provider's public URL and key variables, unless it is the run's provider), with the run's
/// settings and the model's price.
fn agent_model(
    named: &str,
    inputs: &TeamInputs<'_>,
) -> anyhow::Result<(Arc<dyn ChatModel>, CycleConfig)> {
    let run = target(inputs.args, inputs.config)?;
    let (prefixed, model) = split_provider(named);
    if model.is_empty() {
        bail!("model: no model name in {:?}", escape_for_terminal(named));
    }
    let target = match prefixed {
        Some(api) if api != run.api => Target {
            api,
            provider: api.name().to_owned(),
            model: model.to_owned(),
            base_url: api.default_base_url().to_owned(),
            key_variables: api
                .key_variables()
                .iter()
                .map(|&name| name.to_owned())
                .collect(),
        },
        _ => Target {
            model: model.to_owned(),
            ..run
        },
    };
    let client = crate::setup::client_for(&target, &inputs.config.model, inputs.secrets)?;
    let mut config = inputs.run.clone();
    config.model = target.model.clone();
    config.prices = inputs.config.prices.get(&target.model).copied();
    Ok((client, config))
}

/// The schema of `output_schema`: the file's (named after its stem) or the inline one (named
/// after the agent).
fn output_schema(agent: &str, source: &SchemaSource) -> anyhow::Result<OutputSchema> {
    let (name, schema) = match source {
        SchemaSource::Inline(schema) => (agent.to_owned(), Value::Object(schema.clone())),
        SchemaSource::File(file) => {
            let text = read_bounded(file, "output_schema")?;
            let schema: Value = serde_json::from_str(&text)
                .with_context(|| format!("output_schema {} is not JSON", file.display()))?;
            let stem = file
                .file_stem()
                .map(|stem| stem.to_string_lossy().into_owned())
                .unwrap_or_else(|| agent.to_owned());
            (stem, schema)
        }
    };
    OutputSchema::from_json(name, schema).context("output_schema")
}

/// A file of the config, read whole but bounded.
fn read_bounded(file: &Path, key: &str) -> anyhow::Result<String> {
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read {key} {}", file.display()))?
        .len();
    if size > FILE_LIMIT {
        bail!(
            "{key} {} is {size} bytes; it may have at most {FILE_LIMIT}",
            file.display()
        );
    }
    std::fs::read_to_string(file).with_context(|| format!("cannot read {key} {}", file.display()))
}
