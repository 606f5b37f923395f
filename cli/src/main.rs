//! `agcore`: the command-line face of the agcore library — one-shot runs, interactive chat,
//! tool listings, MCP servers, and an offline demo.

mod acp;
mod agent_events;
mod agents_cmd;
mod agents_config;
mod approve;
mod chat;
mod chat_mcp;
mod cli;
mod config;
mod context_cli;
mod demo;
mod elicit;
mod elicit_unattended;
mod hooks;
mod hosted_tools;
mod interactive_default;
mod json_error;
mod layers;
mod mcp_catalog;
mod mcp_close;
mod mcp_cmd;
mod mcp_connect;
mod mcp_login;
mod mcp_notes;
mod mcp_progress;
mod mcp_skills;
mod provider;
mod render;
mod restate_cmd;
mod run;
mod sampling;
mod sandbox_cmd;
mod secrets;
mod sessions_cmd;
mod settings;
mod setup;
mod store;
mod system_prompt;
mod team_build;
mod team_run;
mod telemetry;
mod tool_cards;
mod tools_cmd;
mod trust;
mod typed_run;
mod usage;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{AgentsCommand, Cli, Command, McpCommand, RestateCommand, SessionsCommand};
use crate::layers::Loaded;
use crate::secrets::Secrets;

/// Synchronous on purpose: the config is read and the API key taken out of the environment
/// ([`Secrets::take`]) while the process has one thread; only then does the runtime start.
fn main() -> ExitCode {
    // The sandbox helper, before anything else: it must still have one thread.
    if std::env::args_os().nth(1).as_deref() == Some(sandbox_cmd::HELPER_ARG.as_ref()) {
        return agcore::tools::sandbox::exec_main(std::env::args_os().skip(2));
    }
    exit_quietly_on_broken_pipe();
    let cli = Cli::parse();
    // `run --json` ends a failed run with one error event on stdout, whatever failed.
    let json_run = matches!(&cli.command, Command::Run(args) if args.json);
    let failure = |error: &anyhow::Error| {
        if is_broken_pipe(error) {
            return ExitCode::SUCCESS;
        }
        if json_run {
            json_error::print(&json_error::for_error(error, &describe_raw(error)));
        }
        eprintln!("error: {}", describe(error));
        ExitCode::FAILURE
    };
    let loaded = match load(&cli.command) {
        Ok(loaded) => loaded,
        Err(error) => return failure(&error),
    };
    let model = match &cli.command {
        Command::Run(args) => Some(&args.model),
        Command::Chat(args) => Some(&args.model),
        Command::Acp(args) => Some(&args.model),
        Command::Restate(RestateCommand::Serve(args)) => Some(&args.model),
        _ => None,
    };
    let secrets = Secrets::take(&settings::secret_env_names(&loaded.config, model));
    // Flushes the exported spans when `main` returns, however it returns.
    let _telemetry = telemetry::init(cli.verbose, || EscapedStderr);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => return failure(&error.into()),
    };
    match runtime.block_on(dispatch(cli.command, loaded, secrets)) {
        Ok(code) => code,
        Err(error) => failure(&error),
    }
}

/// Output into a closed pipe (`agcore sessions show NAME --json | head -c 600`) ends the
/// command quietly, with success: the reader had what it wanted. `println!` and `eprintln!`
/// panic when the write fails, so the panic of a broken pipe becomes this exit, for every
/// command and every thread; any other panic is reported as before.
fn exit_quietly_on_broken_pipe() {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let message = payload
            .downcast_ref::<String>()
            .map(String::as_str)
            .or_else(|| payload.downcast_ref::<&str>().copied())
            .unwrap_or_default();
        if message.starts_with("failed printing to std") && message.ends_with(&broken_pipe()) {
            std::process::exit(0);
        }
        report(info);
    }));
}

/// How the OS says "broken pipe" (`Broken pipe (os error 32)` on Linux).
fn broken_pipe() -> String {
    #[cfg(unix)]
    return std::io::Error::from(nix::errno::Errno::EPIPE).to_string();
    #[cfg(not(unix))]
    return std::io::Error::from(std::io::ErrorKind::BrokenPipe).to_string();
}

/// Whether `error` comes from writing into a closed pipe.
fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The config the command uses, by the trust rule of [`layers`] (defaults for commands
/// without one).
fn load(command: &Command) -> anyhow::Result<Loaded> {
    match command {
        Command::Run(args) => settings::load_config(&args.tools),
        Command::Chat(args) => settings::load_config(&args.tools),
        Command::Acp(args) => settings::load_config(&args.tools),
        Command::Tools(args) => settings::load_config(&args.tools),
        Command::Agents(AgentsCommand::List(args)) => settings::load_config(&args.tools),
        Command::Restate(RestateCommand::Serve(args)) => settings::load_config(&args.tools),
        Command::Restate(RestateCommand::Register(_)) => Ok(Loaded::default()),
        Command::Mcp(McpCommand::List(args)) => layers::load(args.source.config.as_deref(), false),
        Command::Mcp(McpCommand::Call(args)) => layers::load(args.source.config.as_deref(), false),
        Command::Mcp(McpCommand::Login(args)) => layers::load(args.source.config.as_deref(), false),
        Command::Mcp(McpCommand::Logout(_)) => Ok(Loaded::default()),
        Command::Sessions(SessionsCommand::List(args)) => {
            layers::load(args.config.as_deref(), false)
        }
        Command::Sessions(SessionsCommand::Show(args) | SessionsCommand::Rm(args)) => {
            layers::load(args.config.as_deref(), false)
        }
        Command::Mcp(McpCommand::Resources(args)) => {
            layers::load(args.source.config.as_deref(), false)
        }
        Command::Mcp(McpCommand::Prompts(args)) => {
            layers::load(args.source.config.as_deref(), false)
        }
        Command::Mcp(McpCommand::Skills(args)) => {
            layers::load(args.source.config.as_deref(), false)
        }
        Command::Mcp(McpCommand::Skill(args)) => layers::load(args.source.config.as_deref(), false),
        Command::Demo(_)
        | Command::Trust(_)
        | Command::Sandbox(_)
        | Command::McpDemoServer { .. } => Ok(Loaded::default()),
    }
}

async fn dispatch(command: Command, loaded: Loaded, secrets: Secrets) -> anyhow::Result<ExitCode> {
    match command {
        Command::Run(args) => run::run(args, loaded, &secrets).await,
        Command::Chat(args) => chat::chat(args, loaded, &secrets).await,
        Command::Acp(args) => acp::serve(args, loaded, secrets).await,
        Command::Tools(args) => tools_cmd::tools(args, loaded).await,
        Command::Agents(command) => agents_cmd::agents(command, loaded).await,
        Command::Mcp(command) => mcp_cmd::mcp(command, loaded).await,
        Command::Demo(args) => demo::demo(args).await,
        Command::Trust(args) => trust::trust(args),
        Command::Sessions(command) => sessions_cmd::sessions(command, loaded).await,
        Command::Restate(RestateCommand::Serve(args)) => {
            restate_cmd::serve(*args, loaded, &secrets).await
        }
        Command::Restate(RestateCommand::Register(args)) => restate_cmd::register(args).await,
        Command::Sandbox(args) => sandbox_cmd::sandbox(args).await,
        Command::McpDemoServer { args } => mcp_demo_server::serve(args)
            .await
            .map(|()| ExitCode::SUCCESS),
    }
}

/// The error and its causes on one line, like `{:#}`, but a cause whose text the line already
/// holds is left out: many errors (ours and the library's) include their source in their own
/// message, and `{:#}` printed it twice. Escaped for the terminal (lines kept): error texts
/// quote servers (HTTP bodies, MCP stderr).
pub(crate) fn describe(error: &anyhow::Error) -> String {
    agcore::display::escape_keeping_lines(&describe_raw(error)).into_owned()
}

/// [`describe`] unescaped, for JSON (which escapes it itself).
pub(crate) fn describe_raw(error: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if line.contains(&text) {
            continue;
        }
        if !line.is_empty() {
            line.push_str(": ");
        }
        line.push_str(&text);
    }
    line
}

/// stderr, with every control, bidi or invisible character but newline and tab escaped.
pub(crate) struct EscapedStderr;

impl std::io::Write for EscapedStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter writes each event whole, so a character is never split across writes.
        let text = String::from_utf8_lossy(buf);
        let escaped = agcore::display::escape_keeping_lines(&text);
        std::io::stderr().write_all(escaped.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}
