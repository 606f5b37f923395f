//! [`BaseTool`]: the interface every tool implements — your own, typed ([`crate::tools::Tool`]),
//! built-in, or an MCP server's.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::capability::Permission;
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::media::ToolMedia;
pub use crate::tools::source::ToolSource;
use crate::tools::streaming::StreamingInput;

/// A tool the model can call.
///
/// The first five methods are the design's; the rest have defaults and tell agcore more about
/// the tool (kind, title, how its output reads to the model, where it comes from, which gates
/// apply). Most tools only implement the first five — or use the typed [`crate::tools::Tool`].
///
/// ```
/// use agcore::tools::prelude::*;
///
/// struct Echo;
///
/// #[async_trait]
/// impl BaseTool for Echo {
///     fn name(&self) -> &str { "echo" }
///     fn description(&self) -> &str { "Echo the text back" }
///     fn parameters(&self) -> Value {
///         json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
///     }
///     async fn execute(&self, args: Value) -> Result<Value, ToolError> {
///         Ok(args["text"].clone())
///     }
/// }
/// ```
#[async_trait]
pub trait BaseTool: Send + Sync {
    /// The tool's unique name, matched against `tool_calls[].function.name`.
    fn name(&self) -> &str;

    /// What the tool does; the model decides from this whether to call it.
    fn description(&self) -> &str;

    /// The JSON Schema of the arguments (sent as the tool's `parameters`).
    fn parameters(&self) -> Value;

    /// The description as it is now, which the model is sent. The default is
    /// [`description`](Self::description); a tool whose description can change while it is
    /// registered (an MCP server's, after `notifications/tools/list_changed`) returns the
    /// current one.
    fn current_description(&self) -> std::borrow::Cow<'_, str> {
        std::borrow::Cow::Borrowed(self.description())
    }

    /// The permissions the tool needs; checked before every call.
    fn required_permissions(&self) -> Vec<Permission> {
        Vec::new()
    }

    /// Whether [`BaseTool::required_permissions`] is a worst-case guess rather than what the
    /// tool declares: an MCP tool whose server says nothing about what it does (no
    /// `readOnlyHint` nor `destructiveHint`). A registry whose [`ApprovalPolicy`] says
    /// [`UnannotatedTools::Ask`] offers such a tool and asks before each call instead of
    /// refusing the guessed permissions. By default: false (the permissions are declared).
    ///
    /// [`ApprovalPolicy`]: crate::tools::approval::ApprovalPolicy
    /// [`UnannotatedTools::Ask`]: crate::tools::approval::UnannotatedTools::Ask
    fn permissions_assumed(&self) -> bool {
        false
    }

    /// Run the tool with the (already validated) arguments.
    async fn execute(&self, args: Value) -> Result<Value, ToolError>;

    /// What the tool does, for UIs and exposure profiles.
    fn kind(&self) -> ToolKind {
        ToolKind::Other
    }

    /// A short human title for one call, computed from its (possibly partial or invalid) input,
    /// e.g. `Read src/main.rs`. Never fails.
    fn title(&self, _input: &Value) -> String {
        self.name().to_owned()
    }

    /// How an output reads to the model: a JSON string as its text, anything else as compact
    /// JSON. The caller always sees the full `Value`.
    fn model_content(&self, output: &Value) -> String {
        default_model_content(output)
    }

    /// The images and audio in an output, passed to the model beside its text (as image parts
    /// when the model accepts images, else named in a note). None by default; MCP tools report
    /// their content blocks'.
    fn media(&self, _output: &Value) -> Vec<ToolMedia> {
        Vec::new()
    }

    /// [`BaseTool::execute`] and [`BaseTool::model_content`] in one go: the output and what
    /// the model reads of it. The registry runs calls through this. The default runs one,
    /// then the other; a typed tool renders from its typed output before it becomes JSON, so
    /// nothing is deserialised a second time.
    async fn execute_rendered(&self, args: Value) -> Result<(Value, String), ToolError> {
        let output = self.execute(args).await?;
        let text = self.model_content(&output);
        Ok((output, text))
    }

    /// Where the tool comes from.
    fn source(&self) -> ToolSource {
        ToolSource::Local
    }

    /// Feature flags that must all be enabled for the tool to be offered.
    fn required_flags(&self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the tool works with this provider (`"openai"`, `"ollama"`, ...) and model.
    fn supports_provider(&self, _provider: &str, _model: &str) -> bool {
        true
    }

    /// Whether the tool may be offered and run in restricted mode (untrusted workspace). By
    /// default: unless it needs `Network` or `Shell`.
    fn allow_in_restricted_mode(&self) -> bool {
        !self
            .required_permissions()
            .iter()
            .any(|p| matches!(p, Permission::Network | Permission::Shell))
    }

    /// A timeout for one call, overriding the registry's default.
    fn timeout(&self) -> Option<Duration> {
        None
    }

    /// Whether running a call twice has the same effect as running it once (a read, a lookup,
    /// a write of fixed content). A run resumed after a crash runs a call that had started
    /// but not finished again only for such a tool; any other is answered as interrupted,
    /// since whether it had its effect is unknown. By default: not idempotent.
    fn idempotent(&self) -> bool {
        false
    }

    /// What `argument` holds, so that rules on arguments ([`crate::tools::rules`]) judge what
    /// the tool will act on: e.g. [`ArgumentKind::ShellCommand`] for a command line, which
    /// rules then judge by the commands it runs rather than by its text. By default: plain
    /// text.
    fn argument_kind(&self, _argument: &str) -> ArgumentKind {
        ArgumentKind::Text
    }

    /// The value the tool will act on for `argument` = `value`, when that differs from what
    /// the model wrote — e.g. a path resolved in the workspace (`sub/../a.txt` → `a.txt`).
    /// Rules on arguments match it ([`ArgumentKind::Path`]). `None` (the default): the kind's
    /// own normalisation ([`ArgumentKind::normalize`]).
    fn normalize_argument(&self, _argument: &str, _value: &Value) -> Option<String> {
        None
    }

    /// Whether the tool wants a call's input while the model is still streaming it
    /// ([`BaseTool::watch_input`]). By default: no.
    fn supports_input_streaming(&self) -> bool {
        false
    }

    /// Watch a call's input as the model streams it: partial values, then — only once the call
    /// passed validation, permissions, rules and approval — the final one. Runs on its own
    /// task inside the call's [`crate::tools::ToolContext`], beside the model's stream, and is
    /// aborted when the call ends. Use it to prepare and to report (a title, a diff that grows),
    /// never to act: the action belongs in [`BaseTool::execute`], which runs after the gates
    /// (see [`crate::tools::streaming`] for why a watcher cannot act too early). Called only
    /// when [`BaseTool::supports_input_streaming`] says so. By default: nothing.
    async fn watch_input(&self, input: StreamingInput) {
        drop(input);
    }
}

/// The default model view of a tool output: a JSON string as its text, anything else as
/// compact JSON.
pub fn default_model_content(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}
