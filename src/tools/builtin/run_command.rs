//! `run_command`: `sh -c COMMAND` in the workspace root, with a timeout that kills every
//! process the command started (see [`super::process_tree`]), a cap on how many commands run
//! at once, and bounded stdout/stderr capture.

use std::collections::VecDeque;
use std::process::{ExitStatus, Stdio};
use std::sync::Arc;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::AsyncReadExt;
use tokio::time::Instant;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::ToolSource;
use crate::tools::builtin::limits::{MODEL_OUTPUT_BUDGET, OutputLimits, truncate_parts};
use crate::tools::builtin::process_tree::{CommandTree, MARKER_ENV, new_marker};
use crate::tools::builtin::workspace::Workspace;
use crate::tools::context::{self, IDEMPOTENCY_ENV, ToolContext};
use crate::tools::error::ToolError;
use crate::tools::event::ToolCallUpdate;
use crate::tools::kind::ToolKind;
use crate::tools::sandbox::{HELPER_FAILURE_PREFIX, HELPER_FAILURE_STATUS, Sandbox};
use crate::tools::typed::Tool;

/// How long to keep draining the pipes after the shell exited and its group was killed (a
/// process that left the group may still hold them open).
const DRAIN_GRACE: Duration = Duration::from_secs(2);
/// What [`RunCommand`]'s own timeout (for the registry) adds to its longest command timeout:
/// the drain grace and the killing, so the registry never cuts a command the tool still runs.
const TOOL_TIMEOUT_SLACK: Duration = Duration::from_secs(30);

/// Run a shell command (`sh -c`) in the workspace root and return its exit code, stdout and
/// stderr. Long output keeps its beginning and end. The command is killed (with every process
/// it started) when it exceeds the timeout; background processes do not outlive it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
pub struct RunCommandInput {
    /// The command line, run with `sh -c` in the workspace root, e.g. `cargo test 2>&1`.
    pub command: String,
    /// Seconds before the command is killed (default: 60, maximum: 600).
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// What `run_command` returns to the caller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCommandOutput {
    /// The command line.
    pub command: String,
    /// The exit code (`None` when killed by a signal).
    pub exit_code: Option<i32>,
    /// The signal that ended it, if any (9 after a timeout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<i32>,
    /// Whether it ran past its timeout and was killed.
    pub timed_out: bool,
    /// Standard output (cut in the middle with a marker when long).
    pub stdout: String,
    /// Standard error (cut in the middle with a marker when long).
    pub stderr: String,
    /// Whether stdout or stderr was cut.
    pub truncated: bool,
}

/// The `run_command` tool. Defaults: 60 s timeout (at most 600 s; the timeout also covers
/// waiting for a free slot), at most [`RunCommand::DEFAULT_MAX_CONCURRENT`] commands at once
/// (shared by clones), each stream capped at 400 lines and half of [`MODEL_OUTPUT_BUDGET`].
///
/// When a command ends or times out, every process it started is killed: its process group,
/// and on Linux also descendants that left the group (`setsid`, double forks), found by an
/// environment marker (`AGCORE_RUN_COMMAND_ID`), by holding the command's output pipes, or by
/// descent. A process that clears its environment, closes the pipes and leaves the group
/// escapes the killing — but not the sandbox.
///
/// Every command runs under a [`Sandbox`] (default: `workspace-write`, network off; see
/// [`crate::tools::sandbox`]), which every process it starts inherits; where the kernel cannot
/// enforce it the command is refused, never run unsandboxed. [`RunCommand::with_sandbox`]
/// chooses another policy, `full` included.
#[derive(Debug, Clone)]
pub struct RunCommand {
    workspace: Workspace,
    default_timeout: Duration,
    max_timeout: Duration,
    limits: OutputLimits,
    removed_env: Vec<String>,
    slots: Arc<tokio::sync::Semaphore>,
    max_concurrent: usize,
    sandbox: Sandbox,
}

impl RunCommand {
    /// How many commands one `RunCommand` (and its clones) runs at once by default.
    pub const DEFAULT_MAX_CONCURRENT: usize = 8;

    /// Run commands in `workspace`'s root.
    pub fn new(workspace: Workspace) -> Self {
        RunCommand {
            workspace,
            default_timeout: Duration::from_secs(60),
            max_timeout: Duration::from_secs(600),
            limits: OutputLimits::new(400, MODEL_OUTPUT_BUDGET / 2 - 512),
            removed_env: Vec::new(),
            slots: Arc::new(tokio::sync::Semaphore::new(Self::DEFAULT_MAX_CONCURRENT)),
            max_concurrent: Self::DEFAULT_MAX_CONCURRENT,
            sandbox: Sandbox::default(),
        }
    }

    /// Run commands under `sandbox` instead of the default (`workspace-write`, network off).
    pub fn with_sandbox(mut self, sandbox: Sandbox) -> Self {
        self.sandbox = sandbox;
        self
    }

    /// The sandbox commands run under.
    pub fn sandbox(&self) -> &Sandbox {
        &self.sandbox
    }

    /// Run at most `max` commands at once (minimum 1); further calls wait for a slot, within
    /// their timeout. The cap is shared by this tool and its clones.
    pub fn with_max_concurrent(mut self, max: usize) -> Self {
        let max = max.max(1);
        self.slots = Arc::new(tokio::sync::Semaphore::new(max));
        self.max_concurrent = max;
        self
    }

    /// Do not pass the environment variable `name` to commands (e.g. an API key the agent's
    /// process holds). Commands otherwise inherit the whole environment.
    pub fn without_env(mut self, name: impl Into<String>) -> Self {
        self.removed_env.push(name.into());
        self
    }

    /// The timeout when the input gives none (also raises the maximum to at least this).
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = timeout;
        self.max_timeout = self.max_timeout.max(timeout);
        self
    }

    /// Cap stdout and stderr each at these limits.
    pub fn with_limits(mut self, limits: OutputLimits) -> Self {
        self.limits = limits;
        self
    }
}

impl Tool for RunCommand {
    type Input = RunCommandInput;
    type Output = RunCommandOutput;
    const NAME: &'static str = "run_command";

    fn kind() -> ToolKind {
        ToolKind::Execute
    }

    fn source() -> ToolSource {
        ToolSource::Builtin
    }

    fn argument_kind(argument: &str) -> ArgumentKind {
        match argument {
            "command" => ArgumentKind::ShellCommand,
            _ => ArgumentKind::Text,
        }
    }

    fn timeout(&self) -> Option<Duration> {
        Some(self.max_timeout + DRAIN_GRACE + TOOL_TIMEOUT_SLACK)
    }

    fn title(&self, input: Result<&RunCommandInput, &Value>) -> String {
        let command = match input {
            Ok(input) => Some(input.command.as_str()),
            Err(raw) => raw.get("command").and_then(Value::as_str),
        };
        match command {
            Some(command) => {
                let line = command.lines().next().unwrap_or_default();
                let short: String = line.chars().take(80).collect();
                let more = short.len() < command.len();
                format!("Run: {short}{}", if more { " …" } else { "" })
            }
            None => "Run command".to_owned(),
        }
    }

    fn model_content(output: &RunCommandOutput) -> String {
        let mut text = match (output.timed_out, output.exit_code, output.signal) {
            (true, _, _) => "Timed out; the command and its processes were killed.\n".to_owned(),
            (false, Some(code), _) => format!("Exit code: {code}\n"),
            (false, None, Some(signal)) => format!("Killed by signal {signal}\n"),
            (false, None, None) => "Exit status unknown\n".to_owned(),
        };
        for (name, stream) in [("stdout", &output.stdout), ("stderr", &output.stderr)] {
            if !stream.is_empty() {
                text.push_str(&format!("--- {name} ---\n{stream}"));
                if !stream.ends_with('\n') {
                    text.push('\n');
                }
            }
        }
        if output.stdout.is_empty() && output.stderr.is_empty() {
            text.push_str("(no output)\n");
        }
        text
    }

    async fn run(&self, input: RunCommandInput) -> Result<RunCommandOutput, ToolError> {
        let timeout = input
            .timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(self.default_timeout)
            .min(self.max_timeout);
        let deadline = Instant::now() + timeout;
        // A slot first: 300 calls in one turn must not start 300 processes at once.
        let _slot =
            match tokio::time::timeout_at(deadline, self.slots.clone().acquire_owned()).await {
                Ok(Ok(slot)) => slot,
                Ok(Err(_)) | Err(_) => {
                    return Err(ToolError::ExecutionFailed(
                        Self::NAME.to_owned(),
                        format!(
                            "the command did not start within its timeout of {} s: all {} command \
                         slots were busy; run fewer commands at once",
                            timeout.as_secs(),
                            self.max_concurrent
                        ),
                    ));
                }
            };
        let marker = new_marker();
        // Refused, not run unsandboxed, where the kernel cannot enforce the policy.
        let sandboxed = self
            .sandbox
            .command(self.workspace.root(), "sh")
            .map_err(|error| {
                ToolError::ExecutionFailed(Self::NAME.to_owned(), error.to_string())
            })?;
        // The private TMPDIR lives until the command is over.
        let _temp_dir = sandboxed.temp_dir;
        let mut command = tokio::process::Command::from(sandboxed.command);
        command
            .arg("-c")
            .arg(&input.command)
            .current_dir(self.workspace.root())
            .env(MARKER_ENV, &marker)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for name in &self.removed_env {
            command.env_remove(name);
        }
        // A command can hand its call's key on (to an API, a lock file) and so tell, after a
        // crash, whether it already ran.
        match ToolContext::current() {
            Some(context) => command.env(IDEMPOTENCY_ENV, context.idempotency_key()),
            None => command.env_remove(IDEMPOTENCY_ENV),
        };
        // Its own process group, so a timeout kills everything the command started.
        #[cfg(unix)]
        command.process_group(0);
        let mut child = command.spawn().map_err(|error| {
            ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                format!("could not start sh: {error}"),
            )
        })?;
        let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take())
        else {
            return Err(ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                "the command's output pipes are missing".to_owned(),
            ));
        };
        let mut tree = TreeGuard::of(&child, marker, [pipe_of(&stdout), pipe_of(&stderr)]);
        let half = self.limits.max_bytes.div_ceil(2);
        let mut out = Capture::new(half);
        let mut err = Capture::new(half);
        let (mut out_open, mut err_open) = (true, true);
        let mut status: Option<std::io::Result<ExitStatus>> = None;
        let mut timed_out = false;
        let mut killed = false;
        let mut drain_until: Option<Instant> = None;
        let mut live = LiveOutput::new(self.limits.max_bytes);
        let mut out_buf = vec![0u8; 8192];
        let mut err_buf = vec![0u8; 8192];
        while out_open || err_open || status.is_none() {
            tokio::select! {
                read = stdout.read(&mut out_buf), if out_open => {
                    live.show(&read, &out_buf);
                    out_open = out.absorb(read, &out_buf);
                }
                read = stderr.read(&mut err_buf), if err_open => {
                    live.show(&read, &err_buf);
                    err_open = err.absorb(read, &err_buf);
                }
                exited = child.wait(), if status.is_none() => {
                    status = Some(exited);
                    // Background processes do not outlive the command (they would hold the
                    // pipes open); then drain what is buffered.
                    tree.kill().await;
                    drain_until = Some(Instant::now() + DRAIN_GRACE);
                }
                () = tokio::time::sleep_until(deadline), if status.is_none() && !timed_out => {
                    timed_out = true;
                    tree.kill().await;
                }
                () = tokio::time::sleep_until(drain_until.unwrap_or(deadline)), if drain_until.is_some() => {
                    break;
                }
            }
            if timed_out && !killed && status.is_none() {
                // Also kill the shell itself, in case the group could not be signalled.
                let _ = child.start_kill();
                killed = true;
            }
        }
        tree.disarm();
        let status = status
            .unwrap_or_else(|| Err(std::io::Error::other("no exit status")))
            .map_err(|error| {
                ToolError::ExecutionFailed(
                    Self::NAME.to_owned(),
                    format!("waiting for the command failed: {error}"),
                )
            })?;
        let (stdout, stdout_cut) = out.finish(self.limits);
        let (mut stderr, stderr_cut) = err.finish(self.limits);
        if status.code() == Some(HELPER_FAILURE_STATUS)
            && let Some(reason) = stderr.strip_prefix(HELPER_FAILURE_PREFIX)
        {
            return Err(ToolError::ExecutionFailed(
                Self::NAME.to_owned(),
                format!(
                    "the sandbox ({}) could not be applied, nothing was run: {}",
                    self.sandbox.policy().describe(),
                    reason.trim_end()
                ),
            ));
        }
        if !status.success()
            && !self.sandbox.policy().is_full()
            && let Some(note) = sandbox_note(&self.sandbox, &stdout, &stderr)
        {
            stderr.push_str(&note);
        }
        Ok(RunCommandOutput {
            command: input.command,
            exit_code: status.code(),
            signal: exit_signal(&status),
            timed_out,
            stdout,
            stderr,
            truncated: stdout_cut || stderr_cut,
        })
    }
}

/// What a failed command's output that looks like a sandbox refusal gets appended, so the
/// model reads the cause instead of a bare `Permission denied`.
fn sandbox_note(sandbox: &Sandbox, stdout: &str, stderr: &str) -> Option<String> {
    use crate::tools::sandbox::{NetworkAccess, SandboxMode};
    let policy = sandbox.policy();
    let seen = |needles: &[&str]| {
        needles
            .iter()
            .any(|needle| stderr.contains(needle) || stdout.contains(needle))
    };
    let mut causes = Vec::new();
    if seen(&[
        "Permission denied",
        "Operation not permitted",
        "Read-only file system",
    ]) {
        causes.push(match policy.effective_mode() {
            SandboxMode::ReadOnly => {
                "writes anywhere but $TMPDIR are blocked by the sandbox (read-only)".to_owned()
            }
            _ => "writes outside the workspace (and to its .git and agcore config) are blocked \
                  by the sandbox; write inside the workspace or $TMPDIR"
                .to_owned(),
        });
    }
    if policy.effective_network() == NetworkAccess::Off
        && seen(&[
            "Network is unreachable",
            "Could not resolve",
            "Temporary failure in name resolution",
            "Connection refused",
            "Operation not permitted",
            "network",
        ])
    {
        causes.push(
            "the network (including localhost and Unix sockets) is off in the sandbox; work \
             offline or ask the user to allow network"
                .to_owned(),
        );
    }
    (!causes.is_empty()).then(|| {
        format!(
            "\n[agcore sandbox: {}: {}]\n",
            policy.describe(),
            causes.join("; ")
        )
    })
}

/// The command's output as it runs, reported to the call's card
/// ([`crate::tools::context::report`]) up to the capture limit; nothing when nobody listens.
struct LiveOutput {
    room: usize,
}

impl LiveOutput {
    fn new(limit: usize) -> Self {
        LiveOutput {
            room: if context::listening() { limit } else { 0 },
        }
    }

    fn show(&mut self, read: &std::io::Result<usize>, buf: &[u8]) {
        let Ok(read) = read else { return };
        let shown = (*read).min(self.room);
        if shown == 0 {
            return;
        }
        self.room -= shown;
        let text = String::from_utf8_lossy(buf.get(..shown).unwrap_or_default());
        context::report(ToolCallUpdate::text(text));
    }
}

#[cfg(unix)]
fn exit_signal(status: &ExitStatus) -> Option<i32> {
    use std::os::unix::process::ExitStatusExt;
    status.signal()
}

#[cfg(not(unix))]
fn exit_signal(_status: &ExitStatus) -> Option<i32> {
    None
}

/// The `/proc/self/fd` text of a pipe end, to find the processes holding the other end.
fn pipe_of(pipe: &impl std::os::fd::AsRawFd) -> Option<String> {
    #[cfg(target_os = "linux")]
    {
        crate::tools::builtin::process_tree::fd_link(pipe)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pipe;
        None
    }
}

/// The command's processes; killed on timeout, after the shell exits, and on drop (when the
/// call is cancelled or the registry's own timeout fires).
struct TreeGuard {
    tree: Option<CommandTree>,
}

impl TreeGuard {
    fn of(child: &tokio::process::Child, marker: String, pipes: [Option<String>; 2]) -> Self {
        TreeGuard {
            tree: child
                .id()
                .and_then(|id| i32::try_from(id).ok())
                .map(|leader| CommandTree {
                    leader,
                    marker,
                    pipes: pipes.into_iter().flatten().collect(),
                }),
        }
    }

    /// Forget the tree once the command is over and was killed: the group id may be reused
    /// by an unrelated process group later.
    fn disarm(&mut self) {
        self.tree = None;
    }

    /// Kill every process of the command, off the async threads (it reads `/proc`).
    async fn kill(&self) {
        if let Some(tree) = self.tree.clone() {
            let _ = tokio::task::spawn_blocking(move || tree.kill_all()).await;
        }
    }
}

impl Drop for TreeGuard {
    fn drop(&mut self) {
        if let Some(tree) = self.tree.take() {
            match tokio::runtime::Handle::try_current() {
                Ok(runtime) => drop(runtime.spawn_blocking(move || tree.kill_all())),
                Err(_) => tree.kill_all(),
            }
        }
    }
}

/// One output stream, kept bounded while it is read: its first `half` bytes, its last `half`
/// bytes, and a count of the bytes and lines in between.
struct Capture {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    gone_bytes: usize,
    gone_lines: usize,
}

impl Capture {
    fn new(half: usize) -> Self {
        Capture {
            half,
            head: Vec::new(),
            tail: VecDeque::new(),
            gone_bytes: 0,
            gone_lines: 0,
        }
    }

    /// Take one read's result; returns whether the stream is still open.
    fn absorb(&mut self, read: std::io::Result<usize>, buffer: &[u8]) -> bool {
        match read {
            Ok(0) | Err(_) => false,
            Ok(n) => {
                self.push(&buffer[..n]);
                true
            }
        }
    }

    fn push(&mut self, mut bytes: &[u8]) {
        let room = self.half.saturating_sub(self.head.len());
        let into_head = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..into_head]);
        bytes = &bytes[into_head..];
        self.tail.extend(bytes);
        let overflow = self.tail.len().saturating_sub(self.half);
        for byte in self.tail.drain(..overflow) {
            self.gone_lines += usize::from(byte == b'\n');
        }
        self.gone_bytes += overflow;
    }

    /// The text within `limits` (middle cut with a marker), and whether anything was cut.
    fn finish(self, limits: OutputLimits) -> (String, bool) {
        let head = String::from_utf8_lossy(&self.head);
        let tail: Vec<u8> = self.tail.into();
        let tail = String::from_utf8_lossy(&tail);
        let cut = truncate_parts(&head, self.gone_bytes, self.gone_lines, &tail, limits);
        (cut.render(), cut.is_cut())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_both_ends_and_counts_the_middle() {
        let mut capture = Capture::new(10);
        for i in 0..100 {
            capture.push(format!("{i:03}\n").as_bytes());
        }
        assert_eq!(capture.gone_bytes, 400 - 20);
        let (text, cut) = capture.finish(OutputLimits::new(1000, 20));
        assert!(cut);
        assert!(text.starts_with("000\n001\n"), "{text}");
        assert!(text.ends_with("098\n099\n"), "{text}");
        assert!(
            text.contains("lines (") && text.contains("bytes) cut ...]"),
            "{text}"
        );
    }
}
