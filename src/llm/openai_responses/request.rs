//! The request body of `POST /responses`, serialised straight from the borrowed history.
//!
//! - The first system message becomes `instructions`; other system and developer messages are
//!   `developer` messages in place.
//! - User messages: `input_text` / `input_image` / `input_audio` / `input_file` parts.
//! - Assistant messages go out element by element in the order of
//!   [`layout`](crate::vocab::artifact::layout) for this API and model: reasoning items
//!   verbatim, the text as an output `message`, each call as a `function_call` whose `call_id`
//!   is the run's call id, with the `On` fields (`id`, `phase`) merged in. Artifacts of another
//!   API or model are left out (with them the ids that need them).
//! - Tool results are `function_call_output` items tied by `call_id`.
//!
//! Options: `reasoning_effort` → `reasoning: {effort, summary: "auto"}` (`Off` →
//! `{effort: "none"}`, no summary); `max_completion_tokens` (else `max_tokens`) →
//! `max_output_tokens`; `tool_choice` and `parallel_tool_calls` (only with tools);
//! `response_format` → `text.format`; `temperature`, `top_p`, `user`; `extra` at the top level
//! (e.g. `prompt_cache_key`), winning over the typed fields. Not sent, the API has no such
//! parameter: `stop`, `seed`, `presence_penalty`, `frequency_penalty`, `stream_options`,
//! `reasoning_budget_tokens`.

use serde::Serialize;
use serde::ser::{SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use crate::llm::error::ProviderError;
use crate::llm::model::ChatRequest;
use crate::llm::openai_responses::output::RESPONSE_ID_KEY;
use crate::vocab::artifact::{Element, layout};
use crate::vocab::{
    Artifact, ArtifactProvider, ContentPart, MessageContent, OpenaiChatMessage, ReasoningEffort,
    ToolChoice, ToolDefinition,
};

/// What the client's configuration decides about a request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mode {
    /// `store` (forced on by `previous_response_id`, which needs stored responses).
    pub(crate) store: bool,
    /// Continue from the last reply's stored response instead of sending the whole history.
    pub(crate) previous_response_id: bool,
}

/// The JSON body of a `/responses` request.
pub(crate) fn request_body(
    request: &ChatRequest<'_>,
    stream: bool,
    mode: Mode,
) -> Result<Vec<u8>, ProviderError> {
    let options = request.options;
    let extra = &options.extra;
    let unless_extra = |key: &str| !extra.contains_key(key);
    let messages = request.messages;
    let instructions = messages
        .iter()
        .position(|message| matches!(message, OpenaiChatMessage::System { .. }));
    let previous = if mode.previous_response_id {
        last_response_id(messages, request.model)
    } else {
        None
    };
    let start = previous.map_or(0, |(index, _)| index + 1);
    let store = mode.store || mode.previous_response_id;
    let has_tools = !request.tools.is_empty() || !options.hosted_tools.is_empty();
    let mut tools: Vec<WireEntry<'_>> = request
        .tools
        .iter()
        .map(|tool| WireEntry::Function(WireTool::from(tool)))
        .collect();
    for hosted in &options.hosted_tools {
        tools.push(WireEntry::Hosted(hosted.responses()?));
    }
    let body = WireRequest {
        model: request.model,
        instructions: instructions
            .and_then(|index| match &messages[index] {
                OpenaiChatMessage::System { content, .. } => Some(content.text()),
                _ => None,
            })
            .filter(|_| unless_extra("instructions")),
        input: Input {
            messages: &messages[start..],
            skip: instructions.and_then(|index| index.checked_sub(start)),
            model: request.model,
        },
        tools,
        tool_choice: options
            .tool_choice
            .as_ref()
            .filter(|_| has_tools && unless_extra("tool_choice"))
            .map(WireToolChoice),
        parallel_tool_calls: options
            .parallel_tool_calls
            .filter(|_| has_tools && unless_extra("parallel_tool_calls")),
        store: Some(store).filter(|_| unless_extra("store")),
        include: (!store && unless_extra("include")).then_some(["reasoning.encrypted_content"]),
        stream: (stream && unless_extra("stream")).then_some(true),
        previous_response_id: previous
            .map(|(_, id)| id)
            .filter(|_| unless_extra("previous_response_id")),
        reasoning: options
            .reasoning_effort
            .filter(|_| unless_extra("reasoning"))
            .map(WireReasoning::from),
        max_output_tokens: options
            .max_completion_tokens
            .or(options.max_tokens)
            .filter(|_| unless_extra("max_output_tokens")),
        temperature: options.temperature.filter(|_| unless_extra("temperature")),
        top_p: options.top_p.filter(|_| unless_extra("top_p")),
        text: options
            .response_format
            .as_ref()
            .filter(|_| unless_extra("text"))
            .map(|format| WireText {
                format: text_format(format),
            }),
        user: options.user.as_deref().filter(|_| unless_extra("user")),
        extra,
    };
    serde_json::to_vec(&body)
        .map_err(|error| ProviderError::Other(format!("could not serialise the request: {error}")))
}

/// The last assistant message whose response id this API and model kept, and that id.
fn last_response_id<'a>(
    messages: &'a [OpenaiChatMessage],
    model: &str,
) -> Option<(usize, &'a str)> {
    messages
        .iter()
        .enumerate()
        .rev()
        .find_map(|(index, message)| {
            message
                .artifacts()
                .iter()
                .filter(|artifact| artifact.usable_by(ArtifactProvider::OpenaiResponses, model))
                .find_map(|artifact| artifact.data.get(RESPONSE_ID_KEY)?.as_str())
                .map(|id| (index, id))
        })
}

/// OpenAI's chat `response_format` in the Responses API's `text.format` shape: a
/// `json_schema` format's `json_schema` object is flattened into it; other formats
/// (`json_object`, `text`) are the same in both.
fn text_format(format: &Value) -> Value {
    let (Some("json_schema"), Some(Value::Object(schema))) = (
        format.get("type").and_then(Value::as_str),
        format.get("json_schema"),
    ) else {
        return format.clone();
    };
    let mut flat = Map::new();
    flat.insert("type".to_owned(), Value::String("json_schema".to_owned()));
    for (key, value) in schema {
        flat.insert(key.clone(), value.clone());
    }
    Value::Object(flat)
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
    input: Input<'a>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<WireToolChoice<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    parallel_tool_calls: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    store: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    include: Option<[&'static str; 1]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    previous_response_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<WireReasoning>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_output_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    text: Option<WireText>,
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<&'a str>,
    #[serde(flatten)]
    extra: &'a Map<String, Value>,
}

/// An entry of `tools`: a function, or a hosted tool's whole entry.
#[derive(Serialize)]
#[serde(untagged)]
enum WireEntry<'a> {
    Function(WireTool<'a>),
    Hosted(Value),
}

/// A function tool, flat (not nested under `function`). `strict` is sent as set, `false`
/// when unset: the API's default is strict, which rejects the usual JSON Schemas.
#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    parameters: &'a Value,
    strict: bool,
}

impl<'a> From<&'a ToolDefinition> for WireTool<'a> {
    fn from(tool: &'a ToolDefinition) -> Self {
        WireTool {
            kind: "function",
            name: &tool.function.name,
            description: tool.function.description.as_deref(),
            parameters: &tool.function.parameters,
            strict: tool.function.strict.unwrap_or(false),
        }
    }
}

struct WireToolChoice<'a>(&'a ToolChoice);

impl Serialize for WireToolChoice<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Function(name) => {
                let mut map = serializer.serialize_map(Some(2))?;
                map.serialize_entry("type", "function")?;
                map.serialize_entry("name", name)?;
                map.end()
            }
        }
    }
}

#[derive(Serialize)]
struct WireReasoning {
    effort: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    summary: Option<&'static str>,
}

impl From<ReasoningEffort> for WireReasoning {
    fn from(effort: ReasoningEffort) -> Self {
        WireReasoning {
            effort: effort.as_str(),
            // Summaries are what `--show-reasoning` shows; there are none without reasoning.
            summary: (effort != ReasoningEffort::Off).then_some("auto"),
        }
    }
}

#[derive(Serialize)]
struct WireText {
    format: Value,
}

/// The `input` items of the messages.
struct Input<'a> {
    messages: &'a [OpenaiChatMessage],
    /// The message sent as `instructions` (an index into `messages`).
    skip: Option<usize>,
    model: &'a str,
}

impl Serialize for Input<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(None)?;
        for (index, message) in self.messages.iter().enumerate() {
            if Some(index) == self.skip {
                continue;
            }
            match message {
                OpenaiChatMessage::System { content, .. }
                | OpenaiChatMessage::Developer { content, .. } => {
                    seq.serialize_element(&InputMessage::new("developer", content))?;
                }
                OpenaiChatMessage::User { content, .. } => {
                    seq.serialize_element(&InputMessage::new("user", content))?;
                }
                OpenaiChatMessage::Tool {
                    tool_call_id,
                    content,
                    ..
                } => seq.serialize_element(&CallOutput {
                    kind: "function_call_output",
                    call_id: tool_call_id,
                    output: InputContent(content),
                })?,
                OpenaiChatMessage::Assistant { refusal, .. } => {
                    let refusal = refusal.as_deref().filter(|refusal| !refusal.is_empty());
                    let elements = layout(message, ArtifactProvider::OpenaiResponses, self.model);
                    let has_text = elements.iter().any(|e| matches!(e, Element::Text { .. }));
                    // A refusal without text goes where the text would: after the items that
                    // precede the first element.
                    let mut pending_refusal = refusal.filter(|_| !has_text);
                    for element in &elements {
                        if !matches!(element, Element::Item(_))
                            && let Some(refusal) = pending_refusal.take()
                        {
                            seq.serialize_element(&OutputMessage::new(None, Some(refusal), &[]))?;
                        }
                        match element {
                            Element::Item(artifact) => seq.serialize_element(&artifact.data)?,
                            Element::Text { text, on } => seq
                                .serialize_element(&OutputMessage::new(Some(*text), refusal, on))?,
                            Element::Call { call, on } => seq.serialize_element(&FunctionCall {
                                kind: "function_call",
                                call_id: &call.id,
                                name: &call.function.name,
                                arguments: &call.function.arguments,
                                fields: OnFields(on),
                            })?,
                        }
                    }
                    if let Some(refusal) = pending_refusal {
                        seq.serialize_element(&OutputMessage::new(None, Some(refusal), &[]))?;
                    }
                }
            }
        }
        seq.end()
    }
}

#[derive(Serialize)]
struct InputMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: InputContent<'a>,
}

impl<'a> InputMessage<'a> {
    fn new(role: &'static str, content: &'a MessageContent) -> Self {
        InputMessage {
            kind: "message",
            role,
            content: InputContent(content),
        }
    }
}

/// A message's content as input: a string, or `input_*` parts.
struct InputContent<'a>(&'a MessageContent);

impl Serialize for InputContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            MessageContent::Text(text) => serializer.serialize_str(text),
            MessageContent::Parts(parts) => {
                let mut seq = serializer.serialize_seq(Some(parts.len()))?;
                for part in parts {
                    seq.serialize_element(&InputPart(part))?;
                }
                seq.end()
            }
        }
    }
}

struct InputPart<'a>(&'a ContentPart);

impl Serialize for InputPart<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        match self.0 {
            ContentPart::Text { text } => {
                map.serialize_entry("type", "input_text")?;
                map.serialize_entry("text", text)?;
            }
            ContentPart::ImageUrl { image_url } => {
                map.serialize_entry("type", "input_image")?;
                map.serialize_entry("image_url", &image_url.url)?;
                map.serialize_entry("detail", image_url.detail.as_deref().unwrap_or("auto"))?;
            }
            ContentPart::InputAudio { input_audio } => {
                map.serialize_entry("type", "input_audio")?;
                map.serialize_entry("input_audio", input_audio)?;
            }
            ContentPart::File { file } => {
                map.serialize_entry("type", "input_file")?;
                // `{"file_id"}` or `{"file_data", "filename"}`: the same fields, flat.
                if let Value::Object(fields) = file {
                    for (key, value) in fields.iter().filter(|(key, _)| *key != "type") {
                        map.serialize_entry(key, value)?;
                    }
                }
            }
        }
        map.end()
    }
}

#[derive(Serialize)]
struct CallOutput<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    output: InputContent<'a>,
}

#[derive(Serialize)]
struct FunctionCall<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    name: &'a str,
    arguments: &'a str,
    #[serde(flatten)]
    fields: OnFields<'a>,
}

/// An assistant's output `message` item.
#[derive(Serialize)]
struct OutputMessage<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    role: &'static str,
    content: Vec<OutputPart<'a>>,
    #[serde(flatten)]
    fields: OnFields<'a>,
}

impl<'a> OutputMessage<'a> {
    fn new(text: Option<&'a str>, refusal: Option<&'a str>, on: &'a [&'a Artifact]) -> Self {
        let mut content = Vec::with_capacity(2);
        if let Some(text) = text {
            content.push(OutputPart::Text {
                text,
                annotations: [],
            });
        }
        if let Some(refusal) = refusal {
            content.push(OutputPart::Refusal { refusal });
        }
        OutputMessage {
            kind: "message",
            role: "assistant",
            content,
            fields: OnFields(on),
        }
    }
}

#[derive(Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum OutputPart<'a> {
    #[serde(rename = "output_text")]
    Text {
        text: &'a str,
        annotations: [(); 0],
    },
    Refusal {
        refusal: &'a str,
    },
}

/// The fields of `On` artifacts, merged into an item. Never the response id (kept for
/// `previous_response_id`, not a field of any item), never a field the item itself has.
struct OnFields<'a>(&'a [&'a Artifact]);

/// The fields every item above writes itself.
const OWN_FIELDS: &[&str] = &["type", "role", "content", "call_id", "name", "arguments"];

impl Serialize for OnFields<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        for artifact in self.0 {
            if let Value::Object(fields) = &artifact.data {
                for (key, value) in fields {
                    if key != RESPONSE_ID_KEY && !OWN_FIELDS.contains(&key.as_str()) {
                        map.serialize_entry(key, value)?;
                    }
                }
            }
        }
        map.end()
    }
}
