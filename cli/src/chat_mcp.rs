//! The chat's MCP commands: `/resources [SERVER] [URI]` (list, or read one), `/prompts` (list)
//! and `/prompt [SERVER] NAME [KEY=VALUE ...]` (render a server's prompt and send it as the
//! next message). Everything a server sent is escaped for the terminal.

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::tools::mcp::McpHandle;
use agcore::vocab::text;
use serde_json::{Map, Value};

/// The most bytes of a read resource printed in the chat.
const MAX_SHOWN_BYTES: usize = 64 * 1024;

/// What the chat does after an MCP command.
pub enum McpCommand {
    /// Printed what was asked; nothing else.
    Done,
    /// Send this text as the user's next message.
    Send(String),
}

/// The help lines of these commands.
pub const HELP: &str = "\
  /resources [SERVER] [URI]          the MCP servers' resources, or read one
  /prompts                           the MCP servers' prompts and their arguments
  /prompt [SERVER] NAME [KEY=VALUE]  render a server's prompt and send it";

/// Run `/name argument` when it is one of these commands (`None` otherwise).
pub async fn command(name: &str, argument: &str, servers: &[McpHandle]) -> Option<McpCommand> {
    let words = split_words(argument);
    let result = match name {
        "resources" => resources(&words, servers).await.map(|()| McpCommand::Done),
        "prompts" => prompts(servers).await.map(|()| McpCommand::Done),
        "prompt" => prompt(&words, servers).await,
        _ => return None,
    };
    Some(result.unwrap_or_else(|error| {
        eprintln!("error: {}", escape_keeping_lines(&error));
        McpCommand::Done
    }))
}

fn offering(
    servers: &[McpHandle],
    what: fn(&agcore::tools::mcp::McpServerInfo) -> bool,
) -> Vec<&McpHandle> {
    servers
        .iter()
        .filter(|s| s.server_info().is_some_and(|info| what(&info)))
        .collect()
}

/// `words[0]` as a server name when it names one of `servers` and more words follow (or
/// `always`); then the rest.
fn pick_server<'a, 'w>(
    words: &'w [String],
    servers: &[&'a McpHandle],
    always: bool,
) -> (Option<&'a McpHandle>, &'w [String]) {
    if let Some(first) = words.first()
        && (always || words.len() > 1)
        && let Some(server) = servers.iter().find(|s| s.server_name() == first)
    {
        return (Some(server), &words[1..]);
    }
    (None, words)
}

async fn resources(words: &[String], servers: &[McpHandle]) -> Result<(), String> {
    let with = offering(servers, |info| info.has_resources);
    if with.is_empty() {
        return Err("no connected MCP server offers resources".into());
    }
    let (named, rest) = pick_server(words, &with, true);
    match rest {
        [] => {
            for server in named.map(|s| vec![s]).unwrap_or(with) {
                list_resources(server).await;
            }
            Ok(())
        }
        [uri] => {
            let server = match named {
                Some(server) => server,
                None if with.len() == 1 => with[0],
                None => return Err("several servers offer resources: /resources SERVER URI".into()),
            };
            let contents = server.read_resource(uri).await.map_err(|e| e.to_string())?;
            for part in contents {
                match (part.text, part.blob) {
                    (Some(text), _) => {
                        let shown = text::head(&text, MAX_SHOWN_BYTES);
                        println!("{}", escape_keeping_lines(shown.head()));
                        if !shown.is_whole() {
                            println!("[… {} more bytes not shown]", shown.cut_bytes());
                        }
                    }
                    (None, Some(blob)) => println!(
                        "[binary {}, {} bytes of base64]",
                        escape_for_terminal(part.mime_type.as_deref().unwrap_or("content")),
                        blob.len()
                    ),
                    (None, None) => println!("[empty]"),
                }
            }
            Ok(())
        }
        _ => Err("usage: /resources [SERVER] [URI]".into()),
    }
}

async fn list_resources(server: &McpHandle) {
    let name = escape_for_terminal(server.server_name());
    match server.list_resources().await {
        Ok(resources) => {
            println!("{name}: {} resource(s)", resources.len());
            for resource in resources {
                println!(
                    "  {}  {}",
                    escape_for_terminal(&resource.uri),
                    escape_for_terminal(&resource.name)
                );
            }
        }
        Err(error) => eprintln!("{name}: {}", escape_keeping_lines(&error.to_string())),
    }
    if let Ok(templates) = server.list_resource_templates().await
        && !templates.is_empty()
    {
        println!("{name}: {} template(s)", templates.len());
        for template in templates {
            println!(
                "  {}  {}",
                escape_for_terminal(&template.uri_template),
                escape_for_terminal(&template.name)
            );
        }
    }
}

async fn prompts(servers: &[McpHandle]) -> Result<(), String> {
    let with = offering(servers, |info| info.has_prompts);
    if with.is_empty() {
        return Err("no connected MCP server offers prompts".into());
    }
    for server in with {
        let name = escape_for_terminal(server.server_name());
        match server.list_prompts().await {
            Ok(prompts) => {
                println!("{name}: {} prompt(s)", prompts.len());
                for prompt in prompts {
                    let arguments: Vec<String> = prompt
                        .arguments
                        .iter()
                        .map(|a| match a.required {
                            Some(true) => format!("{}=…", a.name),
                            _ => format!("[{}=…]", a.name),
                        })
                        .collect();
                    println!(
                        "  {} {}  {}",
                        escape_for_terminal(&prompt.name),
                        escape_for_terminal(&arguments.join(" ")),
                        escape_for_terminal(
                            prompt
                                .description
                                .as_deref()
                                .and_then(|d| d.lines().next())
                                .unwrap_or("")
                        )
                    );
                }
            }
            Err(error) => eprintln!("{name}: {}", escape_keeping_lines(&error.to_string())),
        }
    }
    Ok(())
}

async fn prompt(words: &[String], servers: &[McpHandle]) -> Result<McpCommand, String> {
    let with = offering(servers, |info| info.has_prompts);
    if with.is_empty() {
        return Err("no connected MCP server offers prompts".into());
    }
    let (named, rest) = pick_server(words, &with, false);
    let Some((prompt_name, pairs)) = rest.split_first() else {
        return Err("usage: /prompt [SERVER] NAME [KEY=VALUE ...]".into());
    };
    let mut arguments = Map::new();
    for pair in pairs {
        let Some((key, value)) = pair.split_once('=') else {
            return Err(format!("'{pair}' is not KEY=VALUE"));
        };
        arguments.insert(key.to_owned(), Value::String(value.to_owned()));
    }
    let server = match named {
        Some(server) => server,
        None => {
            // The server whose prompt list names it; two servers naming it must be told apart.
            let mut owners = Vec::new();
            for server in &with {
                if let Ok(prompts) = server.list_prompts().await
                    && prompts.iter().any(|p| &p.name == prompt_name)
                {
                    owners.push(*server);
                }
            }
            match owners.as_slice() {
                [one] => *one,
                [] => {
                    return Err(format!(
                        "no MCP server offers a prompt '{prompt_name}'; /prompts lists them"
                    ));
                }
                _ => {
                    return Err(format!(
                        "several servers offer '{prompt_name}': /prompt SERVER {prompt_name} ..."
                    ));
                }
            }
        }
    };
    let messages = server
        .get_prompt(prompt_name, arguments)
        .await
        .map_err(|e| e.to_string())?;
    if messages.is_empty() {
        return Err(format!("the prompt '{prompt_name}' rendered no messages"));
    }
    // One message is sent as it is; several keep their roles visible to the model.
    let text = match messages.as_slice() {
        [only] => only.text.clone(),
        many => many
            .iter()
            .map(|m| format!("[{}]\n{}", m.role, m.text))
            .collect::<Vec<_>>()
            .join("\n\n"),
    };
    println!(
        "prompt {} from {} ({} message(s)):\n{}",
        escape_for_terminal(prompt_name),
        escape_for_terminal(server.server_name()),
        messages.len(),
        escape_keeping_lines(&text)
    );
    Ok(McpCommand::Send(text))
}

/// Words split on whitespace; double quotes group (`city="New York"` → `city=New York`).
fn split_words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quoted = false;
    let mut any = false;
    for c in text.chars() {
        match c {
            '"' => {
                quoted = !quoted;
                any = true;
            }
            c if c.is_whitespace() && !quoted => {
                if any {
                    words.push(std::mem::take(&mut word));
                    any = false;
                }
            }
            c => {
                word.push(c);
                any = true;
            }
        }
    }
    if any {
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_group_words() {
        assert_eq!(
            split_words(r#" args-prompt city="New York"  state=NY "#),
            ["args-prompt", "city=New York", "state=NY"]
        );
        assert_eq!(split_words(r#"a "" b"#), ["a", "", "b"]);
        assert!(split_words("   ").is_empty());
    }
}
