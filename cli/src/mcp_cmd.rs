//! `agcore mcp list`, `agcore mcp call`, `agcore mcp resources` and `agcore mcp prompts`
//! (`login` / `logout`: [`crate::mcp_login`]; `skills` / `skill`: [`crate::mcp_skills`]).

use std::io::IsTerminal;
use std::process::ExitCode;

use agcore::tools::mcp::McpServerStatus;
use anyhow::Context;
use serde_json::Value;

use agcore::display::{escape_for_terminal, escape_keeping_lines};

use crate::cli::{McpCallArgs, McpCommand, McpListArgs};
use crate::layers::Loaded;
use crate::mcp_connect::{connect_servers, servers, withholding};
use crate::render::json_for_terminal;

/// Run `agcore mcp ...`.
pub async fn mcp(command: McpCommand, loaded: Loaded) -> anyhow::Result<ExitCode> {
    match command {
        McpCommand::List(args) => list(args, &loaded).await,
        McpCommand::Call(args) => call(args, &loaded).await,
        McpCommand::Login(args) => crate::mcp_login::login(args, &loaded).await,
        McpCommand::Logout(args) => crate::mcp_login::logout(args).await,
        McpCommand::Resources(args) => crate::mcp_catalog::resources(args, &loaded).await,
        McpCommand::Prompts(args) => crate::mcp_catalog::prompts(args, &loaded).await,
        McpCommand::Skills(args) => crate::mcp_skills::skills(args, &loaded).await,
        McpCommand::Skill(args) => crate::mcp_skills::skill(args, &loaded).await,
    }
}

async fn list(args: McpListArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let (servers, secrets) = servers(&args.source, loaded)?;
    let mut statuses = Vec::new();
    let mut clients = Vec::new();
    for (name, result) in connect_servers(&servers, &secrets, false).await {
        statuses.push(McpServerStatus::of(&name, &result));
        clients.extend(result.ok());
    }
    for mut client in clients {
        let _ = client.close().await;
    }
    if args.source.json {
        println!(
            "{}",
            json_for_terminal(serde_json::to_string_pretty(&statuses)?)
        );
    } else {
        // Everything here comes from the servers: escaped, so no name, description or error
        // text can move the cursor, hide text or reorder it.
        for status in &statuses {
            let name = escape_for_terminal(&status.name);
            match &status.error {
                Some(error) => println!("{name}: unavailable — {}", escape_keeping_lines(error)),
                None => {
                    let retried = match status.connect_attempts {
                        0 | 1 => String::new(),
                        n => format!(" (after {n} attempts)"),
                    };
                    println!(
                        "{name}: connected{retried}, {} tool(s){}{}{}",
                        status.tools.len(),
                        protocol(status),
                        cache(status),
                        skills(status)
                    );
                    for tool in &status.tools {
                        println!(
                            "  {:<28} {}",
                            escape_for_terminal(&tool.name),
                            escape_for_terminal(first_line(&tool.description))
                        );
                    }
                    for skipped in &status.skipped {
                        println!(
                            "  skipped {}: {}",
                            escape_for_terminal(&skipped.tool),
                            escape_keeping_lines(&skipped.reason.to_string())
                        );
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

async fn call(args: McpCallArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let (servers, secrets) = servers(&args.source, loaded)?;
    let arguments: Value = match &args.args {
        Some(text) => serde_json::from_str(text).context("ARGS_JSON is not valid JSON")?,
        None => Value::Object(Default::default()),
    };
    let secs = args
        .timeout
        .or_else(|| {
            servers
                .servers
                .get(&args.server)
                .and_then(|entry| entry.timeout)
        })
        .unwrap_or(agcore::tools::mcp::DEFAULT_REQUEST_TIMEOUT_SECS);
    let mut client = withholding(servers.client(&args.server)?, &secrets);
    client
        .connect()
        .await
        .with_context(|| format!("MCP server '{}' is unavailable", args.server))?;
    // One bound for the whole call: each request has its own timeout, but a task the call
    // starts is polled for up to an hour; dropping the call cancels it on the server.
    let call = client.call_tool(&args.tool, arguments);
    let result = tokio::time::timeout(std::time::Duration::from_secs(secs), call).await;
    let _ = client.close().await;
    let Ok(result) = result else {
        anyhow::bail!(
            "tool '{}' of MCP server '{}' did not finish within {secs} s and was cancelled \
             (--timeout SECS allows longer)",
            escape_for_terminal(&args.tool),
            escape_for_terminal(&args.server)
        );
    };
    let value = result?;
    match (&value, args.source.json) {
        (Value::String(text), false) => println!(
            "{}",
            crate::render::answer_text(text, std::io::stdout().is_terminal())
        ),
        _ => println!(
            "{}",
            json_for_terminal(serde_json::to_string_pretty(&value)?)
        ),
    }
    Ok(ExitCode::SUCCESS)
}

/// ` — MCP 2026-07-28 (stateless)` / ` — MCP 2025-11-25`: the negotiated protocol version.
fn protocol(status: &McpServerStatus) -> String {
    let Some(info) = &status.info else {
        return String::new();
    };
    let version = escape_for_terminal(&info.protocol_version);
    if info.stateless {
        format!(" — MCP {version} (stateless)")
    } else {
        format!(" — MCP {version}")
    }
}

/// `; list fresh for 60s (shared)`: the listing's cache hint, when the server gave one.
fn cache(status: &McpServerStatus) -> String {
    let Some(hint) = &status.tools_cache else {
        return String::new();
    };
    let scope = if hint.shared { "shared" } else { "private" };
    match hint.ttl() {
        Some(ttl) => format!("; list fresh for {:.3}s ({scope})", ttl.as_secs_f64()),
        None => format!("; list cache scope {scope}"),
    }
}

/// `; offers skills`: the server declared the skills extension (`agcore mcp skills`).
fn skills(status: &McpServerStatus) -> &'static str {
    if status.info.as_ref().is_some_and(|info| info.has_skills) {
        "; offers skills"
    } else {
        ""
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}
