//! The streamed reply: each server-sent event of `/responses` → [`ModelDelta`]s.
//!
//! Events are told apart by their JSON `type` (the `event:` line only when that is missing).
//! Handled: `response.created` / `.in_progress` / `.queued` (metadata), `.output_item.added` /
//! `.done`, `.output_text.delta`, `.refusal.delta`, `.function_call_arguments.delta` / `.done`,
//! `.reasoning_summary_text.delta` and `.reasoning_text.delta` (shown as thoughts, kept only in
//! the reasoning item's artifact), `.reasoning_summary_part.added` (a paragraph break between
//! summary parts), `.completed` / `.incomplete` (the end: finish reason and usage), `.failed`
//! and `error` (typed errors). Every other event is ignored, so new event types do not break
//! the stream.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::time::Duration;

use bytes::Bytes;
use futures::Stream;
use serde::Deserialize;
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::model::{ModelDelta, ModelStream};
use crate::llm::openai_responses::errors;
use crate::llm::openai_responses::output::Output;
use crate::llm::transport::{SseDecoder, decode_events, truncate};

/// Decode a `/responses` SSE body into a [`ModelStream`], under the default size limits and
/// `idle_timeout` (no deadline): for replaying a recorded stream and for benchmarks.
/// [`OpenAiResponsesClient`](crate::llm::openai_responses::OpenAiResponsesClient) applies its
/// own limits and tags the artifacts with the request's model; here they carry no model.
///
/// ```
/// # async fn demo() -> Result<(), agcore::llm::ProviderError> {
/// use agcore::llm::{StreamAssembler, openai_responses::decode_stream};
/// use futures::StreamExt;
///
/// let body = concat!(
///     "event: response.output_text.delta\n",
///     "data: {\"type\":\"response.output_text.delta\",\"sequence_number\":1,\"item_id\":\"msg_1\",\"output_index\":0,\"content_index\":0,\"delta\":\"Hi\",\"logprobs\":[]}\n\n",
///     "event: response.completed\n",
///     "data: {\"type\":\"response.completed\",\"sequence_number\":2,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[]}}\n\n",
/// );
/// let bytes = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(body))]);
/// let mut deltas = decode_stream(bytes, None);
/// let mut assembler = StreamAssembler::new();
/// let mut events = Vec::new();
/// while let Some(delta) = deltas.next().await {
///     assembler.push(delta?, &mut events);
/// }
/// assert_eq!(assembler.finish(&mut events)?.text(), "Hi");
/// # Ok(()) }
/// ```
pub fn decode_stream<S, E>(bytes: S, idle_timeout: Option<Duration>) -> ModelStream
where
    S: Stream<Item = Result<Bytes, E>> + Send + 'static,
    E: std::error::Error + Send + Sync + 'static,
{
    decode_events(bytes, idle_timeout, EventDecoder::new("", false))
}

/// The fields of the events this decoder reads; everything else in an event is ignored.
/// Names are borrowed from the event's text when they need no unescaping (the usual case).
#[derive(Deserialize)]
struct Event<'a> {
    #[serde(rename = "type", default, borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(default)]
    delta: Option<String>,
    #[serde(default)]
    output_index: Option<u64>,
    #[serde(default, borrow)]
    item_id: Option<Cow<'a, str>>,
    #[serde(default)]
    summary_index: Option<u64>,
    #[serde(default)]
    arguments: Option<String>,
    #[serde(default)]
    item: Option<Value>,
    #[serde(default)]
    response: Option<Value>,
}

/// The [`SseDecoder`] of a `/responses` stream.
#[derive(Debug)]
pub struct EventDecoder {
    output: Output,
    /// Whether the reply's metadata went out (from the first of created / in progress).
    meta_sent: bool,
    finished: bool,
}

impl EventDecoder {
    /// A decoder for a reply to a request for `model`; `keep_response_id` keeps the response
    /// id as an artifact (previous-response mode).
    pub(crate) fn new(model: &str, keep_response_id: bool) -> Self {
        EventDecoder {
            output: Output::new(model, keep_response_id),
            meta_sent: false,
            finished: false,
        }
    }
}

impl SseDecoder for EventDecoder {
    fn event(
        &mut self,
        name: Option<&str>,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<bool, ProviderError> {
        if data.is_empty() {
            return Ok(false);
        }
        if data == "[DONE]" {
            // Not part of this API; a proxy's end marker ends the body like its end would.
            return match self.finished {
                true => Ok(true),
                false => Err(ended_early()),
            };
        }
        let event: Event = serde_json::from_str(data).map_err(|error| {
            ProviderError::Decode(format!("invalid event JSON ({error}): {}", truncate(data)))
        })?;
        let kind = event.kind.as_deref().or(name).unwrap_or_default();
        let index = event.output_index;
        match kind {
            "response.created" | "response.in_progress" | "response.queued" if !self.meta_sent => {
                self.meta_sent = true;
                let response = event.response.unwrap_or(Value::Null);
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
            }
            "response.output_item.added" => {
                if let (Some(index), Some(item)) = (index, &event.item) {
                    self.output.added(index, item, out);
                }
            }
            "response.output_item.done" => {
                if let (Some(index), Some(item)) = (index, event.item) {
                    self.output.done(index, item, out);
                }
            }
            "response.output_text.delta" => {
                self.output
                    .text(index, event.delta.unwrap_or_default(), out);
            }
            "response.refusal.delta" => {
                self.output
                    .refusal(index, event.delta.unwrap_or_default(), out);
            }
            "response.function_call_arguments.delta" => self.output.arguments(
                index,
                event.item_id.as_deref(),
                event.delta.unwrap_or_default(),
                out,
            ),
            "response.function_call_arguments.done" => self.output.arguments_done(
                index,
                event.item_id.as_deref(),
                event.arguments.unwrap_or_default(),
                out,
            ),
            "response.reasoning_summary_text.delta" | "response.reasoning_text.delta" => {
                if let Some(delta) = event.delta.filter(|delta| !delta.is_empty()) {
                    out.push_back(ModelDelta::Thought(delta));
                }
            }
            "response.reasoning_summary_part.added"
                if event.summary_index.is_some_and(|index| index > 0) =>
            {
                out.push_back(ModelDelta::Thought("\n\n".to_owned()));
            }
            "response.completed" | "response.incomplete" => {
                let response = event.response.unwrap_or(Value::Null);
                self.output.finish(&response, out);
                self.finished = true;
                return Ok(true);
            }
            "response.failed" => {
                return Err(errors::failed(&event.response.unwrap_or(Value::Null)));
            }
            "error" => {
                let error: Value = serde_json::from_str(data).unwrap_or(Value::Null);
                return Err(errors::error_object(&error));
            }
            _ => {}
        }
        Ok(false)
    }

    fn finished(&self) -> bool {
        self.finished
    }
}

fn ended_early() -> ProviderError {
    ProviderError::Stream(
        "the stream ended before the reply was complete (no response.completed)".to_owned(),
    )
}
