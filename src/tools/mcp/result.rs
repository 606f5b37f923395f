//! `tools/call` results as agcore values: structured content, text, typed media — and the text
//! the model reads.

use rmcp::model::{CallToolResult, ContentBlock};
use serde_json::Value;

use crate::tools::error::ToolError;

/// Convert a `tools/call` result into the tool's output.
///
/// - `isError: true` → `Err(ToolError::ExecutionFailed(tool, <the server's text>))`.
/// - `structuredContent` present → that value.
/// - only text blocks → one JSON string (several blocks joined with `"\n"`; none → `""`).
/// - any other block (image, audio, resource, resource link) → an array of every block as its
///   typed MCP JSON object, e.g. `{"type": "image", "data": "<base64>", "mimeType": "image/png"}`.
pub fn call_result_to_value(tool: &str, result: CallToolResult) -> Result<Value, ToolError> {
    if result.is_error == Some(true) {
        let mut text = joined_text(&result.content);
        if text.is_empty() {
            text = match &result.structured_content {
                Some(value) => value.to_string(),
                None => "the tool reported an error without a message".to_owned(),
            };
        }
        return Err(ToolError::ExecutionFailed(tool.to_owned(), text));
    }
    if let Some(structured) = result.structured_content {
        return Ok(structured);
    }
    let mut content = result.content;
    if content.iter().all(|block| block.as_text().is_some()) {
        if content.len() == 1
            && let Some(ContentBlock::Text(text)) = content.pop()
        {
            return Ok(Value::String(text.text));
        }
        return Ok(Value::String(joined_text(&content)));
    }
    Ok(Value::Array(
        content
            .iter()
            .map(|block| serde_json::to_value(block).unwrap_or(Value::Null))
            .collect(),
    ))
}

fn joined_text(content: &[ContentBlock]) -> String {
    content
        .iter()
        .filter_map(|block| block.as_text().map(|text| text.text.as_str()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The text the model reads for an MCP tool output: a string as itself; an array of MCP
/// content objects as their text, with media summarised (`[image: image/png, 1234 bytes of
/// base64]`) instead of dumped; anything else as compact JSON.
pub fn content_to_model_text(output: &Value) -> String {
    match output {
        Value::String(text) => text.clone(),
        Value::Array(items) if !items.is_empty() && items.iter().all(is_content_object) => items
            .iter()
            .map(content_object_text)
            .collect::<Vec<_>>()
            .join("\n"),
        other => other.to_string(),
    }
}

fn is_content_object(item: &Value) -> bool {
    matches!(
        item.get("type").and_then(Value::as_str),
        Some("text" | "image" | "audio" | "resource" | "resource_link")
    )
}

fn content_object_text(item: &Value) -> String {
    let field = |name: &str| item.get(name).and_then(Value::as_str).unwrap_or("");
    match field("type") {
        "text" => field("text").to_owned(),
        kind @ ("image" | "audio") => format!(
            "[{kind}: {}, {} bytes of base64]",
            field("mimeType"),
            field("data").len()
        ),
        "resource" => {
            let resource = item.get("resource").cloned().unwrap_or(Value::Null);
            let uri = resource.get("uri").and_then(Value::as_str).unwrap_or("");
            match resource.get("text").and_then(Value::as_str) {
                Some(text) => format!("[resource {uri}]\n{text}"),
                None => format!("[resource {uri} (binary)]"),
            }
        }
        _ => format!("[resource link: {} {}]", field("name"), field("uri")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn result(value: Value) -> CallToolResult {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn one_text_block_is_a_string() {
        let value = call_result_to_value(
            "t",
            result(json!({"content": [{"type": "text", "text": "hi"}]})),
        );
        assert_eq!(value.unwrap(), json!("hi"));
    }

    #[test]
    fn several_text_blocks_are_joined_with_newlines() {
        let value = call_result_to_value(
            "t",
            result(
                json!({"content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}),
            ),
        );
        assert_eq!(value.unwrap(), json!("a\nb"));
    }

    #[test]
    fn structured_content_wins() {
        let value = call_result_to_value(
            "t",
            result(
                json!({"content": [{"type": "text", "text": "{}"}], "structuredContent": {"x": 1}}),
            ),
        );
        assert_eq!(value.unwrap(), json!({"x": 1}));
    }

    #[test]
    fn images_are_kept_as_typed_objects_and_summarised_for_the_model() {
        let value = call_result_to_value(
            "t",
            result(json!({"content": [{"type": "text", "text": "see"}, {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})),
        )
        .unwrap();
        assert_eq!(value[1]["type"], "image");
        assert_eq!(value[1]["data"], "AAAA");
        assert_eq!(
            content_to_model_text(&value),
            "see\n[image: image/png, 4 bytes of base64]"
        );
    }

    #[test]
    fn is_error_becomes_execution_failed_with_the_server_text() {
        let error = call_result_to_value(
            "t",
            result(json!({"content": [{"type": "text", "text": "boom"}], "isError": true})),
        )
        .unwrap_err();
        assert!(
            matches!(error, ToolError::ExecutionFailed(tool, text) if tool == "t" && text == "boom")
        );
    }
}
