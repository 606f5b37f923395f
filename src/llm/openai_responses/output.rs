//! The reply's output items → [`ModelDelta`]s, the same for a stream (items arrive in pieces,
//! keyed by `output_index` / `item_id`) and a whole reply (every item arrives done).
//!
//! - `message` items give text (and refusal); their `id` (and `phase`) is kept as an artifact
//!   `On(0)` when the reply has exactly one message — with several, the text is joined and no
//!   single id fits it, so none is kept (the API then takes the text as a new message).
//! - `function_call` items give tool calls numbered by their order in the reply (not by their
//!   output index); the run's call id is the item's `call_id`, and the item's own `id`
//!   (`fc_…`) is kept as an artifact `On(call)`.
//! - `reasoning` items are kept whole and verbatim (with `encrypted_content`) as artifacts
//!   `Before(next element)`, taken from the item's *done* form (the added form's encrypted
//!   content may be incomplete).
//! - The items of hosted tools (`web_search_call`, `code_interpreter_call`,
//!   `file_search_call`; see [`crate::llm::hosted`]) are kept whole and verbatim, from their
//!   done form, as artifacts `Before(next element)`, like reasoning; each `web_search_call`
//!   counts one web search in the usage. Each also streams as a hosted call and result; the
//!   `url_citation` annotations of a message's text as citations.
//! - Other item types are ignored.

use std::collections::{HashMap, VecDeque};

use serde_json::{Map, Value};

use crate::llm::event::Citation;
use crate::llm::model::ModelDelta;
use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, FinishReason, Usage};

/// The key of the artifact that keeps a reply's response id (previous-response mode only).
/// Never a field of an item: the encoder reads it and never sends it as one.
pub(crate) const RESPONSE_ID_KEY: &str = "response_id";

#[derive(Debug)]
enum Item {
    /// A reasoning item, to go back before the element that followed it.
    Reasoning(ArtifactPlace),
    /// A hosted tool's item, kept like a reasoning item.
    Hosted(ArtifactPlace),
    /// Tool call number `ordinal`; how many argument bytes came so far.
    Call { ordinal: u32, argument_bytes: usize },
    /// A message; how many text bytes came so far.
    Message { text_bytes: usize },
    /// Done, or of a type this backend ignores.
    Ignored,
}

/// The state of one reply's output.
#[derive(Debug)]
pub(crate) struct Output {
    model: String,
    keep_response_id: bool,
    text_seen: bool,
    calls: u32,
    items: HashMap<u64, Item>,
    /// The output index of each call item by its `id` (argument events may name only that).
    call_items: HashMap<String, u64>,
    /// The `On(0)` fields of each message item.
    message_fields: Vec<Map<String, Value>>,
    /// The `web_search_call` items seen.
    web_searches: u64,
}

impl Output {
    /// The output of a reply to a request for `model`; `keep_response_id` keeps the reply's
    /// response id as an artifact (for `previous_response_id`).
    pub(crate) fn new(model: &str, keep_response_id: bool) -> Self {
        Output {
            model: model.to_owned(),
            keep_response_id,
            text_seen: false,
            calls: 0,
            items: HashMap::new(),
            call_items: HashMap::new(),
            message_fields: Vec::new(),
            web_searches: 0,
        }
    }

    fn artifact(&self, place: ArtifactPlace, data: Value) -> ModelDelta {
        ModelDelta::Artifact(Artifact::new(
            ArtifactProvider::OpenaiResponses,
            self.model.as_str(),
            place,
            data,
        ))
    }

    /// `response.output_item.added`: an item starts.
    pub(crate) fn added(&mut self, index: u64, item: &Value, out: &mut VecDeque<ModelDelta>) {
        if self.items.contains_key(&index) {
            return;
        }
        let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
        let state = match kind {
            "reasoning" => Item::Reasoning(ArtifactPlace::before_next(
                self.text_seen,
                self.calls as usize,
            )),
            "web_search_call" | "code_interpreter_call" | "file_search_call" => {
                if kind == "web_search_call" {
                    self.web_searches = self.web_searches.saturating_add(1);
                }
                Item::Hosted(ArtifactPlace::before_next(
                    self.text_seen,
                    self.calls as usize,
                ))
            }
            "message" => {
                self.text_seen = true;
                Item::Message { text_bytes: 0 }
            }
            "function_call" => {
                let ordinal = self.calls;
                self.calls = self.calls.saturating_add(1);
                let text = |key: &str| item.get(key).and_then(Value::as_str).map(str::to_owned);
                let arguments = text("arguments").filter(|arguments| !arguments.is_empty());
                if let Some(id) = text("id") {
                    self.call_items.insert(id, index);
                }
                let argument_bytes = arguments.as_ref().map_or(0, String::len);
                out.push_back(ModelDelta::ToolCall {
                    index: Some(ordinal),
                    id: text("call_id"),
                    name: text("name"),
                    arguments,
                });
                Item::Call {
                    ordinal,
                    argument_bytes,
                }
            }
            _ => Item::Ignored,
        };
        self.items.insert(index, state);
    }

    /// `response.output_item.done`: an item is complete (a whole reply's items come only so).
    pub(crate) fn done(&mut self, index: u64, item: Value, out: &mut VecDeque<ModelDelta>) {
        if !self.items.contains_key(&index) {
            self.added(index, &item, out);
        }
        let Some(state) = self.items.insert(index, Item::Ignored) else {
            return;
        };
        match state {
            Item::Reasoning(place) => out.push_back(self.artifact(place, item)),
            Item::Hosted(place) => {
                hosted_events(&item, out);
                out.push_back(self.artifact(place, item));
            }
            Item::Call {
                ordinal,
                argument_bytes,
            } => {
                let arguments = item.get("arguments").and_then(Value::as_str);
                if let Some(arguments) = arguments.filter(|a| argument_bytes == 0 && !a.is_empty())
                {
                    out.push_back(arguments_delta(ordinal, arguments.to_owned()));
                }
                if let Some(id) = item.get("id").filter(|id| id.is_string()) {
                    let mut fields = Map::new();
                    fields.insert("id".to_owned(), id.clone());
                    let place = ArtifactPlace::On(ArtifactPlace::call_element(ordinal as usize));
                    out.push_back(self.artifact(place, Value::Object(fields)));
                }
            }
            Item::Message { text_bytes } => {
                if text_bytes == 0 {
                    message_content(&item, out);
                }
                citations(&item, out);
                let mut fields = Map::new();
                for key in ["id", "phase"] {
                    if let Some(value) = item.get(key).filter(|value| value.is_string()) {
                        fields.insert(key.to_owned(), value.clone());
                    }
                }
                if !fields.is_empty() {
                    self.message_fields.push(fields);
                }
            }
            Item::Ignored => {}
        }
    }

    /// `response.output_text.delta` of the item at `index`.
    pub(crate) fn text(
        &mut self,
        index: Option<u64>,
        delta: String,
        out: &mut VecDeque<ModelDelta>,
    ) {
        if let Some(Item::Message { text_bytes }) = index.and_then(|i| self.items.get_mut(&i)) {
            *text_bytes = text_bytes.saturating_add(delta.len());
        }
        if !delta.is_empty() {
            out.push_back(ModelDelta::Text(delta));
        }
    }

    /// `response.refusal.delta` of the item at `index`.
    pub(crate) fn refusal(
        &mut self,
        index: Option<u64>,
        delta: String,
        out: &mut VecDeque<ModelDelta>,
    ) {
        if let Some(Item::Message { text_bytes }) = index.and_then(|i| self.items.get_mut(&i)) {
            *text_bytes = text_bytes.saturating_add(delta.len());
        }
        if !delta.is_empty() {
            out.push_back(ModelDelta::Refusal(delta));
        }
    }

    /// The call item an argument event names (by output index, else by item id).
    fn call_at(&mut self, index: Option<u64>, item_id: Option<&str>) -> Option<&mut Item> {
        let index = match index.filter(|index| self.items.contains_key(index)) {
            Some(index) => index,
            None => *self.call_items.get(item_id?)?,
        };
        self.items.get_mut(&index)
    }

    /// `response.function_call_arguments.delta`. A delta for an item that is not a known call
    /// (a built-in tool's) is ignored.
    pub(crate) fn arguments(
        &mut self,
        index: Option<u64>,
        item_id: Option<&str>,
        delta: String,
        out: &mut VecDeque<ModelDelta>,
    ) {
        if let Some(Item::Call {
            ordinal,
            argument_bytes,
        }) = self.call_at(index, item_id)
        {
            *argument_bytes = argument_bytes.saturating_add(delta.len());
            if !delta.is_empty() {
                out.push_back(arguments_delta(*ordinal, delta));
            }
        }
    }

    /// `response.function_call_arguments.done`: the whole arguments, used only when no delta
    /// brought any.
    pub(crate) fn arguments_done(
        &mut self,
        index: Option<u64>,
        item_id: Option<&str>,
        arguments: String,
        out: &mut VecDeque<ModelDelta>,
    ) {
        if let Some(Item::Call {
            ordinal,
            argument_bytes,
        }) = self.call_at(index, item_id)
            && *argument_bytes == 0
            && !arguments.is_empty()
        {
            *argument_bytes = arguments.len();
            out.push_back(arguments_delta(*ordinal, arguments));
        }
    }

    /// The end of the reply (`response.completed` / `response.incomplete`, or a whole reply):
    /// the message's id, the response id when kept, the finish reason and the usage.
    pub(crate) fn finish(&mut self, response: &Value, out: &mut VecDeque<ModelDelta>) {
        if self.message_fields.len() == 1 {
            let fields = std::mem::take(&mut self.message_fields);
            for fields in fields {
                out.push_back(self.artifact(ArtifactPlace::On(0), Value::Object(fields)));
            }
        }
        if self.keep_response_id
            && let Some(id) = response.get("id").filter(|id| id.is_string())
        {
            let mut fields = Map::new();
            fields.insert(RESPONSE_ID_KEY.to_owned(), id.clone());
            out.push_back(self.artifact(ArtifactPlace::On(0), Value::Object(fields)));
        }
        out.push_back(ModelDelta::Finish(finish_reason(response)));
        if let Some(mut usage) = response.get("usage").and_then(usage) {
            usage.web_search_requests = (self.web_searches > 0).then_some(self.web_searches);
            out.push_back(ModelDelta::Usage(usage));
        }
    }
}

fn arguments_delta(ordinal: u32, arguments: String) -> ModelDelta {
    ModelDelta::ToolCall {
        index: Some(ordinal),
        id: None,
        name: None,
        arguments: Some(arguments),
    }
}

/// A hosted tool's done item as its call and result: `web_search_call` → `web_search` (its
/// `action` the input), `code_interpreter_call` → `code_interpreter` (its `code`),
/// `file_search_call` → `file_search` (its `queries`); a `failed` status is an error.
fn hosted_events(item: &Value, out: &mut VecDeque<ModelDelta>) {
    let kind = item.get("type").and_then(Value::as_str).unwrap_or_default();
    let (name, input) = match kind {
        "web_search_call" => ("web_search", item.get("action")),
        "code_interpreter_call" => ("code_interpreter", item.get("code")),
        _ => ("file_search", item.get("queries")),
    };
    let id = item
        .get("id")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    out.push_back(ModelDelta::HostedToolCall {
        id: id.clone(),
        name: name.to_owned(),
        input: input.cloned().unwrap_or(Value::Null),
    });
    out.push_back(ModelDelta::HostedToolResult {
        id,
        name: name.to_owned(),
        is_error: item.get("status").and_then(Value::as_str) == Some("failed"),
        output: item.clone(),
    });
}

/// The `url_citation` annotations of a done `message` item's text parts, their character
/// ranges turned into byte offsets of the reply's text.
fn citations(item: &Value, out: &mut VecDeque<ModelDelta>) {
    let Some(parts) = item.get("content").and_then(Value::as_array) else {
        return;
    };
    let mut offset = 0;
    for part in parts {
        let text = part.get("text").and_then(Value::as_str).unwrap_or_default();
        let annotations = part.get("annotations").and_then(Value::as_array);
        for annotation in annotations.into_iter().flatten() {
            let field = |key: &str| annotation.get(key).and_then(Value::as_str);
            if field("type") != Some("url_citation") {
                continue;
            }
            let byte = |key: &str| {
                let chars = usize::try_from(annotation.get(key)?.as_u64()?).ok()?;
                let at = text
                    .char_indices()
                    .nth(chars)
                    .map_or(text.len(), |(at, _)| at);
                Some(offset + at)
            };
            out.push_back(ModelDelta::Citation(Citation {
                url: field("url").unwrap_or_default().to_owned(),
                title: field("title").map(str::to_owned),
                cited_text: None,
                start: byte("start_index"),
                end: byte("end_index"),
            }));
        }
        offset += text.len();
    }
}

/// The text and refusal parts of a whole `message` item.
fn message_content(item: &Value, out: &mut VecDeque<ModelDelta>) {
    let Some(parts) = item.get("content").and_then(Value::as_array) else {
        return;
    };
    for part in parts {
        let text = |key: &str| {
            part.get(key)
                .and_then(Value::as_str)
                .filter(|text| !text.is_empty())
                .map(str::to_owned)
        };
        match part.get("type").and_then(Value::as_str) {
            Some("output_text") => out.extend(text("text").map(ModelDelta::Text)),
            Some("refusal") => out.extend(text("refusal").map(ModelDelta::Refusal)),
            _ => {}
        }
    }
}

/// `completed` → stop; `incomplete` for `max_output_tokens` → length (calls cut there never
/// run), for `content_filter` → content filter, else the reason as sent.
fn finish_reason(response: &Value) -> FinishReason {
    match response.get("status").and_then(Value::as_str) {
        Some("incomplete") => {
            match response
                .pointer("/incomplete_details/reason")
                .and_then(Value::as_str)
            {
                Some("max_output_tokens") | None => FinishReason::Length,
                Some("content_filter") => FinishReason::ContentFilter,
                Some(other) => FinishReason::Other(other.to_owned()),
            }
        }
        _ => FinishReason::Stop,
    }
}

/// The usage of a reply: `input_tokens` (all input, cache reads and writes included),
/// `input_tokens_details.cached_tokens` / `.cache_write_tokens`, `output_tokens` (reasoning
/// included), `output_tokens_details.reasoning_tokens`.
pub(crate) fn usage(value: &Value) -> Option<Usage> {
    let count = |pointer: &str| value.pointer(pointer).and_then(Value::as_u64);
    let prompt_tokens = count("/input_tokens")?;
    let completion_tokens = count("/output_tokens")?;
    Some(Usage {
        prompt_tokens,
        completion_tokens,
        total_tokens: count("/total_tokens")
            .unwrap_or_else(|| prompt_tokens.saturating_add(completion_tokens)),
        cached_tokens: count("/input_tokens_details/cached_tokens"),
        reasoning_tokens: count("/output_tokens_details/reasoning_tokens"),
        cache_write_tokens: count("/input_tokens_details/cache_write_tokens"),
        web_search_requests: None,
    })
}
