//! A server's resources as tools for the model: `<server>__list_resources` (resources and
//! resource templates) and `<server>__read_resource {uri, offset?}` — read-only (`Read`
//! permission, kind `Read`), their output bounded below the loop's tool-output cut, with a note
//! saying how to read on.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::mcp::catalog::McpResourceContent;
use crate::tools::mcp::client::McpClient;
use crate::tools::mcp::handle::McpHandle;
use crate::tools::mcp::media::{MAX_MEDIA_BYTES, media_of};
use crate::tools::mcp::naming::qualified_tool_name;
use crate::tools::mcp::result::content_to_model_text;
use crate::tools::media::ToolMedia;
use crate::tools::permission::Permission;

/// The most text one `read_resource` or `list_resources` answer carries (below the loop's
/// default 32 KiB cut, so the loop never cuts it blindly).
pub const MAX_RESOURCE_OUTPUT_BYTES: usize = crate::vocab::DEFAULT_TOOL_OUTPUT_LIMIT - 2 * 1024;

/// The most entries `list_resources` shows (resources and templates each).
const MAX_LISTED: usize = 200;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    List,
    Read,
}

/// `<server>__list_resources` or `<server>__read_resource`: one server's resources for the
/// model ([`McpClient::resource_tools`]).
#[derive(Debug, Clone)]
pub struct McpResourceTool {
    name: String,
    description: String,
    server: String,
    op: Op,
    handle: McpHandle,
}

impl McpClient {
    /// The model-facing resource tools of this server — `<server>__list_resources` and
    /// `<server>__read_resource` — or none when it offers no resources. They need only `Read`
    /// and are safe to offer wherever reading is allowed. The client's
    /// [tool filter](McpClient::with_tool_filter) applies to them by the names
    /// `list_resources` and `read_resource` (e.g. `exclude: ["*_resource*"]` drops both).
    pub fn resource_tools(&self) -> Vec<Arc<dyn BaseTool>> {
        self.handle().resource_tools()
    }
}

impl McpHandle {
    /// See [`McpClient::resource_tools`].
    pub fn resource_tools(&self) -> Vec<Arc<dyn BaseTool>> {
        let offers = self.server_info().is_some_and(|info| info.has_resources);
        if !offers {
            return Vec::new();
        }
        let server = self.server_name().to_owned();
        let filter = self.tool_filter();
        let tool = |op: Op, suffix: &str, description: String| {
            filter.allows(suffix).then(|| {
                Arc::new(McpResourceTool {
                    name: qualified_tool_name(&server, suffix),
                    description,
                    server: server.clone(),
                    op,
                    handle: self.clone(),
                }) as Arc<dyn BaseTool>
            })
        };
        [
            tool(
                Op::List,
                "list_resources",
                format!(
                    "List the resources (URIs, names, MIME types) and resource templates of the \
                     MCP server '{server}'. Read one with {}.",
                    qualified_tool_name(&server, "read_resource")
                ),
            ),
            tool(
                Op::Read,
                "read_resource",
                format!(
                    "Read a resource of the MCP server '{server}' by URI (from {} or a filled-in \
                     template). Long text comes in parts: pass the offset the answer names.",
                    qualified_tool_name(&server, "list_resources")
                ),
            ),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[async_trait]
impl BaseTool for McpResourceTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        match self.op {
            Op::List => json!({"type": "object", "properties": {}, "additionalProperties": false}),
            Op::Read => json!({
                "type": "object",
                "properties": {
                    "uri": {"type": "string", "description": "The resource's URI"},
                    "offset": {"type": "integer", "minimum": 0,
                               "description": "Byte offset into the text, to read on (default 0)"}
                },
                "required": ["uri"],
                "additionalProperties": false
            }),
        }
    }

    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Read]
    }

    fn kind(&self) -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, input: &Value) -> String {
        match (self.op, input.get("uri").and_then(Value::as_str)) {
            (Op::Read, Some(uri)) => format!("Read {uri}"),
            (Op::Read, None) => format!("Read a resource of {}", self.server),
            (Op::List, _) => format!("List the resources of {}", self.server),
        }
    }

    fn source(&self) -> ToolSource {
        ToolSource::Mcp {
            server: self.server.clone(),
        }
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        match self.op {
            Op::List => self.list().await,
            Op::Read => {
                let uri = args.get("uri").and_then(Value::as_str).ok_or_else(|| {
                    ToolError::InvalidArguments(self.name.clone(), "`uri` is required".into())
                })?;
                let offset = args.get("offset").and_then(Value::as_u64).unwrap_or(0);
                let offset = usize::try_from(offset).unwrap_or(usize::MAX);
                let contents = self.handle.read_resource(uri).await?;
                Ok(read_output(&contents, offset, MAX_RESOURCE_OUTPUT_BYTES))
            }
        }
    }

    /// Text as itself; with media, the text block and the image/audio blocks summarised as a
    /// tool's are (`[image: image/png, N bytes of base64]`).
    fn model_content(&self, output: &Value) -> String {
        content_to_model_text(output)
    }

    /// The image and audio blobs of a first page, as the run passes them to the model.
    fn media(&self, output: &Value) -> Vec<ToolMedia> {
        media_of(output)
    }
}

/// What `read_resource` returns: the text (see [`render_contents`]) as a string, or — on the
/// first page, when the resource has image or audio blobs — MCP content blocks: the text, then
/// the media as image/audio blocks, which the run turns into image parts for a model that
/// accepts images (as it does a tool's; otherwise the tool message says they were not shown).
fn read_output(contents: &[McpResourceContent], offset: usize, budget: usize) -> Value {
    let text = render_contents(contents, offset, budget);
    let media: Vec<Value> = if offset == 0 {
        passed_on(contents)
            .map(|(kind, mime, blob)| json!({"type": kind, "data": blob, "mimeType": mime}))
            .collect()
    } else {
        Vec::new()
    };
    if media.is_empty() {
        return Value::String(text);
    }
    let mut blocks = vec![json!({"type": "text", "text": text})];
    blocks.extend(media);
    Value::Array(blocks)
}

/// The image and audio blobs passed on as media — `(kind, MIME type, base64)`, in order, while
/// they fit in [`MAX_MEDIA_BYTES`] together.
fn passed_on(contents: &[McpResourceContent]) -> impl Iterator<Item = (&str, &str, &str)> {
    let mut used = 0usize;
    contents.iter().filter_map(move |part| {
        let blob = part.blob.as_deref().filter(|_| part.text.is_none())?;
        let mime = part.mime_type.as_deref()?;
        let kind = media_kind(mime)?;
        if used + blob.len() > MAX_MEDIA_BYTES {
            return None;
        }
        used += blob.len();
        Some((kind, mime, blob))
    })
}

/// `image` or `audio` for a MIME type passed on as media.
fn media_kind(mime: &str) -> Option<&'static str> {
    if mime.starts_with("image/") {
        Some("image")
    } else if mime.starts_with("audio/") {
        Some("audio")
    } else {
        None
    }
}

impl McpResourceTool {
    async fn list(&self) -> Result<Value, ToolError> {
        let resources = self.handle.list_resources().await?;
        // A server may offer resources but no templates: that is not a failure.
        let templates = self
            .handle
            .list_resource_templates()
            .await
            .unwrap_or_default();
        let mut out = String::new();
        for resource in resources.iter().take(MAX_LISTED) {
            let mut line = format!("{} — {}", resource.uri, resource.name);
            if let Some(mime) = &resource.mime_type {
                line.push_str(&format!(" ({mime})"));
            }
            if let Some(description) = &resource.description {
                line.push_str(&format!(": {}", first_line(description)));
            }
            push_line(&mut out, &line);
        }
        if resources.len() > MAX_LISTED {
            push_line(
                &mut out,
                &format!("… and {} more resources", resources.len() - MAX_LISTED),
            );
        }
        if !templates.is_empty() {
            push_line(&mut out, "templates (fill in the {placeholders}):");
            for template in templates.iter().take(MAX_LISTED) {
                let mut line = format!("{} — {}", template.uri_template, template.name);
                if let Some(description) = &template.description {
                    line.push_str(&format!(": {}", first_line(description)));
                }
                push_line(&mut out, &line);
            }
        }
        if out.is_empty() {
            out.push_str("the server lists no resources");
        }
        Ok(Value::String(cut(&out, 0, MAX_RESOURCE_OUTPUT_BYTES)))
    }
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("")
}

fn push_line(out: &mut String, line: &str) {
    out.push_str(line);
    out.push('\n');
}

/// The contents as text for the model: text parts inline (from `offset`, at most `budget`
/// bytes, with a note how to read on), binary parts named with their size — image and audio
/// ones as passed on with the first page ([`read_output`]). The text does not depend on
/// `offset`, so the offsets of every page agree.
fn render_contents(contents: &[McpResourceContent], offset: usize, budget: usize) -> String {
    let media: Vec<&str> = passed_on(contents).map(|(_, _, blob)| blob).collect();
    let mut whole = String::new();
    for (index, part) in contents.iter().enumerate() {
        if contents.len() > 1 {
            whole.push_str(&format!("[part {} — {}]\n", index + 1, part.uri));
        }
        match (&part.text, &part.blob) {
            (Some(text), _) => whole.push_str(text),
            (None, Some(blob)) => whole.push_str(&format!(
                "[binary content, {}, {} bytes of base64 — {}]",
                part.mime_type.as_deref().unwrap_or("unknown type"),
                blob.len(),
                if media
                    .iter()
                    .any(|passed| std::ptr::eq(*passed, blob.as_str()))
                {
                    "passed on as media with the first page"
                } else {
                    "not shown"
                }
            )),
            (None, None) => whole.push_str("[empty]"),
        }
        if contents.len() > 1 {
            whole.push('\n');
        }
    }
    cut(&whole, offset, budget)
}

/// `text[offset..]` up to `budget` bytes on char boundaries, with a note when there is more.
pub(crate) fn cut(text: &str, offset: usize, budget: usize) -> String {
    if offset >= text.len() && offset > 0 {
        return format!(
            "[offset {offset} is past the end: the text has {} bytes]",
            text.len()
        );
    }
    let start = text.floor_char_boundary(offset);
    let page = crate::vocab::text::head(&text[start..], budget);
    if page.is_whole() {
        return text[start..].to_owned();
    }
    let end = start + page.head_end();
    format!(
        "{}\n[bytes {start}–{end} of {}; call again with offset {end} for more]",
        page.head(),
        text.len()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(uri: &str, text: &str) -> McpResourceContent {
        McpResourceContent {
            uri: uri.into(),
            mime_type: Some("text/plain".into()),
            text: Some(text.into()),
            blob: None,
        }
    }

    #[test]
    fn long_text_comes_in_parts_that_say_how_to_read_on() {
        let body = "é".repeat(100); // 200 bytes, two per char
        let first = render_contents(&[text("a://x", &body)], 0, 51);
        assert!(first.starts_with(&"é".repeat(25)), "{first}");
        assert!(first.ends_with("[bytes 0–50 of 200; call again with offset 50 for more]"));
        let last = render_contents(&[text("a://x", &body)], 150, 51);
        assert_eq!(last, "é".repeat(25));
        assert!(render_contents(&[text("a://x", "ab")], 9, 51).contains("past the end"));
    }

    #[test]
    fn binary_parts_are_named_not_shown() {
        let blob = McpResourceContent {
            uri: "a://b".into(),
            mime_type: Some("image/png".into()),
            text: None,
            blob: Some("AAAA".into()),
        };
        let zip = McpResourceContent {
            uri: "a://z".into(),
            mime_type: Some("application/zip".into()),
            text: None,
            blob: Some("BBBB".into()),
        };
        let out = render_contents(&[text("a://t", "hi"), blob.clone(), zip.clone()], 0, 1000);
        assert!(out.contains("[part 1 — a://t]\nhi"), "{out}");
        assert!(
            out.contains(
                "[binary content, image/png, 4 bytes of base64 — passed on as media with the first page]"
            ),
            "{out}"
        );
        assert!(
            out.contains("[binary content, application/zip, 4 bytes of base64 — not shown]"),
            "{out}"
        );
        // The first page carries the image as an image block, the way a tool's image comes.
        let first = read_output(&[text("a://t", "hi"), blob.clone(), zip.clone()], 0, 1000);
        assert_eq!(first[0]["text"], out);
        assert_eq!(
            first[1],
            json!({"type": "image", "data": "AAAA", "mimeType": "image/png"})
        );
        assert_eq!(first.as_array().unwrap().len(), 2, "the zip is not media");
        // Later pages are text only; a text-only resource stays a string.
        assert!(read_output(&[text("a://t", "hi"), blob, zip], 3, 1000).is_string());
        assert!(read_output(&[text("a://t", "hi")], 0, 1000).is_string());
    }
}
