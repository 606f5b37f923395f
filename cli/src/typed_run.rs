//! `agcore run --output-schema FILE.json`: the answer must be JSON matching the schema; it is
//! printed validated on stdout (with `--json`, as an `{"type":"output","value":...}` event
//! after the run's events). An answer that stays invalid exits non-zero with the error.
//!
//! A mode of the same run as `agcore run`: with `--session` it is stored, and a typed run that
//! suspends for approvals resumes (`--resume --approve ID`) still typed — the schema is kept in
//! the run's state.

use std::path::Path;
use std::process::ExitCode;

use agcore::display::{escape_keeping_lines, head_and_tail};
use agcore::llm::LlmCycle;
use agcore::run::{
    OutputMode, OutputSchema, RunRequest, TypedEvent, TypedOutcome, TypedOutput, TypedOutputError,
};
use anyhow::{Context, bail};
use futures::StreamExt;
use serde_json::{Value, json};

use crate::cli::RunArgs;
use crate::json_error;
use crate::render::json_for_terminal;
use crate::run::{Ended, suspended};

/// The most of the last invalid answer an error shows (characters, head and tail).
const RAW_SHOWN: usize = 2_000;

/// `request` made typed by `--output-schema FILE` (and `--output-mode`).
pub fn typed<'a>(
    request: RunRequest<'a>,
    args: &RunArgs,
    file: &Path,
) -> anyhow::Result<RunRequest<'a>> {
    let schema = load_schema(file)?;
    let mode: OutputMode = args.output_mode.parse().map_err(anyhow::Error::msg)?;
    Ok(request.with_output_schema(schema, &TypedOutput::new().with_mode(mode)))
}

/// Run a typed request (made by [`typed`], or continuing a typed run's saved state).
pub async fn execute(
    cycle: &mut LlmCycle,
    request: RunRequest<'_>,
    args: &RunArgs,
) -> anyhow::Result<Ended> {
    if !args.json || args.no_stream {
        return match cycle.run_typed_with(request).await {
            Ok(TypedOutcome::Output(value)) if args.json => {
                print_line(&json!({"type": "output", "value": value}))
            }
            Ok(TypedOutcome::Output(value)) => {
                println!(
                    "{}",
                    json_for_terminal(serde_json::to_string_pretty(&value)?)
                );
                Ok(Ended::Code(ExitCode::SUCCESS))
            }
            Ok(TypedOutcome::Suspended(suspension)) => suspended(&suspension, args),
            Ok(_) => bail!("the run ended without an answer"),
            Err(error) => failed(error, args),
        };
    }
    let mut stream = cycle.run_typed_with_stream(request);
    while let Some(item) = stream.next().await {
        match item {
            TypedEvent::Event(event) => {
                println!("{}", json_for_terminal(serde_json::to_string(&event)?));
            }
            TypedEvent::Rejected { attempt, error } => {
                print_line(
                    &json!({"type": "output_rejected", "attempt": attempt, "error": error}),
                )?;
            }
            TypedEvent::Output(value) => {
                return print_line(&json!({"type": "output", "value": value}));
            }
            TypedEvent::Suspended(suspension) => return suspended(&suspension, args),
            TypedEvent::Failed(error) => return failed(error, args),
            _ => {}
        }
    }
    bail!("the run ended without an answer")
}

fn print_line(event: &Value) -> anyhow::Result<Ended> {
    println!("{}", json_for_terminal(serde_json::to_string(event)?));
    Ok(Ended::Code(ExitCode::SUCCESS))
}

/// An answer that stayed invalid: the error (and, with `--json`, the error event) and exit 1;
/// other failures go to the usual error path.
fn failed(error: TypedOutputError, args: &RunArgs) -> anyhow::Result<Ended> {
    let TypedOutputError::Invalid { ref raw, .. } = error else {
        return Err(error.into());
    };
    let message = error.to_string();
    let raw = head_and_tail(raw, RAW_SHOWN / 2, RAW_SHOWN / 2);
    if args.json {
        json_error::print(
            &json!({"type": "error", "kind": "invalid_output", "message": message,
            "raw": raw, "status": null, "retryable": false}),
        );
    }
    eprintln!("error: {}", escape_keeping_lines(&message));
    eprintln!("the last answer was:\n{}", escape_keeping_lines(&raw));
    Ok(Ended::Code(ExitCode::FAILURE))
}

/// The schema file, bounded, named after its stem.
fn load_schema(file: &Path) -> anyhow::Result<OutputSchema> {
    const LIMIT: u64 = 1024 * 1024;
    let size = std::fs::metadata(file)
        .with_context(|| format!("cannot read --output-schema {}", file.display()))?
        .len();
    if size > LIMIT {
        bail!(
            "--output-schema {} is {size} bytes; a schema may have at most {LIMIT}",
            file.display()
        );
    }
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --output-schema {}", file.display()))?;
    let schema: Value = serde_json::from_str(&text)
        .with_context(|| format!("--output-schema {} is not JSON", file.display()))?;
    let name = file
        .file_stem()
        .map(|stem| stem.to_string_lossy().into_owned())
        .unwrap_or_default();
    OutputSchema::from_json(name, schema)
        .with_context(|| format!("--output-schema {}", file.display()))
}
