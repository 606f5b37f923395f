//! Sampling: a server asks the client's model for a completion (`sampling/createMessage`). The
//! request goes to the application's [`Sampler`] (which asks the user and calls its model, or
//! refuses); without one agcore does not declare the capability and a request is refused
//! (logged). Only text reaches the sampler; other content is described in words.

// Sampling is deprecated by SEP-2577 for the 2026 protocol; released servers still use it.
#![allow(deprecated)]

use async_trait::async_trait;
use rmcp::model::{CreateMessageRequestParams, Role, SamplingMessageContentBlock};
use serde::Serialize;

/// Who said a message of a sampling conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SamplingRole {
    /// The user.
    User,
    /// The model.
    Assistant,
}

/// One message of the conversation a server wants completed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplingTurn {
    /// Who said it.
    pub role: SamplingRole,
    /// Its text (non-text content as `[image image/png]` and the like).
    pub text: String,
}

/// One `sampling/createMessage` request.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplingRequest {
    /// The agcore name of the server asking.
    pub server: String,
    /// The conversation (untrusted text: sanitise before display).
    pub messages: Vec<SamplingTurn>,
    /// The server's system prompt, if any.
    pub system_prompt: Option<String>,
    /// The most tokens the server wants back.
    pub max_tokens: u32,
    /// The temperature asked for.
    pub temperature: Option<f32>,
    /// Stop sequences.
    pub stop_sequences: Vec<String>,
}

/// The model's answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SamplingReply {
    /// The model that answered.
    pub model: String,
    /// The answer.
    pub text: String,
    /// Why it stopped (`endTurn`, `maxTokens`, ...), if known.
    pub stop_reason: Option<String>,
}

/// Answers servers' sampling requests (e.g. approve, then call the configured model).
#[async_trait]
pub trait Sampler: Send + Sync {
    /// Complete `request`, or say why not (sent to the server as the error message).
    async fn sample(&self, request: &SamplingRequest) -> Result<SamplingReply, String>;
}

/// agcore's view of rmcp's request.
pub(crate) fn request_of(server: &str, params: CreateMessageRequestParams) -> SamplingRequest {
    let messages = params
        .messages
        .into_iter()
        .map(|message| SamplingTurn {
            role: match message.role {
                Role::Assistant => SamplingRole::Assistant,
                _ => SamplingRole::User,
            },
            text: message
                .content
                .into_vec()
                .iter()
                .map(block_text)
                .collect::<Vec<_>>()
                .join("\n"),
        })
        .collect();
    SamplingRequest {
        server: server.to_owned(),
        messages,
        system_prompt: params.system_prompt,
        max_tokens: params.max_tokens,
        temperature: params.temperature,
        stop_sequences: params.stop_sequences.unwrap_or_default(),
    }
}

fn block_text(block: &SamplingMessageContentBlock) -> String {
    match block {
        SamplingMessageContentBlock::Text(text) => text.text.clone(),
        SamplingMessageContentBlock::Image(image) => format!("[image {}]", image.mime_type),
        SamplingMessageContentBlock::Audio(audio) => format!("[audio {}]", audio.mime_type),
        _ => "[content agcore does not pass on]".to_owned(),
    }
}
