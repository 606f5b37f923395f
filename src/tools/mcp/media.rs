//! Images and audio from MCP tool results, for a model that reads them. Chat Completions'
//! tool messages carry text only, so the media go in a user message meant to follow the tool
//! messages of the step (the tool message's text already names each block, e.g. `[image:
//! image/png, N bytes of base64]`). Bounded: at most [`MAX_MEDIA_BYTES`] of base64 per message;
//! a block over the budget is named in the message's text instead of sent.

use serde_json::{Value, json};

use crate::vocab::{ContentPart, ImageUrl, OpenaiChatMessage};

/// The most base64 bytes of media [`media_message`] puts in one message (8 MiB).
pub const MAX_MEDIA_BYTES: usize = 8 * 1024 * 1024;

/// A user message with the image and audio blocks of one MCP tool output (an array of typed MCP
/// content objects, as [`call_result_to_value`](crate::tools::mcp::call_result_to_value) makes
/// it), introduced by a text part naming the tool and call; `None` when there are none.
/// `budget` caps the base64 bytes sent (use [`MAX_MEDIA_BYTES`]).
pub fn media_message(
    tool: &str,
    call_id: &str,
    output: &Value,
    budget: usize,
) -> Option<OpenaiChatMessage> {
    let blocks = output.as_array()?;
    let mut parts = Vec::new();
    let mut left_out = Vec::new();
    let mut used = 0usize;
    for block in blocks {
        let kind = block.get("type").and_then(Value::as_str);
        let data = block.get("data").and_then(Value::as_str);
        let mime = block
            .get("mimeType")
            .and_then(Value::as_str)
            .unwrap_or("application/octet-stream");
        let (Some(kind @ ("image" | "audio")), Some(data)) = (kind, data) else {
            continue;
        };
        if used + data.len() > budget {
            left_out.push(format!("{kind} {mime} ({} bytes of base64)", data.len()));
            continue;
        }
        let part = match kind {
            "image" => ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{mime};base64,{data}"),
                    detail: None,
                },
            },
            _ => match audio_format(mime) {
                Some(format) => ContentPart::InputAudio {
                    input_audio: json!({"data": data, "format": format}),
                },
                None => {
                    left_out.push(format!("audio {mime} (a format the model does not take)"));
                    continue;
                }
            },
        };
        used += data.len();
        parts.push(part);
    }
    if parts.is_empty() && left_out.is_empty() {
        return None;
    }
    let mut intro = format!(
        "The media returned by the tool call {call_id} ({tool}) follow ({} part(s)).",
        parts.len()
    );
    if !left_out.is_empty() {
        intro.push_str(&format!(
            " Left out (over the {budget}-byte media limit or unsupported): {}.",
            left_out.join(", ")
        ));
    }
    parts.insert(0, ContentPart::Text { text: intro });
    Some(OpenaiChatMessage::user_parts(parts))
}

/// What the run does with the media of one tool output ([`media_for_model`]).
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMedia {
    /// A line for the end of the tool message: the media follow, or were not shown and why.
    pub note: String,
    /// The user message with the media, to follow the step's tool messages (`None` when the
    /// model does not take images).
    pub message: Option<OpenaiChatMessage>,
}

/// The media (image and audio blocks) of a tool output for a model that takes them
/// (`accepts_images`) — a [`media_message`] and a note for the tool message saying it follows
/// — or, for one that does not, only a note saying what was returned and not shown. `None` when
/// the output has no media.
pub fn media_for_model(
    tool: &str,
    call_id: &str,
    output: &Value,
    accepts_images: bool,
    budget: usize,
) -> Option<ModelMedia> {
    let kinds: Vec<String> = output
        .as_array()?
        .iter()
        .filter_map(|block| {
            let kind = block.get("type").and_then(Value::as_str)?;
            matches!(kind, "image" | "audio").then(|| {
                let mime = block
                    .get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or(kind);
                format!("{kind} {mime}")
            })
        })
        .collect();
    if kinds.is_empty() {
        return None;
    }
    if !accepts_images {
        return Some(ModelMedia {
            note: format!(
                "[the tool returned {} ({}); not shown: this model is not set to accept images]",
                plural(kinds.len()),
                kinds.join(", ")
            ),
            message: None,
        });
    }
    let message = media_message(tool, call_id, output, budget)?;
    Some(ModelMedia {
        note: format!(
            "[the tool returned {} ({}); they follow in the next user message]",
            plural(kinds.len()),
            kinds.join(", ")
        ),
        message: Some(message),
    })
}

fn plural(count: usize) -> String {
    if count == 1 {
        "1 media part".to_owned()
    } else {
        format!("{count} media parts")
    }
}

/// Chat Completions' `input_audio.format` for a MIME type.
fn audio_format(mime: &str) -> Option<&'static str> {
    match mime {
        "audio/wav" | "audio/x-wav" | "audio/wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" => Some("mp3"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::MessageContent;

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
