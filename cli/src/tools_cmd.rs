//! `agcore tools`: every tool, where it comes from, what it needs, and whether the model sees it.

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};

use crate::cli::ToolsArgs;
use crate::layers::Loaded;
use crate::render::json_for_terminal;
use crate::settings::provider;
use crate::setup::build_registry;
use crate::store::{history, open, store_url};
use agcore::tools::tool_search::loaded_in_history;
use anyhow::bail;

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
    let mut report = registry
        .explain(&provider, &model)
        .with_skipped_mcp_tools(servers.iter().flat_map(|server| server.skipped.clone()));
    // The hosted tools asked for are rows too: offered, or hidden with the gate's reason.
    let hosted = crate::hosted_tools::chosen(&args.hosted_tools, &loaded.config.model, &provider)?;
    report
        .tools
        .extend(registry.hosted_exposure(&hosted, &provider, &model));
    // Deferred tools the model may find with tool_search (hidden ones are never found).
    let deferred: Vec<String> = registry
        .exposed_tools(&provider, &model)
        .filter(|tool| registry.is_deferred(tool.as_ref()))
        .map(|tool| tool.name().to_owned())
        .collect();
    // The session's loaded set: its interrupted run's, else what its history's searches loaded.
    let loaded_tools = match &args.session {
        Some(name) => {
            let url = store_url(
                args.store.url.as_deref(),
                loaded.config.session.store.as_deref(),
            )?;
            let store = open(&url, &loaded.config.session).await?;
            let Some(restored) = history(&*store, name).await? else {
                bail!("no session {}", escape_for_terminal(name));
            };
            Some(match restored.run {
                Some(run) => run.loaded_tools,
                None => loaded_in_history(&restored.history),
            })
        }
        None => None,
    };
    if args.json {
        let json = serde_json::json!({"report": report, "mcp_servers": servers, "deferred": deferred, "loaded": loaded_tools});
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
        if !deferred.is_empty() {
            println!(
                "deferred: {} tool(s) offered through tool_search, loaded when a search finds them: {}",
                deferred.len(),
                escape_for_terminal(&deferred.join(", "))
            );
        }
        if let (Some(name), Some(tools)) = (&args.session, &loaded_tools) {
            println!(
                "loaded in session {}: {}",
                escape_for_terminal(name),
                if tools.is_empty() {
                    "none".to_owned()
                } else {
                    escape_for_terminal(&tools.join(", ")).into_owned()
                }
            );
        }
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
