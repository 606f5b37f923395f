//! Images and audio in MCP tool results: an output's `image` and `audio` content blocks as
//! [`ToolMedia`], the generic media the run passes to the model ([`crate::tools::media`]).
//! MCP tools report them through [`BaseTool::media`](crate::tools::BaseTool::media);
//! [`media_message`] and [`media_for_model`] take an MCP output directly.

use serde_json::Value;

use crate::tools::media::{self, MediaKind, ToolMedia};
pub use crate::tools::media::{MAX_MEDIA_BYTES, ModelMedia};
use crate::vocab::OpenaiChatMessage;

/// The image and audio blocks (with data) of one MCP tool output — an array of typed MCP
/// content objects, as [`call_result_to_value`](crate::tools::mcp::call_result_to_value) makes
/// it — in order; empty for any other output.
pub fn media_of(output: &Value) -> Vec<ToolMedia> {
    let Some(blocks) = output.as_array() else {
        return Vec::new();
    };
    blocks
        .iter()
        .filter_map(|block| {
            let kind = match block.get("type").and_then(Value::as_str)? {
                "image" => MediaKind::Image,
                "audio" => MediaKind::Audio,
                _ => return None,
            };
            let data = block.get("data").and_then(Value::as_str)?;
            let mime = block
                .get("mimeType")
                .and_then(Value::as_str)
                .unwrap_or("application/octet-stream");
            Some(ToolMedia {
                kind,
                mime_type: mime.to_owned(),
                data: data.to_owned(),
            })
        })
        .collect()
}

/// A user message with the image and audio blocks of one MCP tool output ([`media_of`]),
/// introduced by a text part naming the tool and call; `None` when there are none. `budget`
/// caps the base64 bytes sent (use [`MAX_MEDIA_BYTES`]).
pub fn media_message(
    tool: &str,
    call_id: &str,
    output: &Value,
    budget: usize,
) -> Option<OpenaiChatMessage> {
    media::media_message(tool, call_id, &media_of(output), budget)
}

/// The media of an MCP tool output for a model that takes them (`accepts_images`), or only a
/// note saying what was returned and not shown ([`ModelMedia::of`]). `None` when the output
/// has no media.
pub fn media_for_model(
    tool: &str,
    call_id: &str,
    output: &Value,
    accepts_images: bool,
    budget: usize,
) -> Option<ModelMedia> {
    ModelMedia::of(tool, call_id, &media_of(output), accepts_images, budget)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{ContentPart, MessageContent};
    use serde_json::json;

    #[test]
    fn without_image_support_only_a_note_says_what_was_not_shown() {
        let output = json!([
            {"type": "text", "text": "here"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}
        ]);
        let off = media_for_model("shot", "c1", &output, false, 100).unwrap();
        assert!(off.message.is_none());
        assert_eq!(
            off.note,
            "[the tool returned 1 media part (image image/png); not shown: this model is not set to accept images]"
        );
        let on = media_for_model("shot", "c1", &output, true, 100).unwrap();
        assert!(on.note.ends_with("they follow in the next user message]"));
        assert!(on.message.is_some());
        assert!(media_for_model("t", "c", &json!("text"), true, 100).is_none());
    }

    #[test]
    fn images_become_parts_within_the_budget() {
        let output = json!([
            {"type": "text", "text": "here"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "image", "data": "BBBBBBBB", "mimeType": "image/jpeg"},
            {"type": "audio", "data": "CC", "mimeType": "audio/wav"}
        ]);
        let message = media_message("shot", "call_1", &output, 7).unwrap();
        let OpenaiChatMessage::User {
            content: MessageContent::Parts(parts),
            ..
        } = message
        else {
            panic!("not a user message with parts")
        };
        assert_eq!(parts.len(), 3, "{parts:?}");
        assert!(
            matches!(&parts[1], ContentPart::ImageUrl { image_url } if image_url.url == "data:image/png;base64,AAAA")
        );
        assert!(
            matches!(&parts[2], ContentPart::InputAudio { input_audio } if input_audio["format"] == "wav")
        );
        let ContentPart::Text { text } = &parts[0] else {
            panic!("no intro")
        };
        assert!(
            text.contains("call_1") && text.contains("image/jpeg (8 bytes"),
            "{text}"
        );
        assert!(media_message("t", "c", &json!("just text"), 10).is_none());
        assert!(media_message("t", "c", &json!([{"type": "text", "text": "x"}]), 10).is_none());
    }
}
