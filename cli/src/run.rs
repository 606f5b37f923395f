//! `agcore run`: one prompt, streamed or not, human or JSON output, optional transcript and
//! stored session (`--session`, `--resume`).

use std::process::ExitCode;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::llm::{LlmCycle, StreamEvent};
use agcore::tools::ToolRegistry;
use anyhow::Context;
use futures::StreamExt;

use crate::approve::interrupt_count;
use crate::cli::RunArgs;
use crate::json_error;
use crate::render::{HumanRenderer, json_for_terminal};
use crate::secrets::Secrets;
use crate::session::{Loaded, build_cycle, build_registry, build_session_cycle};
use crate::store::{needs_resume, open_session};
use crate::usage;

/// Run `agcore run`.
pub async fn run(args: RunArgs, loaded: Loaded, secrets: &Secrets) -> anyhow::Result<ExitCode> {
    // The session is locked before anything runs, and stays locked until the end.
    let session = open_session(&args.session, &loaded.config).await?;
    let mut cycle = match &session {
        Some(session) => build_session_cycle(
            &args.model,
            &loaded.config,
            secrets,
            session.history.clone(),
            session.journal.clone(),
        )?,
        None => build_cycle(&args.model, &loaded.config, secrets)?,
    };
    if args.resume && !needs_resume(cycle.messages()) {
        let name = args.session.session.as_deref().unwrap_or_default();
        eprintln!(
            "nothing to resume: session {} {}",
            escape_for_terminal(name),
            if cycle.messages().is_empty() {
                "is empty"
            } else {
                "ends with the model's answer"
            }
        );
        return Ok(ExitCode::SUCCESS);
    }
    let (registry, _) = build_registry(&args.tools, Some(&args.model), &loaded, true).await?;
    // Ctrl-C drops the running turn (request and tools); the transcript is still written.
    let outcome = tokio::select! {
        outcome = execute(&mut cycle, &registry, &args) => outcome,
        _ = tokio::signal::ctrl_c() => Ok(cancelled(&args)),
    };
    // What the library kept (all of it, or the completed turns of a failed or cancelled run)
    // is what the session keeps.
    if let Some(session) = &session {
        match (session.journal.sync(cycle.messages()).await, &outcome) {
            (Err(error), Ok(code)) if *code != ExitCode::SUCCESS => {
                eprintln!("error: {}", crate::describe(&error));
            }
            (Err(error), _) => return Err(error),
            (Ok(()), _) => {}
        }
    }
    if let Some(path) = &args.transcript {
        let written = serde_json::to_string_pretty(cycle.messages())
            .map_err(anyhow::Error::from)
            .and_then(|json| {
                std::fs::write(path, json).with_context(|| {
                    format!("could not write the transcript to {}", path.display())
                })
            });
        match (written, &outcome) {
            // The run failed already and said so (its error event was the last): one error
            // is enough on stdout.
            (Err(error), Ok(code)) if *code != ExitCode::SUCCESS => {
                eprintln!("error: {}", crate::describe(&error));
            }
            (Err(error), _) => return Err(error),
            (Ok(()), _) => {}
        }
    }
    outcome
}

/// One event as a JSON line; the stream's error event with the status and retryability added
/// (and said on stderr too).
fn print_json(event: &StreamEvent) -> anyhow::Result<()> {
    match event {
        StreamEvent::Error { kind, message } => {
            json_error::print(&json_error::for_stream_error(*kind, message));
            eprintln!("error: {}", escape_keeping_lines(message));
        }
        _ => println!("{}", json_for_terminal(serde_json::to_string(event)?)),
    }
    Ok(())
}

/// Ctrl-C: say so (with `--json`, as the terminal error event) and exit 130.
fn cancelled(args: &RunArgs) -> ExitCode {
    if args.json {
        json_error::print(&json_error::cancelled());
    }
    eprintln!("^C cancelled");
    ExitCode::from(130)
}

async fn execute(
    cycle: &mut LlmCycle,
    registry: &ToolRegistry,
    args: &RunArgs,
) -> anyhow::Result<ExitCode> {
    let prompt = args.prompt.clone();
    // `--resume` (no prompt) continues the stored history, running its unanswered calls first.
    let tools = (prompt.is_none() || !registry.is_empty()).then_some(registry);
    if args.no_stream {
        let response = cycle.run(prompt, tools).await?;
        if args.json {
            println!("{}", json_for_terminal(serde_json::to_string(&response)?));
        } else {
            println!("{}", response.text());
            let prices = cycle.config().prices;
            eprintln!("{}", usage::line(&cycle.last_run_usage(), prices.as_ref()));
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut stream = cycle.run_stream(prompt, tools).await?;
    let mut renderer = HumanRenderer::new();
    let mut failed = false;
    let mut held = None;
    let start = interrupt_count();
    while let Some(event) = stream.next().await {
        // Ctrl-C at an approval question (the terminal is in raw mode then, so it is a key,
        // not a signal): stop here, the transcript still gets written.
        if interrupt_count() != start {
            renderer.finish();
            return Ok(cancelled(args));
        }
        if let StreamEvent::Error { .. } = &event {
            failed = true;
        }
        if args.json {
            // The usage event goes before the terminal one (the error or the last
            // `turn_complete`), which stays the last line.
            if let Some(previous) = held.take() {
                print_json(&previous)?;
            }
            match &event {
                StreamEvent::Error { .. } | StreamEvent::TurnComplete { .. } => held = Some(event),
                _ => print_json(&event)?,
            }
        } else {
            renderer.event(&event);
        }
    }
    drop(stream);
    let spent = cycle.last_run_usage();
    let prices = cycle.config().prices;
    if args.json {
        println!("{}", usage::event(&spent, prices.as_ref()));
        if let Some(last) = held {
            print_json(&last)?;
        }
    } else {
        renderer.finish();
        eprintln!("{}", usage::line(&spent, prices.as_ref()));
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
