//! Parsing a non-streaming `chat.completion` body into a [`ChatResponse`].

use reqwest::header::HeaderMap;
use serde_json::{Map, Value};

use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::openai::errors::{embedded_status, error_object_message, status_error};
use crate::llm::openai::origin::origin_artifact;
use crate::llm::openai::stream::extra_content_artifact;
use crate::llm::stream::normalise_tool_calls;
use crate::llm::transport::truncate;
use crate::vocab::{
    Artifact, ChatResponse, FinishReason, OpenaiChatMessage, ReasoningField, Usage,
};

/// Parse a successful (HTTP 200) completion body of `model` from `server` (recorded with
/// reasoning, which goes back only there).
pub(crate) fn parse_completion(
    body: &[u8],
    model: &str,
    server: &str,
) -> Result<ChatResponse, ProviderError> {
    let mut value: Value = serde_json::from_slice(body).map_err(|error| {
        ProviderError::Decode(format!(
            "invalid completion JSON ({error}): {}",
            truncate(&String::from_utf8_lossy(body))
        ))
    })?;
    if let Some(error) = value.get("error").filter(|error| !error.is_null()) {
        return Err(error_in_success(error, body));
    }
    let mut choice = take_first_choice(&mut value)?;
    let finish = choice
        .get("finish_reason")
        .and_then(Value::as_str)
        .filter(|reason| !reason.is_empty())
        .map(FinishReason::parse);
    let (message, artifacts) = match choice.get_mut("message").map(Value::take) {
        Some(Value::Object(mut message)) => {
            let artifacts = take_extra_content(&mut message, model);
            (normalise_message(message), artifacts)
        }
        _ => {
            return Err(ProviderError::Decode(
                "the reply's choice has no message".into(),
            ));
        }
    };
    let mut message: OpenaiChatMessage = serde_json::from_value(message)
        .map_err(|error| ProviderError::Decode(format!("invalid assistant message: {error}")))?;
    if let OpenaiChatMessage::Assistant {
        tool_calls,
        artifacts: kept,
        reasoning_content,
        reasoning,
        ..
    } = &mut message
    {
        normalise_tool_calls(tool_calls);
        // Only what this decoder recognised: a server cannot plant artifacts for another API.
        *kept = artifacts;
        if reasoning_content.is_some() || reasoning.is_some() {
            kept.push(origin_artifact(model, server));
        }
    }
    let stop_reason = FinishReason::for_reply(finish, !message.tool_calls().is_empty());
    let text = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_str)
            .filter(|text| !text.is_empty())
            .map(str::to_owned)
    };
    Ok(ChatResponse {
        message,
        stop_reason,
        usage: value.get("usage").and_then(Usage::from_wire),
        model: text("model"),
        id: text("id"),
    })
}

/// The `extra_content` of each tool call of `message`, as artifacts.
fn take_extra_content(message: &mut Map<String, Value>, model: &str) -> Vec<Artifact> {
    let Some(Value::Array(calls)) = message.get_mut("tool_calls") else {
        return Vec::new();
    };
    (0u32..)
        .zip(calls.iter_mut())
        .filter_map(|(index, call)| {
            let extra = call.as_object_mut()?.remove("extra_content")?;
            (!extra.is_null()).then(|| extra_content_artifact(model, index, extra))
        })
        .collect()
}

/// A whole reply as the deltas a stream of it would have carried.
pub(crate) fn response_deltas(response: ChatResponse) -> Vec<ModelDelta> {
    let mut deltas = vec![ModelDelta::Meta {
        id: response.id,
        model: response.model,
    }];
    if let OpenaiChatMessage::Assistant {
        content,
        refusal,
        reasoning_content,
        reasoning,
        tool_calls,
        artifacts,
        ..
    } = response.message
    {
        deltas.extend(artifacts.into_iter().map(ModelDelta::Artifact));
        let reasoning = match (reasoning_content, reasoning) {
            (Some(text), _) => Some((text, ReasoningField::ReasoningContent)),
            (None, Some(text)) => Some((text, ReasoningField::Reasoning)),
            (None, None) => None,
        };
        deltas.extend(reasoning.map(|(text, field)| ModelDelta::Reasoning { text, field }));
        deltas.extend(content.map(ModelDelta::Text));
        deltas.extend(refusal.map(ModelDelta::Refusal));
        for (index, call) in (0u32..).zip(tool_calls) {
            deltas.push(ModelDelta::ToolCall {
                index: Some(index),
                id: Some(call.id),
                name: Some(call.function.name),
                arguments: Some(call.function.arguments),
            });
        }
    }
    // A reply without a finish reason is still complete: it arrived whole.
    deltas.push(ModelDelta::Finish(
        response.stop_reason.unwrap_or(FinishReason::Stop),
    ));
    deltas.extend(response.usage.map(ModelDelta::Usage));
    deltas
}

/// An `{"error": ...}` body sent with HTTP 200 (some proxies do): typed like the HTTP status its
/// `code` or `type` stands for (see [`embedded_status`]), so it is retried like that status.
fn error_in_success(error: &Value, body: &[u8]) -> ProviderError {
    match embedded_status(error) {
        Some(status) => status_error(status, &HeaderMap::new(), body),
        None => ProviderError::Http {
            status: 200,
            message: error_object_message(error),
        },
    }
}

fn take_first_choice(value: &mut Value) -> Result<Value, ProviderError> {
    let choices = match value.get_mut("choices") {
        Some(Value::Array(choices)) => choices,
        _ => return Err(ProviderError::Decode("the reply has no choices".into())),
    };
    let position = choices
        .iter()
        .position(|choice| choice.get("index").and_then(Value::as_u64).unwrap_or(0) == 0)
        .unwrap_or(0);
    if choices.is_empty() {
        return Err(ProviderError::Decode("the reply has no choices".into()));
    }
    Ok(choices.swap_remove(position))
}

/// Fill what some servers leave out: the role, tool-call ids; drop a duplicate reasoning field
/// (vLLM sends both `reasoning_content` and `reasoning`); turn a legacy `function_call` into a
/// tool call.
fn normalise_message(mut message: Map<String, Value>) -> Value {
    message
        .entry("role")
        .or_insert_with(|| Value::String("assistant".into()));
    if message.contains_key("reasoning_content") {
        message.remove("reasoning");
    }
    // The legacy `functions` API (old Azure deployments): one `function_call` without an id
    // becomes one tool call (with a generated id, see `normalise_tool_calls`), so it is run and sent back as
    // `tool_calls`, which every server speaking the tools API accepts.
    if let Some(function @ Value::Object(_)) = message.remove("function_call") {
        let has_tool_calls =
            matches!(message.get("tool_calls"), Some(Value::Array(calls)) if !calls.is_empty());
        if !has_tool_calls {
            let call = serde_json::json!({"type": "function", "function": function});
            message.insert("tool_calls".into(), Value::Array(vec![call]));
        }
    }
    // A call without an id parses with an empty one, which `normalise_tool_calls` replaces.
    if let Some(Value::Array(calls)) = message.get_mut("tool_calls") {
        for call in calls.iter_mut().filter_map(Value::as_object_mut) {
            if !call.get("id").is_some_and(Value::is_string) {
                call.insert("id".into(), Value::String(String::new()));
            }
        }
    }
    Value::Object(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_completion_of(body: &[u8]) -> Result<ChatResponse, ProviderError> {
        parse_completion(body, "m", "http://127.0.0.1:1/v1")
    }

    #[test]
    fn a_tool_call_reply_parses() {
        let response = parse_completion_of(br#"{
            "id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "gpt-4o-2024-08-06",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": null, "refusal": null,
                "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]},
                "logprobs": null, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 80, "completion_tokens": 17, "total_tokens": 97,
                "prompt_tokens_details": {"cached_tokens": 0}, "completion_tokens_details": {"reasoning_tokens": 0}},
            "system_fingerprint": "fp_1"}"#).unwrap();
        assert_eq!(response.id.as_deref(), Some("chatcmpl-1"));
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        assert_eq!(response.tool_calls()[0].function.name, "get_weather");
        assert_eq!(response.usage.map(|usage| usage.total_tokens), Some(97));
    }

    #[test]
    fn server_quirks_are_normalised() {
        // Ollama: finish "stop" with tool calls; llama.cpp: object arguments, no id; vLLM: both reasoning fields.
        let response = parse_completion_of(br#"{"choices":[{"message":{"content":"","reasoning_content":"r","reasoning":"r",
            "tool_calls":[{"function":{"name":"f","arguments":{"a":1}}},{"id":"b","function":{"name":"g","arguments":""}}]},
            "finish_reason":"stop"}]}"#).unwrap();
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        let calls = response.tool_calls();
        assert_eq!(calls[0].function.arguments, r#"{"a":1}"#);
        assert!(calls[0].id.starts_with("call_"));
        assert_eq!(calls[1].function.arguments, "{}");
        assert_eq!(response.message.reasoning(), Some("r"));
    }

    #[test]
    fn missing_choices_and_error_bodies_are_errors() {
        assert!(matches!(
            parse_completion_of(br#"{"id":"x","choices":[]}"#),
            Err(ProviderError::Decode(_))
        ));
        assert!(matches!(
            parse_completion_of(br#"{"id":"x"}"#),
            Err(ProviderError::Decode(_))
        ));
        assert!(matches!(
            parse_completion_of(br#"{"error":{"message":"upstream down","code":502}}"#),
            Err(ProviderError::Server { status: 502, .. })
        ));
    }

    #[test]
    fn a_legacy_function_call_is_one_tool_call_with_a_generated_id() {
        let response = parse_completion_of(br#"{"choices":[{"index":0,"finish_reason":"function_call",
            "message":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":"{\"a\":1}"}}}]}"#).unwrap();
        assert_eq!(response.stop_reason, Some(FinishReason::ToolCalls));
        let calls = response.tool_calls();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].id.starts_with("call_"));
        assert_eq!(
            (
                calls[0].function.name.as_str(),
                calls[0].function.arguments.as_str()
            ),
            ("f", r#"{"a":1}"#)
        );
        let wire = serde_json::to_value(&response.message).unwrap();
        assert!(wire.get("function_call").is_none(), "{wire}");
        // A `function_call: null` beside real tool calls changes nothing.
        let response = parse_completion_of(br#"{"choices":[{"message":{"function_call":null,
            "tool_calls":[{"id":"c","type":"function","function":{"name":"g","arguments":"{}"}}]}}]}"#).unwrap();
        assert_eq!(response.tool_calls()[0].id, "c");
    }
}
