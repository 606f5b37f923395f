//! `agcore run`: one prompt, streamed or not, human or JSON output, optional transcript.

use std::process::ExitCode;

use agcore::llm::{LlmCycle, StreamEvent};
use agcore::tools::ToolRegistry;
use anyhow::Context;
use futures::StreamExt;

use crate::cli::RunArgs;
use crate::model::build_cycle;
use crate::render::HumanRenderer;

/// Run `agcore run`.
pub async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let mut cycle = build_cycle(&args.model)?;
    let registry = ToolRegistry::new();
    let outcome = execute(&mut cycle, &registry, &args).await;
    if let Some(path) = &args.transcript {
        let json = serde_json::to_string_pretty(cycle.messages())?;
        std::fs::write(path, json)
            .with_context(|| format!("could not write the transcript to {}", path.display()))?;
    }
    outcome
}

async fn execute(
    cycle: &mut LlmCycle,
    registry: &ToolRegistry,
    args: &RunArgs,
) -> anyhow::Result<ExitCode> {
    let prompt = args.prompt.clone();
    let with_tools = !registry.is_empty();
    if args.no_stream {
        let response = if with_tools {
            cycle.submit_with_tools(prompt, registry).await?
        } else {
            cycle.submit(prompt).await?
        };
        if args.json {
            println!("{}", serde_json::to_string(&response)?);
        } else {
            println!("{}", response.text());
        }
        return Ok(ExitCode::SUCCESS);
    }

    let mut stream = if with_tools {
        cycle.submit_stream_with_tools(prompt, registry).await?
    } else {
        cycle.submit_stream(prompt).await?
    };
    let mut renderer = HumanRenderer::new();
    let mut failed = None;
    while let Some(event) = stream.next().await {
        if args.json {
            println!("{}", serde_json::to_string(&event)?);
        } else {
            renderer.event(&event);
        }
        if let StreamEvent::Error { kind, message } = &event {
            failed = Some((*kind, message.clone()));
        }
    }
    if !args.json {
        renderer.finish();
    }
    match failed {
        Some((_, message)) if args.json => {
            eprintln!("error: {message}");
            Ok(ExitCode::FAILURE)
        }
        Some(_) => Ok(ExitCode::FAILURE),
        None => Ok(ExitCode::SUCCESS),
    }
}
