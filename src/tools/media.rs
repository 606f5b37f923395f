//! [`ToolMedia`]: images and audio a call returned, whatever its source — an MCP tool's content
//! blocks, a resource it read, a local tool — carried beside its text on the
//! [`CompletedCall`](crate::tools::CompletedCall) (a tool says which parts of its output are
//! media with [`BaseTool::media`](crate::tools::BaseTool::media)). Chat Completions' tool
//! messages carry text only, so the media go in a user message meant to follow the tool
//! messages of the step ([`media_message`]); [`ModelMedia::of`] adds the line the tool message
//! ends with. Bounded: at most [`MAX_MEDIA_BYTES`] of base64 per message; a part over the
//! budget is named in the message's text instead of sent.

use serde_json::json;

use crate::vocab::{ContentPart, ImageUrl, OpenaiChatMessage};

/// The most base64 bytes of media [`media_message`] puts in one message (8 MiB).
pub const MAX_MEDIA_BYTES: usize = 8 * 1024 * 1024;

/// What a media part is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaKind {
    /// An image.
    Image,
    /// Audio.
    Audio,
}

impl MediaKind {
    /// `image` or `audio`.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
        }
    }
}

/// One image or audio part of a call's output, base64-encoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolMedia {
    /// Image or audio.
    pub kind: MediaKind,
    /// The MIME type, e.g. `image/png`.
    pub mime_type: String,
    /// The bytes, base64.
    pub data: String,
}

/// A user message with `media` (the parts of one call), introduced by a text part naming the
/// tool and call; `None` when there are none. `budget` caps the base64 bytes sent (use
/// [`MAX_MEDIA_BYTES`]): a part over it, or audio in a format the model does not take, is
/// named in the text instead.
pub fn media_message(
    tool: &str,
    call_id: &str,
    media: &[ToolMedia],
    budget: usize,
) -> Option<OpenaiChatMessage> {
    if media.is_empty() {
        return None;
    }
    let mut parts = Vec::with_capacity(media.len() + 1);
    let mut left_out = Vec::new();
    let mut used = 0usize;
    for part in media {
        let (kind, mime, data) = (part.kind.as_str(), part.mime_type.as_str(), &part.data);
        if used + data.len() > budget {
            left_out.push(format!("{kind} {mime} ({} bytes of base64)", data.len()));
            continue;
        }
        let part = match part.kind {
            MediaKind::Image => ContentPart::ImageUrl {
                image_url: ImageUrl {
                    url: format!("data:{mime};base64,{data}"),
                    detail: None,
                },
            },
            MediaKind::Audio => match audio_format(mime) {
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

/// What the run does with the media of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelMedia {
    /// A line for the end of the tool message: the media follow, or were not shown and why.
    pub note: String,
    /// The user message with the media, to follow the step's tool messages (`None` when the
    /// model does not take images).
    pub message: Option<OpenaiChatMessage>,
}

impl ModelMedia {
    /// The media of one call for a model that takes them (`accepts_images`) — a
    /// [`media_message`] and a note for the tool message saying it follows — or, for one that
    /// does not, only a note saying what was returned and not shown. `None` without media.
    pub fn of(
        tool: &str,
        call_id: &str,
        media: &[ToolMedia],
        accepts_images: bool,
        budget: usize,
    ) -> Option<ModelMedia> {
        if media.is_empty() {
            return None;
        }
        let kinds: Vec<String> = media
            .iter()
            .map(|part| format!("{} {}", part.kind.as_str(), part.mime_type))
            .collect();
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
        Some(ModelMedia {
            note: format!(
                "[the tool returned {} ({}); they follow in the next user message]",
                plural(kinds.len()),
                kinds.join(", ")
            ),
            message: media_message(tool, call_id, media, budget),
        })
    }
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
    #![allow(clippy::unwrap_used, clippy::panic)]

    use super::*;
    use crate::vocab::MessageContent;

    fn part(kind: MediaKind, mime: &str, data: &str) -> ToolMedia {
        ToolMedia {
            kind,
            mime_type: mime.to_owned(),
            data: data.to_owned(),
        }
    }

    #[test]
    fn without_image_support_only_a_note_says_what_was_not_shown() {
        let media = [part(MediaKind::Image, "image/png", "AAAA")];
        let off = ModelMedia::of("shot", "c1", &media, false, 100).unwrap();
        assert!(off.message.is_none());
        assert_eq!(
            off.note,
            "[the tool returned 1 media part (image image/png); not shown: this model is not set to accept images]"
        );
        let on = ModelMedia::of("shot", "c1", &media, true, 100).unwrap();
        assert!(on.note.ends_with("they follow in the next user message]"));
        assert!(on.message.is_some());
        assert!(ModelMedia::of("t", "c", &[], true, 100).is_none());
    }

    #[test]
    fn parts_are_sent_within_the_budget_and_the_rest_is_named() {
        let media = [
            part(MediaKind::Image, "image/png", "AAAA"),
            part(MediaKind::Image, "image/jpeg", "BBBBBBBB"),
            part(MediaKind::Audio, "audio/wav", "CC"),
            part(MediaKind::Audio, "audio/ogg", "DD"),
        ];
        let message = media_message("shot", "call_1", &media, 8).unwrap();
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
            text.contains("call_1")
                && text.contains("image/jpeg (8 bytes")
                && text.contains("audio/ogg (a format"),
            "{text}"
        );
        assert!(media_message("t", "c", &[], 10).is_none());
    }
}
