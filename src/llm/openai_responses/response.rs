//! A whole (non-streamed) reply: the `Response` object → the deltas a stream of it would have
//! carried, assembled like a stream (so tool calls are normalised in the one usual place).

use std::collections::VecDeque;

use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::openai_responses::errors;
use crate::llm::openai_responses::output::Output;
use crate::llm::stream::StreamAssembler;
use crate::llm::transport::truncate;
use crate::vocab::ChatResponse;

/// The deltas of a successful (HTTP 200) `Response` body for a request for `model`.
pub(crate) fn response_deltas(
    body: &[u8],
    model: &str,
    keep_response_id: bool,
) -> Result<VecDeque<ModelDelta>, ProviderError> {
    let mut response: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::Decode(format!(
            "invalid response JSON ({error}): {}",
            truncate(&String::from_utf8_lossy(body))
        ))
    })?;
    let status = response
        .get("status")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    let error = response.get("error").filter(|error| !error.is_null());
    match (status.as_str(), error) {
        ("failed", _) => return Err(errors::failed(&response)),
        // An error body sent with HTTP 200 (some proxies do).
        ("", Some(error)) => return Err(errors::error_object(error)),
        ("completed" | "incomplete", _) => {}
        (other, _) => {
            return Err(ProviderError::Decode(format!(
                "the reply is not finished (status {:?})",
                truncate(other)
            )));
        }
    }
    let items = match response.get_mut("output").map(Value::take) {
        Some(Value::Array(items)) => items,
        _ => return Err(ProviderError::Decode("the reply has no output".into())),
    };
    let mut out = VecDeque::new();
    let text = |key: &str| {
        response
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    out.push_back(ModelDelta::Meta {
        id: text("id"),
        model: text("model"),
    });
    let mut output = Output::new(model, keep_response_id);
    for (index, item) in (0u64..).zip(items) {
        output.done(index, item, &mut out);
    }
    output.finish(&response, &mut out);
    Ok(out)
}

/// A whole `Response` body as a [`ChatResponse`].
pub(crate) fn parse_response(
    body: &[u8],
    model: &str,
    keep_response_id: bool,
) -> Result<ChatResponse, ProviderError> {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    for delta in response_deltas(body, model, keep_response_id)? {
        assembler.try_push(delta, &mut events)?;
    }
    assembler.finish(&mut events)
}
