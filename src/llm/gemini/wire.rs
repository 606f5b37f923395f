//! The `contents` of a Gemini request as borrowed wire types, serialised straight into bytes:
//! texts, call ids and names, results and artifacts are written from the history where they
//! are. Only what the request makes up (a call's `args`, media parts) is owned.

use std::borrow::Cow;

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::vocab::Artifact;

/// One part of a turn, borrowed from the history.
#[derive(Debug)]
pub(crate) enum Part<'a> {
    /// `{"text"}`.
    Text(Cow<'a, str>),
    /// An artifact's part (a thought, a signature-only part), as it arrived.
    Verbatim(&'a Value),
    /// `{"functionCall": {"id"?, "name", "args"}}`.
    Call {
        id: Option<&'a str>,
        name: &'a str,
        args: Value,
    },
    /// `{"functionResponse": {"id"?, "name", "response": {"result" | "error": text}}}`.
    Response {
        id: Option<&'a str>,
        name: &'a str,
        key: &'static str,
        text: Cow<'a, str>,
    },
    /// A media part (`inlineData` / `fileData`), made for the request.
    Media(Value),
}

/// A part with the artifact fields merged into it.
#[derive(Debug)]
pub(crate) struct Merged<'a> {
    pub(crate) part: Part<'a>,
    /// `ArtifactPlace::On` artifacts whose fields are merged in (later ones win).
    pub(crate) on: Vec<&'a Artifact>,
    /// The documented placeholder `thoughtSignature`, for a call that has none.
    pub(crate) placeholder: Option<&'static str>,
}

impl<'a> From<Part<'a>> for Merged<'a> {
    fn from(part: Part<'a>) -> Self {
        Merged {
            part,
            on: Vec::new(),
            placeholder: None,
        }
    }
}

impl Merged<'_> {
    /// Whether the merged fields carry `key`.
    pub(crate) fn has(&self, key: &str) -> bool {
        self.on
            .iter()
            .any(|artifact| artifact.data.get(key).is_some())
    }
}

struct FunctionCall<'p> {
    id: Option<&'p str>,
    name: &'p str,
    args: &'p Value,
}

impl Serialize for FunctionCall<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(id) = self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("args", self.args)?;
        map.end()
    }
}

struct FunctionResponse<'p> {
    id: Option<&'p str>,
    name: &'p str,
    key: &'static str,
    text: &'p str,
}

struct One<'p>(&'static str, &'p str);

impl Serialize for One<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry(self.0, self.1)?;
        map.end()
    }
}

impl Serialize for FunctionResponse<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(id) = self.id {
            map.serialize_entry("id", id)?;
        }
        map.serialize_entry("name", self.name)?;
        map.serialize_entry("response", &One(self.key, self.text))?;
        map.end()
    }
}

impl Serialize for Merged<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Part::Verbatim(value) = &self.part
            && !value.is_object()
        {
            return value.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        let keep = |key: &str| !self.has(key);
        match &self.part {
            Part::Text(text) => {
                if keep("text") {
                    map.serialize_entry("text", text)?;
                }
            }
            Part::Verbatim(value) => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    if keep(key) {
                        map.serialize_entry(key, value)?;
                    }
                }
            }
            Part::Call { id, name, args } => {
                if keep("functionCall") {
                    let call = FunctionCall {
                        id: *id,
                        name,
                        args,
                    };
                    map.serialize_entry("functionCall", &call)?;
                }
            }
            Part::Response {
                id,
                name,
                key,
                text,
            } => {
                if keep("functionResponse") {
                    let response = FunctionResponse {
                        id: *id,
                        name,
                        key,
                        text,
                    };
                    map.serialize_entry("functionResponse", &response)?;
                }
            }
            Part::Media(value) => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    if keep(key) {
                        map.serialize_entry(key, value)?;
                    }
                }
            }
        }
        for (at, artifact) in self.on.iter().enumerate() {
            for (key, value) in artifact.data.as_object().into_iter().flatten() {
                let later = self.on[at + 1..]
                    .iter()
                    .any(|later| later.data.get(key).is_some());
                if !later {
                    map.serialize_entry(key, value)?;
                }
            }
        }
        if let Some(signature) = self.placeholder {
            map.serialize_entry("thoughtSignature", signature)?;
        }
        map.end()
    }
}

/// One turn: a role and its parts.
#[derive(Debug)]
pub(crate) struct Turn<'a> {
    pub(crate) role: &'static str,
    pub(crate) parts: Vec<Merged<'a>>,
}

impl Serialize for Turn<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        map.serialize_entry("role", self.role)?;
        map.serialize_entry("parts", &self.parts)?;
        map.end()
    }
}
