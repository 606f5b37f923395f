//! A [`ChatRequest`] as a Messages API request body.
//!
//! - System (and developer) messages become the top-level `system` blocks, in order.
//! - The other messages alternate `user` / `assistant`; consecutive messages of one role are
//!   merged into one. Tool results become `tool_result` blocks (`tool_use_id` = the call id,
//!   `is_error` when the call failed) placed first in the next user message, all results of
//!   a turn in one message. Empty messages are left out (the API rejects them), and a history
//!   that starts with an assistant message gets a short user message before it.
//! - An assistant message is laid out by [`layout`] for Anthropic and the request's model:
//!   its thinking / redacted thinking blocks verbatim and in place, its text, its calls as
//!   `tool_use` blocks (`input` = the parsed arguments). Other providers' artifacts are left
//!   out (see [`crate::vocab::artifact`]).
//! - Images: a `data:` URL becomes a base64 source, any other URL a `url` source; PDF files
//!   given as `data:` URLs become `document` blocks. Audio and other files have no Messages
//!   form: they are replaced by a short note saying so.
//!
//! Options: `max_completion_tokens` or `max_tokens` (else [`DEFAULT_MAX_TOKENS`]) is the
//! required `max_tokens`; reasoning as in [`super::thinking`]; `tool_choice` `auto`/`none`/
//! `required` (`any`)/a function (`tool`), `parallel_tool_calls: false` as
//! `disable_parallel_tool_use`; `stop` as `stop_sequences`; `temperature`, `top_p`;
//! `user` as `metadata.user_id`; `extra` merged at the top level (e.g. `top_k`). Typed output
//! (`response_format` `json_schema` or `json_object`) forces a tool whose input schema is the
//! schema; the decoders turn that call back into the answer text. Not sent (the API has no
//! such parameter): `seed`, `presence_penalty`, `frequency_penalty`, `stream_options`.

use serde_json::{Map, Value, json};

use crate::llm::anthropic::cache::{self, Role};
use crate::llm::anthropic::thinking;
use crate::llm::error::ProviderError;
use crate::llm::model::ChatRequest;
use crate::vocab::artifact::{layout, merge_fields};
use crate::vocab::{
    ArtifactProvider, ContentPart, Element, MessageContent, OpenaiChatMessage, RequestOptions,
    ToolCall, ToolChoice, ToolDefinition,
};

/// `max_tokens` when the options set none (the API requires one).
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The name of the typed-output tool when `response_format` names none.
const DEFAULT_ANSWER_TOOL: &str = "json_answer";

/// An encoded request: the body and, under typed output, the tool whose call is the answer.
#[derive(Debug)]
pub(crate) struct Encoded {
    /// The JSON body.
    pub(crate) body: Vec<u8>,
    /// The forced typed-output tool, if any.
    pub(crate) answer_tool: Option<String>,
}

/// The body of a `/messages` request (`stream` set as given), with cache breakpoints when
/// `cache` is on.
pub(crate) fn request_body(
    request: &ChatRequest<'_>,
    stream: bool,
    cache: bool,
) -> Result<Encoded, ProviderError> {
    let options = request.options;
    let (system, mut messages) = conversation(request.messages, request.model);
    let mut system = system;
    let answer = answer_tool(options.response_format.as_ref(), request.tools);
    let mut tools: Vec<Value> = request.tools.iter().map(tool).collect();
    if let Some((_, definition)) = &answer {
        tools.push(definition.clone());
    }
    let tool_choice = tool_choice(
        options,
        answer.as_ref().map(|(name, _)| name.as_str()),
        !tools.is_empty(),
    );
    let forced = tool_choice
        .as_ref()
        .and_then(|choice| choice.get("type"))
        .and_then(Value::as_str)
        .is_some_and(|kind| kind == "any" || kind == "tool");

    let mut max_tokens = options
        .max_completion_tokens
        .or(options.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut thinking_budget = thinking::requested_budget(options);
    if thinking_budget.is_some() {
        let refusal = if forced {
            Some("a forced tool call (tool_choice any/tool, or typed output) cannot think")
        } else {
            thinking::refusal_in_history(&messages)
        };
        if let Some(reason) = refusal {
            tracing::info!(
                model = request.model,
                reason,
                "this Anthropic request is sent without thinking"
            );
            thinking_budget = None;
        }
    }

    if cache {
        let roles: Vec<Role> = messages
            .iter()
            .map(
                |message| match message.get("role").and_then(Value::as_str) {
                    Some("assistant") => Role::Assistant,
                    _ => Role::User,
                },
            )
            .collect();
        let plan = cache::plan(tools.len(), system.len(), &roles);
        cache::mark(&plan, &mut tools, &mut system, &mut messages);
    }

    let mut body = Map::new();
    body.insert("model".into(), json!(request.model));
    if let Some(budget) = thinking_budget {
        max_tokens = thinking::max_tokens_with(budget, max_tokens);
    }
    body.insert("max_tokens".into(), json!(max_tokens));
    if !system.is_empty() {
        body.insert("system".into(), Value::Array(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !tools.is_empty() {
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(choice) = tool_choice {
        body.insert("tool_choice".into(), choice);
    }
    if let Some(budget) = thinking_budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    // Thinking allows no temperature and only a top_p of 0.95 and above.
    if let Some(temperature) = options.temperature.filter(|_| thinking_budget.is_none()) {
        body.insert("temperature".into(), json!(temperature));
    }
    if let Some(top_p) = options
        .top_p
        .filter(|top_p| thinking_budget.is_none() || *top_p >= 0.95)
    {
        body.insert("top_p".into(), json!(top_p));
    }
    if let Some(stop) = options.stop.as_ref().filter(|stop| !stop.is_empty()) {
        body.insert("stop_sequences".into(), json!(stop));
    }
    if let Some(user) = &options.user {
        body.insert("metadata".into(), json!({"user_id": user}));
    }
    if stream {
        body.insert("stream".into(), Value::Bool(true));
    }
    for (key, value) in &options.extra {
        body.insert(key.clone(), value.clone());
    }
    let body = serde_json::to_vec(&Value::Object(body)).map_err(|error| {
        ProviderError::Other(format!("could not serialise the request: {error}"))
    })?;
    Ok(Encoded {
        body,
        answer_tool: answer.map(|(name, _)| name),
    })
}

/// The system blocks and the alternating wire messages of a history.
fn conversation(history: &[OpenaiChatMessage], model: &str) -> (Vec<Value>, Vec<Value>) {
    let mut system = Vec::new();
    let mut messages = Messages::default();
    for message in history {
        match message {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. } => {
                let text = content.text();
                if !text.is_empty() {
                    system.push(json!({"type": "text", "text": text}));
                }
            }
            OpenaiChatMessage::User { content, .. } => {
                messages.push(Role::User, content_blocks(content));
            }
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => messages.push_tool_result(tool_result(tool_call_id, content, *is_error)),
            OpenaiChatMessage::Assistant { .. } => {
                let blocks = layout(message, ArtifactProvider::Anthropic, model)
                    .into_iter()
                    .map(element)
                    .collect();
                messages.push(Role::Assistant, blocks);
            }
        }
    }
    (system, messages.into_wire())
}

/// Wire messages being built: one per run of same-role messages.
#[derive(Default)]
struct Messages {
    list: Vec<(Role, Vec<Value>)>,
}

impl Messages {
    fn push(&mut self, role: Role, blocks: Vec<Value>) {
        if blocks.is_empty() {
            // The API rejects empty content; an empty message adds nothing.
            return;
        }
        match self.list.last_mut() {
            Some((last, existing)) if *last == role => existing.extend(blocks),
            _ => self.list.push((role, blocks)),
        }
    }

    /// A tool result goes into the current user message after the results already there and
    /// before anything else: the API wants them first.
    fn push_tool_result(&mut self, block: Value) {
        match self.list.last_mut() {
            Some((Role::User, existing)) => {
                let at = existing
                    .iter()
                    .position(|block| {
                        block.get("type").and_then(Value::as_str) != Some("tool_result")
                    })
                    .unwrap_or(existing.len());
                existing.insert(at, block);
            }
            _ => self.list.push((Role::User, vec![block])),
        }
    }

    fn into_wire(mut self) -> Vec<Value> {
        // The API wants a user message first; a history cut before its first user message
        // (by the application) gets a short one rather than a 400.
        if matches!(self.list.first(), Some((Role::Assistant, _))) {
            self.list.insert(
                0,
                (
                    Role::User,
                    vec![json!({"type": "text", "text": "(the conversation so far)"})],
                ),
            );
        }
        self.list
            .into_iter()
            .map(|(role, content)| {
                let role = match role {
                    Role::User => "user",
                    Role::Assistant => "assistant",
                };
                json!({"role": role, "content": content})
            })
            .collect()
    }
}

/// One element of an assistant message as a content block.
fn element(element: Element<'_>) -> Value {
    match element {
        Element::Item(artifact) => artifact.data.clone(),
        Element::Text { text, on } => {
            let mut block = json!({"type": "text", "text": text});
            merge_fields(&mut block, &on);
            block
        }
        Element::Call { call, on } => {
            let mut block = tool_use(call);
            merge_fields(&mut block, &on);
            block
        }
    }
}

/// A call as a `tool_use` block; arguments that are not a JSON object (never produced by this
/// API) go back as `{}`, which the API accepts, rather than failing the request.
fn tool_use(call: &ToolCall) -> Value {
    let input = match serde_json::from_str::<Value>(&call.function.arguments) {
        Ok(Value::Object(fields)) => Value::Object(fields),
        _ => {
            if !crate::vocab::is_blank_arguments(&call.function.arguments) {
                tracing::debug!(call = %call.id, "arguments that are not a JSON object sent as {{}}");
            }
            json!({})
        }
    };
    json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input})
}

fn tool_result(call_id: &str, content: &MessageContent, is_error: bool) -> Value {
    let mut block = json!({"type": "tool_result", "tool_use_id": call_id});
    match content {
        MessageContent::Text(text) if text.is_empty() => {}
        MessageContent::Text(text) => {
            block["content"] = json!(text);
        }
        MessageContent::Parts(_) => {
            block["content"] = Value::Array(content_blocks(content));
        }
    }
    if is_error {
        block["is_error"] = Value::Bool(true);
    }
    block
}

/// The content blocks of user (or tool) content; empty texts are left out (the API rejects them).
fn content_blocks(content: &MessageContent) -> Vec<Value> {
    match content {
        MessageContent::Text(text) if text.is_empty() => Vec::new(),
        MessageContent::Text(text) => vec![json!({"type": "text", "text": text})],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

fn part(part: &ContentPart) -> Option<Value> {
    match part {
        ContentPart::Text { text } if text.is_empty() => None,
        ContentPart::Text { text } => Some(json!({"type": "text", "text": text})),
        ContentPart::ImageUrl { image_url } => Some(match data_url(&image_url.url) {
            Some((media_type, data)) => {
                json!({"type": "image", "source": {"type": "base64", "media_type": media_type, "data": data}})
            }
            None => json!({"type": "image", "source": {"type": "url", "url": image_url.url}}),
        }),
        ContentPart::File { file } => {
            let pdf = file
                .get("file_data")
                .and_then(Value::as_str)
                .and_then(data_url)
                .filter(|(media_type, _)| *media_type == "application/pdf");
            Some(match pdf {
                Some((media_type, data)) => {
                    json!({"type": "document", "source": {"type": "base64", "media_type": media_type, "data": data}})
                }
                None => {
                    json!({"type": "text", "text": "[a file was attached here; the Messages API takes only PDF files as data: URLs]"})
                }
            })
        }
        ContentPart::InputAudio { .. } => Some(
            json!({"type": "text", "text": "[audio was attached here; the Messages API takes no audio]"}),
        ),
    }
}

/// `data:<media type>;base64,<data>` split into its media type and data.
fn data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    let media_type = header.strip_suffix(";base64")?;
    Some((media_type, data))
}

fn tool(definition: &ToolDefinition) -> Value {
    let function = &definition.function;
    let mut tool = json!({"name": function.name});
    if let Some(description) = &function.description {
        tool["description"] = json!(description);
    }
    tool["input_schema"] = function.parameters.clone();
    tool
}

/// The typed-output tool `response_format` asks for: its name and definition.
fn answer_tool(format: Option<&Value>, tools: &[ToolDefinition]) -> Option<(String, Value)> {
    let format = format?;
    let (name, schema, description) = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let spec = format.get("json_schema")?;
            (
                spec.get("name")
                    .and_then(Value::as_str)
                    .filter(|name| valid_tool_name(name)),
                spec.get("schema")
                    .cloned()
                    .unwrap_or_else(|| json!({"type": "object"})),
                spec.get("description").and_then(Value::as_str),
            )
        }
        Some("json_object") => (None, json!({"type": "object"}), None),
        _ => return None,
    };
    let mut name = name.unwrap_or(DEFAULT_ANSWER_TOOL).to_owned();
    while tools.iter().any(|tool| tool.name() == name) {
        name.push_str("_answer");
    }
    let description = description.unwrap_or(
        "Give your answer: the arguments of this call are the answer, in exactly this shape.",
    );
    Some((
        name.clone(),
        json!({"name": name, "description": description, "input_schema": schema}),
    ))
}

fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// `tool_choice` for the options (none without tools): a typed-output tool is forced.
fn tool_choice(
    options: &RequestOptions,
    answer_tool: Option<&str>,
    has_tools: bool,
) -> Option<Value> {
    if !has_tools {
        return None;
    }
    let mut choice = match (answer_tool, &options.tool_choice) {
        (Some(name), _) => json!({"type": "tool", "name": name}),
        (None, None) if options.parallel_tool_calls == Some(false) => json!({"type": "auto"}),
        (None, None) => return None,
        (None, Some(ToolChoice::Auto)) => json!({"type": "auto"}),
        (None, Some(ToolChoice::None)) => return Some(json!({"type": "none"})),
        (None, Some(ToolChoice::Required)) => json!({"type": "any"}),
        (None, Some(ToolChoice::Function(name))) => json!({"type": "tool", "name": name}),
    };
    if options.parallel_tool_calls == Some(false) {
        choice["disable_parallel_tool_use"] = Value::Bool(true);
    }
    Some(choice)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Artifact, ArtifactPlace, ImageUrl, ReasoningEffort};

    fn encode(
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
        options: &RequestOptions,
        cache: bool,
    ) -> Value {
        let request = ChatRequest {
            model: "claude-x",
            messages,
            tools,
            options,
        };
        serde_json::from_slice(&request_body(&request, true, cache).unwrap().body).unwrap()
    }

    fn thinking(signature: &str) -> Artifact {
        Artifact::new(
            ArtifactProvider::Anthropic,
            "claude-x",
            ArtifactPlace::Before(0),
            json!({"type": "thinking", "thinking": "hmm", "signature": signature}),
        )
    }

    fn weather() -> ToolDefinition {
        ToolDefinition::function(
            "get_weather",
            "Weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )
    }

    #[test]
    fn a_tool_loop_is_laid_out_as_the_api_wants_it() {
        let history = vec![
            OpenaiChatMessage::system("Be terse."),
            OpenaiChatMessage::user_text("Paris and Rome?"),
            OpenaiChatMessage::assistant_tool_calls(
                Some("Checking.".into()),
                vec![
                    ToolCall::new("toolu_a", "get_weather", r#"{"city":"Paris"}"#),
                    ToolCall::new("toolu_b", "get_weather", ""),
                ],
            )
            .with_artifacts(vec![
                thinking("sig-1"),
                Artifact::new(
                    ArtifactProvider::Gemini,
                    "g",
                    ArtifactPlace::On(1),
                    json!({"thoughtSignature": "x"}),
                ),
            ]),
            OpenaiChatMessage::tool_result("toolu_a", "22"),
            OpenaiChatMessage::Tool {
                tool_call_id: "toolu_b".into(),
                content: MessageContent::Text("no such city".into()),
                is_error: true,
            },
            OpenaiChatMessage::user_text("And?"),
        ];
        let options = RequestOptions {
            reasoning_effort: Some(ReasoningEffort::Medium),
            ..RequestOptions::default()
        };
        let body = encode(&history, &[weather()], &options, false);
        assert_eq!(
            body["system"],
            json!([{"type": "text", "text": "Be terse."}])
        );
        // The budget must stay below max_tokens: 8192 + 8192.
        assert_eq!(body["max_tokens"], json!(16384));
        assert_eq!(
            body["thinking"],
            json!({"type": "enabled", "budget_tokens": 8192})
        );
        assert_eq!(body["stream"], json!(true));
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "Paris and Rome?"}]},
                {"role": "assistant", "content": [
                    {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
                    {"type": "text", "text": "Checking."},
                    {"type": "tool_use", "id": "toolu_a", "name": "get_weather", "input": {"city": "Paris"}},
                    {"type": "tool_use", "id": "toolu_b", "name": "get_weather", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_a", "content": "22"},
                    {"type": "tool_result", "tool_use_id": "toolu_b", "content": "no such city", "is_error": true},
                    {"type": "text", "text": "And?"}
                ]}
            ])
        );
        assert_eq!(body["tools"][0]["input_schema"]["type"], json!("object"));
    }

    #[test]
    fn thinking_is_left_out_where_the_api_refuses_it() {
        // A tool loop whose call came from another model: no thinking block to lead with.
        let history = vec![
            OpenaiChatMessage::user_text("Paris?"),
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c1", "get_weather", "{}")],
            )
            .with_artifacts(vec![Artifact::new(
                ArtifactProvider::Anthropic,
                "claude-other",
                ArtifactPlace::Before(0),
                json!({"type": "thinking", "thinking": "", "signature": "s"}),
            )]),
            OpenaiChatMessage::tool_result("c1", "22"),
        ];
        let options = RequestOptions {
            reasoning_effort: Some(ReasoningEffort::High),
            temperature: Some(0.2),
            ..RequestOptions::default()
        };
        let body = encode(&history, &[weather()], &options, false);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["temperature"], json!(0.2f32));
        assert_eq!(body["messages"][1]["content"][0]["type"], json!("tool_use"));
        // Thinking on: no temperature, max_tokens above the budget.
        let body = encode(&history[..1], &[], &options, false);
        assert_eq!(body["thinking"]["budget_tokens"], json!(24576));
        assert_eq!(body["max_tokens"], json!(24576 + 8192));
        assert!(body.get("temperature").is_none());
        // A forced tool: no thinking.
        let forced = RequestOptions {
            tool_choice: Some(ToolChoice::Required),
            ..options
        };
        let body = encode(&history[..1], &[weather()], &forced, false);
        assert!(body.get("thinking").is_none());
        assert_eq!(body["tool_choice"], json!({"type": "any"}));
    }

    #[test]
    fn roles_alternate_from_a_user_message() {
        let history = vec![
            OpenaiChatMessage::assistant_text("Hello."),
            OpenaiChatMessage::assistant_text(""),
            OpenaiChatMessage::user_text("Hi."),
            OpenaiChatMessage::user_text(""),
            OpenaiChatMessage::user_text("Still there?"),
        ];
        let body = encode(&history, &[], &RequestOptions::default(), false);
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"type": "text", "text": "(the conversation so far)"}]},
                {"role": "assistant", "content": [{"type": "text", "text": "Hello."}]},
                {"role": "user", "content": [{"type": "text", "text": "Hi."}, {"type": "text", "text": "Still there?"}]}
            ])
        );
    }

    #[test]
    fn options_map_to_their_parameters() {
        let mut extra = Map::new();
        extra.insert("top_k".into(), json!(5));
        let options = RequestOptions {
            max_tokens: Some(100),
            max_completion_tokens: Some(200),
            stop: Some(vec!["END".into()]),
            seed: Some(1),
            user: Some("u-1".into()),
            tool_choice: Some(ToolChoice::Function("get_weather".into())),
            parallel_tool_calls: Some(false),
            extra,
            ..RequestOptions::default()
        };
        let body = encode(
            &[OpenaiChatMessage::user_text("x")],
            &[weather()],
            &options,
            false,
        );
        assert_eq!(body["max_tokens"], json!(200));
        assert_eq!(body["stop_sequences"], json!(["END"]));
        assert_eq!(body["metadata"], json!({"user_id": "u-1"}));
        assert_eq!(body["top_k"], json!(5));
        assert!(body.get("seed").is_none());
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "get_weather", "disable_parallel_tool_use": true})
        );
        // Without tools, no tool_choice.
        let body = encode(&[OpenaiChatMessage::user_text("x")], &[], &options, false);
        assert!(body.get("tool_choice").is_none());
    }

    #[test]
    fn typed_output_forces_a_tool_with_the_schema() {
        let options = RequestOptions {
            response_format: Some(
                json!({"type": "json_schema", "json_schema": {"name": "get_weather", "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}, "strict": true}}),
            ),
            reasoning_effort: Some(ReasoningEffort::Low),
            ..RequestOptions::default()
        };
        let messages = [OpenaiChatMessage::user_text("x")];
        let request = ChatRequest {
            model: "claude-x",
            messages: &messages,
            tools: &[weather()],
            options: &options,
        };
        let encoded = request_body(&request, false, false).unwrap();
        // The name is taken by a real tool: a free one is used.
        assert_eq!(encoded.answer_tool.as_deref(), Some("get_weather_answer"));
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(
            body["tool_choice"],
            json!({"type": "tool", "name": "get_weather_answer"})
        );
        assert_eq!(
            body["tools"][1]["input_schema"]["properties"]["a"]["type"],
            json!("integer")
        );
        assert!(body.get("thinking").is_none());
        assert!(body.get("stream").is_none());
    }

    #[test]
    fn images_and_files_take_their_block_forms() {
        let image = |url: &str| ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: url.into(),
                detail: None,
            },
        };
        let message = OpenaiChatMessage::user_parts(vec![
            ContentPart::Text { text: "see".into() },
            ContentPart::Text {
                text: String::new(),
            },
            image("data:image/png;base64,iVBORw0KGgo="),
            image("https://example.com/a.jpg"),
            ContentPart::File {
                file: json!({"file_data": "data:application/pdf;base64,JVBERi0=", "filename": "a.pdf"}),
            },
        ]);
        let body = encode(&[message], &[], &RequestOptions::default(), false);
        assert_eq!(
            body["messages"][0]["content"],
            json!([
                {"type": "text", "text": "see"},
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
                {"type": "image", "source": {"type": "url", "url": "https://example.com/a.jpg"}},
                {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0="}}
            ])
        );
    }

    #[test]
    fn the_cache_markers_go_on_tools_system_and_the_two_message_ends() {
        let history = vec![
            OpenaiChatMessage::system("Be terse."),
            OpenaiChatMessage::user_text("Paris?"),
            OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new("c1", "get_weather", "{}")],
            )
            .with_artifacts(vec![thinking("s")]),
            OpenaiChatMessage::tool_result("c1", "22"),
        ];
        let body = encode(&history, &[weather()], &RequestOptions::default(), true);
        let marker = json!({"type": "ephemeral"});
        assert_eq!(body["tools"][0]["cache_control"], marker);
        assert_eq!(body["system"][0]["cache_control"], marker);
        assert_eq!(body["messages"][0]["content"][0]["cache_control"], marker);
        assert!(
            body["messages"][1]["content"][1]
                .get("cache_control")
                .is_none()
        );
        assert_eq!(body["messages"][2]["content"][0]["cache_control"], marker);
        // The thinking block itself is never touched.
        assert_eq!(
            body["messages"][1]["content"][0],
            json!({"type": "thinking", "thinking": "hmm", "signature": "s"})
        );
        let text = serde_json::to_string(&body).unwrap();
        assert_eq!(text.matches("cache_control").count(), 4);
    }
}
