//! The `generateContent` request body: the history as `contents`, the system messages as
//! `systemInstruction`, tools in Gemini's schema dialect, and the request options as
//! `generationConfig` and `toolConfig`.
//!
//! An assistant message goes out in the order [`layout`] gives: standalone parts (thoughts,
//! signature-only parts) verbatim, the text part and the `functionCall` parts with their
//! `thoughtSignature` merged back in, so every signature returns in its original part. The tool
//! results after it become one `user` turn with as many `functionResponse` parts as there were
//! calls (Gemini answers 400 when the counts differ). Adjacent turns of one role are merged, so
//! roles alternate.
//!
//! Hosted tools ([`crate::llm::hosted`]) are `tools` entries of their own (`googleSearch`,
//! `codeExecution`, `urlContext`) after the function declarations; any other fails the
//! request.

use std::borrow::Cow;

use serde::ser::{Error as _, Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::llm::error::ProviderError;
use crate::llm::gemini::schema::{SchemaDialect, to_json_schema, to_openapi};
use crate::llm::gemini::wire::{Merged, Part, Turn};
use crate::llm::model::ChatRequest;
use crate::vocab::artifact::{Element, layout};
use crate::vocab::{
    ArtifactProvider, ContentPart, MessageContent, OpenaiChatMessage, ReasoningEffort,
    RequestOptions, ToolCall, ToolChoice, ToolDefinition,
};

/// The signature Gemini documents for a `functionCall` whose real one is unknown (history from
/// another provider or model): Gemini 3 answers 400 when the first call of a step of the
/// current turn has none.
pub(crate) const DUMMY_SIGNATURE: &str = "skip_thought_signature_validator";

/// The thinking budgets of the reasoning efforts on models that take a budget (Gemini 2.5).
const LOW_BUDGET: u32 = 1024;
const MEDIUM_BUDGET: u32 = 8192;
const HIGH_BUDGET: u32 = 24576;

/// The JSON body of a request for `request`, written straight from the borrowed history.
///
/// # Errors
/// [`ProviderError::Other`] when a tool's schema cannot be converted to the chosen dialect.
pub(crate) fn request_body(
    request: &ChatRequest<'_>,
    dialect: SchemaDialect,
) -> Result<Vec<u8>, ProviderError> {
    let model = model_name(request.model);
    let (system, contents) = contents(request.messages, model);
    let mut entries = Vec::new();
    let mut tool_config = None;
    if !request.tools.is_empty() {
        entries.push(tools(request.tools, dialect)?);
        tool_config = request.options.tool_choice.as_ref().map(tool_config_of);
    }
    // Hosted tools are entries of their own after the function declarations.
    for hosted in &request.options.hosted_tools {
        entries.push(hosted.gemini()?);
    }
    let tools = (!entries.is_empty()).then_some(Value::Array(entries));
    let generation = generation_config(request.options, model);
    let body = Body {
        contents: &contents,
        system: &system,
        tools: tools.as_ref(),
        tool_config: tool_config.as_ref(),
        generation: (!generation.is_empty()).then_some(&generation),
        extra: &request.options.extra,
    };
    serde_json::to_vec(&body)
        .map_err(|error| ProviderError::Other(format!("could not encode the request: {error}")))
}

/// The model name without the `models/` prefix Gemini's own names carry.
pub(crate) fn model_name(model: &str) -> &str {
    model.strip_prefix("models/").unwrap_or(model)
}

/// The body. `extra` is merged in: a key the body has as an object (`generationConfig`) gets
/// the extra object's fields, anything else is set as given.
struct Body<'r, 'a> {
    contents: &'r [Turn<'a>],
    system: &'r [Merged<'a>],
    tools: Option<&'r Value>,
    tool_config: Option<&'r Value>,
    generation: Option<&'r Map<String, Value>>,
    extra: &'a Map<String, Value>,
}

/// `{"parts": [...]}`.
struct Parts<'r, 'a>(&'r [Merged<'a>]);

impl Serialize for Parts<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("parts", self.0)?;
        map.end()
    }
}

/// Write `own` as `key`, merged with (or replaced by) the extra value of that key.
fn entry<M: SerializeMap, T: Serialize + ?Sized>(
    map: &mut M,
    key: &str,
    own: &T,
    extra: &Map<String, Value>,
) -> Result<(), M::Error> {
    match extra.get(key) {
        None => map.serialize_entry(key, own),
        Some(Value::Object(more)) => {
            let mut merged = serde_json::to_value(own).map_err(M::Error::custom)?;
            match &mut merged {
                Value::Object(fields) => {
                    fields.extend(more.iter().map(|(k, v)| (k.clone(), v.clone())));
                    map.serialize_entry(key, &merged)
                }
                _ => map.serialize_entry(key, more),
            }
        }
        Some(other) => map.serialize_entry(key, other),
    }
}

impl Serialize for Body<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let mut written: Vec<&str> = Vec::new();
        entry(&mut map, "contents", self.contents, self.extra)?;
        written.push("contents");
        if !self.system.is_empty() {
            entry(
                &mut map,
                "systemInstruction",
                &Parts(self.system),
                self.extra,
            )?;
            written.push("systemInstruction");
        }
        if let Some(tools) = self.tools {
            entry(&mut map, "tools", tools, self.extra)?;
            written.push("tools");
        }
        if let Some(config) = self.tool_config {
            entry(&mut map, "toolConfig", config, self.extra)?;
            written.push("toolConfig");
        }
        if let Some(generation) = self.generation {
            entry(&mut map, "generationConfig", generation, self.extra)?;
            written.push("generationConfig");
        }
        for (key, value) in self.extra {
            if !written.contains(&key.as_str()) {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// The system parts and the `contents` of `messages`.
fn contents<'a>(
    messages: &'a [OpenaiChatMessage],
    model: &str,
) -> (Vec<Merged<'a>>, Vec<Turn<'a>>) {
    // A result's call is almost always in the assistant message just before it; the whole
    // history is searched only for one that is not.
    let mut recent_calls: &[ToolCall] = &[];
    let name_of = |recent: &'a [ToolCall], id: &'a str| -> &'a str {
        let find = |calls: &'a [ToolCall]| {
            calls
                .iter()
                .find(|call| call.id == id)
                .map(|call| call.function.name.as_str())
        };
        find(recent)
            .or_else(|| {
                messages
                    .iter()
                    .find_map(|message| find(message.tool_calls()))
            })
            .unwrap_or(id)
    };
    // The current turn: the steps after the last user message.
    let current_turn = messages
        .iter()
        .rposition(|message| matches!(message, OpenaiChatMessage::User { .. }))
        .map_or(0, |index| index + 1);
    let mut system = Vec::new();
    let mut turns: Vec<Turn<'a>> = Vec::new();
    let push = |turns: &mut Vec<Turn<'a>>, role: &'static str, parts: Vec<Merged<'a>>| {
        if parts.is_empty() {
            return;
        }
        match turns.last_mut() {
            Some(turn) if turn.role == role => turn.parts.extend(parts),
            _ => turns.push(Turn { role, parts }),
        }
    };
    for (index, message) in messages.iter().enumerate() {
        match message {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. } => {
                let part = Part::Text(text_of(content)).into();
                // Instructions before the conversation are the system instruction; later ones
                // (a summary, an injected note) stay where they are, as user text.
                if turns.is_empty() {
                    system.push(part);
                } else {
                    push(&mut turns, "user", vec![part]);
                }
            }
            OpenaiChatMessage::User { content, .. } => {
                push(&mut turns, "user", user_parts(content));
            }
            OpenaiChatMessage::Assistant { .. } => {
                recent_calls = message.tool_calls();
                push(
                    &mut turns,
                    "model",
                    model_parts(message, model, index >= current_turn),
                );
            }
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
                ..
            } => {
                let name = name_of(recent_calls, tool_call_id);
                let part = Part::Response {
                    id: sends_call_id(tool_call_id).then_some(tool_call_id.as_str()),
                    name,
                    key: if *is_error { "error" } else { "result" },
                    text: text_of(content),
                };
                push(&mut turns, "user", vec![part.into()]);
            }
        }
    }
    (system, turns)
}

/// Content as text, borrowed when it is one string (as `MessageContent::text` gives it).
fn text_of(content: &MessageContent) -> Cow<'_, str> {
    match content {
        MessageContent::Text(text) => Cow::Borrowed(text),
        MessageContent::Parts(_) => Cow::Owned(content.text()),
    }
}

/// Whether a call id goes on the wire: one the vendor chose. Ids this crate made up for calls
/// that came without one (`call_` + 24 alphanumerics) are not sent: Gemini never saw them.
fn sends_call_id(id: &str) -> bool {
    let generated = id
        .strip_prefix("call_")
        .is_some_and(|rest| rest.len() == 24 && rest.bytes().all(|b| b.is_ascii_alphanumeric()));
    !id.is_empty() && !generated
}

/// The parts of an assistant message, signatures in place; `current_turn` adds the documented
/// dummy signature to the first call when this model did not make it (no usable artifact on
/// it: another model's call, or one injected into the history). A call this model made goes
/// back exactly as it was sent, with or without a signature.
fn model_parts<'a>(
    message: &'a OpenaiChatMessage,
    model: &str,
    current_turn: bool,
) -> Vec<Merged<'a>> {
    let mut parts: Vec<Merged<'a>> = Vec::new();
    let mut first_call: Option<(usize, bool)> = None;
    for element in layout(message, ArtifactProvider::Gemini, model) {
        match element {
            Element::Item(artifact) => parts.push(Part::Verbatim(&artifact.data).into()),
            Element::Text { text, on } => parts.push(Merged {
                part: Part::Text(Cow::Borrowed(text)),
                on,
                placeholder: None,
            }),
            Element::Call { call, on } => {
                // An `On` artifact of this model, even one with no fields, marks its own call.
                first_call.get_or_insert((parts.len(), !on.is_empty()));
                parts.push(Merged {
                    part: function_call(call),
                    on,
                    placeholder: None,
                });
            }
        }
    }
    if current_turn
        && let Some((index, false)) = first_call
        && let Some(part) = parts.get_mut(index)
        && !part.has("thoughtSignature")
    {
        part.placeholder = Some(DUMMY_SIGNATURE);
    }
    parts
}

/// `{"id"?, "name", "args"}`; arguments that are not a JSON object (only a cut or broken call
/// has such, and it was answered with an error) go out as `{}`.
fn function_call(call: &ToolCall) -> Part<'_> {
    let args = match serde_json::from_str::<Value>(&call.function.arguments) {
        Ok(Value::Object(args)) => Value::Object(args),
        _ => Value::Object(Map::new()),
    };
    Part::Call {
        id: sends_call_id(&call.id).then_some(call.id.as_str()),
        name: &call.function.name,
        args,
    }
}

/// The parts of a user message: text, and media as `inlineData` (a `data:` URL) or `fileData`.
fn user_parts(content: &MessageContent) -> Vec<Merged<'_>> {
    match content {
        MessageContent::Text(text) => vec![Part::Text(Cow::Borrowed(text)).into()],
        MessageContent::Parts(parts) => parts
            .iter()
            .filter_map(content_part)
            .map(Merged::from)
            .collect(),
    }
}

fn content_part(part: &ContentPart) -> Option<Part<'_>> {
    match part {
        ContentPart::Text { text } => Some(Part::Text(Cow::Borrowed(text))),
        ContentPart::ImageUrl { image_url } => Some(Part::Media(media(&image_url.url))),
        ContentPart::InputAudio { input_audio } => {
            let data = input_audio.get("data")?.as_str()?;
            let format = input_audio
                .get("format")
                .and_then(Value::as_str)
                .unwrap_or("wav");
            Some(Part::Media(
                json!({ "inlineData": { "mimeType": format!("audio/{format}"), "data": data } }),
            ))
        }
        ContentPart::File { file } => {
            if let Some(data) = file.get("file_data").and_then(Value::as_str) {
                Some(Part::Media(media(data)))
            } else {
                let id = file.get("file_id").and_then(Value::as_str)?;
                Some(Part::Media(media(id)))
            }
        }
    }
}

/// A `data:` URL as `inlineData`, anything else as `fileData` with a MIME type guessed from
/// the name when it has a known extension.
fn media(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:")
        && let Some((header, data)) = rest.split_once(',')
    {
        let mime = header.strip_suffix(";base64").unwrap_or(header);
        return json!({ "inlineData": { "mimeType": mime, "data": data } });
    }
    let path = url
        .split(['?', '#'])
        .next()
        .unwrap_or(url)
        .to_ascii_lowercase();
    let guessed = path
        .rsplit_once('.')
        .and_then(|(_, extension)| mime_of(extension));
    match guessed {
        Some(mime) => json!({ "fileData": { "mimeType": mime, "fileUri": url } }),
        None => json!({ "fileData": { "fileUri": url } }),
    }
}

/// The MIME type of a file extension Gemini takes as media.
fn mime_of(extension: &str) -> Option<&'static str> {
    Some(match extension {
        "png" => "image/png",
        "jpg" | "jpeg" => "image/jpeg",
        "gif" => "image/gif",
        "webp" => "image/webp",
        "pdf" => "application/pdf",
        "mp3" => "audio/mp3",
        "wav" => "audio/wav",
        _ => return None,
    })
}

/// `{"functionDeclarations": [...]}`.
fn tools(tools: &[ToolDefinition], dialect: SchemaDialect) -> Result<Value, ProviderError> {
    let declarations = tools
        .iter()
        .map(|tool| {
            let function = &tool.function;
            let mut declaration = Map::new();
            declaration.insert("name".into(), Value::String(function.name.clone()));
            if let Some(description) = &function.description {
                declaration.insert("description".into(), Value::String(description.clone()));
            }
            match dialect {
                SchemaDialect::JsonSchema => {
                    declaration.insert(
                        "parametersJsonSchema".into(),
                        to_json_schema(&function.parameters),
                    );
                }
                SchemaDialect::OpenApi => {
                    let schema = to_openapi(&function.name, &function.parameters)
                        .map_err(|error| ProviderError::Other(error.to_string()))?;
                    declaration.insert("parameters".into(), schema);
                }
            }
            Ok(Value::Object(declaration))
        })
        .collect::<Result<Vec<_>, ProviderError>>()?;
    Ok(json!({ "functionDeclarations": declarations }))
}

/// `toolConfig.functionCallingConfig`: auto → `AUTO`, none → `NONE`, required → `ANY`, one
/// function → `ANY` limited to it.
fn tool_config_of(choice: &ToolChoice) -> Value {
    let config = match choice {
        ToolChoice::Auto => json!({ "mode": "AUTO" }),
        ToolChoice::None => json!({ "mode": "NONE" }),
        ToolChoice::Required => json!({ "mode": "ANY" }),
        ToolChoice::Function(name) => json!({ "mode": "ANY", "allowedFunctionNames": [name] }),
    };
    json!({ "functionCallingConfig": config })
}

/// `generationConfig` from the options; empty when nothing is set.
fn generation_config(options: &RequestOptions, model: &str) -> Map<String, Value> {
    let mut config = Map::new();
    let mut set = |key: &str, value: Option<Value>| {
        if let Some(value) = value {
            config.insert(key.into(), value);
        }
    };
    set(
        "maxOutputTokens",
        options
            .max_completion_tokens
            .or(options.max_tokens)
            .map(Value::from),
    );
    set("temperature", options.temperature.map(float));
    set("topP", options.top_p.map(float));
    set(
        "stopSequences",
        options.stop.as_ref().map(|stop| json!(stop)),
    );
    set("seed", options.seed.map(Value::from));
    set("presencePenalty", options.presence_penalty.map(float));
    set("frequencyPenalty", options.frequency_penalty.map(float));
    if let Some(format) = &options.response_format {
        typed_output(format, &mut config);
    }
    if let Some(thinking) = thinking_config(
        model,
        options.reasoning_effort,
        options.reasoning_budget_tokens,
    ) {
        config.insert("thinkingConfig".into(), thinking);
    }
    config
}

/// An `f32` option as the number it was written as (`0.9`, not `0.8999999761581421`).
fn float(value: f32) -> Value {
    let shortest = value.to_string().parse::<f64>().unwrap_or(f64::from(value));
    Value::from(shortest)
}

/// OpenAI's `response_format` in Gemini's typed-output mode: `json_schema` →
/// `responseMimeType: application/json` + `responseJsonSchema`; `json_object` → JSON without a
/// schema; `text` → nothing.
fn typed_output(format: &Value, config: &mut Map<String, Value>) {
    match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            config.insert("responseMimeType".into(), json!("application/json"));
            if let Some(schema) = format.pointer("/json_schema/schema") {
                config.insert("responseJsonSchema".into(), to_json_schema(schema));
            }
        }
        Some("json_object") => {
            config.insert("responseMimeType".into(), json!("application/json"));
        }
        _ => {}
    }
}

/// Whether `model` is a Gemini 3 model (they take `thinkingLevel`).
fn is_gemini_3(model: &str) -> bool {
    model.starts_with("gemini-3")
}

/// `thinkingConfig`: an explicit budget is sent as `thinkingBudget`; an effort is
/// `thinkingLevel` on Gemini 3 (`LOW`/`MEDIUM`/`HIGH`; off → `LOW`, the lowest level every
/// Gemini 3 model has, as they cannot turn thinking off; medium → `HIGH` on Pro models, which
/// have only `LOW` and `HIGH`) and a `thinkingBudget` on earlier models (off 0, low 1024,
/// medium 8192, high 24576). Thought summaries are asked for whenever thinking is on.
fn thinking_config(
    model: &str,
    effort: Option<ReasoningEffort>,
    budget: Option<u32>,
) -> Option<Value> {
    if let Some(budget) = budget {
        return Some(json!({ "thinkingBudget": budget, "includeThoughts": budget > 0 }));
    }
    let effort = effort?;
    if is_gemini_3(model) {
        // The enum's names, as the official SDK writes them.
        let level = match effort {
            ReasoningEffort::Off | ReasoningEffort::Low => "LOW",
            ReasoningEffort::Medium if model.contains("-pro") => "HIGH",
            ReasoningEffort::Medium => "MEDIUM",
            ReasoningEffort::High => "HIGH",
        };
        let include = !matches!(effort, ReasoningEffort::Off);
        return Some(json!({ "thinkingLevel": level, "includeThoughts": include }));
    }
    let budget = match effort {
        ReasoningEffort::Off => 0,
        ReasoningEffort::Low => LOW_BUDGET,
        ReasoningEffort::Medium => MEDIUM_BUDGET,
        ReasoningEffort::High => HIGH_BUDGET,
    };
    Some(json!({ "thinkingBudget": budget, "includeThoughts": budget > 0 }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Artifact, ArtifactPlace};

    const MODEL: &str = "gemini-3-pro-preview";

    fn signed(place: ArtifactPlace, data: Value) -> Artifact {
        Artifact::new(ArtifactProvider::Gemini, MODEL, place, data)
    }

    fn body(messages: &[OpenaiChatMessage], options: &RequestOptions) -> Value {
        let request = ChatRequest {
            model: MODEL,
            messages,
            tools: &[],
            options,
        };
        serde_json::from_slice(&request_body(&request, SchemaDialect::JsonSchema).unwrap()).unwrap()
    }

    #[test]
    fn history_becomes_alternating_contents_with_signatures_in_place() {
        let thought = json!({"text": "plan", "thought": true, "thoughtSignature": "AAAA"});
        let messages = vec![
            OpenaiChatMessage::system("Be brief."),
            OpenaiChatMessage::user_text("Weather?"),
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![
                    ToolCall::new("call_aaaaaaaaaaaaaaaaaaaaaaaa", "w", r#"{"city":"Paris"}"#),
                    ToolCall::new("call_bbbbbbbbbbbbbbbbbbbbbbbb", "w", r#"{"city":"Rome"}"#),
                ],
            )
            .with_artifacts(vec![
                signed(ArtifactPlace::Before(0), thought.clone()),
                signed(ArtifactPlace::On(1), json!({"thoughtSignature": "BBBB"})),
            ]),
            OpenaiChatMessage::tool_result("call_aaaaaaaaaaaaaaaaaaaaaaaa", "18"),
            OpenaiChatMessage::tool_result("call_bbbbbbbbbbbbbbbbbbbbbbbb", "24"),
            OpenaiChatMessage::assistant_text("Done.").with_artifacts(vec![signed(
                ArtifactPlace::Before(1),
                json!({"text": "", "thoughtSignature": "CCCC"}),
            )]),
            OpenaiChatMessage::user_text("Thanks"),
        ];
        let body = body(&messages, &RequestOptions::default());
        assert_eq!(
            body,
            json!({
                "contents": [
                    {"role": "user", "parts": [{"text": "Weather?"}]},
                    {"role": "model", "parts": [
                        thought,
                        {"functionCall": {"name": "w", "args": {"city": "Paris"}}, "thoughtSignature": "BBBB"},
                        {"functionCall": {"name": "w", "args": {"city": "Rome"}}}
                    ]},
                    {"role": "user", "parts": [
                        {"functionResponse": {"name": "w", "response": {"result": "18"}}},
                        {"functionResponse": {"name": "w", "response": {"result": "24"}}}
                    ]},
                    {"role": "model", "parts": [{"text": "Done."}, {"text": "", "thoughtSignature": "CCCC"}]},
                    {"role": "user", "parts": [{"text": "Thanks"}]}
                ],
                "systemInstruction": {"parts": [{"text": "Be brief."}]}
            })
        );
    }

    #[test]
    fn only_the_current_turn_gets_the_placeholder_signature() {
        let step = |id: &str| {
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new(id, "f", "{}")])
        };
        let messages = vec![
            OpenaiChatMessage::user_text("one"),
            step("toolu_1"),
            OpenaiChatMessage::tool_result("toolu_1", "ok"),
            OpenaiChatMessage::assistant_text("done"),
            OpenaiChatMessage::user_text("two"),
            step("toolu_2"),
            OpenaiChatMessage::tool_result("toolu_2", "ok"),
            step("toolu_3"),
            OpenaiChatMessage::tool_result("toolu_3", "failed"),
        ];
        let body = body(&messages, &RequestOptions::default());
        let signatures: Vec<Option<&str>> = body["contents"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|c| c["parts"].as_array().unwrap())
            .filter(|p| p.get("functionCall").is_some())
            .map(|p| p.get("thoughtSignature").and_then(Value::as_str))
            .collect();
        assert_eq!(
            signatures,
            [None, Some(DUMMY_SIGNATURE), Some(DUMMY_SIGNATURE)]
        );
        // Vendor ids go back on both sides.
        assert_eq!(
            body["contents"][1]["parts"][0]["functionCall"]["id"],
            "toolu_1"
        );
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["id"],
            "toolu_1"
        );
    }

    #[test]
    fn a_call_this_model_made_unsigned_goes_back_as_sent() {
        let made_by = |model: &str| {
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("toolu_1", "f", "{}")])
                .with_artifacts(vec![Artifact::new(
                    ArtifactProvider::Gemini,
                    model,
                    ArtifactPlace::On(1),
                    json!({}),
                )])
        };
        let first_signature = |assistant: OpenaiChatMessage| {
            let messages = vec![
                OpenaiChatMessage::user_text("go"),
                assistant,
                OpenaiChatMessage::tool_result("toolu_1", "ok"),
            ];
            let body = body(&messages, &RequestOptions::default());
            body["contents"][1]["parts"][0]
                .get("thoughtSignature")
                .cloned()
        };
        assert_eq!(first_signature(made_by(MODEL)), None);
        assert_eq!(
            first_signature(made_by("gemini-2.5-flash")),
            Some(json!(DUMMY_SIGNATURE))
        );
    }

    #[test]
    fn tool_errors_media_and_choices_use_the_native_shapes() {
        let mut error = OpenaiChatMessage::tool_result("toolu_9", "no such city");
        if let OpenaiChatMessage::Tool { is_error, .. } = &mut error {
            *is_error = true;
        }
        let messages = vec![
            OpenaiChatMessage::user_parts(vec![
                ContentPart::Text {
                    text: "look".into(),
                },
                ContentPart::ImageUrl {
                    image_url: crate::vocab::ImageUrl {
                        url: "data:image/png;base64,iVBORw0KGgo=".into(),
                        detail: None,
                    },
                },
                ContentPart::ImageUrl {
                    image_url: crate::vocab::ImageUrl {
                        url: "https://example.com/cat.JPG?x=1".into(),
                        detail: None,
                    },
                },
            ]),
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("toolu_9", "w", r#"{"city":"Atlantis"}"#)],
            ),
            error,
        ];
        let body = body(&messages, &RequestOptions::default());
        assert_eq!(
            body["contents"][0]["parts"],
            json!([
                {"text": "look"},
                {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}},
                {"fileData": {"mimeType": "image/jpeg", "fileUri": "https://example.com/cat.JPG?x=1"}}
            ])
        );
        assert_eq!(
            body["contents"][2]["parts"][0]["functionResponse"]["response"],
            json!({"error": "no such city"})
        );
        assert_eq!(
            tool_config_of(&ToolChoice::Required),
            json!({"functionCallingConfig": {"mode": "ANY"}})
        );
        assert_eq!(
            tool_config_of(&ToolChoice::None),
            json!({"functionCallingConfig": {"mode": "NONE"}})
        );
    }

    #[test]
    fn reasoning_maps_to_a_level_on_gemini_3_and_a_budget_before() {
        use ReasoningEffort::*;
        let level = |model: &str, effort| thinking_config(model, Some(effort), None).unwrap();
        assert_eq!(
            level("gemini-3-flash-preview", Medium)["thinkingLevel"],
            "MEDIUM"
        );
        assert_eq!(
            level("gemini-3-pro-preview", Medium)["thinkingLevel"],
            "HIGH"
        );
        assert_eq!(
            level("gemini-3-pro-preview", Off),
            json!({"thinkingLevel": "LOW", "includeThoughts": false})
        );
        assert_eq!(
            level("gemini-2.5-flash", Low),
            json!({"thinkingBudget": 1024, "includeThoughts": true})
        );
        assert_eq!(
            thinking_config("gemini-3-pro-preview", Some(High), Some(4000)).unwrap(),
            json!({"thinkingBudget": 4000, "includeThoughts": true})
        );
        assert_eq!(thinking_config("gemini-2.5-pro", None, None), None);
        assert!(!sends_call_id("call_0123456789abcdefghijKLMN"));
        assert!(sends_call_id("call_short"));
    }
}
