//! Decoding one `chat.completion.chunk` JSON payload into [`ModelDelta`]s.
//!
//! The chunk is parsed into small typed structs (not a `serde_json::Value`): unknown fields
//! (`logprobs`, `system_fingerprint`, Azure's filter results, ...) are skipped without being
//! built, which keeps decoding fast on long streams.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::llm::error::ProviderError;
use crate::llm::model::ModelDelta;
use crate::llm::openai::errors::stream_error;
use crate::llm::openai::origin::origin_artifact;
use crate::llm::transport::truncate;
use crate::vocab::generate_call_id;
use crate::vocab::{
    Artifact, ArtifactPlace, ArtifactProvider, FinishReason, ReasoningField, Usage,
};

/// The chat-completions stream decoder: per-stream state of one reply's chunks.
#[derive(Debug, Default)]
pub struct ChunkDecoder {
    sent_id: bool,
    sent_model: bool,
    /// Whether a reasoning delta (possibly empty) has been passed on.
    sent_reasoning: bool,
    finished: bool,
    /// Whether a piece of a legacy `function_call` has been passed on (the first carries the
    /// synthesised id).
    sent_function_call: bool,
    /// The model the request named: artifacts of the reply are sent back to it only.
    model: String,
    /// The server the request went to ([`server_of`](super::origin::server_of)): reasoning of
    /// the reply goes back to it only.
    server: String,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    id: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    model: Option<Cow<'a, str>>,
    #[serde(default)]
    choices: Option<Vec<Choice>>,
    #[serde(default)]
    usage: Option<Value>,
    #[serde(default)]
    error: Option<Value>,
    /// Groq reports streaming usage here instead of in `usage`.
    #[serde(default)]
    x_groq: Option<XGroq>,
}

#[derive(Deserialize)]
struct XGroq {
    #[serde(default)]
    usage: Option<Value>,
}

#[derive(Deserialize)]
struct Choice {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    delta: Option<Delta>,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct Delta {
    #[serde(default, deserialize_with = "text_or_parts")]
    content: Option<String>,
    #[serde(default)]
    reasoning_content: Option<String>,
    /// vLLM (newer), Ollama, OpenRouter and Groq name the reasoning text `reasoning`.
    #[serde(default)]
    reasoning: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<ToolCallPiece>>,
    /// The legacy `functions` API (old Azure deployments): one call, no id, no index.
    #[serde(default)]
    function_call: Option<FunctionPiece>,
}

#[derive(Deserialize)]
struct ToolCallPiece {
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    function: Option<FunctionPiece>,
    /// Vendor state of the call that must come back with it (Gemini's OpenAI-compatible
    /// endpoint: `{"google": {"thought_signature": ...}}`).
    #[serde(default)]
    extra_content: Option<Value>,
}

#[derive(Deserialize)]
struct FunctionPiece {
    #[serde(default)]
    name: Option<String>,
    #[serde(default, deserialize_with = "string_or_json")]
    arguments: Option<String>,
}

impl ChunkDecoder {
    /// A decoder for a reply of `model` (the name the request gave) from `server`.
    pub(crate) fn for_model(model: &str, server: &str) -> Self {
        ChunkDecoder {
            model: model.to_owned(),
            server: server.to_owned(),
            ..ChunkDecoder::default()
        }
    }

    /// Whether a finish reason has been seen: a stream that ends after it is complete even
    /// without `[DONE]`.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// Decode one chunk's JSON text, appending its deltas to `out`.
    pub(crate) fn decode(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<(), ProviderError> {
        let chunk: Chunk<'_> = serde_json::from_str(data).map_err(|error| {
            ProviderError::Decode(format!(
                "invalid stream chunk ({error}): {}",
                truncate(data)
            ))
        })?;
        if let Some(error) = chunk.error.as_ref().filter(|error| !error.is_null()) {
            return Err(stream_error(error));
        }
        self.meta(chunk.id, chunk.model, out);
        // Only the first choice is used (`n` > 1 is not supported by the assembler).
        if let Some(choice) = chunk
            .choices
            .unwrap_or_default()
            .into_iter()
            .find(|choice| choice.index.unwrap_or(0) == 0)
        {
            if let Some(mut delta) = choice.delta {
                if let Some(function) = delta.function_call.take() {
                    self.push_function_call(function, &mut delta);
                }
                let had_reasoning = self.sent_reasoning;
                push_delta(delta, &mut self.sent_reasoning, &self.model, out);
                // A decoder that does not know its server (`decode_stream`) records no origin.
                if self.sent_reasoning && !had_reasoning && !self.server.is_empty() {
                    out.push_back(ModelDelta::Artifact(origin_artifact(
                        &self.model,
                        &self.server,
                    )));
                }
            }
            if let Some(reason) = choice.finish_reason.filter(|reason| !reason.is_empty()) {
                self.finished = true;
                out.push_back(ModelDelta::Finish(FinishReason::parse(&reason)));
            }
        }
        let usage = chunk
            .usage
            .or_else(|| chunk.x_groq.and_then(|groq| groq.usage));
        if let Some(usage) = usage.as_ref().and_then(Usage::from_wire) {
            out.push_back(ModelDelta::Usage(usage));
        }
        Ok(())
    }

    /// A piece of a legacy `function_call`, as a piece of one tool call: the first piece brings
    /// a synthesised id, the rest continue that call.
    fn push_function_call(&mut self, function: FunctionPiece, delta: &mut Delta) {
        let id = (!self.sent_function_call).then(generate_call_id);
        self.sent_function_call = true;
        delta
            .tool_calls
            .get_or_insert_with(Vec::new)
            .push(ToolCallPiece {
                index: None,
                id,
                function: Some(function),
                extra_content: None,
            });
    }

    /// Emit the id and model once each; Azure's first chunk has them empty.
    fn meta(
        &mut self,
        id: Option<Cow<'_, str>>,
        model: Option<Cow<'_, str>>,
        out: &mut VecDeque<ModelDelta>,
    ) {
        let id = id.filter(|id| !self.sent_id && !id.is_empty());
        let model = model.filter(|model| !self.sent_model && !model.is_empty());
        if id.is_none() && model.is_none() {
            return;
        }
        self.sent_id |= id.is_some();
        self.sent_model |= model.is_some();
        out.push_back(ModelDelta::Meta {
            id: id.map(Cow::into_owned),
            model: model.map(Cow::into_owned),
        });
    }
}

fn push_delta(
    delta: Delta,
    sent_reasoning: &mut bool,
    model: &str,
    out: &mut VecDeque<ModelDelta>,
) {
    let reasoning = match (delta.reasoning_content, delta.reasoning) {
        (Some(text), _) if !text.is_empty() => Some((text, ReasoningField::ReasoningContent)),
        (_, Some(text)) if !text.is_empty() => Some((text, ReasoningField::Reasoning)),
        // An empty field is passed on once: the field's presence matters (see StreamAssembler).
        (Some(_), _) if !*sent_reasoning => Some((String::new(), ReasoningField::ReasoningContent)),
        (_, Some(_)) if !*sent_reasoning => Some((String::new(), ReasoningField::Reasoning)),
        _ => None,
    };
    if let Some((text, field)) = reasoning {
        *sent_reasoning = true;
        out.push_back(ModelDelta::Reasoning { text, field });
    }
    if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
        out.push_back(ModelDelta::Text(text));
    }
    if let Some(refusal) = delta.refusal.filter(|text| !text.is_empty()) {
        out.push_back(ModelDelta::Refusal(refusal));
    }
    for piece in delta.tool_calls.unwrap_or_default() {
        let (name, arguments) = match piece.function {
            Some(function) => (function.name, function.arguments),
            None => (None, None),
        };
        if let Some(extra) = piece.extra_content.filter(|extra| !extra.is_null()) {
            out.push_back(ModelDelta::Artifact(extra_content_artifact(
                model,
                piece.index.unwrap_or(0),
                extra,
            )));
        }
        out.push_back(ModelDelta::ToolCall {
            index: piece.index,
            id: piece.id,
            name,
            arguments,
        });
    }
}

/// The `extra_content` of tool call `index` as an artifact merged back into that call.
pub(crate) fn extra_content_artifact(model: &str, index: u32, extra: Value) -> Artifact {
    let mut fields = serde_json::Map::new();
    fields.insert("extra_content".to_owned(), extra);
    Artifact::new(
        ArtifactProvider::OpenaiChat,
        model,
        ArtifactPlace::On(index.saturating_add(1)),
        Value::Object(fields),
    )
}

/// `content` as a string, `null`, or a list of content parts (whose texts are joined).
fn text_or_parts<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct TextVisitor;

    impl<'de> Visitor<'de> for TextVisitor {
        type Value = Option<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string, null or a list of content parts")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }

        fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(text))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
            let mut text = String::new();
            while let Some(part) = seq.next_element::<Value>()? {
                if let Some(piece) = part.get("text").and_then(Value::as_str) {
                    text.push_str(piece);
                }
            }
            Ok(Some(text))
        }
    }

    deserializer.deserialize_any(TextVisitor)
}

/// `arguments` as a JSON text (the standard), `null`, or a JSON object (llama.cpp), which is
/// kept as its JSON text.
fn string_or_json<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<String>, D::Error> {
    struct ArgumentsVisitor;

    impl<'de> Visitor<'de> for ArgumentsVisitor {
        type Value = Option<String>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON text or a JSON object")
        }

        fn visit_str<E: de::Error>(self, text: &str) -> Result<Self::Value, E> {
            Ok(Some(text.to_owned()))
        }

        fn visit_string<E: de::Error>(self, text: String) -> Result<Self::Value, E> {
            Ok(Some(text))
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
            let value = Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
            Ok(Some(value.to_string()))
        }

        fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
            let value = Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
            Ok(Some(value.to_string()))
        }
    }

    deserializer.deserialize_any(ArgumentsVisitor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(chunks: &[&str]) -> Result<Vec<ModelDelta>, ProviderError> {
        let mut decoder = ChunkDecoder::default();
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.decode(chunk, &mut out)?;
        }
        Ok(out.into())
    }

    #[test]
    fn a_streamed_calls_extra_content_becomes_an_artifact_on_that_call() {
        let mut decoder = ChunkDecoder::for_model("gemini-3-flash", "http://127.0.0.1:1/v1");
        let mut out = VecDeque::new();
        decoder
            .decode(
                r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"b","type":"function","function":{"name":"g","arguments":"{}"},"extra_content":{"google":{"thought_signature":"c2ln"}}}]}}]}"#,
                &mut out,
            )
            .unwrap();
        let artifact = out.iter().find_map(|delta| match delta {
            ModelDelta::Artifact(artifact) => Some(artifact.clone()),
            _ => None,
        });
        // Reasoning records where it came from, once.
        let mut reasoning = VecDeque::new();
        for _ in 0..2 {
            decoder
                .decode(
                    r#"{"choices":[{"index":0,"delta":{"reasoning_content":"r"}}]}"#,
                    &mut reasoning,
                )
                .unwrap();
        }
        let origins: Vec<&ModelDelta> = reasoning
            .iter()
            .filter(|delta| matches!(delta, ModelDelta::Artifact(_)))
            .collect();
        assert_eq!(
            origins,
            [&ModelDelta::Artifact(
                crate::llm::openai::origin::origin_artifact(
                    "gemini-3-flash",
                    "http://127.0.0.1:1/v1"
                )
            )]
        );
        assert_eq!(
            artifact,
            Some(Artifact::new(
                ArtifactProvider::OpenaiChat,
                "gemini-3-flash",
                ArtifactPlace::On(2),
                serde_json::json!({"extra_content": {"google": {"thought_signature": "c2ln"}}}),
            ))
        );
    }

    #[test]
    fn text_reasoning_and_finish_are_decoded() {
        let deltas = decode(&[
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"","reasoning_content":"think"},"logprobs":null,"finish_reason":null}]}"#,
            r#"{"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"Hi \"there\""},"finish_reason":"stop"}]}"#,
        ])
        .unwrap();
        assert_eq!(
            deltas,
            vec![
                ModelDelta::Meta {
                    id: Some("c1".into()),
                    model: Some("m".into())
                },
                ModelDelta::Reasoning {
                    text: "think".into(),
                    field: ReasoningField::ReasoningContent
                },
                ModelDelta::Text("Hi \"there\"".into()),
                ModelDelta::Finish(FinishReason::Stop),
            ]
        );
    }

    #[test]
    fn reasoning_named_reasoning_is_tagged_with_its_field() {
        let deltas = decode(&[r#"{"choices":[{"index":0,"delta":{"reasoning":"r"}}]}"#]).unwrap();
        assert_eq!(
            deltas,
            vec![ModelDelta::Reasoning {
                text: "r".into(),
                field: ReasoningField::Reasoning
            }]
        );
    }

    #[test]
    fn an_empty_reasoning_field_is_passed_on_once() {
        let chunk = r#"{"choices":[{"index":0,"delta":{"content":"a","reasoning_content":""}}]}"#;
        let deltas = decode(&[chunk, chunk]).unwrap();
        assert_eq!(
            deltas,
            vec![
                ModelDelta::Reasoning {
                    text: String::new(),
                    field: ReasoningField::ReasoningContent
                },
                ModelDelta::Text("a".into()),
                ModelDelta::Text("a".into()),
            ]
        );
    }

    #[test]
    fn object_arguments_missing_function_and_other_choices_are_handled() {
        let deltas = decode(&[
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"a","type":"function","function":{"name":"f","arguments":{"x":[1,2]}}}]}}]}"#,
            r#"{"choices":[{"index":1,"delta":{"content":"other choice"}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0}]}}]}"#,
        ])
        .unwrap();
        assert_eq!(
            deltas,
            vec![
                ModelDelta::ToolCall {
                    index: Some(0),
                    id: Some("a".into()),
                    name: Some("f".into()),
                    arguments: Some(r#"{"x":[1,2]}"#.into())
                },
                ModelDelta::ToolCall {
                    index: Some(0),
                    id: None,
                    name: None,
                    arguments: None
                },
            ]
        );
    }

    #[test]
    fn errors_usage_and_content_parts_are_decoded() {
        assert!(matches!(
            decode(&[r#"{"error":{"message":"overloaded"}}"#]),
            Err(ProviderError::Stream(message)) if message == "overloaded"
        ));
        assert!(matches!(
            decode(&["not json"]),
            Err(ProviderError::Decode(_))
        ));
        let deltas = decode(&[
            r#"{"choices":[{"index":0,"delta":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}}]}"#,
            r#"{"id":"x","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2,"total_tokens":5}}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"x_groq":{"usage":{"prompt_tokens":1,"completion_tokens":1}}}"#,
        ])
        .unwrap();
        assert_eq!(deltas[0], ModelDelta::Text("ab".into()));
        assert!(matches!(&deltas[2], ModelDelta::Usage(usage) if usage.total_tokens == 5));
        assert!(matches!(&deltas[4], ModelDelta::Usage(usage) if usage.total_tokens == 2));
    }

    #[test]
    fn an_error_chunk_is_typed_like_the_status_its_code_or_type_names() {
        let status = |chunk: &str| match decode(&[chunk]) {
            Err(ProviderError::Server { status, .. }) => Some(status),
            Err(ProviderError::RateLimited { .. }) => Some(429),
            Err(ProviderError::BadRequest { status, .. }) => Some(status),
            _ => None,
        };
        assert_eq!(
            status(r#"{"error":{"code":500,"message":"peg-native format","type":"server_error"}}"#),
            Some(500)
        );
        assert_eq!(
            status(r#"{"error":{"code":502,"message":"upstream"}}"#),
            Some(502)
        );
        assert_eq!(
            status(r#"{"error":{"code":"503","message":"busy"}}"#),
            Some(503)
        );
        assert_eq!(
            status(r#"{"error":{"message":"x","type":"server_error","code":null}}"#),
            Some(500)
        );
        assert_eq!(
            status(r#"{"error":{"message":"slow down","code":"rate_limit_exceeded"}}"#),
            Some(429)
        );
        assert_eq!(
            status(r#"{"error":{"code":400,"message":"bad"}}"#),
            Some(400)
        );
        // A code that is no HTTP error status says nothing about retrying.
        assert_eq!(status(r#"{"error":{"code":200,"message":"odd"}}"#), None);
        assert_eq!(
            status(r#"{"error":{"code":"invalid_prompt","message":"no"}}"#),
            None
        );
        assert!(matches!(
            decode(&[
                r#"{"error":{"code":400,"message":"the request exceeds the available context size","type":"exceed_context_size_error"}}"#
            ]),
            Err(ProviderError::ContextLengthExceeded { .. })
        ));
    }

    #[test]
    fn a_legacy_function_call_streams_as_one_tool_call_with_a_generated_id() {
        let deltas = decode(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":null,"function_call":{"name":"f","arguments":""}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":"{\"a\""}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{"function_call":{"arguments":":1}"}}}]}"#,
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"function_call"}]}"#,
        ])
        .unwrap();
        let ModelDelta::ToolCall {
            id: Some(id), name, ..
        } = &deltas[0]
        else {
            panic!("{deltas:?}");
        };
        assert!(id.starts_with("call_"));
        assert_eq!(name.as_deref(), Some("f"));
        assert_eq!(
            deltas[1..],
            [
                ModelDelta::ToolCall {
                    index: None,
                    id: None,
                    name: None,
                    arguments: Some(r#"{"a""#.into())
                },
                ModelDelta::ToolCall {
                    index: None,
                    id: None,
                    name: None,
                    arguments: Some(":1}".into())
                },
                ModelDelta::Finish(FinishReason::ToolCalls),
            ]
        );
    }
}
