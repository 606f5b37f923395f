//! `agcore sandbox [--policy MODE] [--network-on | --allow-host HOST...] [--workspace DIR] --
//! CMD ARGS`: run one command under a sandbox policy, to try it by hand; the exit status is the
//! command's. Also
//! the CLI's sandbox helper (`agcore __sandbox-exec`, dispatched in `main` before anything
//! else) and the one-line description `agcore tools` and the chat banner show.

use std::process::ExitCode;

use agcore::tools::ToolsConfig;
use agcore::tools::sandbox::{NetworkAccess, Sandbox, SandboxHelper, SandboxMode, SandboxPolicy};
use anyhow::Context;

use crate::cli::SandboxArgs;

/// The hidden first argument on which `agcore` acts as its own sandbox helper.
pub const HELPER_ARG: &str = "__sandbox-exec";

/// This program as the sandbox helper: `agcore __sandbox-exec --spec JSON -- CMD ARGS`.
pub fn helper() -> anyhow::Result<SandboxHelper> {
    let exe = std::env::current_exe().context("the path of the agcore program is unknown")?;
    Ok(SandboxHelper::new(exe, vec![HELPER_ARG.into()]))
}

/// The policy of the config with `--sandbox` (if given) and restricted mode applied.
pub fn policy(tools: &ToolsConfig, mode: Option<SandboxMode>) -> SandboxPolicy {
    let mut policy = tools.sandbox.clone();
    if let Some(mode) = mode {
        policy.mode = mode;
    }
    policy.restricted(tools.restricted)
}

/// `sandbox: run_command workspace-write, network off · MCP servers: per server` for listings.
pub fn describe(policy: &SandboxPolicy) -> String {
    if policy.restricted {
        return format!(
            "sandbox: run_command {} · hooks: read-only, network off (restricted mode) · stdio \
             MCP servers: per server (default workspace-write, network on)",
            policy.describe()
        );
    }
    format!(
        "sandbox: run_command {} · stdio MCP servers and hooks: per server/hook (default \
         workspace-write, network on)",
        policy.describe()
    )
}

/// `agcore sandbox`.
pub async fn sandbox(args: SandboxArgs) -> anyhow::Result<ExitCode> {
    let workspace = match args.workspace {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("no command given: agcore sandbox [--policy MODE] -- CMD ARGS");
    };
    let policy = SandboxPolicy {
        mode: args.policy,
        network: if args.network_on {
            NetworkAccess::On
        } else {
            NetworkAccess::Off
        },
        allowed_hosts: args.allow_hosts,
        ..SandboxPolicy::default()
    };
    let sandboxed = Sandbox::new(policy)
        .with_helper(helper()?)
        .command(&workspace, program)?;
    let mut command = tokio::process::Command::from(sandboxed.command);
    command.args(rest).current_dir(&workspace);
    let status = command
        .status()
        .await
        .with_context(|| format!("could not start {program}"))?;
    drop(sandboxed.temp_dir);
    drop(sandboxed.proxy);
    Ok(match status.code() {
        Some(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        // Killed by a signal: the shell's convention.
        None => ExitCode::from(128 + signal_of(&status)),
    })
}

#[cfg(unix)]
fn signal_of(status: &std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    status
        .signal()
        .and_then(|signal| u8::try_from(signal).ok())
        .unwrap_or(0)
}

#[cfg(not(unix))]
fn signal_of(_status: &std::process::ExitStatus) -> u8 {
    0
}
