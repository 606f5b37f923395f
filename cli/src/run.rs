//! `agcore run`: one prompt, streamed or not, human or JSON output, optional transcript and
//! stored session (`--session`, `--resume`). With a session and no terminal, a call that needs
//! approval suspends the run (exit code 3); `--resume --approve ID | --deny ID | --yes` decides.

use std::process::ExitCode;

use std::io::IsTerminal;
use std::sync::Arc;

use agcore::display::{escape_for_terminal, escape_keeping_lines};
use agcore::llm::{LlmCycle, StreamEvent};
use agcore::run::{
    Decision, RunItem, RunOutcome, RunRequest, RunRules, RunState, Suspension, waiting_for_input,
};
use agcore::tools::DeferAll;
use anyhow::Context;
use futures::StreamExt;

use crate::agent_events::json_event;
use crate::approve::interrupt_count;
use crate::cli::RunArgs;
use crate::elicit_unattended::{self, Unattended};
use crate::json_error;
use crate::layers::Loaded;
use crate::render::{HumanRenderer, json_for_terminal};
use crate::secrets::Secrets;
use crate::setup::{build_cycle, build_registry_with_mcp, build_session_cycle};
use crate::store::{needs_resume, open_session};
use crate::usage;

/// Run `agcore run`.
pub async fn run(args: RunArgs, loaded: Loaded, secrets: &Secrets) -> anyhow::Result<ExitCode> {
    if args.print_system_prompt {
        return match &args.agent {
            Some(name) => crate::team_run::print_instructions(name, &args.model, &loaded.config),
            None => crate::system_prompt::print(&args.model, &loaded.config),
        };
    }
    // The session is locked before anything runs, and stays locked until the end.
    let session = open_session(&args.session, &loaded.config).await?;
    let mut cycle = match &session {
        Some(session) => build_session_cycle(
            &args.model,
            &loaded.config,
            secrets,
            session.history.clone(),
        )?,
        None => build_cycle(&args.model, &loaded.config, secrets)?,
    };
    let pending_run = session.as_ref().and_then(|session| session.run.clone());
    check_resume_flags(&args, pending_run.as_ref())?;
    unattended_answers(&args, session.is_some())?;
    if args.resume && pending_run.is_none() && !needs_resume(cycle.messages()) {
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
    let (mut registry, statuses, servers) =
        build_registry_with_mcp(&args.tools, Some(&args.model), &loaded, true).await?;
    crate::mcp_notes::print(
        &registry,
        &statuses,
        &crate::settings::target(&args.model, &loaded.config)?.provider,
        &cycle.config().model,
    );
    if let Some(session) = &session {
        crate::context_cli::read_outputs_from_session(
            &mut registry,
            &loaded.config,
            &session.journal,
        );
        registry = session.keep_grants(registry);
    }
    // Nobody to ask now, but a stored run can wait: it suspends instead of denying.
    if session.is_some() && !args.tools.yes && !interactive() {
        registry = registry.with_approver(Arc::new(DeferAll));
    }
    // A team run: `--agent`, or the agent a stored run was with. Checked before anything runs.
    let agent = args.agent.clone().or_else(|| {
        pending_run
            .as_ref()
            .filter(|_| args.resume)
            .and_then(|state| state.agent.clone())
    });
    let team = match &agent {
        Some(name) => Some(crate::team_run::team_for(
            name,
            &args.model,
            &loaded.config,
            secrets,
            &cycle,
            &registry,
        )?),
        None => None,
    };
    if let Some(name) = &agent {
        crate::team_run::say_who_continues(name, cycle.messages());
    }
    // A stored typed run resumes typed: its schema is in its state.
    let typed = args.output_schema.is_some()
        || pending_run
            .as_ref()
            .is_some_and(|state| state.typed.is_some());
    let mut request = match pending_run {
        Some(mut state) => {
            // The limits are this command's (its flags and config), not the ones the run was
            // started with: `--max-requests` and the like given on resume apply, counted over
            // the whole run.
            state.rules = RunRules::of(cycle.config());
            let decisions = decisions(&args, &state);
            RunRequest::from_state(state).with_decisions(decisions)
        }
        None => match &args.prompt {
            Some(prompt) if !args.resume => RunRequest::prompt(prompt.clone()),
            _ => RunRequest::resume(),
        },
    };
    // `--resume` (no prompt) continues the stored history, running its unanswered calls first.
    if args.resume || !registry.is_empty() {
        request = request.with_tools(&registry);
    }
    if let Some(session) = &session {
        request = request.with_journal(&*session.journal);
    }
    if let (Some(team), Some(name)) = (&team, &agent) {
        request = request.with_tools(&registry).with_team(team, name.clone());
    }
    if let Some(schema) = &args.output_schema {
        // Typed output is a mode of this same run: stored, suspended and resumed like it.
        request = crate::typed_run::typed(request.with_tools(&registry), &args, schema)?;
    }
    // Ctrl-C drops the running turn (request and tools); the transcript is still written.
    let outcome = tokio::select! {
        outcome = async {
            if typed {
                crate::typed_run::execute(&mut cycle, request, &args).await
            } else {
                execute(&mut cycle, request, &args).await
            }
        } => outcome,
        _ = tokio::signal::ctrl_c() => Ok(Ended::Cancelled(cancelled(&args))),
    };
    let outcome = outcome.map(|ended| match ended {
        Ended::Cancelled(code) => (code, true),
        Ended::Code(code) | Ended::Suspended(code) => (code, false),
    });
    crate::mcp_close::close_servers(&servers).await;
    keep_after(&args, session.as_ref(), &cycle, outcome).await
}

/// The flags that decide a stored run's approvals and questions must have something to
/// decide; a stored run that waits must be continued with `--resume`.
fn check_resume_flags(args: &RunArgs, pending_run: Option<&RunState>) -> anyhow::Result<()> {
    if pending_run.is_some() && !args.resume {
        let name = args.session.session.as_deref().unwrap_or_default();
        anyhow::bail!(
            "session {} has a run that was interrupted or waits for approvals: continue it with \
             agcore run --session {} --resume (--approve ID, --deny ID or --yes decide its approvals)",
            escape_for_terminal(name),
            escape_for_terminal(name)
        );
    }
    if args.resume && pending_run.is_none() && (!args.approve.is_empty() || !args.deny.is_empty()) {
        anyhow::bail!(
            "nothing in this session waits for approval: --approve and --deny have nothing to decide"
        );
    }
    if args.answer.is_some() && pending_run.is_none_or(|state| waiting_for_input(state).is_empty())
    {
        anyhow::bail!("nothing in this session waits for input: --answer has nothing to answer");
    }
    Ok(())
}

/// Set before the servers start: where their progress shows, and who answers their questions
/// when nobody can be asked (`--answer`, or a stored run that waits for a later answer).
fn unattended_answers(args: &RunArgs, stored: bool) -> anyhow::Result<()> {
    crate::mcp_progress::show(if args.json {
        crate::mcp_progress::Shown::Json
    } else {
        crate::mcp_progress::Shown::Human
    });
    if let Some(answer) = &args.answer {
        elicit_unattended::set(Unattended::Answer(elicit_unattended::parse_answer(answer)?));
    } else if stored {
        elicit_unattended::set(Unattended::Defer);
    }
    Ok(())
}

/// After the run: the session keeps what a cancelled run left, the transcript is written.
/// `outcome` is the exit code and whether Ctrl-C cancelled the run.
async fn keep_after(
    args: &RunArgs,
    session: Option<&crate::store::OpenSession>,
    cycle: &LlmCycle,
    outcome: anyhow::Result<(ExitCode, bool)>,
) -> anyhow::Result<ExitCode> {
    // The run recorded each of its steps, its end included, except when Ctrl-C dropped it:
    // then what the library kept (the completed turns) is what the session keeps. (After an
    // error before the run started, or a suspension, the store is already right.)
    if let (Some(session), Ok((_, true))) = (session, &outcome) {
        let outcome = outcome.as_ref().map(|(code, _)| *code);
        match (session.sync(cycle.messages()).await, &outcome) {
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
                crate::store::write_conversation(path, &json).with_context(|| {
                    format!("could not write the transcript to {}", path.display())
                })
            });
        let outcome = outcome.as_ref().map(|(code, _)| *code);
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
    outcome.map(|(code, _)| code)
}

/// Whether someone can answer approval questions (stdin and stderr are a terminal).
fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// The decisions `--approve` and `--deny` give; a call that waits for input (not for an
/// approval) goes on unless denied: its question is answered by `--answer`, the terminal, or
/// suspends the run again.
fn decisions(args: &RunArgs, state: &RunState) -> Vec<Decision> {
    let approved = args.approve.iter().map(Decision::allow);
    let denied = args
        .deny
        .iter()
        .map(|id| Decision::deny(id, Some("the user denied this call".to_owned())));
    let decided = |id: &String| args.approve.contains(id) || args.deny.contains(id);
    let inputs: Vec<Decision> = waiting_for_input(state)
        .into_iter()
        .filter(|request| !decided(&request.call_id))
        .map(|request| Decision::allow(&request.call_id))
        .collect();
    approved.chain(denied).chain(inputs).collect()
}

/// How a run ended.
pub(crate) enum Ended {
    /// Finished or failed, with this exit code.
    Code(ExitCode),
    /// Ctrl-C.
    Cancelled(ExitCode),
    /// Suspended for approvals (exit code 3).
    Suspended(ExitCode),
}

/// The exit code of a suspended run.
const SUSPENDED: u8 = 3;

/// Say which calls wait for a decision and how to give it (with `--json`, as a
/// `{"type":"suspended"}` event); exit code 3.
pub(crate) fn suspended(suspension: &Suspension, args: &RunArgs) -> anyhow::Result<Ended> {
    let name = args.session.session.as_deref().unwrap_or_default();
    if args.json {
        let event = serde_json::json!({
            "type": "suspended",
            "session": name,
            "requests": crate::team_run::requests_json(suspension, args)?,
        });
        println!("{}", json_for_terminal(serde_json::to_string(&event)?));
    }
    let requests = suspension.requests();
    let inputs = waiting_for_input(suspension.state()).len();
    eprintln!(
        "suspended: {} call(s) wait for approval, {inputs} for input (nobody could be asked: no terminal)",
        requests.len() - inputs,
    );
    for request in requests {
        let agent = crate::team_run::agent_of(suspension, &request.call_id, args)
            .map(|path| format!("  (agent {})", escape_for_terminal(&path)))
            .unwrap_or_default();
        eprintln!(
            "  {}  {}{agent}  {}",
            escape_for_terminal(&request.call_id),
            escape_for_terminal(&request.tool),
            escape_for_terminal(&request.reason)
        );
        eprintln!(
            "      arguments: {}",
            escape_for_terminal(&request.arguments.to_string())
        );
    }
    let name = escape_for_terminal(name);
    if inputs < requests.len() {
        eprintln!(
            "decide with: agcore run --session {name} --resume --approve ID | --deny ID (repeatable) | --yes"
        );
    }
    if inputs > 0 {
        eprintln!(
            "answer with: agcore run --session {name} --resume --answer '{{\"field\": \"value\"}}' (or at a terminal; --deny ID gives up the call)"
        );
        if requests
            .iter()
            .any(|request| request.reason.contains("(URL to open: "))
        {
            eprintln!(
                "a question with a URL: open it yourself (agcore does not), then --answer accept (or --answer decline)"
            );
        }
    }
    Ok(Ended::Suspended(ExitCode::from(SUSPENDED)))
}

/// One event as a JSON line; the stream's error event with the status and retryability added
/// (and said on stderr too).
fn print_json(event: &StreamEvent) -> anyhow::Result<()> {
    match event {
        StreamEvent::Error { kind, message } => {
            json_error::print(&json_error::for_stream_error(*kind, message));
            eprintln!("error: {}", escape_keeping_lines(message));
        }
        _ => println!(
            "{}",
            json_for_terminal(serde_json::to_string(&json_event(event)?)?)
        ),
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
    request: RunRequest<'_>,
    args: &RunArgs,
) -> anyhow::Result<Ended> {
    if args.no_stream {
        let outcome = cycle.run_with(request).await?;
        let prices = cycle.config().prices;
        let spent = cycle.last_run_usage();
        return match outcome {
            RunOutcome::Finished(response) => {
                if args.json {
                    println!("{}", json_for_terminal(serde_json::to_string(&response)?));
                } else {
                    println!("{}", response.text());
                    eprintln!("{}", usage::line(&spent, prices.as_ref()));
                }
                Ok(Ended::Code(ExitCode::SUCCESS))
            }
            RunOutcome::Suspended(suspension) => suspended(&suspension, args),
        };
    }

    let mut items = cycle.run_with_stream(request);
    let mut renderer = HumanRenderer::new();
    let mut failed = false;
    let mut started = false;
    let mut held = None;
    let mut suspension = None;
    let start = interrupt_count();
    while let Some(item) = items.next().await {
        // Ctrl-C at an approval question (the terminal is in raw mode then, so it is a key,
        // not a signal): stop here, the transcript still gets written.
        if interrupt_count() != start {
            renderer.finish();
            return Ok(Ended::Cancelled(cancelled(args)));
        }
        let event = match item {
            RunItem::Event(event) => event,
            // Before anything was shown (the connection, the status): an error of the command.
            RunItem::Failed(error) if !started => return Err(error.into()),
            RunItem::Failed(error) => StreamEvent::from_error(&error),
            RunItem::Suspended(suspended) => {
                suspension = Some(suspended);
                break;
            }
            _ => continue,
        };
        started = true;
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
    drop(items);
    let spent = cycle.last_run_usage();
    let prices = cycle.config().prices;
    if args.json {
        // A suspension is the last event: the held one goes before the usage then.
        if suspension.is_some()
            && let Some(previous) = held.take()
        {
            print_json(&previous)?;
        }
        println!("{}", usage::event(&spent, prices.as_ref()));
        if let Some(last) = held {
            print_json(&last)?;
        }
    } else {
        renderer.finish();
        eprintln!("{}", usage::line(&spent, prices.as_ref()));
    }
    if let Some(suspension) = suspension {
        return suspended(&suspension, args);
    }
    Ok(Ended::Code(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }))
}
