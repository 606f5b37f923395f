//! Elicitation: a server asks the user for input (`elicitation/create`, form or URL mode). The
//! question goes to the application's [`Elicitor`], as approvals go to an
//! [`Approver`](crate::tools::approval::Approver).
//!
//! Without an elicitor agcore does not declare the capability, and a server that asks anyway
//! is declined with a logged reason — never a silent accept. An accepted form is completed
//! with the schema's defaults for fields the answer left out (SEP-1034) and validated against
//! the requested schema; an answer that does not fit is declined (logged), not sent.

use async_trait::async_trait;
use serde::Serialize;
use serde_json::{Map, Value};

/// What the server asks for.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "mode", rename_all = "snake_case")]
pub enum ElicitationMode {
    /// Fill in a form: a flat JSON object schema of primitive fields.
    Form {
        /// The requested schema (`{"type": "object", "properties": {..}, "required": [..]}`).
        schema: Value,
    },
    /// Visit a URL (e.g. to sign in to a third party); nothing is sent back but the action.
    Url {
        /// The URL the user should open.
        url: String,
        /// The server's id for this elicitation.
        elicitation_id: String,
    },
}

/// One `elicitation/create` request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ElicitationRequest {
    /// The agcore name of the server asking.
    pub server: String,
    /// The server's message to the user (untrusted text: sanitise before display).
    pub message: String,
    /// Form or URL.
    pub mode: ElicitationMode,
}

/// The user's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum ElicitationResponse {
    /// The user answered: the form's values (fields left out get the schema's defaults); empty
    /// for URL mode.
    Accept {
        /// The values by field name.
        content: Map<String, Value>,
    },
    /// The user refused to answer; the operation goes on without the input.
    Decline,
    /// The user dismissed the question; the operation should stop.
    Cancel,
}

/// Answers servers' elicitation requests (a terminal prompt, a UI, a policy).
///
/// ```
/// use agcore::tools::mcp::{ElicitationRequest, ElicitationResponse, Elicitor};
///
/// /// Accepts every form with the schema's defaults.
/// struct Defaults;
///
/// #[async_trait::async_trait]
/// impl Elicitor for Defaults {
///     async fn elicit(&self, _request: &ElicitationRequest) -> ElicitationResponse {
///         ElicitationResponse::Accept { content: Default::default() }
///     }
/// }
/// ```
#[async_trait]
pub trait Elicitor: Send + Sync {
    /// Ask the user; return their answer.
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse;

    /// Whether URL mode is supported (declared to the server); form mode always is.
    fn supports_url(&self) -> bool {
        true
    }

    /// Whether this elicitor stands for a person who cannot be asked now but later: a question
    /// inside a multi-round-trip `tools/call`, or a task's own question, is then not asked (a
    /// task is left waiting on the server); the call fails with
    /// [`ToolError::InputDeferred`](crate::tools::ToolError::InputDeferred), which suspends a
    /// run that can wait (its state keeps the server's `requestState`, and the resumed run
    /// asks the elicitor it has then). A question the server asks with a request of its own
    /// (older protocols) cannot wait: [`Elicitor::elicit`] answers it.
    fn defers(&self) -> bool {
        false
    }
}

/// Nobody can answer now, but a stored run can wait ([`Elicitor::defers`]): a question inside
/// a `tools/call` suspends the run; one the server asks with a request of its own is declined.
#[derive(Debug, Clone, Copy, Default)]
pub struct DeferElicitation;

#[async_trait]
impl Elicitor for DeferElicitation {
    async fn elicit(&self, _request: &ElicitationRequest) -> ElicitationResponse {
        ElicitationResponse::Decline
    }

    /// A URL question inside a call waits like a form, its URL shown for a person to open by
    /// hand later (nothing opens it); one the server asks with a request of its own is declined.
    fn supports_url(&self) -> bool {
        true
    }

    fn defers(&self) -> bool {
        true
    }
}

/// `content` with every schema property that has a `default` and is absent filled in.
pub fn apply_schema_defaults(schema: &Value, content: &mut Map<String, Value>) {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return;
    };
    for (name, property) in properties {
        if content.contains_key(name) {
            continue;
        }
        if let Some(default) = property.get("default") {
            content.insert(name.clone(), default.clone());
        }
    }
}

/// Check `content` against the requested schema; the first problem, in words.
pub fn validate_elicited(schema: &Value, content: &Map<String, Value>) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema)
        .map_err(|error| format!("the requested schema does not compile: {error}"))?;
    let instance = Value::Object(content.clone());
    match validator.iter_errors(&instance).next() {
        None => Ok(()),
        Some(error) => Err(format!("{error} (at '{}')", error.instance_path().as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_only_absent_fields() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John"},
            "age": {"type": "integer", "default": 30},
            "bare": {"type": "string"}
        }});
        let mut content = Map::new();
        content.insert("age".into(), json!(41));
        apply_schema_defaults(&schema, &mut content);
        assert_eq!(Value::Object(content), json!({"name": "John", "age": 41}));
    }

    #[test]
    fn validation_names_the_problem() {
        let schema = json!({"type": "object", "properties": {"age": {"type": "integer"}},
            "required": ["age"]});
        let mut content = Map::new();
        assert!(validate_elicited(&schema, &content).is_err());
        content.insert("age".into(), json!("old"));
        assert!(validate_elicited(&schema, &content).is_err());
        content.insert("age".into(), json!(3));
        assert_eq!(validate_elicited(&schema, &content), Ok(()));
    }
}
