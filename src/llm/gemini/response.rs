//! A whole (non-streamed) reply: one `GenerateContentResponse`, or a JSON array of them (what
//! `streamGenerateContent` sends without `alt=sse`), decoded like a stream and assembled.

use std::collections::VecDeque;

use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::gemini::request::model_name;
use crate::llm::gemini::stream::ResponseDecoder;
use crate::llm::model::ModelDelta;
use crate::llm::stream::StreamAssembler;
use crate::llm::transport::truncate;
use crate::vocab::ChatResponse;

/// The deltas of a whole reply to a request for `model`.
///
/// # Errors
/// [`ProviderError::Decode`] for a body that is not a Gemini response; the typed error of an
/// `{"error": ...}` body.
pub(crate) fn reply_deltas(body: &[u8], model: &str) -> Result<Vec<ModelDelta>, ProviderError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::Decode(format!(
            "invalid Gemini response ({error}): {}",
            truncate(&String::from_utf8_lossy(body))
        ))
    })?;
    let mut decoder = ResponseDecoder::new(Some(model_name(model).to_owned()));
    let mut out = VecDeque::new();
    match value {
        Value::Array(items) => {
            for item in items {
                decoder.decode_value(item, &mut out)?;
            }
        }
        other => decoder.decode_value(other, &mut out)?,
    }
    Ok(out.into())
}

/// A whole reply to a request for `model` as a [`ChatResponse`] (calls normalised, artifacts in
/// the message).
///
/// # Errors
/// As [`reply_deltas`]; [`ProviderError::Stream`] for a reply without any content.
pub(crate) fn parse_reply(body: &[u8], model: &str) -> Result<ChatResponse, ProviderError> {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    for delta in reply_deltas(body, model)? {
        assembler.try_push(delta, &mut events)?;
    }
    assembler.finish(&mut events)
}
