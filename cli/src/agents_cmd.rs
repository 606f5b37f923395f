//! `agcore agents list`: each agent of the config's team with its tools, sub-agents and
//! handoffs, and every hidden tool with the gate that hid it and why — `agcore tools` per
//! agent, in the same shapes (`--json`: `{"agents": [...], "mcp_servers": [...]}`).

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::team::AgentReport;
use agcore::tools::ExposureReport;

use crate::cli::{AgentsCommand, AgentsListArgs, ModelArgs};
use crate::layers::Loaded;
use crate::render::json_for_terminal;
use crate::settings::provider;
use crate::setup::build_registry;
use crate::team_build::{TeamInputs, build_team};

/// Run `agcore agents ...`.
pub async fn agents(command: AgentsCommand, loaded: Loaded) -> anyhow::Result<ExitCode> {
    match command {
        AgentsCommand::List(args) => list(args, loaded).await,
    }
}

async fn list(args: AgentsListArgs, loaded: Loaded) -> anyhow::Result<ExitCode> {
    let (registry, servers) = build_registry(&args.tools, None, &loaded, false).await?;
    let provider = args
        .provider
        .clone()
        .unwrap_or_else(|| provider(&loaded.config));
    let model = args
        .model
        .clone()
        .or_else(|| loaded.config.model.model.clone())
        .or_else(|| std::env::var("AGCORE_MODEL").ok())
        .unwrap_or_default();
    // The agents' own models are only named here, never called: no key is needed.
    let model_args = ModelArgs {
        model: Some(if model.is_empty() {
            "unnamed".to_owned()
        } else {
            model.clone()
        }),
        ..ModelArgs::default()
    };
    let run_config = agcore::llm::CycleConfig::new(model.clone());
    let secrets = crate::secrets::Secrets::default();
    let team = build_team(&TeamInputs {
        args: &model_args,
        config: &loaded.config,
        secrets: &secrets,
        run: &run_config,
        render_instructions: false,
    })?;
    // Checked from every agent: a list is for finding what is wrong before a run does.
    for agent in team.agents() {
        team.check(agent.name(), &registry)?;
    }
    let reports = team.report(&registry, &provider, &model);
    if args.json {
        let json = serde_json::json!({"agents": reports, "mcp_servers": servers});
        println!(
            "{}",
            json_for_terminal(serde_json::to_string_pretty(&json)?)
        );
        return Ok(ExitCode::SUCCESS);
    }
    for server in &servers {
        if let Some(error) = &server.error {
            println!(
                "mcp server {}: unavailable: {}",
                escape_for_terminal(&server.name),
                escape_keeping_lines(error)
            );
        }
    }
    if reports.is_empty() {
        println!("no agents: define some in agcore.toml as [agents.NAME] (see docs/14-teams.md)");
    }
    let explained = registry.explain(&provider, &model);
    let blocks: Vec<String> = reports
        .iter()
        .map(|report| describe(report, &explained))
        .collect();
    // One block per agent, a blank line between.
    print!("{}", escape_keeping_lines(&blocks.join("\n")));
    Ok(ExitCode::SUCCESS)
}

/// One agent for people: a header, its lists, then its tool table in `agcore tools`' format.
fn describe(report: &AgentReport, run: &ExposureReport) -> String {
    let mut text = format!("agent {}", report.name);
    if !report.description.is_empty() {
        text.push_str(&format!(" — {}", report.description));
    }
    text.push('\n');
    let list = |items: &[String]| {
        if items.is_empty() {
            "(none)".to_owned()
        } else {
            items.join(", ")
        }
    };
    let entries = match &report.tool_entries {
        Some(entries) => list(entries),
        None => "(every tool of the run)".to_owned(),
    };
    text.push_str(&format!("  tools: {entries}\n"));
    text.push_str(&format!("  sub-agents: {}\n", list(&report.agents)));
    let handoffs: Vec<String> = report
        .handoffs
        .iter()
        .map(|name| format!("{name} (as {}{name})", agcore::team::TRANSFER_PREFIX))
        .collect();
    text.push_str(&format!("  handoffs: {}\n", list(&handoffs)));
    let mut details = Vec::new();
    if let Some(model) = &report.model {
        details.push(format!("model {model}"));
    }
    if let Some(turns) = report.max_turns {
        details.push(format!("max_turns {turns}"));
    }
    if report.typed {
        details.push("typed output".to_owned());
    }
    if !details.is_empty() {
        text.push_str(&format!("  {}\n", details.join(" · ")));
    }
    let table = ExposureReport {
        tools: report.tools.clone(),
        problems: Vec::new(),
        ..run.clone()
    };
    // The table without the run's header line (provider, profile, restricted, flags).
    for line in table.to_string().lines().skip(1) {
        text.push_str(&format!("  {line}\n"));
    }
    text
}
