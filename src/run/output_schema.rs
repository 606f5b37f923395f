//! [`OutputSchema`]: the JSON Schema a typed run's final answer must match — from a Rust type
//! or from JSON — in the three forms the modes need (a `response_format`, a final-answer tool,
//! a prompt), and the checks an answer goes through.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

use crate::tools::error::ToolError;
use crate::tools::typed::one_of_to_any_of;
use crate::tools::validate::{compile_schema, validate_arguments};
use crate::vocab::ToolDefinition;

/// The schema of a typed run's final answer.
///
/// The model always sees an object at the root (what `response_format` and tool parameters
/// require): a schema whose root is not an object (an array, an enum, a number) is wrapped as
/// `{"value": <schema>}` and the answer unwrapped again.
///
/// ```
/// use agcore::run::OutputSchema;
/// use serde_json::json;
///
/// let schema = OutputSchema::from_json(
///     "city",
///     json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}),
/// )?;
/// assert_eq!(schema.check(&json!({"name": "Paris"}))?, json!({"name": "Paris"}));
/// assert!(schema.check(&json!({"name": 3})).is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct OutputSchema {
    name: String,
    description: Option<String>,
    /// The schema the model sees (an object at the root).
    schema: Value,
    /// Whether `schema` wraps the caller's schema as `{"value": ...}`.
    wrapped: bool,
    validator: Option<jsonschema::Validator>,
}

/// An [`OutputSchema`] as data (serde): what a suspended typed run keeps in its state, so it
/// resumes checking the same schema in any process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedSchema {
    /// The name.
    pub name: String,
    /// The description (from a type's doc comment), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The schema the model sees (an object at the root).
    pub schema: Value,
    /// Whether `schema` wraps the caller's as `{"value": ...}`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wrapped: bool,
}

/// Why a schema could not be used for typed output.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the output schema '{name}' cannot be used: {reason}")]
pub struct SchemaError {
    /// The schema's name.
    pub name: String,
    /// What is wrong with it.
    pub reason: String,
}

impl OutputSchema {
    /// The schema of `T`, named after the type; its doc comment becomes the description.
    pub fn of<T: schemars::JsonSchema>() -> Result<Self, SchemaError> {
        let settings = schemars::generate::SchemaSettings::draft2020_12().with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        });
        let mut schema = settings
            .into_generator()
            .into_root_schema_for::<T>()
            .to_value();
        one_of_to_any_of(&mut schema);
        let mut description = None;
        if let Some(object) = schema.as_object_mut() {
            object.remove("title");
            description = object
                .remove("description")
                .and_then(|d| d.as_str().map(str::to_owned));
        }
        let mut output = OutputSchema::from_json(T::schema_name(), schema)?;
        output.description = description;
        Ok(output)
    }

    /// A schema given as JSON (e.g. read from a file); `name` is cut to the characters and
    /// length a `response_format` name allows.
    pub fn from_json(name: impl AsRef<str>, schema: Value) -> Result<Self, SchemaError> {
        let name = schema_name(name.as_ref());
        let mut schema = schema;
        if let Some(object) = schema.as_object_mut() {
            object.remove("$schema");
        }
        let wrapped = !is_object_schema(&schema);
        if wrapped {
            schema = wrap(schema);
        }
        let validator = compile_schema(&name, &schema).map_err(|error| SchemaError {
            name: name.clone(),
            reason: match error {
                ToolError::InvalidSchema { reason, .. } => reason,
                other => other.to_string(),
            },
        })?;
        Ok(OutputSchema {
            name,
            description: None,
            schema,
            wrapped,
            validator,
        })
    }

    /// The name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The schema the model sees.
    pub fn schema(&self) -> &Value {
        &self.schema
    }

    /// Check an answer against the schema; returns the answer (unwrapped when the schema was
    /// wrapped). The error names each field that is wrong (at most five).
    pub fn check(&self, answer: &Value) -> Result<Value, String> {
        if let Some(validator) = &self.validator {
            validate_arguments(&self.name, validator, answer).map_err(|error| match error {
                ToolError::InvalidArguments(_, problems) => problems,
                other => other.to_string(),
            })?;
        }
        if self.wrapped {
            return answer
                .get("value")
                .cloned()
                .ok_or_else(|| "the answer has no field `value`".to_owned());
        }
        Ok(answer.clone())
    }

    /// `response_format` for native mode: `{"type": "json_schema", "json_schema": {...,
    /// "strict": true}}`, the schema made strict (see [`strict_schema`]).
    pub fn response_format(&self) -> Value {
        let mut json_schema = json!({
            "name": self.name,
            "schema": strict_schema(self.schema.clone()),
            "strict": true,
        });
        if let Some(description) = &self.description {
            json_schema["description"] = json!(description);
        }
        json!({"type": "json_schema", "json_schema": json_schema})
    }

    /// The final-answer tool for tool mode: its parameters are the schema.
    pub fn tool_definition(&self, tool_name: &str) -> ToolDefinition {
        let mut description = String::from(
            "Give your final answer: its arguments are the answer. Call it once, when you are \
             done — after any other tool calls you need; the run ends with it.",
        );
        if let Some(about) = &self.description {
            description.push_str(" The answer: ");
            description.push_str(about);
        }
        ToolDefinition::function(tool_name, description, self.schema.clone())
    }

    /// The schema as data, to keep with a run's state ([`crate::run::TypedRun`]).
    pub fn saved(&self) -> SavedSchema {
        SavedSchema {
            name: self.name.clone(),
            description: self.description.clone(),
            schema: self.schema.clone(),
            wrapped: self.wrapped,
        }
    }

    /// The schema [`OutputSchema::saved`] kept, compiled again.
    pub fn from_saved(saved: SavedSchema) -> Result<Self, SchemaError> {
        let validator =
            compile_schema(&saved.name, &saved.schema).map_err(|error| SchemaError {
                name: saved.name.clone(),
                reason: error.to_string(),
            })?;
        Ok(OutputSchema {
            name: saved.name,
            description: saved.description,
            schema: saved.schema,
            wrapped: saved.wrapped,
            validator,
        })
    }

    /// The instruction prompted mode appends to the prompt.
    pub fn prompt_instruction(&self) -> String {
        format!(
            "Give your final answer as one JSON value matching this JSON Schema, and nothing \
             else:\n{}",
            self.schema
        )
    }
}

/// `schema` as OpenAI's strict structured outputs require it: every object schema with
/// properties lists all of them as required and allows no others. A field that was optional
/// becomes required (a nullable field can still be `null`).
pub fn strict_schema(mut schema: Value) -> Value {
    make_strict(&mut schema);
    schema
}

fn make_strict(schema: &mut Value) {
    match schema {
        Value::Object(object) => {
            if let Some(Value::Object(properties)) = object.get("properties") {
                let required: Vec<Value> = properties.keys().cloned().map(Value::String).collect();
                object.insert("required".to_owned(), Value::Array(required));
                object
                    .entry("additionalProperties")
                    .or_insert(Value::Bool(false));
            }
            for value in object.values_mut() {
                make_strict(value);
            }
        }
        Value::Array(list) => list.iter_mut().for_each(make_strict),
        _ => {}
    }
}

fn is_object_schema(schema: &Value) -> bool {
    schema.get("type").and_then(Value::as_str) == Some("object")
        || (schema.get("type").is_none() && schema.get("properties").is_some())
}

/// `{"type": "object", "properties": {"value": schema}, "required": ["value"]}`; the
/// definitions move to the new root, where their `$ref`s point.
fn wrap(mut schema: Value) -> Value {
    let mut root = Map::new();
    root.insert("type".to_owned(), json!("object"));
    if let Some(object) = schema.as_object_mut() {
        for key in ["$defs", "definitions"] {
            if let Some(defs) = object.remove(key) {
                root.insert(key.to_owned(), defs);
            }
        }
    }
    root.insert("properties".to_owned(), json!({ "value": schema }));
    root.insert("required".to_owned(), json!(["value"]));
    Value::Object(root)
}

/// `name` with every character outside `[a-zA-Z0-9_-]` replaced by `_`, at most 64
/// characters, `output` when nothing is left.
fn schema_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if cleaned.is_empty() {
        "output".to_owned()
    } else {
        cleaned
    }
}

/// The JSON value in a reply's text: the whole text, else a fenced code block, else the first
/// balanced `{...}` or `[...]` that parses.
pub fn extract_json(text: &str) -> Result<Value, String> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err("the reply is empty; it must be a JSON value".to_owned());
    }
    let whole = serde_json::from_str::<Value>(trimmed);
    if let Ok(value) = whole {
        return Ok(value);
    }
    if let Some(value) = fenced_blocks(trimmed).find_map(|block| serde_json::from_str(block).ok()) {
        return Ok(value);
    }
    for (start, _) in trimmed.match_indices(['{', '[']) {
        if let Some(end) = balanced_end(&trimmed[start..])
            && let Ok(value) = serde_json::from_str(&trimmed[start..start + end])
        {
            return Ok(value);
        }
    }
    Err(match whole {
        Err(error) => format!("the reply is not valid JSON ({error}) and holds no JSON value"),
        Ok(_) => "the reply holds no JSON value".to_owned(),
    })
}

/// The contents of the ``` fenced blocks of `text`.
fn fenced_blocks(text: &str) -> impl Iterator<Item = &str> {
    text.split("```").skip(1).step_by(2).map(|block| {
        // The info string (`json`) runs to the end of the first line.
        match block.split_once('\n') {
            Some((info, body)) if !info.trim_start().starts_with(['{', '[']) => body,
            _ => block,
        }
    })
}

/// The length of the balanced `{...}` / `[...]` at the start of `text` (strings skipped).
fn balanced_end(text: &str) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (index, c) in text.char_indices() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(index + 1);
                }
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_is_found_whole_fenced_or_inside_prose() {
        assert_eq!(extract_json(" {\"a\": 1} ").unwrap(), json!({"a": 1}));
        assert_eq!(
            extract_json("Here:\n```json\n{\"a\": [1, 2]}\n```\nDone.").unwrap(),
            json!({"a": [1, 2]})
        );
        assert_eq!(
            extract_json("The answer is {\"a\": \"}{\"} as asked.").unwrap(),
            json!({"a": "}{"})
        );
        assert!(extract_json("no json here").is_err());
        assert!(extract_json("").is_err());
    }

    #[test]
    fn a_non_object_schema_is_wrapped_and_unwrapped() {
        let schema = OutputSchema::from_json(
            "list",
            json!({"type": "array", "items": {"type": "integer"}}),
        )
        .unwrap();
        assert_eq!(schema.schema()["properties"]["value"]["type"], "array");
        assert_eq!(
            schema.check(&json!({"value": [1, 2]})).unwrap(),
            json!([1, 2])
        );
        let error = schema.check(&json!({"value": ["x"]})).unwrap_err();
        assert!(error.contains("value[0]"), "{error}");
    }

    #[test]
    fn the_strict_form_requires_every_property_and_no_others() {
        let strict = strict_schema(json!({
            "type": "object",
            "properties": {"a": {"type": "string"}, "b": {"type": "object", "properties": {"c": {"type": "integer"}}}},
            "required": ["a"]
        }));
        assert_eq!(strict["required"], json!(["a", "b"]));
        assert_eq!(strict["additionalProperties"], json!(false));
        assert_eq!(strict["properties"]["b"]["required"], json!(["c"]));
        assert_eq!(
            strict["properties"]["b"]["additionalProperties"],
            json!(false)
        );
    }

    #[test]
    fn names_are_cut_to_what_response_format_allows() {
        assert_eq!(schema_name("my schema.json"), "my_schema_json");
        assert_eq!(schema_name(""), "output");
        assert_eq!(schema_name(&"x".repeat(100)).len(), 64);
    }
}

/// How a typed run gets the model's answer into shape.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// [`OutputMode::Native`], falling back to [`OutputMode::Tool`] when the server rejects
    /// `response_format` (said once, in a log line, and remembered by the [`TypedOutput`]).
    #[default]
    Auto,
    /// `response_format: {"type": "json_schema", "strict": true}`: the server constrains the
    /// final text to the schema. Other tools keep working.
    Native,
    /// A final-answer tool whose parameters are the schema: the model calls it to finish, and
    /// the run ends after that turn. Other tools keep working in the same run.
    Tool,
    /// For servers with neither: the schema in the prompt, the JSON taken from the reply.
    Prompted,
}

/// What a typed run keeps in its [`RunState`](crate::run::RunState) (`typed`), so that a run
/// suspended for an approval or cut off by a crash resumes still typed, in any process.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypedRun {
    /// The schema the answer must match.
    pub schema: SavedSchema,
    /// The mode in use (after a fallback from [`OutputMode::Auto`]: [`OutputMode::Tool`]).
    pub mode: OutputMode,
    /// The final-answer tool's name.
    pub tool: String,
    /// How often an invalid answer goes back to the model.
    pub max_retries: u32,
    /// Which answer the run is on (1 = the first).
    pub attempt: u32,
}
