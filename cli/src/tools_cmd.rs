//! `agcore tools`: every tool, where it comes from, what it needs, and whether the model sees it.

use std::process::ExitCode;

use crate::cli::ToolsArgs;
use crate::session::{build_registry, load_config, provider};

/// Run `agcore tools`.
pub async fn tools(args: ToolsArgs) -> anyhow::Result<ExitCode> {
    let loaded = load_config(&args.tools)?;
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
    let report = registry.explain(&provider, &model);
    if args.json {
        let json = serde_json::json!({"report": report, "mcp_servers": servers});
        println!("{}", serde_json::to_string_pretty(&json)?);
    } else {
        for server in &servers {
            match &server.error {
                Some(error) => println!("mcp server {}: unavailable: {error}", server.name),
                None => println!("mcp server {}: {} tool(s)", server.name, server.tools.len()),
            }
            for skipped in &server.skipped {
                println!(
                    "mcp server {}: tool {} skipped: {}",
                    server.name, skipped.tool, skipped.reason
                );
            }
        }
        if registry.is_empty() {
            println!(
                "no tools: enable some with --tools builtin, --mcp-config FILE or agcore.toml"
            );
        }
        print!("{report}");
    }
    Ok(if report.problems.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
