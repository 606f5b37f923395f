//! OpenAI Chat Completions wire types.
//!
//! These serialise exactly as the `/v1/chat/completions` endpoint expects and parse what
//! OpenAI-compatible servers (OpenAI, Azure, vLLM, Ollama, llama.cpp, DeepSeek, ...) return,
//! including their quirks (arguments sent as a JSON object, `reasoning` vs `reasoning_content`,
//! unknown finish reasons).

use std::fmt;

use serde::de::{self, Deserializer};
use serde::ser::Serializer;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::vocab::ToolAnswer;
use crate::vocab::artifact::Artifact;

/// The text or content parts of a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MessageContent {
    /// Plain text.
    Text(String),
    /// Content parts (text, images, audio, files).
    Parts(Vec<ContentPart>),
}

impl MessageContent {
    /// The text of the content: the string itself, or the text parts joined with newlines.
    pub fn text(&self) -> String {
        match self {
            MessageContent::Text(text) => text.clone(),
            MessageContent::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(text.as_str()),
                    _ => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }
}

impl From<String> for MessageContent {
    fn from(text: String) -> Self {
        MessageContent::Text(text)
    }
}

impl From<&str> for MessageContent {
    fn from(text: &str) -> Self {
        MessageContent::Text(text.to_owned())
    }
}

/// One content part of a user (or system/tool) message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    /// A text part.
    Text {
        /// The text.
        text: String,
    },
    /// An image, by URL or `data:` URL.
    ImageUrl {
        /// The image reference.
        image_url: ImageUrl,
    },
    /// Base64 audio input.
    InputAudio {
        /// The audio payload (`{"data": "...", "format": "wav"}`).
        input_audio: Value,
    },
    /// A file input (`{"file_id": ...}` or `{"file_data": ..., "filename": ...}`).
    File {
        /// The file payload.
        file: Value,
    },
}

/// An image reference inside a [`ContentPart::ImageUrl`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    /// `https://...` or `data:image/png;base64,...`.
    pub url: String,
    /// `low`, `high` or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// `data:<media type>;base64,<data>` split into its media type and data (`None` for any other
/// URL): how the native encoders send an inline image or file.
pub(crate) fn base64_data_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("data:")?;
    let (header, data) = rest.split_once(',')?;
    Some((header.strip_suffix(";base64")?, data))
}

/// A chat message of any role, as sent to and received from the server.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum OpenaiChatMessage {
    /// Instructions from the application.
    System {
        /// The instructions.
        content: MessageContent,
        /// Optional participant name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// Instructions with the `developer` role (newer OpenAI models).
    Developer {
        /// The instructions.
        content: MessageContent,
        /// Optional participant name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A user turn.
    User {
        /// Text or content parts.
        content: MessageContent,
        /// Optional participant name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
    },
    /// A model turn.
    Assistant {
        /// The text of the reply; `null` when the reply only calls tools.
        #[serde(default, deserialize_with = "deserialize_assistant_content")]
        content: Option<String>,
        /// A refusal message, if the model refused.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refusal: Option<String>,
        /// Reasoning text the server sent as `reasoning_content` (DeepSeek, llama.cpp, older
        /// vLLM). Kept so it can be sent back under the same name: DeepSeek's thinking mode
        /// rejects a later request whose tool-calling assistant messages lack it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning_content: Option<String>,
        /// Reasoning text the server sent as `reasoning` (OpenRouter, Groq, Cerebras, Ollama,
        /// newer vLLM). Kept apart from `reasoning_content` so each server gets back only the
        /// field it produced: Groq and Cerebras reject a `reasoning_content` they never sent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// The tool calls the model asked for.
        #[serde(
            default,
            deserialize_with = "deserialize_null_default",
            skip_serializing_if = "Vec::is_empty"
        )]
        tool_calls: Vec<ToolCall>,
        /// Optional participant name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// What the API that wrote this reply needs back to continue it (thinking signatures,
        /// encrypted reasoning, thought signatures), kept verbatim; see [`crate::vocab::artifact`].
        /// Never sent as a field: each backend puts its own artifacts back in place.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        artifacts: Vec<Artifact>,
    },
    /// The result of one tool call, answering the assistant's call with `tool_call_id`.
    Tool {
        /// The id of the call this message answers.
        tool_call_id: String,
        /// The result text.
        content: MessageContent,
        /// Whether the call failed or was refused. Data for the application (replay, UIs,
        /// stores), never sent to the model: the wire encoder leaves it out, and the model
        /// reads the failure in `content`. Serialised (only when true) so a saved history
        /// keeps it.
        #[serde(default, skip_serializing_if = "is_false")]
        is_error: bool,
    },
}

fn is_false(value: &bool) -> bool {
    !*value
}

impl OpenaiChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        OpenaiChatMessage::System {
            content: MessageContent::Text(content.into()),
            name: None,
        }
    }

    /// A user message with plain text.
    pub fn user_text(content: impl Into<String>) -> Self {
        OpenaiChatMessage::User {
            content: MessageContent::Text(content.into()),
            name: None,
        }
    }

    /// A user message made of content parts (text, images, ...).
    pub fn user_parts(parts: Vec<ContentPart>) -> Self {
        OpenaiChatMessage::User {
            content: MessageContent::Parts(parts),
            name: None,
        }
    }

    /// An assistant message with plain text.
    pub fn assistant_text(content: impl Into<String>) -> Self {
        OpenaiChatMessage::Assistant {
            content: Some(content.into()),
            refusal: None,
            reasoning_content: None,
            reasoning: None,
            tool_calls: Vec::new(),
            name: None,
            artifacts: Vec::new(),
        }
    }

    /// An assistant message that calls tools (with optional text).
    pub fn assistant_tool_calls(content: Option<String>, tool_calls: Vec<ToolCall>) -> Self {
        OpenaiChatMessage::Assistant {
            content,
            refusal: None,
            reasoning_content: None,
            reasoning: None,
            tool_calls,
            name: None,
            artifacts: Vec::new(),
        }
    }

    /// This message with `artifacts` (an assistant message; other roles have none and are
    /// returned unchanged).
    pub fn with_artifacts(mut self, new: Vec<Artifact>) -> Self {
        if let OpenaiChatMessage::Assistant { artifacts, .. } = &mut self {
            *artifacts = new;
        }
        self
    }

    /// The continuation artifacts of an assistant message (empty for other roles).
    pub fn artifacts(&self) -> &[Artifact] {
        match self {
            OpenaiChatMessage::Assistant { artifacts, .. } => artifacts,
            _ => &[],
        }
    }

    /// A tool result answering the call `call_id`.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        OpenaiChatMessage::Tool {
            tool_call_id: call_id.into(),
            content: MessageContent::Text(content.into()),
            is_error: false,
        }
    }

    /// The tool message answering `call_id` with `answer` (its text and error flag).
    pub fn tool_answer(call_id: impl Into<String>, answer: ToolAnswer) -> Self {
        OpenaiChatMessage::Tool {
            tool_call_id: call_id.into(),
            content: MessageContent::Text(answer.content),
            is_error: answer.is_error,
        }
    }

    /// Whether this is a tool message reporting a failed or refused call.
    pub fn is_tool_error(&self) -> bool {
        matches!(self, OpenaiChatMessage::Tool { is_error: true, .. })
    }

    /// The role name as it appears on the wire.
    pub fn role(&self) -> &'static str {
        match self {
            OpenaiChatMessage::System { .. } => "system",
            OpenaiChatMessage::Developer { .. } => "developer",
            OpenaiChatMessage::User { .. } => "user",
            OpenaiChatMessage::Assistant { .. } => "assistant",
            OpenaiChatMessage::Tool { .. } => "tool",
        }
    }

    /// The message's text (content parts joined), or `None` for an assistant message without text.
    pub fn text(&self) -> Option<String> {
        match self {
            OpenaiChatMessage::System { content, .. }
            | OpenaiChatMessage::Developer { content, .. }
            | OpenaiChatMessage::User { content, .. }
            | OpenaiChatMessage::Tool { content, .. } => Some(content.text()),
            OpenaiChatMessage::Assistant { content, .. } => content.clone(),
        }
    }

    /// The tool calls of an assistant message (empty for other roles).
    pub fn tool_calls(&self) -> &[ToolCall] {
        match self {
            OpenaiChatMessage::Assistant { tool_calls, .. } => tool_calls,
            _ => &[],
        }
    }

    /// The reasoning text of an assistant message, whichever field the server used.
    pub fn reasoning(&self) -> Option<&str> {
        match self {
            OpenaiChatMessage::Assistant {
                reasoning_content,
                reasoning,
                ..
            } => reasoning_content.as_deref().or(reasoning.as_deref()),
            _ => None,
        }
    }
}

/// The response field a server put its reasoning text in. The text is sent back under the
/// same name, so a server never receives a field it did not produce.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum ReasoningField {
    /// `reasoning_content` (DeepSeek, llama.cpp, older vLLM).
    #[default]
    ReasoningContent,
    /// `reasoning` (OpenRouter, Groq, Cerebras, Ollama, newer vLLM).
    Reasoning,
}

/// One tool call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call id; the matching `tool` message carries it as `tool_call_id`.
    pub id: String,
    /// Always `"function"` today.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function and its arguments.
    pub function: FunctionCall,
}

impl ToolCall {
    /// A function tool call.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: impl Into<String>,
    ) -> Self {
        ToolCall {
            id: id.into(),
            kind: function_type(),
            function: FunctionCall {
                name: name.into(),
                arguments: arguments.into(),
            },
        }
    }
}

/// The function part of a [`ToolCall`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionCall {
    /// The tool name.
    pub name: String,
    /// The arguments as a JSON text. Servers that send a JSON object instead (llama.cpp) are
    /// accepted: the object is stored as its JSON text.
    #[serde(default, deserialize_with = "deserialize_arguments")]
    pub arguments: String,
}

fn function_type() -> String {
    "function".to_owned()
}

/// A tool offered to the model: `{"type":"function","function":{"name","description","parameters"}}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpenaiToolDefinition {
    /// Always `"function"`.
    #[serde(rename = "type", default = "function_type")]
    pub kind: String,
    /// The function's name, description and JSON Schema.
    pub function: FunctionDefinition,
}

/// The tool definition passed to the model (the design's name for [`OpenaiToolDefinition`]).
pub type ToolDefinition = OpenaiToolDefinition;

impl OpenaiToolDefinition {
    /// A function tool definition.
    pub fn function(
        name: impl Into<String>,
        description: impl Into<String>,
        parameters: Value,
    ) -> Self {
        let description = description.into();
        OpenaiToolDefinition {
            kind: function_type(),
            function: FunctionDefinition {
                name: name.into(),
                description: (!description.is_empty()).then_some(description),
                parameters,
                strict: None,
                defer_loading: false,
            },
        }
    }

    /// The tool's name.
    pub fn name(&self) -> &str {
        &self.function.name
    }
}

/// The function part of a [`ToolDefinition`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionDefinition {
    /// The tool name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// What the tool does; the model decides from this whether to call it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The JSON Schema of the arguments (an object schema).
    #[serde(default = "empty_object_schema")]
    pub parameters: Value,
    /// OpenAI structured-outputs strict mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
    /// A deferred tool offered to an API with native tool search (Anthropic's
    /// `defer_loading`): the API loads it when its own search finds it
    /// ([`crate::tools::deferred`]). Never serialised: only an encoder that has native search
    /// reads it.
    #[serde(skip)]
    pub defer_loading: bool,
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object", "properties": {}})
}

/// How the model may choose tools (`tool_choice`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    /// The model decides (`"auto"`).
    Auto,
    /// No tool calls (`"none"`).
    None,
    /// At least one tool call (`"required"`).
    Required,
    /// Exactly this function.
    Function(String),
}

impl Serialize for ToolChoice {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ToolChoice::Auto => serializer.serialize_str("auto"),
            ToolChoice::None => serializer.serialize_str("none"),
            ToolChoice::Required => serializer.serialize_str("required"),
            ToolChoice::Function(name) => serde_json::json!({
                "type": "function",
                "function": {"name": name}
            })
            .serialize(serializer),
        }
    }
}

impl<'de> Deserialize<'de> for ToolChoice {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(deserializer)?;
        match &value {
            Value::String(s) if s == "auto" => Ok(ToolChoice::Auto),
            Value::String(s) if s == "none" => Ok(ToolChoice::None),
            Value::String(s) if s == "required" => Ok(ToolChoice::Required),
            Value::Object(_) => value
                .pointer("/function/name")
                .and_then(Value::as_str)
                .map(|name| ToolChoice::Function(name.to_owned()))
                .ok_or_else(|| de::Error::custom("tool_choice object without function.name")),
            other => Err(de::Error::custom(format!("unknown tool_choice {other}"))),
        }
    }
}

/// `stream_options` of a streaming request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StreamOptions {
    /// Ask for a final chunk carrying token usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub include_usage: Option<bool>,
}

/// Request options besides model, messages and tools. Unset options are not sent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RequestOptions {
    /// Sampling temperature.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Nucleus sampling.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f32>,
    /// Maximum tokens to generate (`max_tokens`, understood by every compatible server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Maximum tokens including reasoning (`max_completion_tokens`, newer OpenAI models).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_completion_tokens: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop: Option<Vec<String>>,
    /// Sampling seed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<i64>,
    /// Presence penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence_penalty: Option<f32>,
    /// Frequency penalty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// How the model may choose tools; only sent when tools are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_choice: Option<ToolChoice>,
    /// Whether the model may call several tools in one turn; only sent when tools are sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel_tool_calls: Option<bool>,
    /// `response_format` (`{"type":"json_object"}`, `{"type":"json_schema",...}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<Value>,
    /// `stream_options` for streaming requests. When unset, streaming requests ask for usage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_options: Option<StreamOptions>,
    /// End-user id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// How much the model reasons, for every API: chat completions send it as
    /// `reasoning_effort`; each native backend maps it to its own parameter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<ReasoningEffort>,
    /// An explicit reasoning budget in tokens, for the APIs that take one (Anthropic's
    /// `budget_tokens`, Gemini's `thinkingBudget`); it wins over `reasoning_effort` there.
    /// Chat completions have no such parameter and never send it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_budget_tokens: Option<u32>,
    /// Tools the provider runs itself (web search, code execution, ...), sent in the API's
    /// own shape; one the API does not have fails the request, naming what each API has
    /// (see [`crate::llm::hosted`]). Chat completions have none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosted_tools: Vec<crate::vocab::hosted::HostedTool>,
    /// Vendor extras sent as-is at the top level of the body (e.g. `top_k`, `chat_template_kwargs`).
    #[serde(default, flatten, skip_serializing_if = "Map::is_empty")]
    pub extra: Map<String, Value>,
}

/// How much a reasoning model thinks before it answers: the same four words for every API.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReasoningEffort {
    /// No reasoning (`"none"` on the wire of chat completions).
    #[serde(rename = "none")]
    Off,
    /// Little reasoning.
    Low,
    /// The models' usual default.
    Medium,
    /// The most reasoning.
    High,
}

impl ReasoningEffort {
    /// The word used on the command line and in chat completions (`none`, `low`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ReasoningEffort::Off => "none",
            ReasoningEffort::Low => "low",
            ReasoningEffort::Medium => "medium",
            ReasoningEffort::High => "high",
        }
    }
}

/// Why the model stopped generating.
///
/// Parsing never fails: an unknown or empty string becomes [`FinishReason::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum FinishReason {
    /// A natural stop or a stop sequence (`"stop"`; also `"eos"`, `"end_turn"`).
    Stop,
    /// The token limit was reached (`"length"`).
    Length,
    /// The model asked for tool calls (`"tool_calls"`; also the legacy `"function_call"`).
    ToolCalls,
    /// Content was filtered (`"content_filter"`).
    ContentFilter,
    /// Anything else the server sent.
    Other(String),
}

impl FinishReason {
    /// The finish reason of a reply as the server sent it (`sent`) given whether the reply
    /// holds tool calls: calls under `stop`, an unknown reason or none (Ollama sends `stop`)
    /// are still tool calls. `length` stays `length` — its calls may be cut mid-JSON.
    pub fn for_reply(sent: Option<FinishReason>, has_tool_calls: bool) -> Option<FinishReason> {
        match sent {
            Some(FinishReason::Stop) | Some(FinishReason::Other(_)) | None if has_tool_calls => {
                Some(FinishReason::ToolCalls)
            }
            other => other,
        }
    }

    /// Parse a server's finish reason; never fails.
    pub fn parse(value: &str) -> Self {
        match value {
            "stop" | "eos" | "end_turn" | "stop_sequence" => FinishReason::Stop,
            "length" | "max_tokens" => FinishReason::Length,
            "tool_calls" | "function_call" | "tool_use" => FinishReason::ToolCalls,
            "content_filter" => FinishReason::ContentFilter,
            other => FinishReason::Other(other.to_owned()),
        }
    }

    /// The wire form.
    pub fn as_str(&self) -> &str {
        match self {
            FinishReason::Stop => "stop",
            FinishReason::Length => "length",
            FinishReason::ToolCalls => "tool_calls",
            FinishReason::ContentFilter => "content_filter",
            FinishReason::Other(other) => other,
        }
    }
}

impl fmt::Display for FinishReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FinishReason {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FinishReason {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let value = Option::<String>::deserialize(deserializer)?;
        Ok(FinishReason::parse(value.as_deref().unwrap_or("")))
    }
}

/// Token usage of one request, or summed over the turns of a tool loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Tokens in the prompt.
    #[serde(default, deserialize_with = "deserialize_null_default")]
    pub prompt_tokens: u64,
    /// Tokens generated.
    #[serde(default, deserialize_with = "deserialize_null_default")]
    pub completion_tokens: u64,
    /// Prompt plus completion.
    #[serde(default, deserialize_with = "deserialize_null_default")]
    pub total_tokens: u64,
    /// Prompt tokens served from the server's prompt cache, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_tokens: Option<u64>,
    /// Completion tokens spent on reasoning, when reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning_tokens: Option<u64>,
    /// Prompt tokens written to the server's prompt cache, when reported (Anthropic's
    /// `cache_creation_input_tokens`); part of `prompt_tokens`, like `cached_tokens`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// Web searches the provider ran for a hosted web search tool, when reported
    /// (Anthropic's `server_tool_use.web_search_requests`, Responses' `web_search_call`
    /// items); billed per search, apart from tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub web_search_requests: Option<u64>,
}

impl Usage {
    /// Parse a wire `usage` object, reading the nested `*_tokens_details` too.
    pub fn from_wire(value: &Value) -> Option<Usage> {
        let object = value.as_object()?;
        // A count that is there but not a non-negative integer makes the whole usage unknown
        // (said once per reply in a warning), rather than a zero that would turn token budgets
        // off without a word.
        let malformed = ["prompt_tokens", "completion_tokens", "total_tokens"]
            .into_iter()
            .find(|key| {
                object
                    .get(*key)
                    .is_some_and(|v| !v.is_null() && v.as_u64().is_none())
            });
        if let Some(key) = malformed {
            tracing::warn!(
                field = key,
                "the server reported usage that is not a count of tokens; this reply's usage is unknown"
            );
            return None;
        }
        let field = |key: &str| object.get(key).and_then(Value::as_u64).unwrap_or(0);
        let prompt_tokens = field("prompt_tokens");
        let completion_tokens = field("completion_tokens");
        let total_tokens = match field("total_tokens") {
            0 => prompt_tokens.saturating_add(completion_tokens),
            total => total,
        };
        Some(Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens,
            cached_tokens: value
                .pointer("/prompt_tokens_details/cached_tokens")
                .or_else(|| object.get("prompt_cache_hit_tokens"))
                .and_then(Value::as_u64),
            reasoning_tokens: value
                .pointer("/completion_tokens_details/reasoning_tokens")
                .and_then(Value::as_u64),
            cache_write_tokens: None,
            web_search_requests: None,
        })
    }
}

/// Sums saturate at `u64::MAX`: a server may report any number, and a sum must not panic.
impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        fn add(a: Option<u64>, b: Option<u64>) -> Option<u64> {
            match (a, b) {
                (None, None) => None,
                (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
            }
        }
        self.prompt_tokens = self.prompt_tokens.saturating_add(other.prompt_tokens);
        self.completion_tokens = self
            .completion_tokens
            .saturating_add(other.completion_tokens);
        self.total_tokens = self.total_tokens.saturating_add(other.total_tokens);
        self.cached_tokens = add(self.cached_tokens, other.cached_tokens);
        self.reasoning_tokens = add(self.reasoning_tokens, other.reasoning_tokens);
        self.cache_write_tokens = add(self.cache_write_tokens, other.cache_write_tokens);
        self.web_search_requests = add(self.web_search_requests, other.web_search_requests);
    }
}

/// The result of one model request (or of a whole tool loop: then `usage` is the sum).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatResponse {
    /// The assistant message.
    pub message: OpenaiChatMessage,
    /// Why the model stopped; `None` when the server did not say.
    pub stop_reason: Option<FinishReason>,
    /// Token usage, when the server reported it.
    pub usage: Option<Usage>,
    /// The model that answered, as reported by the server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The server's completion id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
}

impl ChatResponse {
    /// The assistant's text (empty when it only called tools).
    pub fn text(&self) -> String {
        self.message.text().unwrap_or_default()
    }

    /// The tool calls the assistant asked for.
    pub fn tool_calls(&self) -> &[ToolCall] {
        self.message.tool_calls()
    }
}

fn deserialize_null_default<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Assistant content may arrive as a string, `null`, or (rarely) content parts.
fn deserialize_assistant_content<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<String>, D::Error> {
    Ok(Option::<MessageContent>::deserialize(deserializer)?.map(|content| content.text()))
}

/// Arguments arrive as a JSON text (the standard) or as a JSON object (llama.cpp, some Ollama builds).
fn deserialize_arguments<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    match Option::<Value>::deserialize(deserializer)? {
        None | Some(Value::Null) => Ok(String::new()),
        Some(Value::String(text)) => Ok(text),
        Some(other) => Ok(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn tool_definition_serialises_to_the_openai_shape() {
        let def = ToolDefinition::function("get_weather", "Weather now", json!({"type": "object"}));
        assert_eq!(
            serde_json::to_value(&def).unwrap_or_default(),
            json!({"type": "function", "function": {"name": "get_weather", "description": "Weather now", "parameters": {"type": "object"}}})
        );
    }

    #[test]
    fn unknown_and_empty_finish_reasons_parse() {
        let parsed: Vec<FinishReason> =
            serde_json::from_value(json!(["stop", "", "weird", null, "tool_calls"]))
                .unwrap_or_default();
        assert_eq!(
            parsed,
            vec![
                FinishReason::Stop,
                FinishReason::Other(String::new()),
                FinishReason::Other("weird".into()),
                FinishReason::Other(String::new()),
                FinishReason::ToolCalls
            ]
        );
    }

    #[test]
    fn assistant_with_object_arguments_and_null_tool_calls_parses() {
        let message: OpenaiChatMessage = serde_json::from_value(json!({
            "role": "assistant", "content": null,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}]
        }))
        .unwrap_or_else(|e| OpenaiChatMessage::system(e.to_string()));
        assert_eq!(message.tool_calls()[0].function.arguments, r#"{"a":1}"#);
        let message: OpenaiChatMessage = serde_json::from_value(
            json!({"role": "assistant", "content": "hi", "tool_calls": null, "reasoning": "think"}),
        )
        .unwrap_or_else(|e| OpenaiChatMessage::system(e.to_string()));
        assert_eq!(message.text().as_deref(), Some("hi"));
        assert_eq!(message.reasoning(), Some("think"));
    }

    #[test]
    fn reasoning_goes_back_under_the_field_name_it_arrived_in() {
        for field in ["reasoning", "reasoning_content"] {
            let wire = json!({"role": "assistant", "content": "hi", field: "think"});
            let message: OpenaiChatMessage = serde_json::from_value(wire.clone()).unwrap();
            assert_eq!(message.reasoning(), Some("think"));
            assert_eq!(serde_json::to_value(&message).unwrap(), wire);
        }
    }

    #[test]
    fn tool_result_message_carries_the_call_id() {
        let message = OpenaiChatMessage::tool_result("call_1", "22 degrees");
        assert_eq!(
            serde_json::to_value(&message).unwrap_or_default(),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "22 degrees"})
        );
    }

    #[test]
    fn assistant_tool_call_message_sends_null_content() {
        let message =
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("c1", "f", "{}")]);
        assert_eq!(
            serde_json::to_value(&message).unwrap_or_default(),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        );
    }

    #[test]
    fn usage_sums_saturate_instead_of_overflowing() {
        let huge = Usage {
            prompt_tokens: u64::MAX,
            completion_tokens: u64::MAX,
            total_tokens: u64::MAX,
            cached_tokens: Some(u64::MAX),
            reasoning_tokens: Some(u64::MAX),
            cache_write_tokens: Some(u64::MAX),
            web_search_requests: None,
        };
        let mut sum = huge;
        sum += huge;
        assert_eq!(sum, huge);
        let wire = json!({"prompt_tokens": u64::MAX, "completion_tokens": 1});
        assert_eq!(
            Usage::from_wire(&wire).map(|u| u.total_tokens),
            Some(u64::MAX)
        );
    }
}
