//! `run --agent NAME` and `chat --agent NAME`: the team built and checked before anything runs
//! (an unknown agent or tool, a cycle of sub-agents: an error naming the path), which agent a
//! stored conversation goes on with, and a suspended run's pending calls named by agent path.

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::llm::{CycleConfig, OpenaiChatMessage};
use agcore::run::Suspension;
use agcore::team::Team;
use agcore::tools::ToolRegistry;
use anyhow::Context;
use serde_json::Value;

use crate::cli::{ModelArgs, RunArgs};
use crate::config::AgcoreConfig;
use crate::secrets::Secrets;
use crate::team_build::{TeamInputs, build_team};

/// The config's team for a run starting with agent `name`, checked over the run's `registry`.
pub fn team_for(
    name: &str,
    args: &ModelArgs,
    config: &AgcoreConfig,
    secrets: &Secrets,
    run: &CycleConfig,
    registry: &ToolRegistry,
) -> anyhow::Result<Team> {
    crate::agents_config::section(&config.agents, name)?;
    let team = build_team(&TeamInputs {
        args,
        config,
        secrets,
        run,
        render_instructions: true,
    })?;
    team.check(name, registry)
        .map_err(|error| anyhow::anyhow!("the team in the config cannot run: {error}"))?;
    Ok(team)
}

/// `run --agent NAME --print-system-prompt`: the agent's system prompt (escaped: it holds
/// `AGENTS.md`, text from the workspace).
pub fn print_instructions(
    name: &str,
    args: &ModelArgs,
    config: &AgcoreConfig,
) -> anyhow::Result<ExitCode> {
    let section = crate::agents_config::section(&config.agents, name)?;
    let text = crate::team_build::instructions(name, section, args, config)
        .with_context(|| format!("[agents.{}]", escape_for_terminal(name)))?;
    if let Some(text) = text {
        println!("{}", escape_keeping_lines(&text));
    }
    Ok(ExitCode::SUCCESS)
}

/// Say (on stderr) when a stored conversation goes on with another agent than `--agent`: the
/// one its last handoff left it with.
pub fn say_who_continues(name: &str, history: &[OpenaiChatMessage]) {
    if let Some(current) = agcore::team::current_agent(history)
        && current != name
    {
        eprintln!(
            "note: the conversation goes on with agent {} (its last handoff went there)",
            escape_for_terminal(&current)
        );
    }
}

/// The agent path of the pending call `call_id` (`main/researcher`), for a team's run.
pub fn agent_of(suspension: &Suspension, call_id: &str, args: &RunArgs) -> Option<String> {
    let state = suspension.state();
    let root = args.agent.clone().or_else(|| state.agent.clone())?;
    state.agent_of(call_id, &root)
}

/// The pending requests as JSON, each with `"agent"` in a team's run.
pub fn requests_json(suspension: &Suspension, args: &RunArgs) -> serde_json::Result<Vec<Value>> {
    suspension
        .requests()
        .iter()
        .map(|request| {
            let mut value = serde_json::to_value(request)?;
            if let (Value::Object(object), Some(agent)) =
                (&mut value, agent_of(suspension, &request.call_id, args))
            {
                object.insert("agent".to_owned(), Value::from(agent));
            }
            Ok(value)
        })
        .collect()
}
