//! The sandbox helper's entry point: parse `--spec JSON -- COMMAND ARGS`, confine this process,
//! then replace it with the command (same pid, so process groups and timeouts still work).

use std::ffi::OsString;
use std::process::ExitCode;

use crate::tools::sandbox::spec::{
    HELPER_FAILURE_PREFIX, HELPER_FAILURE_STATUS, SPEC_FLAG, SandboxSpec,
};

/// Run the sandbox helper with `args` (what follows the program name and any leading
/// arguments). Returns only on failure — having printed `agcore-sandbox: ...` on stderr — with
/// status 125; on success the process becomes the command. Call it while the process has one
/// thread (before any runtime starts): user namespaces require that.
pub fn exec_main(args: impl IntoIterator<Item = OsString>) -> ExitCode {
    let error = match run(args.into_iter().collect()) {
        Ok(never) => match never {},
        Err(error) => error,
    };
    eprintln!("{HELPER_FAILURE_PREFIX}{error}");
    ExitCode::from(u8::try_from(HELPER_FAILURE_STATUS).unwrap_or(1))
}

enum Never {}

fn run(args: Vec<OsString>) -> Result<Never, String> {
    let usage = || format!("usage: {SPEC_FLAG} JSON -- COMMAND [ARGS...]");
    let mut args = args.into_iter();
    if args.next().as_deref() != Some(SPEC_FLAG.as_ref()) {
        return Err(usage());
    }
    let json = args.next().ok_or_else(usage)?;
    let spec: SandboxSpec = serde_json::from_str(&json.to_string_lossy())
        .map_err(|error| format!("the sandbox plan is not valid: {error}"))?;
    if args.next().as_deref() != Some("--".as_ref()) {
        return Err(usage());
    }
    let program = args.next().ok_or_else(usage)?;
    confine(&spec)?;
    let mut command = std::process::Command::new(&program);
    command.args(args);
    Err(exec(command, &program))
}

#[cfg(target_os = "linux")]
fn confine(spec: &SandboxSpec) -> Result<(), String> {
    crate::tools::sandbox::linux::confine(spec)
}

#[cfg(not(target_os = "linux"))]
fn confine(_spec: &SandboxSpec) -> Result<(), String> {
    Err("agcore enforces a sandbox on Linux only".to_owned())
}

#[cfg(unix)]
fn exec(mut command: std::process::Command, program: &OsString) -> String {
    use std::os::unix::process::CommandExt;
    let error = command.exec();
    format!("{} could not be run: {error}", program.to_string_lossy())
}

#[cfg(not(unix))]
fn exec(_command: std::process::Command, _program: &OsString) -> String {
    "the sandbox helper runs on Unix only".to_owned()
}
