//! `[hooks]` in agcore.toml: commands run at the points of a run. Each gets one JSON event on
//! stdin and may answer one JSON object on stdout, within the timeout (the Claude Code and
//! Codex convention). Hooks are code, so they come only from a trusted config file: the user's
//! own, `--config FILE`, or a workspace file recorded by `agcore trust` (an untrusted
//! workspace file is not read at all, see `layers.rs`).
//!
//! ```toml
//! [hooks]
//! timeout_ms = 5000
//! [[hooks.before_tool_call]]
//! command = ["python3", "/home/me/guard.py"]
//! tools = ["run_command"]                 # only these tools (default: every tool)
//! [[hooks.after_tool_call]]
//! command = ["/home/me/redact"]
//! ```
//!
//! | event | stdin | stdout (optional) |
//! |---|---|---|
//! | `before_model_request` | `model`, `messages` | `{"messages": [...]}` replaces what is sent |
//! | `after_model_response` | `message`, `finish_reason`, `usage` | ignored |
//! | `before_tool_call` | `tool`, `call_id`, `arguments` | `{"decision": "allow"}`, `{"decision": "deny", "reason": "..."}`, `{"decision": "rewrite", "arguments": {...}}` |
//! | `after_tool_call` | `tool`, `call_id`, `arguments`, `output`, `is_error` | `{"output": "..."}` replaces what the model reads |
//! | `on_error` | `kind`, `message` | ignored |
//!
//! Empty stdout is "no change" (allow). Exit status 2 denies a tool call with stderr as the
//! reason; any other failure (another status, stdout that is not the JSON above, the
//! timeout) is reported on stderr and, before a tool call, denies it.

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use agcore::llm::{ChatResponse, LlmError, ToolCall};
use agcore::run::hooks::{Compaction, HookChain, HookRequest, Hooks, ToolCallDecision};
use agcore::vocab::ToolAnswer;
use async_trait::async_trait;
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The most of a hook's stdout or stderr that is read.
const MAX_OUTPUT: u64 = 1024 * 1024;

/// `[hooks]`.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HooksSection {
    /// The time one command may take per event, in milliseconds (default 10 000).
    pub timeout_ms: Option<u64>,
    /// Run before each model request.
    #[serde(default)]
    pub before_model_request: Vec<HookCommand>,
    /// Run after each model reply.
    #[serde(default)]
    pub after_model_response: Vec<HookCommand>,
    /// Run before each tool call.
    #[serde(default)]
    pub before_tool_call: Vec<HookCommand>,
    /// Run after each tool call.
    #[serde(default)]
    pub after_tool_call: Vec<HookCommand>,
    /// Run after each compaction of the history (told, not asked).
    #[serde(default)]
    pub on_compaction: Vec<HookCommand>,
    /// Run when a run fails.
    #[serde(default)]
    pub on_error: Vec<HookCommand>,
}

impl HooksSection {
    /// Every command with the name of its event, in the order they run.
    pub fn commands(&self) -> impl Iterator<Item = (&'static str, &HookCommand)> {
        [
            ("before_model_request", &self.before_model_request),
            ("after_model_response", &self.after_model_response),
            ("before_tool_call", &self.before_tool_call),
            ("after_tool_call", &self.after_tool_call),
            ("on_compaction", &self.on_compaction),
            ("on_error", &self.on_error),
        ]
        .into_iter()
        .flat_map(|(event, commands)| commands.iter().map(move |command| (event, command)))
    }
}

/// One hook command.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookCommand {
    /// The program and its arguments (not a shell line).
    pub command: Vec<String>,
    /// For tool-call events: the tools it applies to (default: every tool).
    #[serde(default)]
    pub tools: Vec<String>,
    /// The OS sandbox it runs in, e.g. `{ mode = "read-only" }` (default: `workspace-write`
    /// in the current directory with the network on, as stdio MCP servers).
    #[serde(default)]
    pub sandbox: Option<agcore::tools::sandbox::SandboxPolicy>,
}

/// Which event a [`CommandHook`] runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Event {
    BeforeModelRequest,
    AfterModelResponse,
    BeforeToolCall,
    AfterToolCall,
    OnCompaction,
    OnError,
}

/// The chain of `section`'s commands, in the order of the file, per event. In restricted mode
/// (`restricted`) every command runs `read-only` with the network off, whatever its own
/// `sandbox` says.
pub fn chain(section: &HooksSection, restricted: bool) -> HookChain {
    let mut chain =
        HookChain::new().with_timeout(Duration::from_millis(section.timeout_ms.unwrap_or(10_000)));
    for (event, commands) in [
        (Event::BeforeModelRequest, &section.before_model_request),
        (Event::AfterModelResponse, &section.after_model_response),
        (Event::BeforeToolCall, &section.before_tool_call),
        (Event::AfterToolCall, &section.after_tool_call),
        (Event::OnCompaction, &section.on_compaction),
        (Event::OnError, &section.on_error),
    ] {
        for command in commands.iter().filter(|c| !c.command.is_empty()) {
            chain.push(Arc::new(CommandHook::new(
                event,
                command.clone(),
                restricted,
            )));
        }
    }
    chain
}

/// A command run on one event.
struct CommandHook {
    event: Event,
    command: HookCommand,
    name: String,
    /// Restricted mode: the sandbox is `read-only`, network off, whatever the command says.
    restricted: bool,
}

/// A hook command's process group (its id is the command's pid); killed when dropped, so a
/// timed-out hook leaves nothing behind either. Killed once: afterwards the id may be reused.
struct ProcessGroup(std::sync::Mutex<Option<u32>>);

impl ProcessGroup {
    fn new(id: Option<u32>) -> Self {
        ProcessGroup(std::sync::Mutex::new(id))
    }

    /// SIGKILL to every process left in the group (none left is fine).
    fn kill(&self) {
        let id = self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
        #[cfg(unix)]
        if let Some(id) = id.and_then(|id| i32::try_from(id).ok()) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(id),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        #[cfg(not(unix))]
        let _ = id;
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// How a command ended.
enum Ran {
    /// Exit 0: its stdout (possibly empty).
    Answered(Vec<u8>),
    /// Exit 2: deny, with its stderr.
    Denied(String),
    /// Anything else, said as text.
    Failed(String),
}

impl CommandHook {
    fn new(event: Event, command: HookCommand, restricted: bool) -> Self {
        // The whole command line names it: `python3` alone would not say which hook.
        let name = command.command.join(" ");
        CommandHook {
            event,
            command,
            name,
            restricted,
        }
    }

    /// The hook's program under its sandbox, with the current directory as the workspace.
    fn sandboxed(&self) -> anyhow::Result<agcore::tools::sandbox::SandboxedCommand> {
        use agcore::tools::sandbox::{Sandbox, SandboxPolicy};
        let policy = self
            .command
            .sandbox
            .clone()
            .unwrap_or_else(SandboxPolicy::for_mcp_servers)
            .restricted(self.restricted);
        let workspace = std::env::current_dir()?;
        Ok(Sandbox::new(policy)
            .with_helper(crate::sandbox_cmd::helper()?)
            .command(&workspace, &self.command.command[0])?)
    }

    fn applies_to(&self, tool: &str) -> bool {
        self.command.tools.is_empty() || self.command.tools.iter().any(|t| t == tool)
    }

    /// Run the command with `input` on stdin, in a process group of its own: when the command
    /// ends (or the hook chain's timeout drops this future) the whole group is killed, so a
    /// child it left in the background does not outlive the hook (nor hold its stdout open).
    async fn run(&self, input: Value) -> Ran {
        // Refused, not run unsandboxed, where the kernel cannot enforce the policy.
        let sandboxed = match self.sandboxed() {
            Ok(sandboxed) => sandboxed,
            Err(error) => return Ran::Failed(format!("could not start it: {error:#}")),
        };
        let _temp_dir = sandboxed.temp_dir;
        let mut command = tokio::process::Command::from(sandboxed.command);
        command
            .args(&self.command.command[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        #[cfg(unix)]
        command.process_group(0);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(error) => return Ran::Failed(format!("could not start it: {error}")),
        };
        let group = ProcessGroup::new(child.id());
        if let Some(mut stdin) = child.stdin.take() {
            // A hook that does not read its input is fine: a broken pipe is not a failure.
            let _ = stdin.write_all(input.to_string().as_bytes()).await;
        }
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let (out, err) = (child.stdout.take(), child.stderr.take());
        let read_out = async {
            if let Some(out) = out {
                let _ = out.take(MAX_OUTPUT).read_to_end(&mut stdout).await;
            }
        };
        let read_err = async {
            if let Some(err) = err {
                let _ = err.take(MAX_OUTPUT).read_to_end(&mut stderr).await;
            }
        };
        // Once the command itself has exited, what is left of its group goes: that also closes
        // the pipes a background child inherited, so the reads end.
        let exited = async {
            let status = child.wait().await;
            group.kill();
            status
        };
        let ((), (), status) = tokio::join!(read_out, read_err, exited);
        let status = match status {
            Ok(status) => status,
            Err(error) => return Ran::Failed(format!("could not wait for it: {error}")),
        };
        let stderr = String::from_utf8_lossy(&stderr).trim().to_owned();
        match status.code() {
            Some(0) => Ran::Answered(stdout),
            Some(2) => Ran::Denied(stderr),
            _ => Ran::Failed(format!("it exited with {status}: {stderr}")),
        }
    }

    /// Run for an event whose answer is ignored; report failures.
    async fn notify(&self, event: &str, input: Value) {
        if let Ran::Failed(reason) | Ran::Denied(reason) = self.run(input).await {
            self.report(event, &reason);
        }
    }

    /// Run and parse a JSON object answer; `None` for empty stdout, reported failures.
    async fn ask(&self, event: &str, input: Value) -> Result<Option<Value>, String> {
        match self.run(input).await {
            Ran::Answered(stdout) if stdout.iter().all(u8::is_ascii_whitespace) => Ok(None),
            Ran::Answered(stdout) => match serde_json::from_slice::<Value>(&stdout) {
                Ok(value @ Value::Object(_)) => Ok(Some(value)),
                _ => Err(self.report(event, "its stdout is not a JSON object")),
            },
            Ran::Denied(reason) => Err(reason),
            Ran::Failed(reason) => Err(self.report(event, &reason)),
        }
    }

    fn report(&self, event: &str, reason: &str) -> String {
        let text = format!("hook command {} failed on {event}: {reason}", self.name);
        eprintln!("warning: {}", agcore::display::escape_for_terminal(&text));
        text
    }
}

#[async_trait]
impl Hooks for CommandHook {
    fn name(&self) -> &str {
        &self.name
    }

    async fn before_model_request(&self, request: &mut HookRequest) {
        if self.event != Event::BeforeModelRequest {
            return;
        }
        let input = json!({"event": "before_model_request", "model": request.model, "messages": request.messages});
        if let Ok(Some(answer)) = self.ask("before_model_request", input).await
            && let Some(messages) = answer.get("messages")
        {
            match serde_json::from_value(messages.clone()) {
                Ok(messages) => request.messages = messages,
                Err(error) => {
                    self.report("before_model_request", &format!("its messages: {error}"));
                }
            }
        }
    }

    async fn after_model_response(&self, reply: &ChatResponse) {
        if self.event == Event::AfterModelResponse {
            let input = json!({"event": "after_model_response", "message": reply.message,
                "finish_reason": reply.stop_reason, "usage": reply.usage});
            self.notify("after_model_response", input).await;
        }
    }

    async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
        if self.event != Event::BeforeToolCall || !self.applies_to(&call.function.name) {
            return ToolCallDecision::Allow;
        }
        let input = json!({"event": "before_tool_call", "tool": call.function.name,
            "call_id": call.id, "arguments": arguments(call)});
        let answer = match self.ask("before_tool_call", input).await {
            Ok(None) => return ToolCallDecision::Allow,
            Ok(Some(answer)) => answer,
            Err(reason) => return ToolCallDecision::deny(reason),
        };
        match answer.get("decision").and_then(Value::as_str) {
            None | Some("allow") => ToolCallDecision::Allow,
            Some("deny") => ToolCallDecision::deny(
                answer
                    .get("reason")
                    .and_then(Value::as_str)
                    .unwrap_or("denied by a hook"),
            ),
            Some("rewrite") => match answer.get("arguments") {
                Some(arguments) => ToolCallDecision::Rewrite {
                    arguments: arguments.clone(),
                },
                None => ToolCallDecision::deny(
                    self.report("before_tool_call", "a rewrite without arguments"),
                ),
            },
            Some(other) => ToolCallDecision::deny(
                self.report("before_tool_call", &format!("unknown decision {other:?}")),
            ),
        }
    }

    async fn after_tool_call(&self, call: &ToolCall, answer: &mut ToolAnswer) {
        if self.event != Event::AfterToolCall || !self.applies_to(&call.function.name) {
            return;
        }
        let input = json!({"event": "after_tool_call", "tool": call.function.name,
            "call_id": call.id, "arguments": arguments(call),
            "output": answer.content, "is_error": answer.is_error});
        if let Ok(Some(rewritten)) = self.ask("after_tool_call", input).await
            && let Some(output) = rewritten.get("output").and_then(Value::as_str)
        {
            answer.content = output.to_owned();
        }
    }

    async fn on_compaction(&self, compaction: &Compaction) {
        if self.event == Event::OnCompaction {
            let input = json!({"event": "on_compaction", "tier": compaction.tier.number(),
                "tokens_before": compaction.tokens_before, "tokens_after": compaction.tokens_after,
                "messages": compaction.messages, "window": compaction.window});
            self.notify("on_compaction", input).await;
        }
    }

    async fn on_error(&self, error: &LlmError) {
        if self.event == Event::OnError {
            let input =
                json!({"event": "on_error", "kind": error.kind(), "message": error.to_string()});
            self.notify("on_error", input).await;
        }
    }
}

/// The call's arguments as JSON (their text as a string when they are not JSON).
fn arguments(call: &ToolCall) -> Value {
    serde_json::from_str(&call.function.arguments)
        .unwrap_or_else(|_| Value::String(call.function.arguments.clone()))
}

#[cfg(test)]
mod tests {
    use crate::config::AgcoreConfig;

    #[test]
    fn hooks_parse_in_file_order_and_unknown_keys_are_errors() {
        let config = AgcoreConfig::parse(
            "[hooks]\ntimeout_ms = 100\n[[hooks.before_tool_call]]\ncommand = [\"a\"]\n\
             [[hooks.before_tool_call]]\ncommand = [\"b\", \"--x\"]\ntools = [\"run_command\"]\n\
             [[hooks.on_error]]\ncommand = [\"c\"]\n",
        )
        .unwrap();
        let commands: Vec<(&str, String)> = config
            .hooks
            .commands()
            .map(|(event, command)| (event, command.command.join(" ")))
            .collect();
        assert_eq!(
            commands,
            [
                ("before_tool_call", "a".to_owned()),
                ("before_tool_call", "b --x".to_owned()),
                ("on_error", "c".to_owned())
            ]
        );
        assert!(!super::chain(&config.hooks, false).is_empty());
        assert!(AgcoreConfig::parse("[[hooks.before_tool]]\ncommand = [\"a\"]\n").is_err());
        assert!(AgcoreConfig::parse("[[hooks.on_error]]\ncmd = [\"a\"]\n").is_err());
    }
}
