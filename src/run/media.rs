//! Tool media for the model: an MCP tool's image and audio blocks become a user message after
//! the turn's tool messages when the model accepts images
//! ([`CycleConfig::accepts_images`](crate::run::CycleConfig::accepts_images)); otherwise the
//! tool message says what was returned and not shown. The conversion itself is the MCP
//! module's ([`media_for_model`]).

use crate::tools::mcp::{MAX_MEDIA_BYTES, ModelMedia, media_for_model};
use crate::tools::outcome::{CompletedCall, ToolOutcome};
use crate::vocab::{OpenaiChatMessage, ToolAnswer};

/// The media of a finished call's output, if it has any (a failed call has none).
pub(crate) fn of(call: &CompletedCall, accepts_images: bool) -> Option<ModelMedia> {
    let ToolOutcome::Ran { result: Ok(output) } = &call.outcome else {
        return None; // a failed or refused call has no media
    };
    media_for_model(
        &call.tool_name,
        &call.id,
        output,
        accepts_images,
        MAX_MEDIA_BYTES,
    )
}

/// The answer with the media note as its last line, and the media message to record.
pub(crate) fn attach(
    mut answer: ToolAnswer,
    media: Option<ModelMedia>,
) -> (ToolAnswer, Option<OpenaiChatMessage>) {
    match media {
        Some(media) => {
            answer.content.push('\n');
            answer.content.push_str(&media.note);
            (answer, media.message)
        }
        None => (answer, None),
    }
}
