//! `agcore mcp resources SERVER [URI]` and `agcore mcp prompts SERVER [NAME] [--arg K=V]`:
//! what a server offers besides tools. Every text the server sent is escaped for the terminal.

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::tools::mcp::McpClient;
use anyhow::{Context, bail};
use serde_json::{Map, Value};

use crate::cli::{McpPromptsArgs, McpResourcesArgs, McpSourceArgs};
use crate::layers::Loaded;
use crate::mcp_connect::{servers, withholding};

pub(crate) async fn connected(
    source: &McpSourceArgs,
    server: &str,
    loaded: &Loaded,
) -> anyhow::Result<McpClient> {
    let (servers, secrets) = servers(source, loaded)?;
    let mut client = withholding(servers.client(server)?, &secrets);
    client
        .connect()
        .await
        .with_context(|| format!("MCP server '{server}' is unavailable"))?;
    Ok(client)
}

pub(crate) fn print_json(value: &impl serde::Serialize) -> anyhow::Result<()> {
    println!(
        "{}",
        crate::render::json_for_terminal(serde_json::to_string_pretty(value)?)
    );
    Ok(())
}

fn line(name: &str, about: Option<&str>) {
    match about {
        Some(about) => println!(
            "  {}  {}",
            escape_for_terminal(name),
            escape_for_terminal(about.lines().next().unwrap_or(""))
        ),
        None => println!("  {}", escape_for_terminal(name)),
    }
}

/// `agcore mcp resources`.
pub async fn resources(args: McpResourcesArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let mut client = connected(&args.source, &args.server, loaded).await?;
    let result = resources_of(&client, &args).await;
    let _ = client.close().await;
    result
}

async fn resources_of(client: &McpClient, args: &McpResourcesArgs) -> anyhow::Result<ExitCode> {
    if let Some(uri) = &args.uri {
        let contents = client.read_resource(uri).await?;
        if args.source.json {
            print_json(&contents)?;
        } else {
            for content in contents {
                match (&content.text, &content.blob) {
                    (Some(text), _) => println!("{}", escape_keeping_lines(text)),
                    (None, Some(blob)) => println!(
                        "[{} bytes of base64 {}]",
                        blob.len(),
                        escape_for_terminal(content.mime_type.as_deref().unwrap_or("data"))
                    ),
                    (None, None) => {}
                }
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let resources = client.list_resources().await?;
    // A server without templates answers with an error; that is not a failure of the listing.
    let templates = client.list_resource_templates().await.unwrap_or_default();
    if args.source.json {
        print_json(&serde_json::json!({"resources": resources, "templates": templates}))?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("resources ({}):", resources.len());
    for resource in &resources {
        line(&resource.uri, resource.description.as_deref());
    }
    println!("templates ({}):", templates.len());
    for template in &templates {
        line(&template.uri_template, template.description.as_deref());
    }
    Ok(ExitCode::SUCCESS)
}

/// `agcore mcp prompts`.
pub async fn prompts(args: McpPromptsArgs, loaded: &Loaded) -> anyhow::Result<ExitCode> {
    let arguments = prompt_arguments(&args.args)?;
    let mut client = connected(&args.source, &args.server, loaded).await?;
    let result = prompts_of(&client, &args, arguments).await;
    let _ = client.close().await;
    result
}

/// `KEY=VALUE` pairs as a JSON object of strings.
fn prompt_arguments(pairs: &[String]) -> anyhow::Result<Map<String, Value>> {
    let mut arguments = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            bail!("--arg wants KEY=VALUE, not '{}'", escape_for_terminal(pair));
        };
        arguments.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    Ok(arguments)
}

async fn prompts_of(
    client: &McpClient,
    args: &McpPromptsArgs,
    arguments: Map<String, Value>,
) -> anyhow::Result<ExitCode> {
    if let Some(name) = &args.name {
        let messages = client.get_prompt(name, arguments).await?;
        if args.source.json {
            print_json(&messages)?;
        } else {
            for message in messages {
                println!(
                    "[{}]\n{}",
                    escape_for_terminal(&message.role),
                    escape_keeping_lines(&message.text)
                );
            }
        }
        return Ok(ExitCode::SUCCESS);
    }
    let prompts = client.list_prompts().await?;
    if args.source.json {
        print_json(&prompts)?;
        return Ok(ExitCode::SUCCESS);
    }
    println!("prompts ({}):", prompts.len());
    for prompt in &prompts {
        line(&prompt.name, prompt.description.as_deref());
        for argument in &prompt.arguments {
            let required = if argument.required == Some(true) {
                " (required)"
            } else {
                ""
            };
            println!(
                "      --arg {}=...{required}",
                escape_for_terminal(&argument.name)
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompt_arguments_are_key_value_pairs() {
        let arguments = prompt_arguments(&["city=Paris".into(), "q=a=b".into()]).unwrap();
        assert_eq!(arguments["city"], "Paris");
        assert_eq!(arguments["q"], "a=b");
        assert!(prompt_arguments(&["nope".into()]).is_err());
    }
}
