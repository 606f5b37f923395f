//! The request body: a [`ChatRequest`] serialised once, straight into bytes, with the changes the
//! wire needs (reasoning left out where it is not wanted, `stream`, `stream_options`) made while
//! serialising instead of on a copy of the history.

use std::borrow::Cow;

use serde::Serialize;
use serde::ser::{SerializeSeq, Serializer};

use crate::llm::error::ProviderError;
use crate::llm::model::ChatRequest;
use crate::llm::openai::origin::reasoning_is_from;
use crate::llm::openai::{Dialect, ReasoningEcho};
use crate::vocab::artifact::merge_fields;
use crate::vocab::{
    Artifact, ArtifactPlace, ArtifactProvider, MessageContent, OpenaiChatMessage, RequestOptions,
    ToolCall, ToolDefinition,
};

/// The JSON body of a `/chat/completions` request.
pub(crate) fn request_body(
    request: &ChatRequest<'_>,
    stream: bool,
    echo: ReasoningEcho,
    dialect: &dyn Dialect,
    server: &str,
) -> Result<Vec<u8>, ProviderError> {
    // Chat completions have no hosted tools: asking for one fails, naming who has them.
    for hosted in &request.options.hosted_tools {
        hosted.check(crate::llm::model::WireApi::ChatCompletions)?;
    }
    // OpenAI rejects `tool_choice` and `parallel_tool_calls` without tools, and `stream_options`
    // without `stream`; dropping them needs a copy of the (small) options, made only then.
    let drop_tool_options = request.tools.is_empty()
        && (request.options.tool_choice.is_some() || request.options.parallel_tool_calls.is_some());
    let drop_stream_options = !stream && request.options.stream_options.is_some();
    // Chat completions have no reasoning budget parameter (only `reasoning_effort`).
    let drop_budget = request.options.reasoning_budget_tokens.is_some();
    let options = if drop_tool_options || drop_stream_options || drop_budget {
        let mut options = request.options.clone();
        options.reasoning_budget_tokens = None;
        if drop_tool_options {
            options.tool_choice = None;
            options.parallel_tool_calls = None;
        }
        if drop_stream_options {
            options.stream_options = None;
        }
        Cow::Owned(options)
    } else {
        Cow::Borrowed(request.options)
    };
    let options = dialect.options(options);
    let stream_options = (stream && options.stream_options.is_none()).then_some(IncludeUsage {
        include_usage: true,
    });
    let body = WireRequest {
        model: request.model,
        messages: WireMessages {
            messages: request.messages,
            echo,
            model: request.model,
            server,
        },
        tools: request.tools,
        options: &options,
        stream: (!options.extra.contains_key("stream")).then_some(stream),
        stream_options,
    };
    serde_json::to_vec(&body)
        .map_err(|error| ProviderError::Other(format!("could not serialise the request: {error}")))
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

/// The history, with reasoning sent back only where it is needed.
///
/// The history is split into user turns (a user message and what follows it up to the next
/// one). Reasoning is sent back, in the field it arrived in, for the current (last) turn and for
/// every earlier turn that called tools: DeepSeek's thinking mode answers 400 ("Missing
/// `reasoning_content` field") when a tool-calling turn's reasoning is missing from any later
/// request. Earlier turns without tool calls are sent without it: servers ignore it there, and
/// it can be most of the request's size.
struct WireMessages<'a> {
    messages: &'a [OpenaiChatMessage],
    echo: ReasoningEcho,
    /// The model the request is for: only its artifacts go back.
    model: &'a str,
    /// The server the request goes to: with the model, the only one reasoning goes back to.
    server: &'a str,
}

impl Serialize for WireMessages<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let messages = self.messages;
        let mut seq = serializer.serialize_seq(Some(messages.len()))?;
        let mut start = 0;
        while start < messages.len() {
            let end = messages[start + 1..]
                .iter()
                .position(|m| matches!(m, OpenaiChatMessage::User { .. }))
                .map_or(messages.len(), |offset| start + 1 + offset);
            let turn = &messages[start..end];
            let keep_reasoning = match self.echo {
                ReasoningEcho::Never => false,
                ReasoningEcho::AsReceived => {
                    end == messages.len() || turn.iter().any(|m| !m.tool_calls().is_empty())
                }
            };
            for message in turn {
                // Reasoning goes back only to the server and model that produced it.
                let keep_reasoning =
                    keep_reasoning && reasoning_is_from(message, self.model, self.server);
                match message {
                    OpenaiChatMessage::Assistant {
                        content,
                        refusal,
                        reasoning_content,
                        reasoning,
                        tool_calls,
                        name,
                        artifacts,
                    } => seq.serialize_element(&WireAssistant {
                        role: "assistant",
                        // OpenAI requires `content` unless there are tool calls: a reply that
                        // was empty (or only reasoning) goes back as "" rather than null.
                        content: match content {
                            None if tool_calls.is_empty() => Some(""),
                            content => content.as_deref(),
                        },
                        refusal: refusal.as_deref(),
                        reasoning_content: reasoning_content.as_deref().filter(|_| keep_reasoning),
                        reasoning: reasoning.as_deref().filter(|_| keep_reasoning),
                        tool_calls: WireCalls {
                            calls: tool_calls,
                            artifacts,
                            model: self.model,
                        },
                        name: name.as_deref(),
                    })?,
                    // `is_error` is the application's, not the model's: left out.
                    OpenaiChatMessage::Tool {
                        tool_call_id,
                        content,
                        ..
                    } => seq.serialize_element(&WireTool {
                        role: "tool",
                        tool_call_id,
                        content,
                    })?,
                    other => seq.serialize_element(other)?,
                }
            }
            start = end;
        }
        seq.end()
    }
}

/// The wire form of [`OpenaiChatMessage::Assistant`], borrowed.
#[derive(Serialize)]
struct WireAssistant<'a> {
    role: &'static str,
    content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    refusal: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning_content: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reasoning: Option<&'a str>,
    #[serde(skip_serializing_if = "WireCalls::is_empty")]
    tool_calls: WireCalls<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
}

/// The tool calls of an assistant message, each with the fields its artifacts add back
/// (`extra_content`); a message without such artifacts is serialised as it is.
struct WireCalls<'a> {
    calls: &'a [ToolCall],
    artifacts: &'a [Artifact],
    model: &'a str,
}

impl WireCalls<'_> {
    fn is_empty(&self) -> bool {
        self.calls.is_empty()
    }
}

impl Serialize for WireCalls<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let usable = |artifact: &&Artifact| {
            artifact.usable_by(ArtifactProvider::OpenaiChat, self.model)
                && matches!(artifact.place, ArtifactPlace::On(_))
        };
        if !self.artifacts.iter().any(|a| usable(&a)) {
            return self.calls.serialize(serializer);
        }
        let mut seq = serializer.serialize_seq(Some(self.calls.len()))?;
        for (index, call) in self.calls.iter().enumerate() {
            let element = ArtifactPlace::On(ArtifactPlace::call_element(index));
            let on: Vec<&Artifact> = self
                .artifacts
                .iter()
                .filter(|a| usable(a) && a.place == element)
                .collect();
            if on.is_empty() {
                seq.serialize_element(call)?;
            } else {
                let mut value = serde_json::to_value(call).map_err(serde::ser::Error::custom)?;
                merge_fields(&mut value, &on);
                seq.serialize_element(&value)?;
            }
        }
        seq.end()
    }
}

/// The wire form of [`OpenaiChatMessage::Tool`], borrowed: without `is_error`.
#[derive(Serialize)]
struct WireTool<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a MessageContent,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::{StreamOptions, ToolChoice};
    use serde_json::{Value, json};

    const SERVER: &str = "http://127.0.0.1:1/v1";

    /// A reply of model `m` from `SERVER`, as the decoders record it.
    fn assistant(text: &str, reasoning: &str, field: &str, calls: bool) -> OpenaiChatMessage {
        let mut wire = json!({"role": "assistant", "content": text, field: reasoning});
        if calls {
            wire["tool_calls"] = json!([{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]);
        }
        serde_json::from_value::<OpenaiChatMessage>(wire)
            .unwrap()
            .with_artifacts(vec![crate::llm::openai::origin::origin_artifact(
                "m", SERVER,
            )])
    }

    fn body(request: &ChatRequest<'_>, stream: bool) -> Value {
        body_with(request, stream, ReasoningEcho::AsReceived)
    }

    fn body_with(request: &ChatRequest<'_>, stream: bool, echo: ReasoningEcho) -> Value {
        serde_json::from_slice(
            &request_body(
                request,
                stream,
                echo,
                &crate::llm::openai::StandardDialect,
                SERVER,
            )
            .unwrap(),
        )
        .unwrap()
    }

    fn history() -> Vec<OpenaiChatMessage> {
        vec![
            OpenaiChatMessage::user_text("q1"),
            assistant("a1", "r1", "reasoning_content", true),
            OpenaiChatMessage::tool_result("c1", "out"),
            assistant("a1 done", "r1b", "reasoning_content", false),
            OpenaiChatMessage::user_text("q2"),
            assistant("a2", "r2", "reasoning_content", false),
            OpenaiChatMessage::user_text("q3"),
            assistant("a3", "r3", "reasoning", true),
        ]
    }

    #[test]
    fn a_tool_calls_extra_content_goes_back_on_that_call_and_only_to_its_model() {
        // Gemini's OpenAI-compatible endpoint: the signature rides on the call it came with.
        let reply = br#"{"model":"gemini-3-pro","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,
            "tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}},
                          {"id":"b","type":"function","function":{"name":"g","arguments":"{}"},"extra_content":{"google":{"thought_signature":"c2ln"}}}]}}]}"#;
        let reply =
            crate::llm::openai::response::parse_completion(reply, "gemini-3-pro", SERVER).unwrap();
        assert_eq!(reply.message.artifacts().len(), 1);
        let messages = vec![
            OpenaiChatMessage::user_text("q"),
            reply.message,
            OpenaiChatMessage::tool_result("a", "1"),
            OpenaiChatMessage::tool_result("b", "2"),
        ];
        let options = RequestOptions::default();
        let request = |model| ChatRequest {
            model,
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let sent = body(&request("gemini-3-pro"), false);
        let calls = &sent["messages"][1]["tool_calls"];
        assert!(calls[0].get("extra_content").is_none());
        assert_eq!(
            calls[1]["extra_content"],
            json!({"google": {"thought_signature": "c2ln"}})
        );
        assert!(sent["messages"][1].get("artifacts").is_none());
        // Another model never receives it.
        let sent = body(&request("gpt-4o"), false);
        assert!(
            sent["messages"][1]["tool_calls"][1]
                .get("extra_content")
                .is_none()
        );
    }

    #[test]
    fn reasoning_effort_is_sent_and_a_budget_is_not() {
        let messages = vec![OpenaiChatMessage::user_text("q")];
        let options = RequestOptions {
            reasoning_effort: Some(crate::vocab::ReasoningEffort::Low),
            reasoning_budget_tokens: Some(2048),
            ..RequestOptions::default()
        };
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let sent = body(&request, true);
        assert_eq!(sent["reasoning_effort"], "low");
        assert!(sent.get("reasoning_budget_tokens").is_none());
    }

    #[test]
    fn reasoning_goes_back_for_tool_turns_and_the_current_turn_in_its_own_field() {
        let messages = history();
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let body = body(&request, false);
        let sent = body["messages"].as_array().unwrap();
        // The turn that called tools keeps all its reasoning (DeepSeek requires it).
        let mut first = serde_json::to_value(&messages[1]).unwrap();
        first.as_object_mut().unwrap().remove("artifacts");
        assert_eq!(sent[1], first);
        assert_eq!(sent[3]["reasoning_content"], "r1b");
        // An earlier turn without tool calls is sent without it.
        assert_eq!(sent[5], json!({"role": "assistant", "content": "a2"}));
        // The current turn keeps it, under the name the server used, and only that name.
        assert_eq!(sent[7]["reasoning"], "r3");
        assert!(sent[7].get("reasoning_content").is_none());
        assert_eq!(body["stream"], false);
        assert!(body.get("stream_options").is_none());
    }

    #[test]
    fn reasoning_goes_back_only_to_the_server_and_model_that_produced_it() {
        let mut messages = history();
        // The current turn's reply came from another server (a fallback).
        messages[7] = serde_json::from_value::<OpenaiChatMessage>(
            json!({"role": "assistant", "content": "a3", "reasoning": "r3"}),
        )
        .unwrap()
        .with_artifacts(vec![crate::llm::openai::origin::origin_artifact(
            "m",
            "https://fallback.example/v1",
        )]);
        let options = RequestOptions::default();
        let request = |model| ChatRequest {
            model,
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let reasoning_sent = |body: Value| {
            body["messages"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|m| m.get("reasoning_content").is_some() || m.get("reasoning").is_some())
                .count()
        };
        // Same server and model: the tool turn's two replies; the fallback's goes without.
        assert_eq!(reasoning_sent(body(&request("m"), false)), 2);
        // Another model on the same server, or the same model on another server: none.
        assert_eq!(reasoning_sent(body(&request("m2"), false)), 0);
        let elsewhere = request_body(
            &request("m"),
            false,
            ReasoningEcho::AsReceived,
            &crate::llm::openai::StandardDialect,
            "https://other.example/v1",
        )
        .unwrap();
        assert_eq!(
            reasoning_sent(serde_json::from_slice(&elsewhere).unwrap()),
            0
        );
    }

    #[test]
    fn a_tool_error_flag_is_kept_in_serde_but_never_sent() {
        let failed = OpenaiChatMessage::tool_answer("c1", crate::vocab::ToolAnswer::error("boom"));
        let saved = serde_json::to_value(&failed).unwrap();
        assert_eq!(saved["is_error"], true);
        let loaded: OpenaiChatMessage = serde_json::from_value(saved).unwrap();
        assert!(loaded.is_tool_error());
        let messages = vec![
            OpenaiChatMessage::user_text("q"),
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("c1", "f", "{}")]),
            failed,
        ];
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        assert_eq!(
            body(&request, false)["messages"][2],
            json!({"role": "tool", "tool_call_id": "c1", "content": "Error: boom"})
        );
    }

    #[test]
    fn an_assistant_message_without_text_or_tool_calls_sends_empty_content_not_null() {
        let mut empty = OpenaiChatMessage::assistant_text("");
        if let OpenaiChatMessage::Assistant { content, .. } = &mut empty {
            *content = None;
        }
        let calls =
            OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("c1", "f", "{}")]);
        let messages = vec![OpenaiChatMessage::user_text("q"), empty, calls];
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let body = body(&request, false);
        assert_eq!(
            body["messages"][1],
            json!({"role": "assistant", "content": ""})
        );
        assert_eq!(body["messages"][2]["content"], Value::Null);
    }

    #[test]
    fn reasoning_echo_never_sends_no_reasoning() {
        let messages = history();
        let options = RequestOptions::default();
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        let body = body_with(&request, false, ReasoningEcho::Never);
        for message in body["messages"].as_array().unwrap() {
            assert!(message.get("reasoning").is_none(), "{message}");
            assert!(message.get("reasoning_content").is_none(), "{message}");
        }
        assert_eq!(body["messages"][1]["tool_calls"][0]["id"], "c1");
    }

    #[test]
    fn stream_options_are_not_sent_without_stream() {
        let messages = vec![OpenaiChatMessage::user_text("q")];
        let options = RequestOptions {
            stream_options: Some(StreamOptions {
                include_usage: Some(true),
            }),
            ..RequestOptions::default()
        };
        let request = ChatRequest {
            model: "m",
            messages: &messages,
            tools: &[],
            options: &options,
        };
        assert!(body(&request, false).get("stream_options").is_none());
        assert_eq!(
            body(&request, true)["stream_options"],
            json!({"include_usage": true})
        );
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
