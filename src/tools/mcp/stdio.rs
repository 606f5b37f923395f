//! The stdio transport: spawn the server in its own process group, speak JSON-RPC over its
//! stdin/stdout (rmcp's line codec), pump its stderr, notice at once when it exits or closes
//! stdout, and shut it down without leaving zombies or orphans.

use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::RoleClient;
use rmcp::model::{ClientRequest, ErrorCode, ErrorData, JsonRpcMessage, JsonRpcRequest, RequestId};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::{oneshot, watch};
use tokio_util::sync::CancellationToken;

use crate::tools::mcp::MAX_MESSAGE_BYTES;
use crate::tools::mcp::lines::{LineReader, Read};
use crate::tools::mcp::stderr::{StderrTail, pump_stderr};
use crate::vocab::trace_context::otel_int;

/// How long a server gets to exit after its stdin is closed, and again after SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// What to run.
#[derive(Debug, Clone)]
pub(crate) struct StdioSpec {
    pub command: String,
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    /// Inherited variables not passed on (removed before `env` is applied).
    pub env_remove: Vec<String>,
    pub cwd: Option<PathBuf>,
    /// The OS sandbox it runs in (its workspace: `cwd`, else the current directory).
    pub sandbox: crate::tools::sandbox::Sandbox,
}

/// The JSON-RPC code of the error agcore puts in place of a server's oversized answer.
pub(crate) const OVERSIZED_CODE: i32 = -32050;

/// The error [`StdioTransport`] fails a message over [`MAX_MESSAGE_BYTES`] with, unsent: a
/// server drops a line that long (rmcp's codec does, at the same 16 MiB), and the request would
/// wait out its timeout.
#[derive(Debug, thiserror::Error)]
#[error("the message is {bytes} bytes, over the {MAX_MESSAGE_BYTES}-byte limit; not sent")]
pub(crate) struct TooLargeToSend {
    /// The serialized message's size (without its newline).
    pub(crate) bytes: usize,
}

/// The size of a message the transport refused to send, when that is what `error` is.
pub(crate) fn refused_size(error: &rmcp::transport::DynamicTransportError) -> Option<usize> {
    error
        .error
        .downcast_ref::<std::io::Error>()
        .and_then(std::io::Error::get_ref)
        .and_then(|inner| inner.downcast_ref::<TooLargeToSend>())
        .map(|refused| refused.bytes)
}

/// Newline-delimited JSON-RPC over the child's pipes; fires `closed` when stdout ends.
///
/// Unlike rmcp's line transport it fails the request an oversized line answers at once (an
/// error response in its place), and it ignores responses to ids nobody asked for during
/// `initialize` (rmcp would abort the handshake).
pub(crate) struct StdioTransport {
    server: Arc<str>,
    reader: LineReader<BufReader<ChildStdout>>,
    writer: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    closed: CancellationToken,
    /// The id of `initialize` until its answer arrives.
    initialize: Option<RequestId>,
}

impl Transport<RoleClient> for StdioTransport {
    type Error = std::io::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        if let JsonRpcMessage::Request(JsonRpcRequest {
            id,
            request: ClientRequest::InitializeRequest(_),
            ..
        }) = &item
        {
            self.initialize = Some(id.clone());
        }
        let writer = self.writer.clone();
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        async move {
            let line = line.map_err(std::io::Error::other)?;
            let bytes = line.len() - 1;
            if bytes > MAX_MESSAGE_BYTES {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    TooLargeToSend { bytes },
                ));
            }
            let mut writer = writer.lock().await;
            let Some(stdin) = writer.as_mut() else {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotConnected,
                    "the server's stdin is closed",
                ));
            };
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            match self.reader.next().await {
                Read::Line(line) => {
                    if let Some(message) = self.accept(&line) {
                        return Some(message);
                    }
                }
                Read::Oversized {
                    id: Some(id),
                    bytes,
                    whole,
                } => {
                    tracing::warn!(target: "agcore::mcp", server = %self.server, %id, bytes = otel_int(bytes), "discarded an oversized message");
                    let message = format!(
                        "the server's answer is larger than agcore's {} MiB message limit \
                         ({}{bytes} bytes) and was discarded",
                        MAX_MESSAGE_BYTES / (1024 * 1024),
                        if !whole { "at least " } else { "" },
                    );
                    let error = ErrorData::new(ErrorCode(OVERSIZED_CODE), message, None);
                    return Some(JsonRpcMessage::error(error, Some(id)));
                }
                Read::Oversized {
                    id: None, bytes, ..
                } => {
                    tracing::warn!(target: "agcore::mcp", server = %self.server, bytes = otel_int(bytes), "discarded an oversized message without an id");
                }
                Read::Eof => break,
                Read::Io(error) => {
                    tracing::debug!(target: "agcore::mcp", server = %self.server, %error, "reading the server's stdout failed");
                    break;
                }
            }
        }
        self.closed.cancel();
        None
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Drops the writer: the server sees EOF on stdin, the spec's shutdown signal.
        drop(self.writer.lock().await.take());
        Ok(())
    }
}

impl StdioTransport {
    /// The message on `line`, or `None` to skip it (not JSON-RPC; a stray answer during
    /// `initialize`).
    fn accept(&mut self, line: &[u8]) -> Option<RxJsonRpcMessage<RoleClient>> {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        let message: RxJsonRpcMessage<RoleClient> = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(error) => {
                tracing::debug!(target: "agcore::mcp", server = %self.server, %error, "ignored a line that is not a JSON-RPC message");
                return None;
            }
        };
        if let Some(expected) = &self.initialize {
            let answered = match &message {
                JsonRpcMessage::Response(response) => Some(Some(&response.id)),
                JsonRpcMessage::Error(error) => Some(error.id.as_ref()),
                _ => None,
            };
            match answered {
                // An error without an id answers what the server could not read: initialize.
                Some(Some(id)) if !same_id(expected, id) => {
                    tracing::warn!(target: "agcore::mcp", server = %self.server, %id, "ignored a response to an unknown id during initialize");
                    return None;
                }
                Some(_) => self.initialize = None,
                None => {}
            }
        }
        Some(message)
    }
}

/// Whether a response id answers `request` (a numeric id may come back as a string).
fn same_id(request: &RequestId, response: &RequestId) -> bool {
    request == response
        || matches!((request, response), (RequestId::Number(n), RequestId::String(s)) if s.parse::<i64>().ok() == Some(*n))
}

/// The running child: its pid, exit status (once known), stderr tail, and the supervisor that
/// reaps it. Dropping the handle shuts the child down in the background.
#[derive(Debug)]
pub(crate) struct ChildHandle {
    pid: Option<u32>,
    exit: watch::Receiver<Option<ExitStatus>>,
    stderr: Arc<StderrTail>,
    shutdown: Mutex<Option<oneshot::Sender<()>>>,
    supervisor: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl ChildHandle {
    /// The child's process id.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The stderr tail.
    pub(crate) fn stderr(&self) -> &Arc<StderrTail> {
        &self.stderr
    }

    /// The child's exit status, waiting up to `wait` for it; `None` while it still runs.
    pub(crate) async fn exit_status(&self, wait: Duration) -> Option<ExitStatus> {
        let mut exit = self.exit.clone();
        tokio::time::timeout(wait, exit.wait_for(Option::is_some))
            .await
            .ok()
            .and_then(|status| status.ok().and_then(|status| *status))
    }

    /// What happened to the server, waiting up to `wait` for its exit status:
    /// `exited with exit status: 3`, or `closed its stdout` while it still runs.
    pub(crate) async fn describe_end(&self, wait: Duration) -> String {
        match self.exit_status(wait).await {
            Some(status) => {
                // The process is gone: its stderr ends now; take the last lines with it.
                self.stderr.wait_for_end(Duration::from_millis(300)).await;
                format!("exited ({status})")
            }
            None => "closed its stdout".to_owned(),
        }
    }

    /// Shut the child down: (its stdin is already closed by the transport) wait briefly, then
    /// SIGTERM its process group, wait again, then SIGKILL. Returns once it is reaped.
    pub(crate) async fn shutdown(&self) {
        let shutdown = self
            .shutdown
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(shutdown) = shutdown {
            let _ = shutdown.send(());
        }
        let supervisor = self
            .supervisor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(supervisor) = supervisor {
            let _ = supervisor.await;
        }
    }
}

/// Whether `program` names an executable file: a path as it is, a bare name on `PATH` (the
/// server's own `PATH` if its config sets one).
fn program_found(program: &str, env: &[(String, String)]) -> bool {
    let is_file = |path: &std::path::Path| path.is_file();
    if program.contains('/') {
        return is_file(std::path::Path::new(program));
    }
    let path = env
        .iter()
        .rev()
        .find(|(name, _)| name == "PATH")
        .map(|(_, value)| std::ffi::OsString::from(value))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path).any(|dir| is_file(&dir.join(program)))
}

/// Spawn the server. `closed` fires when its stdout ends or it exits.
pub(crate) fn spawn(
    server: &Arc<str>,
    spec: &StdioSpec,
    closed: CancellationToken,
) -> std::io::Result<(StdioTransport, ChildHandle)> {
    let workspace = match &spec.cwd {
        Some(cwd) => cwd.clone(),
        None => std::env::current_dir()?,
    };
    // Refused, not started unsandboxed, where the kernel cannot enforce the policy.
    // A missing program is a start error here, as without the sandbox (not an exit of the
    // helper that would look like a crashed server).
    if !spec.sandbox.policy().is_full() && !program_found(&spec.command, &spec.env) {
        return Err(std::io::Error::new(
            std::io::ErrorKind::NotFound,
            format!("{} was not found", spec.command),
        ));
    }
    // The directories its command line names are the ones the user gave it to work in (the
    // filesystem server's allowed roots): writable under `workspace-write` like its cwd.
    let sandbox = spec
        .args
        .iter()
        .map(std::path::Path::new)
        .filter(|arg| arg.is_absolute() && arg.is_dir())
        .fold(spec.sandbox.clone(), |sandbox, dir| {
            sandbox.with_writable_root(dir)
        });
    let sandboxed = sandbox
        .command(&workspace, &spec.command)
        .map_err(std::io::Error::other)?;
    let temp_dir = sandboxed.temp_dir;
    let mut command = Command::from(sandboxed.command);
    for name in &spec.env_remove {
        command.env_remove(name);
    }
    command
        .args(&spec.args)
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(cwd) = &spec.cwd {
        command.current_dir(cwd);
    }
    // Its own process group, so shutdown also reaches what a launcher (npx, uvx, sh) started.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = command.spawn()?;
    let pid = child.id();
    let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
        return Err(std::io::Error::other(
            "the child's stdin/stdout were not piped",
        ));
    };
    let stderr = StderrTail::new(crate::tools::mcp::STDERR_TAIL_LINES);
    if let Some(stream) = child.stderr.take() {
        tokio::spawn(pump_stderr(server.clone(), stream, stderr.clone()));
    }
    let (exit_tx, exit) = watch::channel(None);
    let (shutdown_tx, shutdown_rx) = oneshot::channel();
    let supervised = supervise(child, pid, exit_tx, shutdown_rx, closed.clone());
    // The server's private TMPDIR lives as long as it runs.
    let supervisor = tokio::spawn(async move {
        let output = supervised.await;
        drop(temp_dir);
        output
    });
    let transport = StdioTransport {
        server: server.clone(),
        reader: LineReader::new(BufReader::new(stdout), MAX_MESSAGE_BYTES),
        writer: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
        closed,
        initialize: None,
    };
    Ok((
        transport,
        ChildHandle {
            pid,
            exit,
            stderr,
            shutdown: Mutex::new(Some(shutdown_tx)),
            supervisor: Mutex::new(Some(supervisor)),
        },
    ))
}

/// Wait for the child to exit or for a shutdown request (an explicit one, or the handle being
/// dropped); record the exit status; kill what is left of its process group.
async fn supervise(
    mut child: Child,
    pid: Option<u32>,
    exit_tx: watch::Sender<Option<ExitStatus>>,
    mut shutdown: oneshot::Receiver<()>,
    closed: CancellationToken,
) {
    let group = GroupGuard { pgid: pid };
    let status = tokio::select! {
        status = child.wait() => status.ok(),
        _ = &mut shutdown => stop(&mut child, &group).await,
    };
    if let Some(status) = status {
        tracing::debug!(target: "agcore::mcp", ?pid, %status, "MCP server process ended");
        exit_tx.send_replace(Some(status));
    }
    closed.cancel();
    drop(group);
}

async fn stop(child: &mut Child, group: &GroupGuard) -> Option<ExitStatus> {
    if let Ok(status) = tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await {
        return status.ok();
    }
    group.signal(Signal::Term);
    if let Ok(status) = tokio::time::timeout(SHUTDOWN_GRACE, child.wait()).await {
        return status.ok();
    }
    group.signal(Signal::Kill);
    let _ = child.start_kill();
    child.wait().await.ok()
}

#[derive(Debug, Clone, Copy)]
enum Signal {
    Term,
    Kill,
}

/// Kills the process group when dropped — also when the runtime drops the supervisor task.
struct GroupGuard {
    pgid: Option<u32>,
}

impl GroupGuard {
    #[cfg(unix)]
    fn signal(&self, signal: Signal) {
        use nix::sys::signal::{Signal as Nix, killpg};
        use nix::unistd::Pid;
        let Some(pgid) = self.pgid.and_then(|pid| i32::try_from(pid).ok()) else {
            return;
        };
        let signal = match signal {
            Signal::Term => Nix::SIGTERM,
            Signal::Kill => Nix::SIGKILL,
        };
        // ESRCH (the group is already gone) is the normal case.
        let _ = killpg(Pid::from_raw(pgid), signal);
    }

    #[cfg(not(unix))]
    fn signal(&self, _signal: Signal) {}
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        self.signal(Signal::Kill);
    }
}
