//! `agcore sessions list|show|rm`: the stored conversations of `--session`.

use std::process::ExitCode;
use std::time::{SystemTime, UNIX_EPOCH};

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::llm::OpenaiChatMessage;
use anyhow::bail;
use serde_json::json;

use crate::cli::{SessionsCommand, StoreArgs};
use crate::layers::Loaded;
use crate::render::json_for_terminal;
use crate::store::{history, open, store_url};

/// Run `agcore sessions ...`.
pub async fn sessions(command: SessionsCommand, loaded: Loaded) -> anyhow::Result<ExitCode> {
    let store_of =
        |args: &StoreArgs| store_url(args.url.as_deref(), loaded.config.session.store.as_deref());
    match command {
        SessionsCommand::List(args) => {
            let store = open(&store_of(&args.store)?, &loaded.config.session).await?;
            let sessions = store.list().await?;
            if args.json {
                let rows: Vec<_> = sessions
                    .iter()
                    .map(|s| {
                        json!({
                            "name": s.name,
                            "steps": s.steps,
                            "format_version": s.format_version,
                            "created_ms": millis(s.created),
                            "updated_ms": millis(s.updated),
                        })
                    })
                    .collect();
                println!("{}", json_for_terminal(serde_json::to_string(&rows)?));
            } else if sessions.is_empty() {
                println!("no sessions");
            } else {
                for s in &sessions {
                    println!(
                        "{}  {} steps  updated {}",
                        escape_for_terminal(&s.name),
                        s.steps,
                        age(s.updated)
                    );
                }
            }
        }
        SessionsCommand::Show(args) => {
            let store = open(&store_of(&args.store)?, &loaded.config.session).await?;
            let Some(restored) = history(&*store, &args.name).await? else {
                bail!("no session {}", escape_for_terminal(&args.name));
            };
            let messages = restored.history;
            if let Some(run) = &restored.run {
                let pending = run.pending_approvals();
                if pending.is_empty() {
                    eprintln!(
                        "(a run was interrupted mid-turn: continue it with agcore run --session NAME --resume)"
                    );
                } else {
                    eprintln!(
                        "(a run is suspended: {} call(s) wait for approval; decide with agcore run --session NAME --resume --approve ID | --deny ID)",
                        pending.len()
                    );
                }
            }
            if args.json {
                let json = serde_json::to_string_pretty(&messages)?;
                println!("{}", json_for_terminal(json));
            } else {
                for message in &messages {
                    print!("{}", human(message));
                }
            }
        }
        SessionsCommand::Rm(args) => {
            let store = open(&store_of(&args.store)?, &loaded.config.session).await?;
            // Deleting a session another process is writing would lose its next turns' base.
            let _lease = crate::store::lock(&*store, &args.name, None).await?;
            if !store.delete(&args.name).await? {
                bail!("no session {}", escape_for_terminal(&args.name));
            }
            if args.json {
                println!("{}", json!({"deleted": args.name}));
            } else {
                println!("deleted session {}", escape_for_terminal(&args.name));
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// One message for people: its role, its text and its tool calls, escaped for the terminal.
fn human(message: &OpenaiChatMessage) -> String {
    let mut out = String::new();
    let role = match message {
        OpenaiChatMessage::Tool { tool_call_id, .. } => {
            format!("tool [{}]", escape_for_terminal(tool_call_id))
        }
        other => other.role().to_owned(),
    };
    out.push_str(&format!("{role}:"));
    if let Some(text) = message.text().filter(|text| !text.is_empty()) {
        out.push_str(&format!(" {}", escape_keeping_lines(&text)));
    }
    out.push('\n');
    for call in message.tool_calls() {
        out.push_str(&format!(
            "  → {} [{}] {}\n",
            escape_for_terminal(&call.function.name),
            escape_for_terminal(&call.id),
            escape_for_terminal(&call.function.arguments)
        ));
    }
    out
}

fn millis(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
        .unwrap_or(0)
}

/// How long ago `time` was, roughly.
fn age(time: SystemTime) -> String {
    let seconds = SystemTime::now()
        .duration_since(time)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    match seconds {
        0..60 => format!("{seconds}s ago"),
        60..3600 => format!("{}m ago", seconds / 60),
        3600..86400 => format!("{}h ago", seconds / 3600),
        _ => format!("{}d ago", seconds / 86400),
    }
}
