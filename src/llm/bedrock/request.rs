//! A [`ChatRequest`] as a Converse / ConverseStream request body, serialised from borrowed
//! wire types (no `Value` copy of the history).
//!
//! - System (and developer) messages become the top-level `system` blocks.
//! - The other messages alternate `user` / `assistant` (same-role runs merged, empty ones left
//!   out, a user message put first when the history starts with a reply). Tool results become
//!   `toolResult` blocks (`toolUseId` = the call id, `status: "error"` when the call failed),
//!   first in the next user message.
//! - An assistant message is laid out by [`layout`] for Bedrock and the request's model: its
//!   `reasoningContent` blocks byte-exact and in place, its text, its calls as `toolUse`
//!   blocks. Other providers' (and models') artifacts are left out.
//! - Images given as `data:` URLs become `image` blocks (`format` from the media type), PDFs
//!   `document` blocks; other URLs, audio and files have no Converse form and become a note.
//!
//! Options: `inferenceConfig` (`maxTokens`, `temperature`, `topP`, `stopSequences`);
//! reasoning for Anthropic models as `additionalModelRequestFields.thinking` with the
//! budgets and refusals of [`crate::llm::anthropic::thinking`]; `extra` merged into
//! `additionalModelRequestFields` (e.g. `top_k`); `toolConfig.toolChoice` `auto` / `any` /
//! `tool` (`none` sends no tools); typed output forces a tool whose input schema is the schema
//! (as on Anthropic). With caching on, `cachePoint` blocks mark the tools, the system prompt,
//! the previous request's end and the newest message (the planner of the Anthropic backend).

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::llm::anthropic::cache::{self, Role};
use crate::llm::anthropic::thinking;
use crate::llm::error::ProviderError;
use crate::llm::model::ChatRequest;
use crate::vocab::artifact::{Element, layout};
use crate::vocab::types::base64_data_url;
use crate::vocab::{
    ArtifactProvider, ContentPart, MessageContent, OpenaiChatMessage, ToolCall, ToolChoice,
    ToolDefinition,
};

/// `maxTokens` when the options set none.
pub const DEFAULT_MAX_TOKENS: u32 = 8192;

/// The typed-output tool's name when `response_format` names none.
const DEFAULT_ANSWER_TOOL: &str = "json_answer";

/// An encoded request and, under typed output, the tool whose call is the answer.
#[derive(Debug)]
pub(crate) struct Encoded {
    pub(crate) body: Vec<u8>,
    pub(crate) answer_tool: Option<String>,
}

/// One content block of a message or of the system prompt.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) enum Block<'a> {
    Text(&'a str),
    #[serde(rename = "text")]
    TextOwned(String),
    Image {
        format: &'a str,
        source: Source<'a>,
    },
    Document {
        format: &'a str,
        name: &'a str,
        source: Source<'a>,
    },
    #[serde(rename_all = "camelCase")]
    ToolUse {
        tool_use_id: &'a str,
        name: &'a str,
        input: Value,
    },
    #[serde(rename_all = "camelCase")]
    ToolResult {
        tool_use_id: &'a str,
        content: Vec<Block<'a>>,
        #[serde(skip_serializing_if = "Option::is_none")]
        status: Option<&'static str>,
    },
    CachePoint(CachePoint),
    /// An artifact's block (`reasoningContent`), byte for byte as it arrived.
    #[serde(untagged)]
    Verbatim(&'a Value),
}

impl Block<'_> {
    fn is_tool_result(&self) -> bool {
        matches!(self, Block::ToolResult { .. })
    }

    fn is_reasoning(&self) -> bool {
        matches!(self, Block::Verbatim(value) if value.get("reasoningContent").is_some())
    }
}

/// `{"bytes": base64}`.
#[derive(Debug, Serialize)]
pub(crate) struct Source<'a> {
    bytes: &'a str,
}

/// `{"type": "default"}`.
#[derive(Debug, Serialize)]
pub(crate) struct CachePoint {
    #[serde(rename = "type")]
    kind: &'static str,
}

const CACHE_POINT: fn() -> Block<'static> = || Block::CachePoint(CachePoint { kind: "default" });

#[derive(Debug, Serialize)]
struct Message<'a> {
    role: &'static str,
    content: Vec<Block<'a>>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolSpec<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<&'a str>,
    input_schema: Json<'a>,
}

#[derive(Serialize)]
struct Json<'a> {
    json: &'a Value,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
enum ToolEntry<'a> {
    ToolSpec(ToolSpec<'a>),
    CachePoint(CachePoint),
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolConfig<'a> {
    tools: Vec<ToolEntry<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_choice: Option<Value>,
}

#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct InferenceConfig<'a> {
    max_tokens: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    top_p: Option<f32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stop_sequences: Option<&'a [String]>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    messages: Vec<Message<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    system: Vec<Block<'a>>,
    inference_config: InferenceConfig<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_config: Option<ToolConfig<'a>>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    additional_model_request_fields: Map<String, Value>,
}

/// Whether `model` is an Anthropic model on Bedrock (ids, inference profiles and ARNs name it).
pub(crate) fn is_anthropic(model: &str) -> bool {
    model.contains("anthropic") || model.contains("claude")
}

/// The body of a Converse request for `request`, with cache points when `cache` is on.
pub(crate) fn request_body(
    request: &ChatRequest<'_>,
    cache: bool,
) -> Result<Encoded, ProviderError> {
    let options = request.options;
    let (mut system, mut messages) = conversation(request.messages, request.model);
    let answer = answer_tool(options.response_format.as_ref(), request.tools);
    let no_tools = matches!(options.tool_choice, Some(ToolChoice::None)) && answer.is_none();
    let mut tools: Vec<ToolEntry<'_>> = Vec::new();
    if !no_tools {
        tools.extend(request.tools.iter().map(tool));
    }
    if let Some(answer) = &answer {
        tools.push(ToolEntry::ToolSpec(ToolSpec {
            name: &answer.name,
            description: Some(
                "Give your answer: the arguments of this call are the answer, in exactly this shape.",
            ),
            input_schema: Json {
                json: answer.schema,
            },
        }));
    }
    let tool_choice = match (&answer, &options.tool_choice) {
        _ if tools.is_empty() => None,
        (Some(answer), _) => Some(json!({"tool": {"name": answer.name}})),
        (None, Some(ToolChoice::Required)) => Some(json!({"any": {}})),
        (None, Some(ToolChoice::Function(name))) => Some(json!({"tool": {"name": name}})),
        (None, Some(ToolChoice::Auto)) => Some(json!({"auto": {}})),
        (None, _) => None,
    };
    let forced = tool_choice
        .as_ref()
        .is_some_and(|choice| choice.get("any").is_some() || choice.get("tool").is_some());

    let mut max_tokens = options
        .max_completion_tokens
        .or(options.max_tokens)
        .unwrap_or(DEFAULT_MAX_TOKENS);
    let mut budget = thinking::requested_budget(options).filter(|_| is_anthropic(request.model));
    if budget.is_some() {
        let refusal = if forced {
            Some("a forced tool call (tool_choice any/tool, or typed output) cannot think")
        } else {
            refusal_in_history(&messages)
        };
        if let Some(reason) = refusal {
            tracing::info!(
                model = request.model,
                reason,
                "this Bedrock request is sent without reasoning"
            );
            budget = None;
        }
    }
    if let Some(budget) = budget {
        max_tokens = thinking::max_tokens_with(budget, max_tokens);
    }

    if cache {
        let roles: Vec<Role> = messages
            .iter()
            .map(|message| {
                if message.role == "user" {
                    Role::User
                } else {
                    Role::Assistant
                }
            })
            .collect();
        let tool_count = usize::from(!tools.is_empty());
        let plan = cache::plan(tool_count, usize::from(!system.is_empty()), &roles);
        if plan.tools {
            tools.push(ToolEntry::CachePoint(CachePoint { kind: "default" }));
        }
        if plan.system {
            system.push(CACHE_POINT());
        }
        for at in plan.messages {
            if let Some(message) = messages.get_mut(at) {
                message.content.push(CACHE_POINT());
            }
        }
    }

    let mut additional = options.extra.clone();
    if let Some(budget) = budget {
        additional.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    let body = Body {
        messages,
        system,
        inference_config: InferenceConfig {
            max_tokens,
            // Thinking allows no temperature and only a top_p of 0.95 and above.
            temperature: options.temperature.filter(|_| budget.is_none()),
            top_p: options
                .top_p
                .filter(|top_p| budget.is_none() || *top_p >= 0.95),
            stop_sequences: options.stop.as_deref().filter(|stop| !stop.is_empty()),
        },
        tool_config: (!tools.is_empty()).then_some(ToolConfig { tools, tool_choice }),
        additional_model_request_fields: additional,
    };
    let body = serde_json::to_vec(&body).map_err(|error| {
        ProviderError::Other(format!("could not serialise the request: {error}"))
    })?;
    Ok(Encoded {
        body,
        answer_tool: answer.map(|answer| answer.name),
    })
}

/// Why a request with these wire `messages` must not think (the Anthropic rule: in a tool loop
/// the last assistant message must start with a reasoning block of this model).
fn refusal_in_history(messages: &[Message<'_>]) -> Option<&'static str> {
    let last = messages.last()?;
    let in_tool_loop = last.content.iter().any(Block::is_tool_result);
    let reply = messages
        .iter()
        .rev()
        .find(|message| message.role == "assistant");
    let leads = reply
        .and_then(|reply| reply.content.first())
        .is_some_and(Block::is_reasoning);
    thinking::refusal(in_tool_loop, reply.is_some(), leads)
}

/// The system blocks and the alternating messages of a history.
fn conversation<'a>(
    history: &'a [OpenaiChatMessage],
    model: &str,
) -> (Vec<Block<'a>>, Vec<Message<'a>>) {
    let mut system = Vec::new();
    let mut messages: Vec<Message<'a>> = Vec::new();
    let push = |role: &'static str, blocks: Vec<Block<'a>>, messages: &mut Vec<Message<'a>>| {
        if blocks.is_empty() {
            return;
        }
        match messages.last_mut() {
            Some(last) if last.role == role => last.content.extend(blocks),
            _ => messages.push(Message {
                role,
                content: blocks,
            }),
        }
    };
    for message in history {
        match message {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. } => match content {
                MessageContent::Text(text) if text.is_empty() => {}
                MessageContent::Text(text) => system.push(Block::Text(text)),
                MessageContent::Parts(_) => {
                    let text = content.text();
                    if !text.is_empty() {
                        system.push(Block::TextOwned(text));
                    }
                }
            },
            OpenaiChatMessage::User { content, .. } => {
                push("user", content_blocks(content), &mut messages);
            }
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut blocks = content_blocks(content);
                if blocks.is_empty() {
                    // A result needs content; an empty one says so.
                    blocks.push(Block::Text("(no output)"));
                }
                let block = Block::ToolResult {
                    tool_use_id: tool_call_id,
                    content: blocks,
                    status: is_error.then_some("error"),
                };
                match messages.last_mut() {
                    Some(last) if last.role == "user" => {
                        let at = last
                            .content
                            .iter()
                            .position(|block| !block.is_tool_result())
                            .unwrap_or(last.content.len());
                        last.content.insert(at, block);
                    }
                    _ => messages.push(Message {
                        role: "user",
                        content: vec![block],
                    }),
                }
            }
            OpenaiChatMessage::Assistant { .. } => {
                let blocks = layout(message, ArtifactProvider::Bedrock, model)
                    .into_iter()
                    .map(|element| match element {
                        Element::Item(artifact) => Block::Verbatim(&artifact.data),
                        Element::Text { text, .. } => Block::Text(text),
                        Element::Call { call, .. } => tool_use(call),
                    })
                    .collect();
                push("assistant", blocks, &mut messages);
            }
        }
    }
    if matches!(messages.first(), Some(first) if first.role == "assistant") {
        messages.insert(
            0,
            Message {
                role: "user",
                content: vec![Block::Text("(the conversation so far)")],
            },
        );
    }
    (system, messages)
}

/// A call as a `toolUse` block; arguments that are not a JSON object go back as `{}`.
fn tool_use(call: &ToolCall) -> Block<'_> {
    let input = match serde_json::from_str::<Value>(&call.function.arguments) {
        Ok(Value::Object(fields)) => Value::Object(fields),
        _ => Value::Object(Map::new()),
    };
    Block::ToolUse {
        tool_use_id: &call.id,
        name: &call.function.name,
        input,
    }
}

/// The blocks of user or tool content; empty texts are left out (the API rejects them).
fn content_blocks(content: &MessageContent) -> Vec<Block<'_>> {
    match content {
        MessageContent::Text(text) if text.is_empty() => Vec::new(),
        MessageContent::Text(text) => vec![Block::Text(text)],
        MessageContent::Parts(parts) => parts.iter().filter_map(part).collect(),
    }
}

fn part(part: &ContentPart) -> Option<Block<'_>> {
    match part {
        ContentPart::Text { text } if text.is_empty() => None,
        ContentPart::Text { text } => Some(Block::Text(text)),
        ContentPart::ImageUrl { image_url } => Some(
            match base64_data_url(&image_url.url).and_then(|(media, data)| {
                media
                    .strip_prefix("image/")
                    .map(|format| (format.strip_prefix("x-").unwrap_or(format), data))
            }) {
                Some((format, data)) => Block::Image {
                    format: if format == "jpg" { "jpeg" } else { format },
                    source: Source { bytes: data },
                },
                None => Block::Text(
                    "[an image was attached here by URL; Converse takes images only as data: URLs]",
                ),
            },
        ),
        ContentPart::File { file } => {
            let pdf = file
                .get("file_data")
                .and_then(Value::as_str)
                .and_then(base64_data_url)
                .filter(|(media, _)| *media == "application/pdf");
            Some(match pdf {
                Some((_, data)) => Block::Document {
                    format: "pdf",
                    name: "document",
                    source: Source { bytes: data },
                },
                None => Block::Text(
                    "[a file was attached here; Converse takes only PDF files as data: URLs]",
                ),
            })
        }
        ContentPart::InputAudio { .. } => Some(Block::Text(
            "[audio was attached here; Converse takes no audio]",
        )),
    }
}

fn tool(definition: &ToolDefinition) -> ToolEntry<'_> {
    let function = &definition.function;
    ToolEntry::ToolSpec(ToolSpec {
        name: &function.name,
        description: function.description.as_deref().filter(|d| !d.is_empty()),
        input_schema: Json {
            json: &function.parameters,
        },
    })
}

struct AnswerTool<'a> {
    name: String,
    schema: &'a Value,
}

static OBJECT_SCHEMA: std::sync::LazyLock<Value> =
    std::sync::LazyLock::new(|| json!({"type": "object"}));

/// The typed-output tool `response_format` asks for, if any.
fn answer_tool<'a>(format: Option<&'a Value>, tools: &[ToolDefinition]) -> Option<AnswerTool<'a>> {
    let format = format?;
    let (name, schema) = match format.get("type").and_then(Value::as_str) {
        Some("json_schema") => {
            let spec = format.get("json_schema")?;
            (
                spec.get("name").and_then(Value::as_str).filter(|name| {
                    (1..=64).contains(&name.len())
                        && name
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
                }),
                spec.get("schema").unwrap_or(&OBJECT_SCHEMA),
            )
        }
        Some("json_object") => (None, &*OBJECT_SCHEMA),
        _ => return None,
    };
    let mut name = name.unwrap_or(DEFAULT_ANSWER_TOOL).to_owned();
    while tools.iter().any(|tool| tool.name() == name) {
        name.push_str("_answer");
    }
    Some(AnswerTool { name, schema })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{Artifact, ArtifactPlace, ReasoningEffort, RequestOptions};

    const MODEL: &str = "anthropic.claude-x-v1:0";

    fn encode(
        messages: &[OpenaiChatMessage],
        tools: &[ToolDefinition],
        options: &RequestOptions,
        cache: bool,
    ) -> Value {
        let request = ChatRequest {
            model: MODEL,
            messages,
            tools,
            options,
        };
        serde_json::from_slice(&request_body(&request, cache).unwrap().body).unwrap()
    }

    fn reasoning(model: &str, signature: &str) -> Artifact {
        Artifact::new(
            ArtifactProvider::Bedrock,
            model,
            ArtifactPlace::Before(0),
            json!({"reasoningContent": {"reasoningText": {"text": "hmm", "signature": signature}}}),
        )
    }

    fn weather() -> ToolDefinition {
        ToolDefinition::function(
            "get_weather",
            "Weather",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        )
    }

    fn tool_loop(model: &str) -> Vec<OpenaiChatMessage> {
        vec![
            OpenaiChatMessage::system("Be terse."),
            OpenaiChatMessage::user_text("Paris?"),
            OpenaiChatMessage::assistant_tool_calls(
                Some("Checking.".into()),
                vec![ToolCall::new(
                    "tooluse_a",
                    "get_weather",
                    r#"{"city":"Paris"}"#,
                )],
            )
            .with_artifacts(vec![reasoning(model, "sig-1")]),
            OpenaiChatMessage::Tool {
                tool_call_id: "tooluse_a".into(),
                content: MessageContent::Text("no such city".into()),
                is_error: true,
            },
        ]
    }

    #[test]
    fn a_tool_loop_with_reasoning_is_laid_out_as_converse_wants_it() {
        let options = RequestOptions {
            reasoning_effort: Some(ReasoningEffort::Low),
            temperature: Some(0.5),
            ..RequestOptions::default()
        };
        let body = encode(&tool_loop(MODEL), &[weather()], &options, false);
        assert_eq!(body["system"], json!([{"text": "Be terse."}]));
        assert_eq!(
            body["messages"],
            json!([
                {"role": "user", "content": [{"text": "Paris?"}]},
                {"role": "assistant", "content": [
                    {"reasoningContent": {"reasoningText": {"text": "hmm", "signature": "sig-1"}}},
                    {"text": "Checking."},
                    {"toolUse": {"toolUseId": "tooluse_a", "name": "get_weather", "input": {"city": "Paris"}}}
                ]},
                {"role": "user", "content": [
                    {"toolResult": {"toolUseId": "tooluse_a", "content": [{"text": "no such city"}], "status": "error"}}
                ]}
            ])
        );
        assert_eq!(
            body["additionalModelRequestFields"],
            json!({"thinking": {"type": "enabled", "budget_tokens": 2048}})
        );
        assert_eq!(body["inferenceConfig"], json!({"maxTokens": 8192}));
        assert_eq!(
            body["toolConfig"]["tools"][0]["toolSpec"]["inputSchema"]["json"]["type"],
            json!("object")
        );
    }

    #[test]
    fn another_models_reasoning_is_left_out_and_the_request_does_not_think() {
        let options = RequestOptions {
            reasoning_effort: Some(ReasoningEffort::High),
            ..RequestOptions::default()
        };
        let body = encode(
            &tool_loop("anthropic.claude-other"),
            &[weather()],
            &options,
            false,
        );
        assert_eq!(
            body["messages"][1]["content"][0],
            json!({"text": "Checking."})
        );
        assert!(body.get("additionalModelRequestFields").is_none());
    }

    #[test]
    fn cache_points_mark_tools_system_and_the_message_ends() {
        let body = encode(
            &tool_loop(MODEL),
            &[weather()],
            &RequestOptions::default(),
            true,
        );
        let point = json!({"cachePoint": {"type": "default"}});
        assert_eq!(body["toolConfig"]["tools"][1], point);
        assert_eq!(body["system"][1], point);
        assert_eq!(body["messages"][0]["content"][1], point);
        assert_eq!(body["messages"][2]["content"][1], point);
        assert_eq!(
            serde_json::to_string(&body)
                .unwrap()
                .matches("cachePoint")
                .count(),
            4
        );
    }

    #[test]
    fn options_and_typed_output_map_to_their_fields() {
        let mut extra = Map::new();
        extra.insert("top_k".into(), json!(5));
        let options = RequestOptions {
            max_tokens: Some(100),
            stop: Some(vec!["END".into()]),
            top_p: Some(0.9),
            extra,
            response_format: Some(
                json!({"type": "json_schema", "json_schema": {"name": "get_weather", "schema": {"type": "object"}}}),
            ),
            ..RequestOptions::default()
        };
        let messages = [OpenaiChatMessage::user_parts(vec![
            ContentPart::Text { text: "see".into() },
            ContentPart::ImageUrl {
                image_url: crate::vocab::ImageUrl {
                    url: "data:image/png;base64,iVBO".into(),
                    detail: None,
                },
            },
        ])];
        let request = ChatRequest {
            model: "amazon.nova-pro-v1:0",
            messages: &messages,
            tools: &[weather()],
            options: &options,
        };
        let encoded = request_body(&request, false).unwrap();
        assert_eq!(encoded.answer_tool.as_deref(), Some("get_weather_answer"));
        let body: Value = serde_json::from_slice(&encoded.body).unwrap();
        assert_eq!(
            body["inferenceConfig"],
            json!({"maxTokens": 100, "topP": 0.9, "stopSequences": ["END"]})
        );
        assert_eq!(body["additionalModelRequestFields"], json!({"top_k": 5}));
        assert_eq!(
            body["toolConfig"]["toolChoice"],
            json!({"tool": {"name": "get_weather_answer"}})
        );
        assert_eq!(
            body["messages"][0]["content"][1],
            json!({"image": {"format": "png", "source": {"bytes": "iVBO"}}})
        );
    }
}
