//! Continuation artifacts: what a model API needs back, byte-exact and in place, to continue a
//! conversation it began — Anthropic `thinking` blocks and their signatures, Responses
//! `reasoning` items with `encrypted_content`, Gemini `thoughtSignature`s, the
//! `extra_content` a chat-completions server attaches to a tool call.
//!
//! An assistant message keeps its text and tool calls in the provider-neutral fields every
//! backend reads; what only its own API understands rides along as [`Artifact`]s, opaque JSON
//! tagged with the API (and model) that produced it. Rules:
//!
//! - **Never edited.** `data` is the vendor's JSON as received: every value byte for byte
//!   (object keys are stored in serde_json's order, which no API gives meaning to). Code that
//!   rewrites history (repair, compaction) keeps a message with artifacts whole, or drops it whole
//!   together with its tool results.
//! - **In place.** An artifact records where it sat among the message's *elements*: element 0 is
//!   the text, element `i + 1` the tool call `i`. A standalone item ([`ArtifactPlace::Before`])
//!   goes back immediately before its element; fields of an element ([`ArtifactPlace::On`]) go
//!   back merged into that element's wire form.
//! - **Foreign artifacts are left out, not converted.** A request to another API, or to another
//!   model of the same API, sends none of them ([`Artifact::usable_by`]): a signature verifies
//!   only against the model that made it, and no API accepts another's reasoning state. They stay
//!   in the history, so a later request to their own model has them again. Each backend documents
//!   what it does when its API insists on an artifact the history lacks (Anthropic: no thinking
//!   for that request; Gemini: its documented placeholder signature).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::vocab::{OpenaiChatMessage, ToolCall};

/// The model API an [`Artifact`] came from (and the only one it is sent back to).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactProvider {
    /// OpenAI-compatible chat completions (e.g. Gemini's `extra_content.google.thought_signature`).
    OpenaiChat,
    /// The OpenAI Responses API.
    OpenaiResponses,
    /// The Anthropic Messages API.
    Anthropic,
    /// The Gemini API.
    Gemini,
    /// Amazon Bedrock's Converse API (`reasoningContent` blocks).
    Bedrock,
}

/// Where an [`Artifact`] sits among its message's elements (element 0: the text; element
/// `i + 1`: tool call `i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ArtifactPlace {
    /// A whole item of its own, sent immediately before the element (past the last element: at
    /// the end of the message).
    Before(u32),
    /// Fields (a JSON object) merged into the element's wire form.
    On(u32),
}

impl ArtifactPlace {
    /// The place of a standalone item that arrives now, after the text (`text_seen`) and
    /// `calls_seen` tool calls of the reply so far.
    ///
    /// ```
    /// use agcore::vocab::ArtifactPlace;
    ///
    /// assert_eq!(ArtifactPlace::before_next(false, 0), ArtifactPlace::Before(0));
    /// assert_eq!(ArtifactPlace::before_next(true, 0), ArtifactPlace::Before(1));
    /// assert_eq!(ArtifactPlace::before_next(true, 2), ArtifactPlace::Before(3));
    /// ```
    pub fn before_next(text_seen: bool, calls_seen: usize) -> ArtifactPlace {
        let element = match calls_seen {
            0 => u32::from(text_seen),
            calls => u32::try_from(calls).unwrap_or(u32::MAX).saturating_add(1),
        };
        ArtifactPlace::Before(element)
    }

    /// The element of tool call `index`.
    pub fn call_element(index: usize) -> u32 {
        u32::try_from(index).unwrap_or(u32::MAX).saturating_add(1)
    }
}

/// Opaque continuation state of one assistant message for one model API. See the
/// [module docs](self) for the rules.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Artifact {
    /// The API that produced it.
    pub provider: ArtifactProvider,
    /// The model the request named, when known; the artifact is sent back only to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// Where it sits in the message.
    pub place: ArtifactPlace,
    /// The vendor's JSON, verbatim: a whole item for [`ArtifactPlace::Before`], an object of
    /// fields for [`ArtifactPlace::On`].
    pub data: Value,
}

impl Artifact {
    /// An artifact of `provider`, made for `model`, at `place`.
    pub fn new(
        provider: ArtifactProvider,
        model: impl Into<String>,
        place: ArtifactPlace,
        data: Value,
    ) -> Self {
        let model = model.into();
        Artifact {
            provider,
            model: (!model.is_empty()).then_some(model),
            place,
            data,
        }
    }

    /// Whether a request to `provider` for `model` gets this artifact: the same API and the
    /// same model (or no model recorded).
    ///
    /// ```
    /// use agcore::vocab::{Artifact, ArtifactPlace, ArtifactProvider};
    ///
    /// let thinking = Artifact::new(ArtifactProvider::Anthropic, "claude-sonnet-4-5", ArtifactPlace::Before(0), serde_json::json!({"type": "thinking"}));
    /// assert!(thinking.usable_by(ArtifactProvider::Anthropic, "claude-sonnet-4-5"));
    /// assert!(!thinking.usable_by(ArtifactProvider::Anthropic, "claude-opus-4-1"));
    /// assert!(!thinking.usable_by(ArtifactProvider::Gemini, "claude-sonnet-4-5"));
    /// ```
    pub fn usable_by(&self, provider: ArtifactProvider, model: &str) -> bool {
        self.provider == provider && self.model.as_deref().is_none_or(|made| made == model)
    }

    /// The size of `data` as JSON text, for reply limits and estimates.
    pub fn data_bytes(&self) -> usize {
        json_bytes(&self.data)
    }
}

/// The length of `value` as compact JSON text, counted without writing it out.
fn json_bytes(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 = self.0.saturating_add(buf.len());
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut count = Count(0);
    // Writing a `Value` to a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

/// One element of an assistant message in the order its API wants it (see [`layout`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Element<'a> {
    /// A standalone item ([`ArtifactPlace::Before`]).
    Item(&'a Artifact),
    /// The message's text, with the fields to merge into its wire form.
    Text {
        /// The text.
        text: &'a str,
        /// [`ArtifactPlace::On`] artifacts of the text.
        on: Vec<&'a Artifact>,
    },
    /// A tool call, with the fields to merge into its wire form.
    Call {
        /// The call.
        call: &'a ToolCall,
        /// [`ArtifactPlace::On`] artifacts of the call.
        on: Vec<&'a Artifact>,
    },
}

/// The elements of an assistant `message` in wire order for a request to `provider` and
/// `model`: each element preceded by its usable standalone items and carrying its usable
/// fields, then the items placed past the last element. The text is left out when there is
/// none (its items and fields stay in place); other roles have no elements.
pub fn layout<'a>(
    message: &'a OpenaiChatMessage,
    provider: ArtifactProvider,
    model: &str,
) -> Vec<Element<'a>> {
    let OpenaiChatMessage::Assistant {
        content,
        tool_calls,
        artifacts,
        ..
    } = message
    else {
        return Vec::new();
    };
    let usable: Vec<&Artifact> = artifacts
        .iter()
        .filter(|artifact| artifact.usable_by(provider, model))
        .collect();
    let before = |element: u32| {
        usable
            .iter()
            .copied()
            .filter(move |a| a.place == ArtifactPlace::Before(element))
    };
    let on = |element: u32| {
        usable
            .iter()
            .copied()
            .filter(|a| a.place == ArtifactPlace::On(element))
            .collect::<Vec<_>>()
    };
    let mut elements = Vec::with_capacity(1 + tool_calls.len() + usable.len());
    elements.extend(before(0).map(Element::Item));
    if let Some(text) = content.as_deref().filter(|text| !text.is_empty()) {
        elements.push(Element::Text { text, on: on(0) });
    }
    for (index, call) in tool_calls.iter().enumerate() {
        let element = ArtifactPlace::call_element(index);
        elements.extend(before(element).map(Element::Item));
        elements.push(Element::Call {
            call,
            on: on(element),
        });
    }
    let last = ArtifactPlace::call_element(tool_calls.len());
    elements.extend(
        usable
            .iter()
            .copied()
            .filter(|a| matches!(a.place, ArtifactPlace::Before(e) if e >= last))
            .map(Element::Item),
    );
    elements
}

/// Merge the fields of `on` artifacts into `target` (a JSON object); other values are left
/// alone. Later fields win, the element's own fields are never removed.
pub fn merge_fields(target: &mut Value, on: &[&Artifact]) {
    let Value::Object(target) = target else {
        return;
    };
    for artifact in on {
        if let Value::Object(fields) = &artifact.data {
            for (key, value) in fields {
                target.insert(key.clone(), value.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn artifact(provider: ArtifactProvider, place: ArtifactPlace, data: Value) -> Artifact {
        Artifact::new(provider, "m", place, data)
    }

    #[test]
    fn layout_puts_items_before_their_element_and_fields_on_it() {
        let message = OpenaiChatMessage::assistant_tool_calls(
            Some("let me look".into()),
            vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "g", "{}")],
        )
        .with_artifacts(vec![
            artifact(
                ArtifactProvider::Anthropic,
                ArtifactPlace::Before(0),
                json!({"type": "thinking", "signature": "s1"}),
            ),
            artifact(
                ArtifactProvider::Anthropic,
                ArtifactPlace::Before(2),
                json!({"type": "thinking", "signature": "s2"}),
            ),
            artifact(
                ArtifactProvider::Anthropic,
                ArtifactPlace::Before(9),
                json!({"type": "tail"}),
            ),
            artifact(
                ArtifactProvider::Anthropic,
                ArtifactPlace::On(1),
                json!({"extra": 1}),
            ),
            artifact(
                ArtifactProvider::Gemini,
                ArtifactPlace::On(1),
                json!({"thoughtSignature": "g"}),
            ),
        ]);
        let names: Vec<String> = layout(&message, ArtifactProvider::Anthropic, "m")
            .into_iter()
            .map(|element| match element {
                Element::Item(a) => a.data["signature"].as_str().unwrap_or("tail").to_owned(),
                Element::Text { text, on } => format!("text:{text}:{}", on.len()),
                Element::Call { call, on } => format!("call:{}:{}", call.id, on.len()),
            })
            .collect();
        assert_eq!(
            names,
            [
                "s1",
                "text:let me look:0",
                "call:a:1",
                "s2",
                "call:b:0",
                "tail"
            ]
        );
        // Another model of the same API gets none of them.
        let plain: Vec<_> = layout(&message, ArtifactProvider::Anthropic, "other")
            .into_iter()
            .filter(|e| matches!(e, Element::Item(_)))
            .collect();
        assert!(plain.is_empty());
    }

    #[test]
    fn places_serialise_by_name_and_survive_a_round_trip() {
        let a = artifact(
            ArtifactProvider::OpenaiResponses,
            ArtifactPlace::Before(1),
            json!({"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": []}),
        );
        let text = serde_json::to_string(&a).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&text).unwrap(),
            json!({"provider": "openai_responses", "model": "m", "place": {"before": 1},
                   "data": {"type": "reasoning", "id": "rs_1", "encrypted_content": "gAAA", "summary": []}})
        );
        assert_eq!(serde_json::from_str::<Artifact>(&text).unwrap(), a);
        assert_eq!(a.data_bytes(), serde_json::to_vec(&a.data).unwrap().len());
    }

    #[test]
    fn merge_fields_adds_to_an_object_and_leaves_other_values() {
        let on = artifact(
            ArtifactProvider::Gemini,
            ArtifactPlace::On(1),
            json!({"thoughtSignature": "sig"}),
        );
        let mut part = json!({"functionCall": {"name": "f", "args": {}}});
        merge_fields(&mut part, &[&on]);
        assert_eq!(
            part,
            json!({"functionCall": {"name": "f", "args": {}}, "thoughtSignature": "sig"})
        );
        let mut text = json!("x");
        merge_fields(&mut text, &[&on]);
        assert_eq!(text, json!("x"));
    }
}
