//! One tool call and its record: [`ToolCallRequest`] (what the model asked for) and
//! [`ToolInvocation`] (what happened).

use std::time::Duration;

use serde_json::Value;

use crate::tools::error::ToolError;
use crate::vocab::{ToolCall, is_blank_arguments};

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

impl ToolArguments {
    /// The arguments as a value: parsed JSON, or the raw text as a JSON string when it does not
    /// parse (so a record always shows what the model sent).
    pub fn into_value(self) -> Value {
        match self {
            ToolArguments::Value(value) => value,
            ToolArguments::Json(text) => parse_arguments(&text).unwrap_or(Value::String(text)),
        }
    }
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

    /// A call whose arguments are the JSON text a model sent.
    pub fn from_json(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCallRequest {
            id: id.into(),
            name: name.into(),
            arguments: ToolArguments::Json(arguments.into()),
        }
    }
}

impl From<(String, Value)> for ToolCallRequest {
    /// The design's `(name, args)` pair; the id is generated.
    fn from((name, arguments): (String, Value)) -> Self {
        ToolCallRequest::new(generate_call_id(), name, arguments)
    }
}

impl From<&ToolCall> for ToolCallRequest {
    /// A call as the model sent it; the arguments stay JSON text until the registry parses them.
    fn from(call: &ToolCall) -> Self {
        ToolCallRequest::from_json(
            call.id.clone(),
            call.function.name.clone(),
            call.function.arguments.clone(),
        )
    }
}

pub use crate::vocab::generate_call_id;

/// Parse call arguments: empty text means `{}`.
pub(crate) fn parse_arguments(text: &str) -> Result<Value, serde_json::Error> {
    if is_blank_arguments(text) {
        Ok(Value::Object(Default::default()))
    } else {
        serde_json::from_str(text)
    }
}

/// Parse call arguments for `tool`, with an error a model can act on.
pub(crate) fn parse_arguments_for(tool: &str, text: &str) -> Result<Value, ToolError> {
    parse_arguments(text).map_err(|error| {
        ToolError::InvalidArguments(
            tool.to_owned(),
            format!(
                "the arguments are not valid JSON ({error}); send one JSON object matching the tool's parameters"
            ),
        )
    })
}
