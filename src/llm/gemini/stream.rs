//! One `GenerateContentResponse` (a whole reply, or one chunk of a stream: each SSE `data:` is
//! one) into [`ModelDelta`]s.
//!
//! Parts map to deltas and continuation artifacts:
//! - a text part: [`ModelDelta::Text`]; its other fields (a `thoughtSignature`) an
//!   [`ArtifactPlace::On`] artifact on the text (element 0);
//! - a `functionCall` part: a whole [`ModelDelta::ToolCall`] (`index` = the call's ordinal in the
//!   reply, `args` as JSON text, the vendor's `id` when it sent one); its other fields an `On`
//!   artifact on that call — an empty one when it has none, the record that this model made
//!   the call;
//! - any other part — a `thought: true` part (its text also a [`ModelDelta::Thought`] for
//!   display), an empty text part that only carries a signature, code execution, inline data —
//!   a [`ArtifactPlace::Before`] artifact, kept whole where it came.
//!
//! Code execution's `executableCode` / `codeExecutionResult` parts are such parts; they also
//! stream as a hosted call and result. A Google search leaves no part: its
//! `groundingMetadata.webSearchQueries` count the web searches in the usage, its chunks and
//! supports become citations.
//!
//! Artifact data is the vendor's JSON as received (key order kept), never edited.

use std::collections::VecDeque;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::llm::error::ProviderError;
use crate::llm::event::Citation;
use crate::llm::gemini::errors::embedded_error;
use crate::llm::model::ModelDelta;
use crate::llm::transport::truncate;
use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, FinishReason, Usage};

/// Per-reply state of the decoder.
#[derive(Debug, Default)]
pub(crate) struct ResponseDecoder {
    /// The model the request named; recorded on every artifact (signatures are per model).
    model: Option<String>,
    sent_id: bool,
    sent_model: bool,
    text_seen: bool,
    calls_seen: usize,
    finished: bool,
    /// The Google searches the reply's grounding reported (`webSearchQueries`).
    web_searches: u64,
    /// Code execution parts seen (their calls' ids).
    code_runs: usize,
    /// Whether the grounding's citations were sent (the last chunks may repeat them).
    cited: bool,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Response {
    #[serde(default)]
    candidates: Option<Vec<Candidate>>,
    #[serde(default)]
    prompt_feedback: Option<PromptFeedback>,
    #[serde(default)]
    usage_metadata: Option<UsageMetadata>,
    #[serde(default)]
    model_version: Option<String>,
    #[serde(default)]
    response_id: Option<String>,
    #[serde(default)]
    error: Option<Value>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Candidate {
    #[serde(default)]
    content: Option<Content>,
    #[serde(default)]
    finish_reason: Option<String>,
    #[serde(default)]
    index: Option<u32>,
    #[serde(default)]
    grounding_metadata: Option<Value>,
}

#[derive(Deserialize)]
struct Content {
    #[serde(default)]
    parts: Option<Vec<Map<String, Value>>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PromptFeedback {
    #[serde(default)]
    block_reason: Option<String>,
}

/// `usageMetadata`; every count optional (a chunk before the first token has none).
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct UsageMetadata {
    #[serde(default)]
    prompt_token_count: Option<u64>,
    #[serde(default)]
    cached_content_token_count: Option<u64>,
    #[serde(default)]
    candidates_token_count: Option<u64>,
    #[serde(default)]
    tool_use_prompt_token_count: Option<u64>,
    #[serde(default)]
    thoughts_token_count: Option<u64>,
    #[serde(default)]
    total_token_count: Option<u64>,
}

impl UsageMetadata {
    /// Gemini's counts in the shared kinds: input = prompt (it includes cached content) plus
    /// tool-use prompt; output = candidates plus thoughts (Gemini counts them apart).
    fn usage(&self) -> Usage {
        let prompt_tokens = self
            .prompt_token_count
            .unwrap_or(0)
            .saturating_add(self.tool_use_prompt_token_count.unwrap_or(0));
        let completion_tokens = self
            .candidates_token_count
            .unwrap_or(0)
            .saturating_add(self.thoughts_token_count.unwrap_or(0));
        Usage {
            prompt_tokens,
            completion_tokens,
            total_tokens: self
                .total_token_count
                .unwrap_or_else(|| prompt_tokens.saturating_add(completion_tokens)),
            cached_tokens: self.cached_content_token_count,
            reasoning_tokens: self.thoughts_token_count,
            ..Usage::default()
        }
    }
}

/// The citations of a candidate's `groundingMetadata`: each `groundingSupports` segment (byte
/// offsets of the text) with each web chunk it names; without supports, each web chunk.
/// Whether any was sent.
fn grounding_citations(grounding: &Value, out: &mut VecDeque<ModelDelta>) -> bool {
    let chunks: Vec<&Value> = grounding
        .get("groundingChunks")
        .and_then(Value::as_array)
        .map(|chunks| chunks.iter().collect())
        .unwrap_or_default();
    let source = |index: usize| {
        let web = chunks.get(index)?.get("web")?;
        let text = |key: &str| web.get(key).and_then(Value::as_str).map(str::to_owned);
        Some((text("uri")?, text("title")))
    };
    let before = out.len();
    let supports = grounding.get("groundingSupports").and_then(Value::as_array);
    match supports {
        Some(supports) if !supports.is_empty() => {
            for support in supports {
                let segment = support.get("segment");
                let offset = |key: &str| {
                    segment
                        .and_then(|segment| segment.get(key))
                        .and_then(Value::as_u64)
                        .and_then(|value| usize::try_from(value).ok())
                };
                let indices = support
                    .get("groundingChunkIndices")
                    .and_then(Value::as_array);
                for index in indices.into_iter().flatten().filter_map(Value::as_u64) {
                    if let Some((url, title)) = usize::try_from(index).ok().and_then(source) {
                        out.push_back(ModelDelta::Citation(Citation {
                            url,
                            title,
                            cited_text: segment
                                .and_then(|segment| segment.get("text"))
                                .and_then(Value::as_str)
                                .map(str::to_owned),
                            start: offset("startIndex").or(Some(0)),
                            end: offset("endIndex"),
                        }));
                    }
                }
            }
        }
        _ => {
            for (url, title) in (0..chunks.len()).filter_map(source) {
                out.push_back(ModelDelta::Citation(Citation {
                    url,
                    title,
                    cited_text: None,
                    start: None,
                    end: None,
                }));
            }
        }
    }
    out.len() > before
}

impl ResponseDecoder {
    /// A decoder for a reply to a request for `model` (`None`: artifacts usable by any model).
    pub(crate) fn new(model: Option<String>) -> Self {
        ResponseDecoder {
            model,
            ..ResponseDecoder::default()
        }
    }

    /// Whether a finish reason (or a blocked prompt) has been seen: a stream that ends after
    /// it is complete.
    pub(crate) fn finished(&self) -> bool {
        self.finished
    }

    /// Decode one `GenerateContentResponse` JSON text, appending its deltas to `out`.
    pub(crate) fn decode(
        &mut self,
        data: &str,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<(), ProviderError> {
        let response: Response = serde_json::from_str(data).map_err(|error| {
            ProviderError::Decode(format!(
                "invalid Gemini response ({error}): {}",
                truncate(data)
            ))
        })?;
        self.response(response, out)
    }

    /// Decode a parsed response value (a whole non-streamed body).
    pub(crate) fn decode_value(
        &mut self,
        value: Value,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<(), ProviderError> {
        let response: Response = serde_json::from_value(value)
            .map_err(|error| ProviderError::Decode(format!("invalid Gemini response ({error})")))?;
        self.response(response, out)
    }

    fn response(
        &mut self,
        response: Response,
        out: &mut VecDeque<ModelDelta>,
    ) -> Result<(), ProviderError> {
        if let Some(error) = response.error.as_ref().filter(|error| !error.is_null()) {
            return Err(embedded_error(error));
        }
        self.meta(response.response_id, response.model_version, out);
        // Only the first candidate is used (`candidateCount` is never sent).
        let candidate = response
            .candidates
            .unwrap_or_default()
            .into_iter()
            .find(|candidate| candidate.index.unwrap_or(0) == 0);
        if let Some(candidate) = candidate {
            let parts = candidate.content.and_then(|content| content.parts);
            for part in parts.into_iter().flatten() {
                self.part(part, out);
            }
            if let Some(queries) = candidate
                .grounding_metadata
                .as_ref()
                .and_then(|grounding| grounding.get("webSearchQueries"))
                .and_then(Value::as_array)
            {
                self.web_searches = self.web_searches.max(queries.len() as u64);
            }
            if let Some(grounding) = &candidate.grounding_metadata
                && !self.cited
            {
                self.cited = grounding_citations(grounding, out);
            }
            if let Some(reason) = candidate.finish_reason {
                self.finish(&reason, out);
            }
        } else if let Some(reason) = response
            .prompt_feedback
            .and_then(|feedback| feedback.block_reason)
            .filter(|reason| !reason.is_empty())
        {
            // The prompt was blocked: no candidate, the reply is over.
            tracing::debug!(block_reason = %reason, "Gemini blocked the prompt");
            self.finished = true;
            out.push_back(ModelDelta::Finish(FinishReason::ContentFilter));
        }
        if let Some(usage) = response.usage_metadata {
            let mut usage = usage.usage();
            usage.web_search_requests = (self.web_searches > 0).then_some(self.web_searches);
            out.push_back(ModelDelta::Usage(usage));
        }
        Ok(())
    }

    /// Emit the response id and model once each.
    fn meta(&mut self, id: Option<String>, model: Option<String>, out: &mut VecDeque<ModelDelta>) {
        let id = id.filter(|id| !self.sent_id && !id.is_empty());
        let model = model.filter(|model| !self.sent_model && !model.is_empty());
        if id.is_none() && model.is_none() {
            return;
        }
        self.sent_id |= id.is_some();
        self.sent_model |= model.is_some();
        out.push_back(ModelDelta::Meta { id, model });
    }

    fn artifact(&self, place: ArtifactPlace, data: Map<String, Value>) -> ModelDelta {
        ModelDelta::Artifact(Artifact {
            provider: ArtifactProvider::Gemini,
            model: self.model.clone(),
            place,
            data: Value::Object(data),
        })
    }

    fn part(&mut self, mut part: Map<String, Value>, out: &mut VecDeque<ModelDelta>) {
        let thought = part.get("thought").and_then(Value::as_bool) == Some(true);
        if !thought && part.get("functionCall").is_some_and(Value::is_object) {
            let call = part.remove("functionCall").unwrap_or_default();
            let index = self.calls_seen;
            self.calls_seen += 1;
            let field = |key: &str| call.get(key).and_then(Value::as_str).map(str::to_owned);
            // `args` is an object; absent means no arguments.
            let arguments = match call.get("args") {
                Some(args) if !args.is_null() => args.to_string(),
                _ => "{}".to_owned(),
            };
            out.push_back(ModelDelta::ToolCall {
                index: Some(u32::try_from(index).unwrap_or(u32::MAX)),
                id: field("id").filter(|id| !id.is_empty()),
                name: field("name"),
                arguments: Some(arguments),
            });
            // Always an artifact, even with no fields: it records that this model made the
            // call, so a call it made without a signature goes back as sent (the placeholder
            // signature is only for calls it did not make).
            let element = u32::try_from(index.saturating_add(1)).unwrap_or(u32::MAX);
            out.push_back(self.artifact(ArtifactPlace::On(element), part));
            return;
        }
        let text_len = part.get("text").and_then(Value::as_str).map_or(0, str::len);
        if !thought && text_len > 0 {
            let text = match part.remove("text") {
                Some(Value::String(text)) => text,
                _ => String::new(),
            };
            self.text_seen = true;
            out.push_back(ModelDelta::Text(text));
            if !part.is_empty() {
                out.push_back(self.artifact(ArtifactPlace::On(0), part));
            }
            return;
        }
        // `{"text": ""}` alone carries nothing.
        if part.len() == 1 && text_len == 0 && part.contains_key("text") {
            return;
        }
        if thought
            && let Some(text) = part.get("text").and_then(Value::as_str)
            && !text.is_empty()
        {
            out.push_back(ModelDelta::Thought(text.to_owned()));
        }
        self.code_events(&part, out);
        let place = ArtifactPlace::before_next(self.text_seen, self.calls_seen);
        out.push_back(self.artifact(place, part));
    }

    /// An `executableCode` part as a hosted `code_execution` call, a `codeExecutionResult`
    /// as its result (an outcome other than `OUTCOME_OK` is an error).
    fn code_events(&mut self, part: &Map<String, Value>, out: &mut VecDeque<ModelDelta>) {
        let name = "code_execution".to_owned();
        if let Some(code) = part.get("executableCode") {
            self.code_runs = self.code_runs.saturating_add(1);
            out.push_back(ModelDelta::HostedToolCall {
                id: format!("code_execution_{}", self.code_runs),
                name,
                input: code.clone(),
            });
        } else if let Some(result) = part.get("codeExecutionResult") {
            let outcome = result.get("outcome").and_then(Value::as_str);
            out.push_back(ModelDelta::HostedToolResult {
                id: format!("code_execution_{}", self.code_runs),
                name,
                is_error: outcome != Some("OUTCOME_OK"),
                output: result.clone(),
            });
        }
    }

    fn finish(&mut self, reason: &str, out: &mut VecDeque<ModelDelta>) {
        let reason = match reason {
            "" | "FINISH_REASON_UNSPECIFIED" => return,
            "STOP" => FinishReason::Stop,
            "MAX_TOKENS" => FinishReason::Length,
            "SAFETY"
            | "RECITATION"
            | "LANGUAGE"
            | "BLOCKLIST"
            | "PROHIBITED_CONTENT"
            | "SPII"
            | "IMAGE_SAFETY"
            | "IMAGE_PROHIBITED_CONTENT"
            | "IMAGE_RECITATION" => FinishReason::ContentFilter,
            "MALFORMED_FUNCTION_CALL" => {
                // The model tried a call Gemini could not parse and sends no part for it. A
                // reply cut mid-call is one with calls under `length` (the run fails it with
                // `truncated_tool_calls` and runs nothing): a nameless call stands for it.
                if self.calls_seen == 0 {
                    out.push_back(ModelDelta::ToolCall {
                        index: Some(0),
                        id: None,
                        name: Some(String::new()),
                        arguments: Some(String::new()),
                    });
                    self.calls_seen = 1;
                }
                FinishReason::Length
            }
            other => FinishReason::Other(other.to_ascii_lowercase()),
        };
        self.finished = true;
        out.push_back(ModelDelta::Finish(reason));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn decode(chunks: &[Value]) -> (Vec<ModelDelta>, bool) {
        let mut decoder = ResponseDecoder::new(Some("gemini-3-pro-preview".into()));
        let mut out = VecDeque::new();
        for chunk in chunks {
            decoder.decode(&chunk.to_string(), &mut out).unwrap();
        }
        (out.into(), decoder.finished())
    }

    fn candidate(parts: Value, finish: Option<&str>) -> Value {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({"candidates": [candidate]})
    }

    fn places(deltas: &[ModelDelta]) -> Vec<(ArtifactPlace, Value)> {
        deltas
            .iter()
            .filter_map(|delta| match delta {
                ModelDelta::Artifact(artifact) => Some((artifact.place, artifact.data.clone())),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn parts_become_deltas_and_artifacts_in_place() {
        let thought = json!({"text": "plan", "thought": true, "thoughtSignature": "c2ln"});
        let (deltas, finished) = decode(&[
            candidate(json!([thought.clone()]), None),
            candidate(
                json!([{"text": "Hello", "thoughtSignature": "dGV4dA=="}]),
                None,
            ),
            candidate(json!([{"text": "", "thoughtSignature": "ZW1wdHk="}]), None),
            candidate(
                json!([
                    {"functionCall": {"name": "f", "args": {"b": 1, "a": 2}}, "thoughtSignature": "Y2FsbA=="},
                    {"functionCall": {"id": "fc-7", "name": "g"}}
                ]),
                Some("STOP"),
            ),
        ]);
        assert!(finished);
        assert!(deltas.contains(&ModelDelta::Thought("plan".into())));
        assert!(deltas.contains(&ModelDelta::Text("Hello".into())));
        // The arguments' key order follows serde_json's map (sorted, or as sent when a
        // dependency turns on `preserve_order`): compare them as JSON.
        let first = deltas.iter().find_map(|delta| match delta {
            ModelDelta::ToolCall {
                index: Some(0),
                id: None,
                name: Some(name),
                arguments: Some(arguments),
            } if name == "f" => serde_json::from_str::<Value>(arguments).ok(),
            _ => None,
        });
        assert_eq!(first, Some(json!({"a": 2, "b": 1})));
        assert!(deltas.contains(&ModelDelta::ToolCall {
            index: Some(1),
            id: Some("fc-7".into()),
            name: Some("g".into()),
            arguments: Some("{}".into()),
        }));
        assert_eq!(
            places(&deltas),
            vec![
                (ArtifactPlace::Before(0), thought),
                (
                    ArtifactPlace::On(0),
                    json!({"thoughtSignature": "dGV4dA=="})
                ),
                (
                    ArtifactPlace::Before(1),
                    json!({"text": "", "thoughtSignature": "ZW1wdHk="})
                ),
                (
                    ArtifactPlace::On(1),
                    json!({"thoughtSignature": "Y2FsbA=="})
                ),
                // The unsigned call: an empty record that this model made it.
                (ArtifactPlace::On(2), json!({})),
            ]
        );
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::Stop)));
    }

    #[test]
    fn finish_reasons_and_usage_map_to_the_shared_kinds() {
        let (deltas, _) = decode(&[candidate(json!([{"text": "cut"}]), Some("MAX_TOKENS"))]);
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::Length)));
        let (deltas, _) = decode(&[candidate(json!([]), Some("SAFETY"))]);
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::ContentFilter)));
        let (deltas, _) = decode(&[candidate(json!([]), Some("UNEXPECTED_TOOL_CALL"))]);
        assert!(deltas.contains(&ModelDelta::Finish(FinishReason::Other(
            "unexpected_tool_call".into()
        ))));
        // A malformed call: a nameless call under `length`, so the run refuses it.
        let (deltas, finished) = decode(&[
            json!({"candidates": [{"content": {}, "finishReason": "MALFORMED_FUNCTION_CALL", "index": 0}]}),
        ]);
        assert!(finished);
        assert!(
            matches!(&deltas[0], ModelDelta::ToolCall { index: Some(0), name: Some(name), .. } if name.is_empty())
        );
        assert_eq!(deltas[1], ModelDelta::Finish(FinishReason::Length));
        let (deltas, finished) =
            decode(&[json!({"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}})]);
        assert!(finished);
        assert_eq!(deltas, [ModelDelta::Finish(FinishReason::ContentFilter)]);
        let (deltas, _) = decode(&[json!({"usageMetadata": {
            "promptTokenCount": 100, "cachedContentTokenCount": 60, "candidatesTokenCount": 10,
            "thoughtsTokenCount": 30, "toolUsePromptTokenCount": 5, "totalTokenCount": 145
        }})]);
        let ModelDelta::Usage(usage) = &deltas[0] else {
            panic!("{deltas:?}");
        };
        assert_eq!(
            (
                usage.prompt_tokens,
                usage.cached_tokens,
                usage.completion_tokens,
                usage.reasoning_tokens,
                usage.total_tokens
            ),
            (105, Some(60), 40, Some(30), 145)
        );
    }

    #[test]
    fn unknown_fields_are_ignored_and_errors_are_typed() {
        let (deltas, _) = decode(&[json!({
            "candidates": [{"content": {"parts": [{"text": "x"}], "role": "model"}, "index": 0, "groundingMetadata": {}, "avgLogprobs": -0.1}],
            "createTime": "2026-01-01T00:00:00Z", "newField": [1]
        })]);
        assert_eq!(deltas, [ModelDelta::Text("x".into())]);
        let mut decoder = ResponseDecoder::new(None);
        let mut out = VecDeque::new();
        let error = decoder
            .decode(r#"{"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}}"#, &mut out)
            .unwrap_err();
        assert!(matches!(error, ProviderError::RateLimited { .. }));
        assert!(matches!(
            decoder.decode("{not json", &mut out),
            Err(ProviderError::Decode(_))
        ));
    }
}
