//! `agcore mcp list` and `agcore mcp call`.

use std::process::ExitCode;

use agcore::tools::mcp::{McpServerStatus, McpServersConfig};
use anyhow::{Context, bail};
use serde_json::Value;

use crate::cli::{McpCallArgs, McpCommand, McpListArgs, McpSourceArgs};
use crate::config::AgcoreConfig;
use crate::session::{connect_servers, mcp_servers, secret_env_names, withholding};

/// Run `agcore mcp ...`.
pub async fn mcp(command: McpCommand) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::List(args) => list(args).await,
        McpCommand::Call(args) => call(args).await,
    }
}

/// The configured servers and the variables none of them may see (the model's API key).
fn servers(source: &McpSourceArgs) -> anyhow::Result<(McpServersConfig, Vec<String>)> {
    let (loaded, path) = AgcoreConfig::discover(source.config.as_deref())?;
    let servers = mcp_servers(&loaded, path.as_deref(), source.mcp_config.as_deref())?;
    if servers.servers.is_empty() {
        bail!(
            "no MCP servers configured: pass --mcp-config FILE (an mcpServers JSON) or add [mcp] to agcore.toml"
        );
    }
    Ok((servers, secret_env_names(&loaded, None)))
}

async fn list(args: McpListArgs) -> anyhow::Result<ExitCode> {
    let (servers, secrets) = servers(&args.source)?;
    let mut statuses = Vec::new();
    let mut clients = Vec::new();
    for (name, result) in connect_servers(&servers, &secrets).await {
        statuses.push(McpServerStatus::of(&name, &result));
        clients.extend(result.ok());
    }
    for mut client in clients {
        let _ = client.close().await;
    }
    if args.source.json {
        println!("{}", serde_json::to_string_pretty(&statuses)?);
    } else {
        for status in &statuses {
            match &status.error {
                Some(error) => println!("{}: unavailable — {error}", status.name),
                None => {
                    println!("{}: connected, {} tool(s)", status.name, status.tools.len());
                    for tool in &status.tools {
                        println!("  {:<28} {}", tool.name, first_line(&tool.description));
                    }
                    for skipped in &status.skipped {
                        println!("  skipped {}: {}", skipped.tool, skipped.reason);
                    }
                }
            }
        }
    }
    let all_failed = statuses.iter().all(|s| s.error.is_some());
    Ok(if all_failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

async fn call(args: McpCallArgs) -> anyhow::Result<ExitCode> {
    let (servers, secrets) = servers(&args.source)?;
    let arguments: Value = match &args.args {
        Some(text) => serde_json::from_str(text).context("ARGS_JSON is not valid JSON")?,
        None => Value::Object(Default::default()),
    };
    let mut client = withholding(servers.client(&args.server)?, &secrets);
    client
        .connect()
        .await
        .with_context(|| format!("MCP server '{}' is unavailable", args.server))?;
    let result = client.call_tool(&args.tool, arguments).await;
    let _ = client.close().await;
    let value = result?;
    match (&value, args.source.json) {
        (Value::String(text), false) => println!("{text}"),
        _ => println!("{}", serde_json::to_string_pretty(&value)?),
    }
    Ok(ExitCode::SUCCESS)
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
