//! `agcore mcp skills [SERVER]` and `agcore mcp skill SERVER NAME`: the skills servers serve
//! (SEP-2640). Listing fetches no skill file; `skill` fetches one `SKILL.md`, verifies it
//! against the listing (size, digest, frontmatter) and prints it, or fails naming the check.
//! Everything the server sent is escaped for the terminal.

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::tools::mcp::{McpClient, McpSkill};

use crate::cli::{McpSkillArgs, McpSkillsArgs};
use crate::layers::Loaded;
use crate::mcp_catalog::{connected, print_json};
use crate::mcp_connect::{connect_servers, servers};

/// `agcore mcp skills`.
pub async fn skills(args: McpSkillsArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let mut clients: Vec<McpClient> = Vec::new();
    let mut unavailable = Vec::new();
    match &args.server {
        Some(server) => clients.push(connected(&args.source, server, loaded).await?),
        None => {
            let (servers, secrets) = servers(&args.source, loaded)?;
            for (name, result) in connect_servers(&servers, &secrets, false).await {
                match result {
                    Ok(client) => clients.push(client),
                    Err(error) => unavailable.push((name, error.to_string())),
                }
            }
        }
    }
    let listed = list_all(&clients, args.server.is_some()).await;
    for mut client in clients {
        let _ = client.close().await;
    }
    let listed = listed?;
    if args.source.json {
        let skills: Vec<&McpSkill> = listed.iter().flat_map(|(_, skills)| skills).collect();
        print_json(&skills)?;
        return Ok(ExitCode::SUCCESS);
    }
    for (server, skills) in &listed {
        println!("{}: {} skill(s)", escape_for_terminal(server), skills.len());
        for skill in skills {
            print_skill(skill);
        }
    }
    for (server, error) in &unavailable {
        println!(
            "{}: unavailable — {}",
            escape_for_terminal(server),
            escape_keeping_lines(error)
        );
    }
    if listed.is_empty() && unavailable.is_empty() {
        println!("no server offers skills");
    }
    Ok(ExitCode::SUCCESS)
}

/// The skills of each client that offers them (of the one asked for: an error when it does not).
async fn list_all(
    clients: &[McpClient],
    asked: bool,
) -> anyhow::Result<Vec<(String, Vec<McpSkill>)>> {
    let mut listed = Vec::new();
    for client in clients {
        let offers = client.server_info().is_some_and(|info| info.has_skills);
        if !offers && !asked {
            continue;
        }
        listed.push((client.server_name().to_owned(), client.list_skills().await?));
    }
    Ok(listed)
}

fn print_skill(skill: &McpSkill) {
    let description = skill.description.lines().next().unwrap_or("");
    println!(
        "  {:<24} {}",
        escape_for_terminal(&skill.name),
        escape_for_terminal(description)
    );
    let files = match (&skill.files, skill.skill_md()) {
        (Some(files), Some(skill_md)) => {
            format!("{} bytes, {} file(s)", skill_md.size, files.len())
        }
        (Some(files), None) => format!("{} file(s)", files.len()),
        (None, _) => "generated files, no digests".to_owned(),
    };
    println!("      {}  ({files})", escape_for_terminal(&skill.uri));
    if let Some(problem) = &skill.problem {
        println!("      not loadable: {}", escape_for_terminal(problem));
    }
}

/// `agcore mcp skill`.
pub async fn skill(args: McpSkillArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let mut client = connected(&args.source, &args.server, loaded).await?;
    let result = async {
        let skill = client.find_skill(&args.name).await?;
        client.load_skill(&skill).await
    }
    .await;
    let _ = client.close().await;
    let loaded = result?;
    if args.source.json {
        print_json(&loaded)?;
        return Ok(ExitCode::SUCCESS);
    }
    if let Some(skill_md) = loaded.skill.skill_md() {
        eprintln!(
            "verified {} from MCP server '{}' ({} bytes, {})",
            escape_for_terminal(&loaded.skill.uri),
            escape_for_terminal(&loaded.skill.server),
            skill_md.size,
            escape_for_terminal(&skill_md.digest)
        );
    }
    print!("{}", escape_keeping_lines(&loaded.text));
    Ok(ExitCode::SUCCESS)
}
