//! The request body: a [`ChatRequest`] serialised once, straight into bytes, with the changes the
//! wire needs (reasoning stripped from earlier turns, `stream`, `stream_options`) made while
//! serialising instead of on a copy of the history.

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use crate::llm::error::LlmError;
use crate::llm::model::ChatRequest;
use crate::llm::types::{OpenaiChatMessage, RequestOptions, ToolCall, ToolDefinition};

/// The JSON body of a `/chat/completions` request.
pub(crate) fn request_body(request: &ChatRequest<'_>, stream: bool) -> Result<Vec<u8>, LlmError> {
    // `tool_choice` and `parallel_tool_calls` without tools are rejected by OpenAI; dropping them
    // needs a copy of the (small) options, made only in that case.
    let options = if request.tools.is_empty()
        && (request.options.tool_choice.is_some() || request.options.parallel_tool_calls.is_some())
    {
        let mut options = request.options.clone();
        options.tool_choice = None;
        options.parallel_tool_calls = None;
        Cow::Owned(options)
    } else {
        Cow::Borrowed(request.options)
    };
    let stream_options = (stream && options.stream_options.is_none()).then_some(IncludeUsage {
        include_usage: true,
    });
    let body = WireRequest {
        model: request.model,
        messages: WireMessages {
            messages: request.messages,
            reasoning_from: request.reasoning_from,
        },
        tools: request.tools,
        options: &options,
        stream: (!options.extra.contains_key("stream")).then_some(stream),
        stream_options,
    };
    serde_json::to_vec(&body)
        .map_err(|error| LlmError::Other(format!("could not serialise the request: {error}")))
}

#[derive(Serialize)]
struct WireRequest<'a> {
    model: &'a str,
    messages: WireMessages<'a>,
    #[serde(skip_serializing_if = "<[ToolDefinition]>::is_empty")]
    tools: &'a [ToolDefinition],
    #[serde(flatten)]
    options: &'a RequestOptions,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<IncludeUsage>,
}

#[derive(Serialize)]
struct IncludeUsage {
    include_usage: bool,
}

/// The history, with assistant messages before `reasoning_from` sent without their reasoning.
struct WireMessages<'a> {
    messages: &'a [OpenaiChatMessage],
    reasoning_from: usize,
}

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut seq = serializer.serialize_seq(Some(self.messages.len()))?;
        for (position, message) in self.messages.iter().enumerate() {
            match message {
                OpenaiChatMessage::Assistant {
                    content,
                    refusal,
                    reasoning_content: Some(_),
                    tool_calls,
                    name,
                } if position < self.reasoning_from => {
                    seq.serialize_element(&AssistantWithoutReasoning {
                        role: "assistant",
                        content: content.as_deref(),
                        refusal: refusal.as_deref(),
                        tool_calls,
                        name: name.as_deref(),
                    })?;
                }
                other => seq.serialize_element(other)?,
            }
        }
        seq.end()
    }
}

/// The wire form of [`OpenaiChatMessage::Assistant`] minus `reasoning_content`.
#[derive(Serialize)]
struct AssistantWithoutReasoning<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<&'a str>,
    #[serde(skip_serializing_if = "<[ToolCall]>::is_empty")]
    tool_calls: &'a [ToolCall],
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::types::{StreamOptions, ToolChoice};
    use serde_json::{Value, json};

    fn assistant_with_reasoning(text: &str, reasoning: &str) -> OpenaiChatMessage {
        OpenaiChatMessage::Assistant {
            content: Some(text.to_owned()),
            refusal: None,
            reasoning_content: Some(reasoning.to_owned()),
            tool_calls: vec![ToolCall::new("c1", "f", "{}")],
            name: None,
        }
    }

    fn body(request: &ChatRequest<'_>, stream: bool) -> Value {
        serde_json::from_slice(&request_body(request, stream).unwrap()).unwrap()
    }

    #[test]
    fn reasoning_is_stripped_only_before_reasoning_from() {
        let messages = vec![
            OpenaiChatMessage::user_text("q1"),
            assistant_with_reasoning("a1", "r1"),
            OpenaiChatMessage::tool_result("c1", "out"),
            OpenaiChatMessage::user_text("q2"),
            assistant_with_reasoning("a2", "r2"),
        ];
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
            reasoning_from: 3,
        };
        let body = body(&request, false);
        let sent = body["messages"].as_array().unwrap();
        assert_eq!(
            sent[1],
            json!({"role": "assistant", "content": "a1", "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]})
        );
        assert_eq!(sent[4]["reasoning_content"], "r2");
        assert_eq!(sent[4], serde_json::to_value(&messages[4]).unwrap());
        assert_eq!(body["stream"], false);
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn streaming_asks_for_usage_unless_the_caller_set_stream_options() {
        let messages = vec![OpenaiChatMessage::user_text("q")];
        let mut options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
            reasoning_from: 0,
        };
        let sent = body(&request, true);
        assert_eq!(sent["stream"], true);
        assert_eq!(sent["stream_options"], json!({"include_usage": true}));
        options.stream_options = Some(StreamOptions {
            include_usage: Some(false),
        });
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
            reasoning_from: 0,
        };
        assert_eq!(
            body(&request, true)["stream_options"],
            json!({"include_usage": false})
        );
    }

    #[test]
    fn tool_choice_is_dropped_without_tools_and_extras_go_top_level() {
        let messages = vec![OpenaiChatMessage::user_text("q")];
        let mut options = RequestOptions {
            tool_choice: Some(ToolChoice::Required),
            parallel_tool_calls: Some(false),
            ..RequestOptions::default()
        };
        options.extra.insert("top_k".into(), json!(20));
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
            reasoning_from: 0,
        };
        let sent = body(&request, false);
        assert!(sent.get("tool_choice").is_none());
        assert!(sent.get("parallel_tool_calls").is_none());
        assert_eq!(sent["top_k"], 20);
        let tools = vec![ToolDefinition::function(
            "f",
            "d",
            json!({"type": "object"}),
        )];
        let request = ChatRequest {
            tools: &tools,
            ..request
        };
        let sent = body(&request, false);
        assert_eq!(sent["tool_choice"], "required");
        assert_eq!(sent["parallel_tool_calls"], false);
        assert_eq!(sent["tools"][0]["function"]["name"], "f");
    }
}
