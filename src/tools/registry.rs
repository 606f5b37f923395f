//! [`ToolRegistry`]: registers tools, offers their definitions to the model, and runs calls —
//! permission-checked, schema-validated, time-limited and panic-isolated.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::FutureExt;
use futures::stream::{self, StreamExt};
use indexmap::IndexMap;
use serde_json::Value;

use crate::llm::types::{ToolCall, ToolDefinition};
use crate::tools::base::BaseTool;
use crate::tools::error::ToolError;
use crate::tools::permission::PermissionChecker;

/// The record of one tool call: what was asked, what came back, and how long it took.
#[derive(Debug)]
pub struct ToolInvocation {
    /// The call id (`tool_call_id` on the wire; generated for calls without one).
    pub id: String,
    /// The tool name as requested.
    pub tool_name: String,
    /// The arguments (the raw text as a JSON string when it was not valid JSON).
    pub input: Value,
    /// The tool's full output, or why the call failed.
    pub output: Result<Value, ToolError>,
    /// Wall time from the start of the call (lookup included) to its end.
    pub duration: Duration,
}

impl ToolInvocation {
    /// Whether the call failed.
    pub fn is_error(&self) -> bool {
        self.output.is_err()
    }
}

/// The arguments of a call: parsed, or the raw JSON text the model sent.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolArguments {
    /// Already a JSON value.
    Value(Value),
    /// JSON text, parsed (and rejected with a clear error when invalid) by the registry.
    /// An empty text means `{}`.
    Json(String),
}

/// One requested call: id, tool name, arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    /// The call id.
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments.
    pub arguments: ToolArguments,
}

impl ToolCallRequest {
    /// A call with parsed arguments.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: ToolArguments::Value(arguments),
        }
    }
}

impl From<(String, Value)> for ToolCallRequest {
    /// The design's `(name, args)` pair; the id is generated.
    fn from((name, arguments): (String, Value)) -> Self {
        ToolCallRequest::new(generate_call_id(), name, arguments)
    }
}

impl From<(&str, Value)> for ToolCallRequest {
    fn from((name, arguments): (&str, Value)) -> Self {
        ToolCallRequest::new(generate_call_id(), name, arguments)
    }
}

impl From<&ToolCall> for ToolCallRequest {
    fn from(call: &ToolCall) -> Self {
        ToolCallRequest {
            id: call.id.clone(),
            name: call.function.name.clone(),
            arguments: ToolArguments::Json(call.function.arguments.clone()),
        }
    }
}

/// A unique call id (`call_` + 24 random alphanumerics), for calls that arrived without one.
pub fn generate_call_id() -> String {
    let mut id = String::with_capacity(29);
    id.push_str("call_");
    id.extend(std::iter::repeat_with(fastrand::alphanumeric).take(24));
    id
}

struct Entry {
    tool: Arc<dyn BaseTool>,
    validator: Option<jsonschema::Validator>,
}

/// Holds tools by name, in registration order, and runs calls.
///
/// ```
/// # use std::sync::Arc;
/// use agcore::tools::prelude::*;
/// use agcore::tools::{PermissionChecker, PermissionConfig};
///
/// # struct Echo;
/// # #[async_trait]
/// # impl BaseTool for Echo {
/// #     fn name(&self) -> &str { "echo" }
/// #     fn description(&self) -> &str { "Echo" }
/// #     fn parameters(&self) -> Value { json!({"type": "object"}) }
/// #     async fn execute(&self, args: Value) -> Result<Value, ToolError> { Ok(args) }
/// # }
/// # async fn demo() -> Result<(), ToolError> {
/// let mut registry = ToolRegistry::new()
///     .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
/// registry.register(Arc::new(Echo))?;
/// let invocation = registry.invoke("echo", json!({"x": 1})).await?;
/// assert_eq!(invocation.output?, json!({"x": 1}));
/// # Ok(()) }
/// ```
pub struct ToolRegistry {
    tools: IndexMap<String, Entry>,
    permission_checker: Option<Arc<PermissionChecker>>,
    default_timeout: Option<Duration>,
    concurrency_limit: Option<usize>,
}

impl Default for ToolRegistry {
    fn default() -> Self {
        Self::new()
    }
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.list_tools())
            .field("permission_checker", &self.permission_checker)
            .field("default_timeout", &self.default_timeout)
            .finish()
    }
}

impl ToolRegistry {
    /// An empty registry without a permission checker (every call is allowed).
    pub fn new() -> Self {
        ToolRegistry {
            tools: IndexMap::new(),
            permission_checker: None,
            default_timeout: None,
            concurrency_limit: None,
        }
    }

    /// Check permissions with `checker` before every call.
    pub fn with_permission_checker(self, checker: PermissionChecker) -> Self {
        self.with_shared_permission_checker(Arc::new(checker))
    }

    /// Check permissions with a checker shared with other registries.
    pub fn with_shared_permission_checker(mut self, checker: Arc<PermissionChecker>) -> Self {
        self.permission_checker = Some(checker);
        self
    }

    /// The permission checker, if any.
    pub fn permission_checker(&self) -> Option<&Arc<PermissionChecker>> {
        self.permission_checker.as_ref()
    }

    /// A timeout for every call of a tool that does not set its own ([`BaseTool::timeout`]).
    pub fn with_default_timeout(mut self, timeout: Duration) -> Self {
        self.default_timeout = Some(timeout);
        self
    }

    /// Run at most `limit` calls of one `invoke_all` at a time (default: all at once).
    pub fn with_concurrency_limit(mut self, limit: usize) -> Self {
        self.concurrency_limit = Some(limit.max(1));
        self
    }

    /// Register a tool. Fails on a duplicate name, a name the OpenAI wire format rejects, or
    /// a parameters schema that is not valid JSON Schema.
    pub fn register(&mut self, tool: Arc<dyn BaseTool>) -> Result<(), ToolError> {
        let name = tool.name().to_owned();
        validate_tool_name(&name)?;
        if self.tools.contains_key(&name) {
            return Err(ToolError::DuplicateName(name));
        }
        let validator = compile_schema(&name, &tool.parameters())?;
        self.tools.insert(name, Entry { tool, validator });
        Ok(())
    }

    /// Register several tools; stops at the first error (tools before it stay registered).
    pub fn register_all(&mut self, tools: Vec<Arc<dyn BaseTool>>) -> Result<(), ToolError> {
        tools.into_iter().try_for_each(|tool| self.register(tool))
    }

    /// Remove a tool; the order of the others is kept.
    pub fn unregister(&mut self, name: &str) -> Option<Arc<dyn BaseTool>> {
        self.tools.shift_remove(name).map(|entry| entry.tool)
    }

    /// The tool named `name`.
    pub fn get(&self, name: &str) -> Option<Arc<dyn BaseTool>> {
        self.tools.get(name).map(|entry| entry.tool.clone())
    }

    /// The names of all tools, in registration order.
    pub fn list_tools(&self) -> Vec<String> {
        self.tools.keys().cloned().collect()
    }

    /// All tools, in registration order.
    pub fn tools(&self) -> impl Iterator<Item = &Arc<dyn BaseTool>> {
        self.tools.values().map(|entry| &entry.tool)
    }

    /// How many tools are registered.
    pub fn len(&self) -> usize {
        self.tools.len()
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }

    /// The definitions of all tools, in registration order (stable, so prompts and prompt
    /// caches are reproducible).
    pub fn definitions(&self) -> Vec<ToolDefinition> {
        self.tools
            .values()
            .map(|entry| definition_of(entry.tool.as_ref()))
            .collect()
    }

    /// Run one call: look up → check permissions → validate the arguments → execute.
    ///
    /// Returns `Err` when the call could not start (unknown tool, permission denied, invalid
    /// arguments); `Ok` with the record once the tool ran — its `output` holds the tool's
    /// error, a timeout or a panic.
    pub async fn invoke(&self, name: &str, args: Value) -> Result<ToolInvocation, ToolError> {
        let started = Instant::now();
        let call = ToolCallRequest::new(generate_call_id(), name, args);
        let (input, entry) = self.prepare(&call)?;
        Ok(self
            .execute(call.id, call.name, input, entry, started)
            .await)
    }

    /// Run several calls concurrently (bounded by the concurrency limit); results come back
    /// in the order of `calls`, and one failing call does not stop the others.
    pub async fn invoke_all<I>(&self, calls: I) -> Vec<ToolInvocation>
    where
        I: IntoIterator,
        I::Item: Into<ToolCallRequest>,
    {
        let calls: Vec<ToolCallRequest> = calls.into_iter().map(Into::into).collect();
        let limit = self.concurrency_limit.unwrap_or(calls.len()).max(1);
        stream::iter(calls.into_iter().map(|call| self.invoke_call(call)))
            .buffered(limit)
            .collect()
            .await
    }

    /// Run one call and record every outcome, failures before execution included.
    pub async fn invoke_call(&self, call: ToolCallRequest) -> ToolInvocation {
        let started = Instant::now();
        match self.prepare(&call) {
            Ok((input, entry)) => {
                self.execute(call.id, call.name, input, entry, started)
                    .await
            }
            Err(error) => ToolInvocation {
                input: match call.arguments {
                    ToolArguments::Value(value) => value,
                    ToolArguments::Json(text) => {
                        parse_arguments(&text).unwrap_or(Value::String(text))
                    }
                },
                id: call.id,
                tool_name: call.name,
                output: Err(error),
                duration: started.elapsed(),
            },
        }
    }

    /// Everything before execution: lookup, permissions, argument parsing and validation.
    fn prepare(&self, call: &ToolCallRequest) -> Result<(Value, &Entry), ToolError> {
        let entry = self
            .tools
            .get(&call.name)
            .ok_or_else(|| not_found(&call.name, self.tools.keys()))?;
        if let Some(checker) = &self.permission_checker {
            checker.check(&call.name, &entry.tool.required_permissions())?;
        }
        let input = match &call.arguments {
            ToolArguments::Value(value) => value.clone(),
            ToolArguments::Json(text) => parse_arguments(text).map_err(|error| {
                ToolError::InvalidArguments(
                    call.name.clone(),
                    format!("the arguments are not valid JSON ({error}); send a JSON object matching the tool's parameters"),
                )
            })?,
        };
        if let Some(validator) = &entry.validator {
            validate(&call.name, validator, &input)?;
        }
        Ok((input, entry))
    }

    async fn execute(
        &self,
        id: String,
        tool_name: String,
        input: Value,
        entry: &Entry,
        started: Instant,
    ) -> ToolInvocation {
        let tool = &entry.tool;
        let run = AssertUnwindSafe(tool.execute(input.clone())).catch_unwind();
        let outcome = match tool.timeout().or(self.default_timeout) {
            Some(limit) => match tokio::time::timeout(limit, run).await {
                Ok(outcome) => outcome,
                Err(_) => Ok(Err(ToolError::Timeout {
                    tool: tool_name.clone(),
                    limit,
                })),
            },
            None => run.await,
        };
        let output = outcome.unwrap_or_else(|panic| {
            Err(ToolError::ExecutionFailed(
                tool_name.clone(),
                format!("the tool panicked: {}", panic_message(panic.as_ref())),
            ))
        });
        ToolInvocation {
            id,
            tool_name,
            input,
            output,
            duration: started.elapsed(),
        }
    }
}

/// The definition the model sees for `tool`.
pub fn definition_of(tool: &dyn BaseTool) -> ToolDefinition {
    ToolDefinition::function(tool.name(), tool.description(), tool.parameters())
}

/// Check a tool name against the OpenAI wire format: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn validate_tool_name(name: &str) -> Result<(), ToolError> {
    let reason = if name.is_empty() {
        Some("it is empty".to_owned())
    } else if name.len() > 64 {
        Some(format!(
            "it is {} characters long; the limit is 64",
            name.len()
        ))
    } else {
        name.chars()
            .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || *c == '-'))
            .map(|c| format!("'{c}' is not allowed; use letters, digits, '_' and '-'"))
    };
    match reason {
        Some(reason) => Err(ToolError::InvalidName {
            name: name.to_owned(),
            reason,
        }),
        None => Ok(()),
    }
}

/// Parse call arguments: empty text means `{}`.
fn parse_arguments(text: &str) -> Result<Value, serde_json::Error> {
    if text.trim().is_empty() {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str(text)
    }
}

fn compile_schema(name: &str, schema: &Value) -> Result<Option<jsonschema::Validator>, ToolError> {
    if schema.is_null() || schema.as_object().is_some_and(|o| o.is_empty()) {
        return Ok(None);
    }
    jsonschema::validator_for(schema)
        .map(Some)
        .map_err(|error| {
            ToolError::InvalidArguments(
                name.to_owned(),
                format!("the tool's parameters are not a valid JSON Schema: {error}"),
            )
        })
}

fn validate(name: &str, validator: &jsonschema::Validator, input: &Value) -> Result<(), ToolError> {
    let problems: Vec<String> = validator
        .iter_errors(input)
        .take(5)
        .map(|error| {
            let path = error.instance_path().to_string();
            let at = if path.is_empty() {
                "the arguments".to_owned()
            } else {
                format!("'{path}'")
            };
            format!("{at}: {error}")
        })
        .collect();
    if problems.is_empty() {
        Ok(())
    } else {
        Err(ToolError::InvalidArguments(
            name.to_owned(),
            problems.join("; "),
        ))
    }
}

fn not_found<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> ToolError {
    let _ = known;
    ToolError::NotFound(name.to_owned())
}

fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

// --- Used by the tool loop (src/llm/tool_loop.rs). ---
impl ToolRegistry {
    /// Run `calls` concurrently (bounded by the concurrency limit) and yield each result as it
    /// finishes, with its position in `calls`.
    pub fn invoke_stream(
        &self,
        calls: Vec<ToolCallRequest>,
    ) -> impl futures::Stream<Item = (usize, ToolInvocation)> + Send + '_ {
        let limit = self.concurrency_limit.unwrap_or(calls.len()).max(1);
        stream::iter(
            calls
                .into_iter()
                .enumerate()
                .map(|(position, call)| self.invoke_call(call).map(move |done| (position, done))),
        )
        .buffer_unordered(limit)
    }

    /// What the model reads for an invocation: the tool's view of its output, or an error
    /// text starting with `Error: `.
    pub fn model_content(&self, invocation: &ToolInvocation) -> String {
        match &invocation.output {
            Ok(output) => match self.tools.get(&invocation.tool_name) {
                Some(entry) => entry.tool.model_content(output),
                None => crate::tools::base::default_model_content(output),
            },
            Err(error) => format!("Error: {error}"),
        }
    }

    /// The definitions the loop sends: tools that pass every exposure gate.
    pub fn exposed_definitions(&self, provider: &str, model: &str) -> Vec<ToolDefinition> {
        self.tools
            .values()
            .filter(|entry| entry.tool.supports_provider(provider, model))
            .map(|entry| definition_of(entry.tool.as_ref()))
            .collect()
    }
}
