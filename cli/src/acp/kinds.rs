//! agcore's tool vocabulary in ACP's terms: kinds, and the content of a finished call.

use agcore::tools::ToolKind;
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;

/// The most text of one call's output shown in the editor's card (the model gets all of it).
pub const MAX_SHOWN_OUTPUT_BYTES: usize = 64 * 1024;

/// ACP's kind of an agcore tool kind (the design's `kind()` is ACP's `ToolKind`).
pub fn kind(kind: ToolKind) -> acp::ToolKind {
    match kind {
        ToolKind::Read => acp::ToolKind::Read,
        ToolKind::Edit => acp::ToolKind::Edit,
        ToolKind::Delete => acp::ToolKind::Delete,
        ToolKind::Move => acp::ToolKind::Move,
        ToolKind::Search => acp::ToolKind::Search,
        ToolKind::Execute => acp::ToolKind::Execute,
        ToolKind::Fetch => acp::ToolKind::Fetch,
        ToolKind::Think => acp::ToolKind::Think,
        _ => acp::ToolKind::Other,
    }
}

/// A call's output as the card's text: a string as it is, anything else as JSON; cut at
/// [`MAX_SHOWN_OUTPUT_BYTES`] (on a character boundary) with a note saying so.
pub fn output_text(output: &Value) -> String {
    let text = match output {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    bounded(text, MAX_SHOWN_OUTPUT_BYTES)
}

/// `text` cut to at most `limit` bytes on a character boundary, with a note when cut.
pub fn bounded(mut text: String, limit: usize) -> String {
    if text.len() <= limit {
        return text;
    }
    let total = text.len();
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(&format!("\n… ({total} bytes; the rest is not shown)"));
    text
}

/// The card content of a text.
pub fn text_content(text: String) -> acp::ToolCallContent {
    acp::ToolCallContent::Content(acp::Content::new(acp::ContentBlock::from(text)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_output_is_cut_on_a_character_boundary_and_says_so() {
        let text = "é".repeat(10);
        let cut = bounded(text, 5);
        assert!(cut.starts_with("éé"));
        assert!(cut.contains("20 bytes"));
        assert_eq!(bounded("short".to_owned(), 5), "short");
    }

    #[test]
    fn every_kind_maps() {
        assert_eq!(kind(ToolKind::Execute), acp::ToolKind::Execute);
        assert_eq!(kind(ToolKind::Other), acp::ToolKind::Other);
        assert_eq!(output_text(&serde_json::json!({"a": 1})), r#"{"a":1}"#);
    }
}
