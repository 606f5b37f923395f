//! `agcore chat`: an interactive session — line editing and history (rustyline), streaming
//! answers, live tool calls, approvals inline, slash commands, Ctrl-C cancels the turn.
//!
//! stdin has one reader at a time: the prompt's readline runs (on a blocking thread) only
//! between turns, and an approval question reads only during a turn.

use std::path::Path;
use std::process::ExitCode;

use std::sync::Arc;

use agcore::llm::{LlmCycle, StreamEvent};
use agcore::run::{RunItem, RunRequest};
use agcore::session::SessionJournal;
use agcore::team::Team;
use agcore::tools::ToolRegistry;
use anyhow::Context;
use futures::StreamExt;
use rustyline::DefaultEditor;
use rustyline::error::ReadlineError;

use agcore::display::{escape_for_terminal, escape_keeping_lines};

use crate::approve::{interrupt_count, interrupted_since, raise_interrupt};
use crate::cli::ChatArgs;
use crate::layers::Loaded;
use crate::render::HumanRenderer;
use crate::secrets::Secrets;
use crate::settings::target;
use crate::setup::{build_cycle, build_registry_with_mcp, build_session_cycle};
use crate::store::{OpenSession, open_session};
use crate::usage;

/// The prompt shown for each line.
const PROMPT: &str = "you> ";

const HELP: &str = "\
commands:
  /tools        every tool, and whether the model sees it (and why not)
  /clear        forget the conversation (the system prompt stays)
  /compact      summarise older turns now (the prompt shows the context in use: [used/window])
  /save FILE    write the conversation (all messages) as JSON to FILE
{MCP}
  /usage        what the last prompt and the whole chat spent (cost when the model is priced)
  /help         this list
  /exit         leave (or Ctrl-D)
Ctrl-C cancels the running turn (dropped, unless a tool had started: then kept, unfinished calls answered
as cancelled); at the prompt it clears the line.";

/// Run `agcore chat`.
pub async fn chat(
    args: ChatArgs,
    mut loaded: Loaded,
    secrets: &Secrets,
) -> anyhow::Result<ExitCode> {
    // Someone at the terminal answers: writes and commands are asked, not refused.
    if !args.tools.yes && crate::approve::can_ask_terminal() {
        crate::interactive_default::apply(&mut loaded.config.tools);
    }
    // Held (locked) for the whole chat; every completed prompt is stored.
    let stored = open_session(&args.session, &loaded.config).await?;
    let mut cycle = match &stored {
        Some(stored) => {
            build_session_cycle(&args.model, &loaded.config, secrets, stored.history.clone())?
        }
        None => build_cycle(&args.model, &loaded.config, secrets)?,
    };
    let target = target(&args.model, &loaded.config)?;
    crate::context_cli::discover(&mut cycle, &args.model, &loaded.config, secrets).await;
    // Servers' progress (a task being polled) shows between the turn's output.
    crate::mcp_progress::show(crate::mcp_progress::Shown::Human);
    let (mut registry, statuses, mcp) =
        build_registry_with_mcp(&args.tools, Some(&args.model), &loaded, true).await?;
    crate::mcp_notes::print(
        &registry,
        &statuses,
        &target.provider,
        &cycle.config().model,
    );
    if let Some(stored) = &stored {
        crate::context_cli::read_outputs_from_session(
            &mut registry,
            &loaded.config,
            &stored.journal,
        );
        registry = stored.keep_grants(registry);
    }
    // Calls are shown while the model writes them (the title improves as the input streams).
    let registry = registry.with_input_updates(true);
    let team = match &args.agent {
        Some(name) => Some((
            crate::team_run::team_for(
                name,
                &args.model,
                &loaded.config,
                secrets,
                &cycle,
                &registry,
            )?,
            name.clone(),
        )),
        None => None,
    };
    let mut session = Session {
        provider: target.provider.clone(),
        model: cycle.config().model.clone(),
        team,
        registry,
        journal: stored.as_ref().map(|stored| stored.journal.clone()),
        show_reasoning: args.show_reasoning,
    };
    println!("{}", session.banner(&target.base_url));
    println!(
        "{}",
        crate::sandbox_cmd::describe(&crate::sandbox_cmd::policy(
            &loaded.config.tools,
            args.tools.sandbox
        ))
    );
    println!(
        "{}",
        crate::system_prompt::compose(&args.model, &loaded.config)?.summary()
    );
    if let (Some(name), Some(stored)) = (&args.session.session, &stored) {
        println!(
            "session {} · {} messages",
            escape_for_terminal(name),
            stored.history.len()
        );
        // Its calls, drawn again: title, final status, diffs.
        crate::tool_cards::replay(
            &stored.history,
            &stored.calls,
            std::io::IsTerminal::is_terminal(&std::io::stderr()),
        );
        if stored.run.is_some() {
            println!(
                "note: this session's last run was interrupted or is waiting for approvals; a new \
                 prompt here leaves it behind (agcore run --session NAME --resume continues it)"
            );
        }
    }
    if let Some(name) = &args.agent {
        println!("agent {}", escape_for_terminal(name));
        crate::team_run::say_who_continues(name, cycle.messages());
    }
    forward_ctrl_c()?;

    let mut history = Vec::new();
    loop {
        let prompt = format!(
            "{}{} {PROMPT}",
            crate::render::usage_label(cycle.context_usage()),
            session.agent_label(&cycle)
        );
        let line = match read_line(&history, prompt).await? {
            Ok(line) => line,
            // Ctrl-C at the prompt: rustyline already dropped the line; ask again.
            Err(ReadlineError::Interrupted) => continue,
            Err(ReadlineError::Eof) => break,
            Err(error) => return Err(error).context("could not read the input"),
        };
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        history.push(line.to_owned());
        if line == "/compact" {
            compact(&mut cycle).await;
            store(stored.as_ref(), &cycle).await;
            continue;
        }
        if let Some(command) = line.strip_prefix('/') {
            let (name, argument) = command.split_once(' ').unwrap_or((command, ""));
            match crate::chat_mcp::command(name, argument, &mcp).await {
                Some(crate::chat_mcp::McpCommand::Send(prompt)) => {
                    session.turn(&mut cycle, prompt).await;
                    store(stored.as_ref(), &cycle).await;
                    continue;
                }
                Some(crate::chat_mcp::McpCommand::Done) => continue,
                None => {}
            }
            let flow = session.command(command, &mut cycle);
            // `/clear` changed the history: the session follows.
            store(stored.as_ref(), &cycle).await;
            match flow {
                Flow::Continue => continue,
                Flow::Exit => break,
            }
        }
        session.turn(&mut cycle, line.to_owned()).await;
        store(stored.as_ref(), &cycle).await;
    }
    crate::mcp_close::close_servers(&mcp).await;
    Ok(ExitCode::SUCCESS)
}

/// `/compact`: summarise older turns now, and say what happened.
async fn compact(cycle: &mut LlmCycle) {
    let events = cycle.compact().await;
    if events.is_empty() {
        println!("nothing compacted (too little history, or the summary request failed)");
    }
    for event in &events {
        if let Some(line) = crate::render::event_line(event) {
            println!("{line}");
        }
    }
}

/// Make the stored session equal to what the library kept of the conversation.
async fn store(stored: Option<&OpenSession>, cycle: &LlmCycle) {
    if let Some(stored) = stored
        && let Err(error) = stored.sync(cycle.messages()).await
    {
        eprintln!("error: {}", crate::describe(&error));
    }
}

/// Read one line on a blocking thread, so the runtime (and the MCP servers' I/O) keeps going.
///
/// The editor lives only for this one line: rustyline (without its `signal-hook` feature)
/// replaces the SIGINT handler while an editor exists and restores it on drop, so during a
/// turn the session's own handler ([`forward_ctrl_c`]) is the one that runs, and an approval
/// question can make its own editor without two editors sharing rustyline's global state.
async fn read_line(
    history: &[String],
    prompt: String,
) -> anyhow::Result<rustyline::Result<String>> {
    let history = history.to_vec();
    tokio::task::spawn_blocking(move || {
        let mut editor = DefaultEditor::new()?;
        for line in history {
            let _ = editor.add_history_entry(line);
        }
        editor.readline(&prompt)
    })
    .await
    .context("the input reader failed")
}

/// Turn SIGINT into [`raise_interrupt`] for the whole session. While readline has the terminal (raw
/// mode) Ctrl-C is a key, not a signal; during a turn it is a signal and cancels the turn.
/// The handler is registered here, before any editor exists, so editors restore it.
fn forward_ctrl_c() -> anyhow::Result<()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        let mut signals = signal(SignalKind::interrupt()).context("could not listen for Ctrl-C")?;
        tokio::spawn(async move {
            while signals.recv().await.is_some() {
                raise_interrupt();
            }
        });
    }
    #[cfg(not(unix))]
    tokio::spawn(async {
        while tokio::signal::ctrl_c().await.is_ok() {
            raise_interrupt();
        }
    });
    Ok(())
}

enum Flow {
    Continue,
    Exit,
}

struct Session {
    provider: String,
    model: String,
    /// `--agent`: the team, and the agent the chat started with.
    team: Option<(Team, String)>,
    registry: ToolRegistry,
    /// The stored session's journal: each run records its steps there.
    journal: Option<Arc<SessionJournal>>,
    /// `--show-reasoning`.
    show_reasoning: bool,
}

impl Session {
    /// ` billing` in the prompt: the agent the conversation is with (after handoffs).
    fn agent_label(&self, cycle: &LlmCycle) -> String {
        let Some((_, start)) = &self.team else {
            return String::new();
        };
        let current =
            agcore::team::current_agent(cycle.messages()).unwrap_or_else(|| start.clone());
        format!(" {}", escape_for_terminal(&current))
    }

    fn banner(&self, base_url: &str) -> String {
        let report = self.registry.explain(&self.provider, &self.model);
        let profile = report.profile.as_deref().unwrap_or("default (all tools)");
        let restricted = if report.restricted {
            " · restricted"
        } else {
            ""
        };
        let line = format!(
            "agcore chat · model {} at {} · {} tools ({} exposed) · profile {}{} · /help, Ctrl-D to exit",
            self.model,
            base_url,
            report.tools.len(),
            report.exposed().len(),
            profile,
            restricted,
        );
        escape_for_terminal(&line).into_owned()
    }

    fn command(&mut self, command: &str, cycle: &mut LlmCycle) -> Flow {
        let (name, argument) = match command.split_once(char::is_whitespace) {
            Some((name, rest)) => (name, rest.trim()),
            None => (command, ""),
        };
        match name {
            "exit" | "quit" => return Flow::Exit,
            "help" | "?" => println!("{}", HELP.replace("{MCP}", crate::chat_mcp::HELP)),
            "tools" => print!(
                "{}",
                escape_keeping_lines(
                    &self
                        .registry
                        .explain(&self.provider, &self.model)
                        .to_string()
                )
            ),
            "clear" => {
                cycle.clear();
                println!("conversation cleared (the system prompt stays)");
            }
            "usage" => {
                let prices = cycle.config().prices;
                let last = usage::line(&cycle.last_run_usage(), prices.as_ref());
                let total = usage::line(&cycle.usage(), prices.as_ref());
                println!("last prompt {last}\nthis chat   {total}");
            }
            "save" if argument.is_empty() => eprintln!("error: usage: /save FILE"),
            "save" => match save(cycle, Path::new(argument)) {
                Ok(()) => println!("saved {} messages to {argument}", cycle.messages().len()),
                Err(error) => eprintln!("error: {}", crate::describe(&error)),
            },
            other => eprintln!("error: unknown command /{other}; /help lists the commands"),
        }
        Flow::Continue
    }

    /// One prompt: stream the reply (running tools) until it ends, fails, or Ctrl-C.
    async fn turn(&self, cycle: &mut LlmCycle, prompt: String) {
        // Only a Ctrl-C pressed from now on cancels this turn.
        let start = interrupt_count();
        let before = cycle.messages().len();
        let mut renderer = HumanRenderer::new().with_reasoning(self.show_reasoning);
        let cancelled = {
            let work = async {
                let mut request = RunRequest::prompt(prompt);
                if !self.registry.is_empty() {
                    request = request.with_tools(&self.registry);
                }
                if let Some(journal) = &self.journal {
                    request = request.with_journal(&**journal);
                }
                if let Some((team, name)) = &self.team {
                    request = request
                        .with_tools(&self.registry)
                        .with_team(team, name.clone());
                }
                let mut items = cycle.run_with_stream(request);
                while let Some(item) = items.next().await {
                    match item {
                        RunItem::Event(event) => renderer.event(&event),
                        // Rendered as `error: ...`, like an error event.
                        RunItem::Failed(error) => renderer.event(&StreamEvent::from_error(&error)),
                        // The terminal approver never defers.
                        RunItem::Suspended(_) => {
                            renderer.finish();
                            eprintln!(
                                "error: the run was suspended for approvals; continue it with agcore run --session NAME --resume"
                            );
                        }
                        _ => {}
                    }
                    // Ctrl-C at an approval prompt is seen here at the latest: stop
                    // before the loop's next request gets anywhere.
                    if interrupt_count() != start {
                        return true;
                    }
                }
                false
            };
            tokio::select! {
                biased;
                () = interrupted_since(start) => true,
                cancelled = work => cancelled,
            }
            // `work` is dropped here: the request and any running tool with it.
        };
        renderer.finish();
        if cancelled && cycle.messages().len() > before {
            // A tool had started: the library kept the turn (see docs/6-tool-loop.md).
            eprintln!(
                "^C cancelled: a tool had started, so the turn is kept (unfinished calls answered as cancelled)"
            );
        } else if cancelled {
            eprintln!(
                "^C cancelled: the turn was dropped (the history keeps only completed turns)"
            );
        }
        println!();
    }
}

fn save(cycle: &LlmCycle, path: &Path) -> anyhow::Result<()> {
    let json = serde_json::to_string_pretty(cycle.messages())?;
    crate::store::write_conversation(path, &json)
        .with_context(|| format!("could not write {}", path.display()))
}
