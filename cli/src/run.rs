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
    crate::context_cli::discover(&mut cycle, &args.model, &loaded.config, secrets).await;
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
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut stream = cycle.run_stream(prompt, tools).await?;
    let mut renderer = HumanRenderer::new();
    let mut failed = false;
    let start = interrupt_count();
    while let Some(event) = stream.next().await {
        // Ctrl-C at an approval question (the terminal is in raw mode then, so it is a key,
        // not a signal): stop here, the transcript still gets written.
        if interrupt_count() != start {
            renderer.finish();
            return Ok(cancelled(args));
        }
        match (&event, args.json) {
            // The stream's error event, with the status and retryability added.
            (StreamEvent::Error { kind, message }, true) => {
                json_error::print(&json_error::for_stream_error(*kind, message));
                eprintln!("error: {}", escape_keeping_lines(message));
            }
            (_, true) => println!("{}", json_for_terminal(serde_json::to_string(&event)?)),
            (_, false) => renderer.event(&event),
        }
        if let StreamEvent::Error { .. } = &event {
            failed = true;
        }
    }
    if !args.json {
        renderer.finish();
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
