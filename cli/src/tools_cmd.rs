//! `agcore tools`: every tool, where it comes from, what it needs, and whether the model sees it.

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};

use crate::cli::ToolsArgs;
use crate::layers::Loaded;
use crate::render::json_for_terminal;
use crate::settings::provider;
use crate::setup::build_registry;

/// Run `agcore tools`.
pub async fn tools(args: ToolsArgs, loaded: Loaded) -> anyhow::Result<ExitCode> {
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
    // A server's tools that were not registered (its include/exclude lists, unusable schemas)
    // are rows of the report too: hidden, with the reason.
    let report = registry
        .explain(&provider, &model)
        .with_skipped_mcp_tools(servers.iter().flat_map(|server| server.skipped.clone()));
    if args.json {
        let json = serde_json::json!({"report": report, "mcp_servers": servers});
        println!(
            "{}",
            json_for_terminal(serde_json::to_string_pretty(&json)?)
        );
    } else {
        // Names, descriptions and errors come from servers: nothing reaches the terminal raw.
        for server in &servers {
            let name = escape_for_terminal(&server.name);
            match &server.error {
                Some(error) => println!(
                    "mcp server {name}: unavailable: {}",
                    escape_keeping_lines(error)
                ),
                None => println!("mcp server {name}: {} tool(s)", server.tools.len()),
            }
        }
        if registry.is_empty() {
            println!(
                "no tools: enable some with --tools builtin, --mcp-config FILE or agcore.toml"
            );
        }
        print!("{}", escape_keeping_lines(&report.to_string()));
        let policy = crate::sandbox_cmd::policy(&loaded.config.tools, args.tools.sandbox);
        println!("{}", crate::sandbox_cmd::describe(&policy));
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
