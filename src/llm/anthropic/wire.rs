//! The Messages request as borrowed wire types, serialised straight into bytes: texts, tool
//! schemas and artifacts are written from the history where they are, never copied into a
//! `serde_json::Value` tree first. Only what the request makes up (a call's `input`, the small
//! option objects) is owned.

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;

use crate::llm::anthropic::cache::{Breakpoints, Role};
use crate::vocab::Artifact;

/// One content block, borrowed from the history.
#[derive(Debug)]
pub(crate) enum Block<'a> {
    /// `{"type": "text", "text"}`.
    Text(&'a str),
    /// The same with a text made for the request (a system message's parts joined).
    TextOwned(String),
    /// An artifact's block (thinking, redacted thinking), byte for byte as it arrived.
    Verbatim(&'a Value),
    /// `{"type": "tool_use", "id", "name", "input"}`.
    ToolUse {
        id: &'a str,
        name: &'a str,
        input: Value,
    },
    /// `{"type": "tool_result", "tool_use_id", "content"?, "is_error"?}`.
    ToolResult {
        id: &'a str,
        content: ResultContent<'a>,
        is_error: bool,
    },
    /// `{"type": "image" | "document", "source": {"type": "base64", "media_type", "data"}}`.
    Base64 {
        kind: &'static str,
        media_type: &'a str,
        data: &'a str,
    },
    /// `{"type": "image", "source": {"type": "url", "url"}}`.
    ImageUrl(&'a str),
}

/// A tool result's content.
#[derive(Debug)]
pub(crate) enum ResultContent<'a> {
    /// None (an empty result).
    Empty,
    /// A plain string.
    Text(&'a str),
    /// Blocks (media).
    Blocks(Vec<Marked<'a>>),
}

impl<'a> Block<'a> {
    /// The block's `type`.
    pub(crate) fn kind(&self) -> &str {
        match self {
            Block::Text(_) | Block::TextOwned(_) => "text",
            Block::Verbatim(value) => value.get("type").and_then(Value::as_str).unwrap_or(""),
            Block::ToolUse { .. } => "tool_use",
            Block::ToolResult { .. } => "tool_result",
            Block::Base64 { kind, .. } => kind,
            Block::ImageUrl(_) => "image",
        }
    }

    /// Whether a cache marker may go on it (thinking blocks take none).
    fn can_carry_marker(&self) -> bool {
        !matches!(self.kind(), "thinking" | "redacted_thinking")
    }
}

/// A block with the artifact fields merged into it and its cache marker.
#[derive(Debug)]
pub(crate) struct Marked<'a> {
    pub(crate) block: Block<'a>,
    /// `ArtifactPlace::On` artifacts whose fields are merged in (later ones win).
    pub(crate) on: Vec<&'a Artifact>,
    /// `cache_control: {"type": "ephemeral"}`.
    pub(crate) cache: bool,
}

impl<'a> From<Block<'a>> for Marked<'a> {
    fn from(block: Block<'a>) -> Self {
        Marked {
            block,
            on: Vec::new(),
            cache: false,
        }
    }
}

/// `{"type": "ephemeral"}`.
struct Ephemeral;

impl Serialize for Ephemeral {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(1))?;
        map.serialize_entry("type", "ephemeral")?;
        map.end()
    }
}

/// `{"type": "base64" | "url", ...}` of an image or document.
enum Source<'a> {
    Base64(&'a str, &'a str),
    Url(&'a str),
}

impl Serialize for Source<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(3))?;
        match self {
            Source::Base64(media_type, data) => {
                map.serialize_entry("type", "base64")?;
                map.serialize_entry("media_type", media_type)?;
                map.serialize_entry("data", data)?;
            }
            Source::Url(url) => {
                map.serialize_entry("type", "url")?;
                map.serialize_entry("url", url)?;
            }
        }
        map.end()
    }
}

impl Serialize for ResultContent<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            ResultContent::Empty => serializer.serialize_none(),
            ResultContent::Text(text) => serializer.serialize_str(text),
            ResultContent::Blocks(blocks) => blocks.serialize(serializer),
        }
    }
}

impl Marked<'_> {
    /// Whether one of the merged fields (or the marker) replaces the block's own `key`.
    fn replaced(&self, key: &str) -> bool {
        (self.cache && key == "cache_control")
            || self
                .on
                .iter()
                .any(|artifact| artifact.data.get(key).is_some())
    }
}

/// Writes a block's own fields, leaving out those the merged fields replace.
struct Fields<'m, 'b, M> {
    map: &'m mut M,
    block: &'b Marked<'b>,
}

impl<M: SerializeMap> Fields<'_, '_, M> {
    fn put<V: Serialize + ?Sized>(&mut self, key: &str, value: &V) -> Result<(), M::Error> {
        if self.block.replaced(key) {
            return Ok(());
        }
        self.map.serialize_entry(key, value)
    }
}

impl Serialize for Marked<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        if let Block::Verbatim(value) = &self.block
            && !value.is_object()
        {
            return value.serialize(serializer);
        }
        let mut map = serializer.serialize_map(None)?;
        let mut fields = Fields {
            map: &mut map,
            block: self,
        };
        match &self.block {
            Block::Text(text) => {
                fields.put("type", "text")?;
                fields.put("text", text)?;
            }
            Block::TextOwned(text) => {
                fields.put("type", "text")?;
                fields.put("text", text)?;
            }
            Block::Verbatim(value) => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    fields.put(key, value)?;
                }
            }
            Block::ToolUse { id, name, input } => {
                fields.put("type", "tool_use")?;
                fields.put("id", id)?;
                fields.put("name", name)?;
                fields.put("input", input)?;
            }
            Block::ToolResult {
                id,
                content,
                is_error,
            } => {
                fields.put("type", "tool_result")?;
                fields.put("tool_use_id", id)?;
                if !matches!(content, ResultContent::Empty) {
                    fields.put("content", content)?;
                }
                if *is_error {
                    fields.put("is_error", &true)?;
                }
            }
            Block::Base64 {
                kind,
                media_type,
                data,
            } => {
                fields.put("type", kind)?;
                fields.put("source", &Source::Base64(media_type, data))?;
            }
            Block::ImageUrl(url) => {
                fields.put("type", "image")?;
                fields.put("source", &Source::Url(url))?;
            }
        }
        // The merged fields, later artifacts winning, then the marker over all of them.
        for (at, artifact) in self.on.iter().enumerate() {
            for (key, value) in artifact.data.as_object().into_iter().flatten() {
                let later = self.on[at + 1..]
                    .iter()
                    .any(|later| later.data.get(key).is_some());
                let marker = self.cache && key == "cache_control";
                if !(later || marker) {
                    map.serialize_entry(key, value)?;
                }
            }
        }
        if self.cache {
            map.serialize_entry("cache_control", &Ephemeral)?;
        }
        map.end()
    }
}

/// A wire message: a role and its blocks.
#[derive(Debug)]
pub(crate) struct Message<'a> {
    pub(crate) role: Role,
    pub(crate) content: Vec<Marked<'a>>,
}

impl Serialize for Message<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(2))?;
        let role = match self.role {
            Role::User => "user",
            Role::Assistant => "assistant",
        };
        map.serialize_entry("role", role)?;
        map.serialize_entry("content", &self.content)?;
        map.end()
    }
}

/// A tool definition: its schema borrowed from the tool set (or the typed-output format).
#[derive(Debug)]
pub(crate) struct Tool<'a> {
    pub(crate) name: std::borrow::Cow<'a, str>,
    pub(crate) description: Option<&'a str>,
    pub(crate) input_schema: std::borrow::Cow<'a, Value>,
    pub(crate) cache: bool,
    /// `defer_loading: true`: loaded when the API's tool search finds it.
    pub(crate) defer_loading: bool,
    /// A tool the API runs itself, by its versioned `type` (the tool search tool): only its
    /// `type` and `name` go out.
    pub(crate) server_type: Option<&'static str>,
    /// A hosted tool's whole entry (`type`, `name` and its options): it goes out as it is.
    pub(crate) hosted: Option<Value>,
}

impl Serialize for Tool<'_> {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(Value::Object(entry)) = &self.hosted {
            for (key, value) in entry {
                map.serialize_entry(key, value)?;
            }
            if self.cache {
                map.serialize_entry("cache_control", &Ephemeral)?;
            }
            return map.end();
        }
        if let Some(kind) = self.server_type {
            map.serialize_entry("type", kind)?;
            map.serialize_entry("name", &self.name)?;
            if self.cache {
                map.serialize_entry("cache_control", &Ephemeral)?;
            }
            return map.end();
        }
        map.serialize_entry("name", &self.name)?;
        if let Some(description) = self.description {
            map.serialize_entry("description", description)?;
        }
        map.serialize_entry("input_schema", &self.input_schema)?;
        if self.defer_loading {
            map.serialize_entry("defer_loading", &true)?;
        }
        if self.cache {
            map.serialize_entry("cache_control", &Ephemeral)?;
        }
        map.end()
    }
}

/// Put the markers of `plan` on the last tool, the last system block and the last block of
/// each planned message that can carry one (thinking blocks cannot; a message without such a
/// block is left unmarked).
pub(crate) fn mark(
    plan: &Breakpoints,
    tools: &mut [Tool<'_>],
    system: &mut [Marked<'_>],
    messages: &mut [Message<'_>],
) {
    if plan.tools
        && let Some(tool) = tools.last_mut()
    {
        tool.cache = true;
    }
    if plan.system
        && let Some(block) = system.last_mut()
    {
        block.cache = true;
    }
    for &index in &plan.messages {
        let Some(message) = messages.get_mut(index) else {
            continue;
        };
        if let Some(block) = message
            .content
            .iter_mut()
            .rev()
            .find(|block| block.block.can_carry_marker())
        {
            block.cache = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn markers_skip_thinking_blocks() {
        let thinking = json!({"type": "thinking", "thinking": "t", "signature": "s"});
        let mut messages = vec![Message {
            role: Role::Assistant,
            content: vec![Block::Text("a").into(), Block::Verbatim(&thinking).into()],
        }];
        let schema = json!({"type": "object"});
        let mut tools = vec![Tool {
            name: "f".into(),
            description: None,
            input_schema: std::borrow::Cow::Borrowed(&schema),
            cache: false,
            defer_loading: false,
            server_type: None,
            hosted: None,
        }];
        let mut system = vec![Block::Text("s").into()];
        let plan = Breakpoints {
            tools: true,
            system: true,
            messages: vec![0, 5],
        };
        mark(&plan, &mut tools, &mut system, &mut messages);
        let marker = json!({"type": "ephemeral"});
        assert_eq!(
            serde_json::to_value(&tools[0]).unwrap()["cache_control"],
            marker
        );
        assert_eq!(
            serde_json::to_value(&system[0]).unwrap()["cache_control"],
            marker
        );
        let message = serde_json::to_value(&messages[0]).unwrap();
        assert_eq!(message["content"][0]["cache_control"], marker);
        // The thinking block is sent byte for byte as it arrived.
        assert_eq!(message["content"][1], thinking);
    }

    #[test]
    fn merged_fields_win_over_the_block_s_own_and_the_marker_over_all() {
        let artifact = Artifact::new(
            crate::vocab::ArtifactProvider::Anthropic,
            "m",
            crate::vocab::ArtifactPlace::On(0),
            json!({"text": "replaced", "citations": [], "cache_control": "x"}),
        );
        let block = Marked {
            block: Block::Text("own"),
            on: vec![&artifact],
            cache: true,
        };
        let text = serde_json::to_string(&block).unwrap();
        assert_eq!(text.matches("\"text\":").count(), 1, "{text}");
        let value: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            value,
            json!({"type": "text", "text": "replaced", "citations": [], "cache_control": {"type": "ephemeral"}})
        );
    }
}
