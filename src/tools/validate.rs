//! Checks done once at registration (tool names, schemas) and on every call (arguments against
//! the schema), with messages a model can act on: which field, what was expected, what came.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::Value;

use crate::tools::error::ToolError;

/// How many schema violations one error message lists (the model fixes them one round at a time).
const MAX_PROBLEMS: usize = 5;
/// How many characters of an offending value a message quotes.
const MAX_VALUE_CHARS: usize = 60;

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

/// Compile a tool's parameters schema once; `None` when the schema accepts anything (`{}`/null).
pub(crate) fn compile_schema(tool: &str, schema: &Value) -> Result<Option<Validator>, ToolError> {
    if schema.is_null() || schema.as_object().is_some_and(|o| o.is_empty()) {
        return Ok(None);
    }
    jsonschema::validator_for(schema)
        .map(Some)
        .map_err(|error| ToolError::InvalidSchema {
            tool: tool.to_owned(),
            reason: error.to_string(),
        })
}

/// Validate call arguments; the error lists up to five problems, each naming the field.
pub(crate) fn validate_arguments(
    tool: &str,
    validator: &Validator,
    input: &Value,
) -> Result<(), ToolError> {
    // The fast boolean check keeps the common (valid) path cheap; messages are built only on failure.
    if validator.is_valid(input) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(input)
        .take(MAX_PROBLEMS)
        .map(|error| describe(&error))
        .collect();
    Err(ToolError::InvalidArguments(
        tool.to_owned(),
        problems.join("; "),
    ))
}

/// One violation in words: `field `a.b[0]`: expected integer, got string "x"`.
fn describe(error: &ValidationError<'_>) -> String {
    let path = json_path(error.instance_path().as_str());
    let at = if path.is_empty() {
        "the arguments".to_owned()
    } else {
        format!("field `{path}`")
    };
    let got = || quote(error.instance());
    match error.kind() {
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            let field = if path.is_empty() {
                name
            } else {
                format!("{path}.{name}")
            };
            format!("missing required field `{field}`")
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(single) => single.to_string(),
                TypeKind::Multiple(set) => set
                    .iter()
                    .map(|t| t.to_string())
                    .collect::<Vec<_>>()
                    .join(" or "),
            };
            format!(
                "{at}: expected {expected}, got {} {}",
                type_name(error.instance()),
                got()
            )
        }
        ValidationErrorKind::Enum { options } => {
            format!("{at}: expected one of {options}, got {}", got())
        }
        ValidationErrorKind::Constant { expected_value } => {
            format!("{at}: expected {expected_value}, got {}", got())
        }
        ValidationErrorKind::AdditionalProperties { unexpected }
        | ValidationErrorKind::UnevaluatedProperties { unexpected } => format!(
            "{at}: unknown field(s) {}; remove them",
            unexpected
                .iter()
                .map(|name| format!("`{name}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context } => {
            // Name the closest alternative: the one with the fewest violations.
            let closest = context
                .iter()
                .filter(|errors| !errors.is_empty())
                .min_by_key(|errors| errors.len());
            match closest {
                Some(errors) => format!(
                    "{at}: {} matches none of the allowed shapes; closest: {}",
                    got(),
                    errors.iter().map(describe).collect::<Vec<_>>().join(", ")
                ),
                None => format!("{at}: {} matches none of the allowed shapes", got()),
            }
        }
        _ => format!("{at}: {error}"),
    }
}

/// A JSON pointer (`/a/0/b`) as a path a model reads (`a[0].b`); empty for the root.
fn json_path(pointer: &str) -> String {
    let mut path = String::new();
    for segment in pointer.split('/').skip(1) {
        let segment = segment.replace("~1", "/").replace("~0", "~");
        if !segment.is_empty() && segment.bytes().all(|b| b.is_ascii_digit()) {
            path.push('[');
            path.push_str(&segment);
            path.push(']');
        } else {
            if !path.is_empty() {
                path.push('.');
            }
            path.push_str(&segment);
        }
    }
    path
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A value quoted for a message, shortened so a huge argument does not flood the context.
fn quote(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_VALUE_CHARS {
        text
    } else {
        let short: String = text.chars().take(MAX_VALUE_CHARS).collect();
        format!("{short}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(schema: Value, input: Value) -> String {
        let validator = compile_schema("t", &schema).unwrap().unwrap();
        match validate_arguments("t", &validator, &input).unwrap_err() {
            ToolError::InvalidArguments(_, message) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn pointers_become_readable_paths() {
        assert_eq!(json_path(""), "");
        assert_eq!(json_path("/a/0/b"), "a[0].b");
        assert_eq!(json_path("/a~1b"), "a/b");
    }

    #[test]
    fn missing_field_is_named_with_its_parent_path() {
        let schema = json!({"type": "object", "properties": {"opts": {"type": "object",
            "properties": {"unit": {"type": "string"}}, "required": ["unit"]}}, "required": ["opts"]});
        assert_eq!(
            check(schema.clone(), json!({})),
            "missing required field `opts`"
        );
        assert_eq!(
            check(schema, json!({"opts": {}})),
            "missing required field `opts.unit`"
        );
    }

    #[test]
    fn wrong_type_says_what_was_expected_and_what_came() {
        let schema = json!({"type": "object", "properties": {"days": {"type": "integer"}}});
        assert_eq!(
            check(schema, json!({"days": "3"})),
            "field `days`: expected integer, got string \"3\""
        );
    }

    #[test]
    fn enum_lists_the_options() {
        let schema = json!({"type": "object", "properties": {"unit": {"enum": ["c", "f"]}}});
        assert_eq!(
            check(schema, json!({"unit": "k"})),
            "field `unit`: expected one of [\"c\",\"f\"], got \"k\""
        );
    }

    #[test]
    fn unknown_fields_are_named() {
        let schema = json!({"type": "object", "properties": {}, "additionalProperties": false});
        assert_eq!(
            check(schema, json!({"x": 1})),
            "the arguments: unknown field(s) `x`; remove them"
        );
    }

    #[test]
    fn long_values_are_shortened() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let message = check(schema, json!({"n": "x".repeat(500)}));
        assert!(message.len() < 150, "{message}");
    }

    #[test]
    fn names_follow_the_openai_pattern() {
        assert!(validate_tool_name("get_weather-2").is_ok());
        assert!(validate_tool_name("").is_err());
        assert!(validate_tool_name("a.b").is_err());
        assert!(validate_tool_name(&"a".repeat(65)).is_err());
        assert!(validate_tool_name(&"a".repeat(64)).is_ok());
    }
}
