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
//! Hosted tools ([`crate::llm::hosted`]) follow the function tools as server tool entries
//! (`web_search_20250305`, `web_fetch_20250910`, `code_execution_20250825`); the betas they
//! need go out as `anthropic-beta` ([`betas`]); any other fails the request.
//!
//! Options: `max_completion_tokens` or `max_tokens` (else [`DEFAULT_MAX_TOKENS`]) is the
//! required `max_tokens`; reasoning as in [`super::thinking`]; `tool_choice` `auto`/`none`/
//! `required` (`any`)/a function (`tool`), `parallel_tool_calls: false` as
//! `disable_parallel_tool_use`; `stop` as `stop_sequences`; `temperature`, `top_p`;
//! `user` as `metadata.user_id`; `extra` merged at the top level (e.g. `top_k`). Typed output
//! (`response_format` `json_schema` or `json_object`) forces a tool whose input schema is the
//! schema; the decoders turn that call back into the answer text. Not sent (the API has no
//! such parameter): `seed`, `presence_penalty`, `frequency_penalty`, `stream_options`.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::{Map, Value, json};

use crate::llm::anthropic::cache::{self, Role};
use crate::llm::anthropic::thinking;
use crate::llm::anthropic::wire::{self, Block, Marked, Message, ResultContent, Tool};
use crate::llm::error::ProviderError;
use crate::llm::model::ChatRequest;
use crate::vocab::artifact::{Element, layout};
use crate::vocab::types::base64_data_url;
use crate::vocab::{
    ArtifactProvider, ContentPart, MessageContent, OpenaiChatMessage, RequestOptions, ToolCall,
    ToolChoice, ToolDefinition,
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
    let (mut system, mut messages) = conversation(request.messages, request.model);
    let answer = answer_tool(options.response_format.as_ref(), request.tools);
    let mut tools: Vec<Tool<'_>> = request.tools.iter().map(tool).collect();
    if let Some(answer) = &answer {
        tools.push(Tool {
            name: Cow::Owned(answer.name.clone()),
            description: Some(answer.description),
            input_schema: answer.schema.clone(),
            cache: false,
            defer_loading: false,
            server_type: None,
            hosted: None,
        });
    }
    for hosted in &options.hosted_tools {
        let (entry, _beta) = hosted.anthropic()?;
        tools.push(Tool {
            name: Cow::Borrowed(hosted.name()),
            description: None,
            input_schema: Cow::Owned(Value::Null),
            cache: false,
            defer_loading: false,
            server_type: None,
            hosted: Some(entry),
        });
    }
    // Deferred tools are found by the API's own tool search (BM25), offered last so that the
    // cache marker of the tool list sits on it rather than on a deferred tool.
    if tools.iter().any(|tool| tool.defer_loading) {
        tools.push(Tool {
            name: Cow::Borrowed(TOOL_SEARCH_NAME),
            description: None,
            input_schema: Cow::Owned(Value::Null),
            cache: false,
            defer_loading: false,
            server_type: Some(TOOL_SEARCH_TYPE),
            hosted: None,
        });
    }
    let tool_choice = tool_choice(
        options,
        answer.as_ref().map(|answer| answer.name.as_str()),
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
            refusal_in_history(&messages)
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
        let roles: Vec<Role> = messages.iter().map(|message| message.role).collect();
        let plan = cache::plan(tools.len(), system.len(), &roles);
        wire::mark(&plan, &mut tools, &mut system, &mut messages);
    }
    if let Some(budget) = thinking_budget {
        max_tokens = thinking::max_tokens_with(budget, max_tokens);
    }
    let body = Body {
        model: request.model,
        max_tokens,
        system: &system,
        messages: &messages,
        tools: &tools,
        tool_choice: tool_choice.as_ref(),
        thinking_budget,
        // Thinking allows no temperature and only a top_p of 0.95 and above.
        temperature: options.temperature.filter(|_| thinking_budget.is_none()),
        top_p: options
            .top_p
            .filter(|top_p| thinking_budget.is_none() || *top_p >= 0.95),
        stop: options.stop.as_deref().filter(|stop| !stop.is_empty()),
        user: options.user.as_deref(),
        stream,
        extra: &options.extra,
    };
    let body = serde_json::to_vec(&body).map_err(|error| {
        ProviderError::Other(format!("could not serialise the request: {error}"))
    })?;
    Ok(Encoded {
        body,
        answer_tool: answer.map(|answer| answer.name),
    })
}

/// The `anthropic-beta` flags the request's hosted tools need, comma-separated; `None` when
/// none does.
pub(crate) fn betas(options: &RequestOptions) -> Option<String> {
    let mut betas: Vec<&str> = options
        .hosted_tools
        .iter()
        .filter_map(|tool| tool.anthropic().ok().and_then(|(_, beta)| beta))
        .collect();
    betas.sort_unstable();
    betas.dedup();
    (!betas.is_empty()).then(|| betas.join(","))
}

/// The body, field by field; a field `extra` also has is left to `extra`, which comes last.
struct Body<'r, 'a> {
    model: &'a str,
    max_tokens: u32,
    system: &'r [Marked<'a>],
    messages: &'r [Message<'a>],
    tools: &'r [Tool<'a>],
    tool_choice: Option<&'r Value>,
    thinking_budget: Option<u32>,
    temperature: Option<f32>,
    top_p: Option<f32>,
    stop: Option<&'a [String]>,
    user: Option<&'a str>,
    stream: bool,
    extra: &'a Map<String, Value>,
}

/// `{"type": "enabled", "budget_tokens"}`.
struct Thinking(u32);

impl Serialize for Thinking {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("type", "enabled")?;
        map.serialize_entry("budget_tokens", &self.0)?;
        map.end()
    }
}

/// `{"user_id"}`.
struct Metadata<'a>(&'a str);

impl Serialize for Metadata<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("user_id", self.0)?;
        map.end()
    }
}

impl Serialize for Body<'_, '_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        let own = |key: &str| !self.extra.contains_key(key);
        if own("model") {
            map.serialize_entry("model", self.model)?;
        }
        if own("max_tokens") {
            map.serialize_entry("max_tokens", &self.max_tokens)?;
        }
        if !self.system.is_empty() && own("system") {
            map.serialize_entry("system", self.system)?;
        }
        if own("messages") {
            map.serialize_entry("messages", self.messages)?;
        }
        if !self.tools.is_empty() && own("tools") {
            map.serialize_entry("tools", self.tools)?;
        }
        if let Some(choice) = self.tool_choice.filter(|_| own("tool_choice")) {
            map.serialize_entry("tool_choice", choice)?;
        }
        if let Some(budget) = self.thinking_budget.filter(|_| own("thinking")) {
            map.serialize_entry("thinking", &Thinking(budget))?;
        }
        if let Some(temperature) = self.temperature.filter(|_| own("temperature")) {
            map.serialize_entry("temperature", &temperature)?;
        }
        if let Some(top_p) = self.top_p.filter(|_| own("top_p")) {
            map.serialize_entry("top_p", &top_p)?;
        }
        if let Some(stop) = self.stop.filter(|_| own("stop_sequences")) {
            map.serialize_entry("stop_sequences", stop)?;
        }
        if let Some(user) = self.user.filter(|_| own("metadata")) {
            map.serialize_entry("metadata", &Metadata(user))?;
        }
        if self.stream && own("stream") {
            map.serialize_entry("stream", &true)?;
        }
        for (key, value) in self.extra {
            map.serialize_entry(key, value)?;
        }
        map.end()
    }
}

/// Why a request with these wire `messages` must not think, if it must not: in a tool loop
/// (the last user message holds tool results) the assistant message before it must start with
/// a thinking block.
fn refusal_in_history(messages: &[Message<'_>]) -> Option<&'static str> {
    let last = messages.last()?;
    let in_tool_loop = last
        .content
        .iter()
        .any(|block| block.block.kind() == "tool_result");
    let reply = messages
        .iter()
        .rev()
        .find(|message| message.role == Role::Assistant);
    let leads_with_thinking = reply
        .and_then(|reply| reply.content.first())
        .is_some_and(|block| matches!(block.block.kind(), "thinking" | "redacted_thinking"));
    thinking::refusal(in_tool_loop, reply.is_some(), leads_with_thinking)
}

/// The system blocks and the alternating wire messages of a history.
fn conversation<'a>(
    history: &'a [OpenaiChatMessage],
    model: &str,
) -> (Vec<Marked<'a>>, Vec<Message<'a>>) {
    let mut system = Vec::new();
    let mut messages = Messages::default();
    for message in history {
        match message {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. } => match system_text(content) {
                Some(Cow::Borrowed(text)) => system.push(Block::Text(text).into()),
                Some(Cow::Owned(text)) => system.push(Block::TextOwned(text).into()),
                None => {}
            },
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

/// A system message's text, borrowed when it is one string; `None` when empty.
fn system_text(content: &MessageContent) -> Option<Cow<'_, str>> {
    match content {
        MessageContent::Text(text) if text.is_empty() => None,
        MessageContent::Text(text) => Some(Cow::Borrowed(text)),
        MessageContent::Parts(_) => {
            Some(Cow::<str>::Owned(content.text())).filter(|text| !text.is_empty())
        }
    }
}

/// Wire messages being built: one per run of same-role messages.
#[derive(Default)]
struct Messages<'a> {
    list: Vec<Message<'a>>,
}

impl<'a> Messages<'a> {
    fn push(&mut self, role: Role, blocks: Vec<Marked<'a>>) {
        if blocks.is_empty() {
            // The API rejects empty content; an empty message adds nothing.
            return;
        }
        match self.list.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => self.list.push(Message {
                role,
                content: blocks,
            }),
        }
    }

    /// A tool result goes into the current user message after the results already there and
    /// before anything else: the API wants them first.
    fn push_tool_result(&mut self, block: Marked<'a>) {
        match self.list.last_mut() {
            Some(last) if last.role == Role::User => {
                let at = last
                    .content
                    .iter()
                    .position(|block| block.block.kind() != "tool_result")
                    .unwrap_or(last.content.len());
                last.content.insert(at, block);
            }
            _ => self.list.push(Message {
                role: Role::User,
                content: vec![block],
            }),
        }
    }

    fn into_wire(mut self) -> Vec<Message<'a>> {
        // The API wants a user message first; a history cut before its first user message
        // (by the application) gets a short one rather than a 400.
        if matches!(self.list.first(), Some(first) if first.role == Role::Assistant) {
            self.list.insert(
                0,
                Message {
                    role: Role::User,
                    content: vec![Block::Text("(the conversation so far)").into()],
                },
            );
        }
        self.list
    }
}

/// One element of an assistant message as a content block.
fn element(element: Element<'_>) -> Marked<'_> {
    match element {
        Element::Item(artifact) => Block::Verbatim(&artifact.data).into(),
        Element::Text { text, on } => Marked {
            block: Block::Text(text),
            on,
            cache: false,
        },
        Element::Call { call, on } => Marked {
            block: tool_use(call),
            on,
            cache: false,
        },
    }
}

/// A call as a `tool_use` block; arguments that are not a JSON object (never produced by this
/// API) go back as `{}`, which the API accepts, rather than failing the request.
fn tool_use(call: &ToolCall) -> Block<'_> {
    let input = match serde_json::from_str::<Value>(&call.function.arguments) {
        Ok(Value::Object(fields)) => Value::Object(fields),
        _ => {
            if !crate::vocab::is_blank_arguments(&call.function.arguments) {
                tracing::debug!(call = %call.id, "arguments that are not a JSON object sent as {{}}");
            }
            Value::Object(Map::new())
        }
    };
    Block::ToolUse {
        id: &call.id,
        name: &call.function.name,
        input,
    }
}

fn tool_result<'a>(call_id: &'a str, content: &'a MessageContent, is_error: bool) -> Marked<'a> {
    let content = match content {
        MessageContent::Text(text) if text.is_empty() => ResultContent::Empty,
        MessageContent::Text(text) => ResultContent::Text(text),
        MessageContent::Parts(_) => ResultContent::Blocks(content_blocks(content)),
    };
    Block::ToolResult {
        id: call_id,
        content,
        is_error,
    }
    .into()
}

/// The content blocks of user (or tool) content; empty texts are left out (the API rejects them).
fn content_blocks(content: &MessageContent) -> Vec<Marked<'_>> {
    match content {
        MessageContent::Text(text) if text.is_empty() => Vec::new(),
        MessageContent::Text(text) => vec![Block::Text(text).into()],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).map(Marked::from).collect(),
    }
}

fn part(part: &ContentPart) -> Option<Block<'_>> {
    match part {
        ContentPart::Text { text } if text.is_empty() => None,
        ContentPart::Text { text } => Some(Block::Text(text)),
        ContentPart::ImageUrl { image_url } => Some(match base64_data_url(&image_url.url) {
            Some((media_type, data)) => Block::Base64 {
                kind: "image",
                media_type,
                data,
            },
            None => Block::ImageUrl(&image_url.url),
        }),
        ContentPart::File { file } => {
            let pdf = file
                .get("file_data")
                .and_then(Value::as_str)
                .and_then(base64_data_url)
                .filter(|(media_type, _)| *media_type == "application/pdf");
            Some(match pdf {
                Some((media_type, data)) => Block::Base64 {
                    kind: "document",
                    media_type,
                    data,
                },
                None => Block::Text(
                    "[a file was attached here; the Messages API takes only PDF files as data: URLs]",
                ),
            })
        }
        ContentPart::InputAudio { .. } => Some(Block::Text(
            "[audio was attached here; the Messages API takes no audio]",
        )),
    }
}

/// The versioned type of the API's tool search tool (BM25 over names, descriptions and
/// parameters, like the local one).
pub(crate) const TOOL_SEARCH_TYPE: &str = "tool_search_tool_bm25_20251119";

/// Its name.
pub(crate) const TOOL_SEARCH_NAME: &str = "tool_search_tool_bm25";

/// A tool definition; its schema goes out as the tool set holds it (no copy, no conversion).
fn tool(definition: &ToolDefinition) -> Tool<'_> {
    let function = &definition.function;
    Tool {
        name: Cow::Borrowed(&function.name),
        description: function.description.as_deref(),
        input_schema: Cow::Borrowed(&function.parameters),
        cache: false,
        defer_loading: function.defer_loading,
        server_type: None,
        hosted: None,
    }
}

/// The typed-output tool `response_format` asks for.
struct AnswerTool<'a> {
    name: String,
    description: &'a str,
    schema: Cow<'a, Value>,
}

/// The typed-output tool `response_format` asks for, if any.
fn answer_tool<'a>(format: Option<&'a Value>, tools: &[ToolDefinition]) -> Option<AnswerTool<'a>> {
    let format = format?;
    let (name, schema, description) = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let spec = format.get("json_schema")?;
            (
                spec.get("name")
                    .and_then(Value::as_str)
                    .filter(|name| valid_tool_name(name)),
                spec.get("schema")
                    .map_or_else(|| Cow::Owned(json!({"type": "object"})), Cow::Borrowed),
                spec.get("description").and_then(Value::as_str),
            )
        }
        Some("json_object") => (None, Cow::Owned(json!({"type": "object"})), None),
        _ => return None,
    };
    let mut name = name.unwrap_or(DEFAULT_ANSWER_TOOL).to_owned();
    while tools.iter().any(|tool| tool.name() == name) {
        name.push_str("_answer");
    }
    let description = description.unwrap_or(
        "Give your answer: the arguments of this call are the answer, in exactly this shape.",
    );
    Some(AnswerTool {
        name,
        description,
        schema,
    })
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
        // Written as the f32 it is ("0.2"), as chat completions write it, not widened to f64
        // first (0.20000000298023224).
        assert_eq!(body["temperature"], json!(0.2));
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
