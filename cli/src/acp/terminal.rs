//! The editor's terminal: when the client offers `terminal`, `run_command` runs its command in
//! a terminal of the editor (`terminal/create`, then `terminal/wait_for_exit` within the
//! timeout, `terminal/kill` past it, `terminal/output`, `terminal/release`), and the call's
//! card embeds that terminal, so the user watches the command live.
//!
//! Gated exactly as the built-in (same name, schema, permissions, shell rules: see
//! [`super::delegate`]), and confined the same way: the command runs in the session's
//! workspace under the session's OS sandbox — the editor is asked to run agcore's sandbox
//! helper with the command (`agcore __sandbox-exec --spec … -- sh -c COMMAND`), so a policy
//! the kernel cannot enforce refuses the command rather than running it unconfined — and
//! without the environment variables the built-in withholds (the model's API keys: `env -u`).

use std::time::Duration;

use agcore::tools::StreamingInput;
use agcore::tools::ToolCallUpdate;
use agcore::tools::builtin::{RunCommandInput, RunCommandOutput};
use agcore::tools::context;
use agcore::tools::prelude::*;
use agcore::tools::sandbox::Sandbox;
use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp;

use super::delegate::delegate_to_builtin;
use super::requests::ask;

const TOOL: &str = "run_command";

/// The built-in's default and longest timeouts.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
const MAX_TIMEOUT: Duration = Duration::from_secs(600);

/// The most output the editor keeps for the model (it drops the beginning past it).
const OUTPUT_BYTE_LIMIT: u64 = 64 * 1024;

/// `run_command`, running in the editor's terminal.
pub struct EditorRunCommand {
    builtin: Arc<dyn BaseTool>,
    connection: ConnectionTo<Client>,
    session: acp::SessionId,
    workspace: std::path::PathBuf,
    sandbox: Sandbox,
    withheld_env: Vec<String>,
}

impl EditorRunCommand {
    /// The built-in `run_command`, running in `session`'s terminals in `workspace` under
    /// `sandbox`, without the `withheld_env` variables.
    pub fn new(
        builtin: Arc<dyn BaseTool>,
        connection: ConnectionTo<Client>,
        session: acp::SessionId,
        workspace: std::path::PathBuf,
        sandbox: Sandbox,
        withheld_env: Vec<String>,
    ) -> Self {
        Self {
            builtin,
            connection,
            session,
            workspace,
            sandbox,
            withheld_env,
        }
    }

    fn failed(message: impl Into<String>) -> ToolError {
        ToolError::ExecutionFailed(TOOL.to_owned(), message.into())
    }

    /// The `terminal/create` request for `command`, and the sandbox's temporary directory (to
    /// keep until the command ended).
    fn create_request(
        &self,
        command: &str,
    ) -> Result<(acp::CreateTerminalRequest, Option<tempfile::TempDir>), ToolError> {
        let sandboxed = self
            .sandbox
            .command(&self.workspace, "sh")
            .map_err(|error| Self::failed(format!("the command was not run: {error}")))?;
        let inner = &sandboxed.command;
        let mut argv: Vec<String> = Vec::new();
        argv.push(inner.get_program().to_string_lossy().into_owned());
        argv.extend(
            inner
                .get_args()
                .map(|arg| arg.to_string_lossy().into_owned()),
        );
        argv.extend(["-c".to_owned(), command.to_owned()]);
        // The editor's environment is its own: the withheld variables are unset by `env`.
        let (program, args) = if self.withheld_env.is_empty() {
            let program = argv.remove(0);
            (program, argv)
        } else {
            let mut args = Vec::new();
            for name in &self.withheld_env {
                args.extend(["-u".to_owned(), name.clone()]);
            }
            args.extend(argv);
            ("env".to_owned(), args)
        };
        let env = inner
            .get_envs()
            .filter_map(|(name, value)| {
                Some(acp::EnvVariable::new(
                    name.to_string_lossy().into_owned(),
                    value?.to_string_lossy().into_owned(),
                ))
            })
            .collect();
        let mut request = acp::CreateTerminalRequest::new(self.session.clone(), program);
        request.args = args;
        request.env = env;
        request.cwd = Some(self.workspace.clone());
        request.output_byte_limit = Some(OUTPUT_BYTE_LIMIT);
        Ok((request, sandboxed.temp_dir))
    }
}

/// A terminal of the editor, killed and released when the call is dropped before it ended
/// (a cancelled turn), so no command outlives its call.
struct TerminalGuard {
    connection: ConnectionTo<Client>,
    session: acp::SessionId,
    id: Option<acp::TerminalId>,
}

impl TerminalGuard {
    /// Release the terminal now (its output has been read).
    async fn release(mut self) {
        if let Some(id) = self.id.take() {
            let request = acp::ReleaseTerminalRequest::new(self.session.clone(), id);
            if let Err(error) = ask(&self.connection, request).await {
                tracing::warn!(%error, "the editor's terminal could not be released");
            }
        }
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let connection = self.connection.clone();
        let session = self.session.clone();
        let spawned = self.connection.spawn(async move {
            let kill = acp::KillTerminalRequest::new(session.clone(), id.clone());
            let _ = connection.send_request(kill).block_task().await;
            let release = acp::ReleaseTerminalRequest::new(session, id);
            let _ = connection.send_request(release).block_task().await;
            Ok(())
        });
        if let Err(error) = spawned {
            tracing::warn!(%error, "an abandoned terminal of the editor could not be killed");
        }
    }
}

#[async_trait]
impl BaseTool for EditorRunCommand {
    delegate_to_builtin!();

    async fn watch_input(&self, input: StreamingInput) {
        self.builtin.watch_input(input).await;
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let input: RunCommandInput = serde_json::from_value(args)
            .map_err(|error| ToolError::InvalidArguments(TOOL.to_owned(), error.to_string()))?;
        let timeout = input
            .timeout_secs
            .map_or(DEFAULT_TIMEOUT, Duration::from_secs)
            .min(MAX_TIMEOUT);
        let (request, temp_dir) = self.create_request(&input.command)?;
        let created = ask(&self.connection, request).await.map_err(|error| {
            Self::failed(format!(
                "the editor could not start a terminal: {}",
                error.message
            ))
        })?;
        let terminal = TerminalGuard {
            connection: self.connection.clone(),
            session: self.session.clone(),
            id: Some(created.terminal_id.clone()),
        };
        // The card shows the editor's terminal, live.
        context::report(ToolCallUpdate::terminal(created.terminal_id.0.to_string()));
        let wait =
            acp::WaitForTerminalExitRequest::new(self.session.clone(), created.terminal_id.clone());
        let exited = tokio::time::timeout(timeout, ask(&self.connection, wait)).await;
        let (status, timed_out) = match exited {
            Ok(Ok(exited)) => (Some(exited.exit_status), false),
            Ok(Err(error)) => {
                return Err(Self::failed(format!(
                    "the editor's terminal failed: {}",
                    error.message
                )));
            }
            Err(_) => {
                let kill = acp::KillTerminalRequest::new(
                    self.session.clone(),
                    created.terminal_id.clone(),
                );
                let _ = ask(&self.connection, kill).await;
                (None, true)
            }
        };
        let output_request =
            acp::TerminalOutputRequest::new(self.session.clone(), created.terminal_id.clone());
        let output = ask(&self.connection, output_request)
            .await
            .map_err(|error| {
                Self::failed(format!("the editor's terminal output: {}", error.message))
            })?;
        terminal.release().await;
        drop(temp_dir);
        let status = status.or(output.exit_status);
        let output = RunCommandOutput {
            command: input.command,
            exit_code: status
                .as_ref()
                .and_then(|status| status.exit_code)
                .and_then(|code| i32::try_from(code).ok()),
            signal: if timed_out { Some(9) } else { None },
            timed_out,
            stdout: output.output,
            stderr: String::new(),
            truncated: output.truncated,
        };
        serde_json::to_value(&output).map_err(|error| Self::failed(error.to_string()))
    }
}
