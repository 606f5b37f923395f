//! A tool's `structuredContent` checked against its `outputSchema`: the 2026-07-28 protocol
//! lets it be any JSON value (an array, a number, `null`), so the schema, not its shape, says
//! what is right. A result that breaks the schema is an error the model reads, never passed on
//! as if valid.

use rmcp::model::{CallToolResult, Tool};

use crate::tools::error::ToolError;
use crate::tools::validate::compile_schema;

/// How many violations an error names.
const MAX_PROBLEMS: usize = 3;
/// How many characters of one violation's text are kept (the value may be the server's).
const MAX_PROBLEM_CHARS: usize = 200;

/// Check `result.structuredContent` against `tool.outputSchema` when both are present (an
/// `isError` result is not checked: its content is the error).
pub(crate) fn check_structured_content(
    tool: &Tool,
    result: &CallToolResult,
) -> Result<(), ToolError> {
    let (Some(schema), Some(structured)) = (&tool.output_schema, &result.structured_content) else {
        return Ok(());
    };
    if result.is_error == Some(true) {
        return Ok(());
    }
    let name = tool.name.as_ref();
    let schema = serde_json::Value::Object(schema.as_ref().clone());
    let Some(validator) = compile_schema(name, &schema)? else {
        return Ok(());
    };
    if validator.is_valid(structured) {
        return Ok(());
    }
    let problems: Vec<String> = validator
        .iter_errors(structured)
        .take(MAX_PROBLEMS)
        .map(|error| {
            let text = format!("at '{}': {error}", error.instance_path());
            crate::display::escape_for_terminal(&text)
                .chars()
                .take(MAX_PROBLEM_CHARS)
                .collect()
        })
        .collect();
    Err(ToolError::ExecutionFailed(
        name.to_owned(),
        format!(
            "the server's structuredContent does not match the tool's outputSchema: {}",
            problems.join("; ")
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn tool(output: serde_json::Value) -> Tool {
        let mut tool = Tool::new("t", "", Arc::new(serde_json::Map::new()));
        if let serde_json::Value::Object(map) = output {
            tool.output_schema = Some(Arc::new(map));
        }
        tool
    }

    fn result(structured: serde_json::Value) -> CallToolResult {
        let mut result = CallToolResult::success(vec![]);
        result.structured_content = Some(structured);
        result
    }

    #[test]
    fn any_json_type_is_checked_against_the_schema() {
        let array = tool(json!({"type": "array", "items": {"type": "integer"}}));
        assert!(check_structured_content(&array, &result(json!([1, 2, 3]))).is_ok());
        let wrong = check_structured_content(&array, &result(json!([1, "two"]))).unwrap_err();
        assert!(
            matches!(&wrong, ToolError::ExecutionFailed(name, text)
                if name == "t" && text.contains("outputSchema") && text.contains("/1")),
            "{wrong:?}"
        );
        let number = tool(json!({"type": "number", "minimum": 0}));
        assert!(check_structured_content(&number, &result(json!(2.5))).is_ok());
        assert!(check_structured_content(&number, &result(json!(-1))).is_err());
        assert!(check_structured_content(&number, &result(json!(null))).is_err());
    }

    #[test]
    fn without_a_schema_or_for_an_error_nothing_is_checked() {
        let plain = Tool::new("t", "", Arc::new(serde_json::Map::new()));
        assert!(check_structured_content(&plain, &result(json!("anything"))).is_ok());
        let object = tool(json!({"type": "object"}));
        let mut failed = result(json!(42));
        failed.is_error = Some(true);
        assert!(check_structured_content(&object, &failed).is_ok());
    }
}
