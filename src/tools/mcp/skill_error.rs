//! [`McpSkillError`]: why a server's skill (SEP-2640) was not listed, found or loaded — one
//! variant per check, so a caller can tell a tampered file from a missing one. Every text in it
//! that came from the server (URIs, names, digests, reasons) is cut to [`SHOWN_CHARS`]
//! characters with control, bidi and invisible characters escaped when the error is made.

use crate::display::escape_for_terminal;
use crate::tools::error::ToolError;

/// The most characters of one server-sent text an error keeps.
pub(crate) const SHOWN_CHARS: usize = 200;

/// `text` from a server, fit for an error message: escaped and cut.
pub(crate) fn shown(text: &str) -> String {
    let escaped = escape_for_terminal(text);
    let cut = crate::vocab::text::head_tail_chars(&escaped, SHOWN_CHARS, 0);
    if cut.is_whole() {
        escaped.into_owned()
    } else {
        format!("{}…", cut.head())
    }
}

/// A skill could not be listed, found or loaded, or failed a check when it was fetched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum McpSkillError {
    /// The server did not declare the `io.modelcontextprotocol/skills` extension: nothing was
    /// asked.
    #[error(
        "MCP server '{server}' does not offer skills (no io.modelcontextprotocol/skills extension)"
    )]
    NotOffered {
        /// The server.
        server: String,
    },
    /// No listed skill has this name, and it is not a `SKILL.md` URI the server serves.
    #[error("MCP server '{server}' has no skill '{name}'")]
    NotFound {
        /// The server.
        server: String,
        /// The name or URI asked for.
        name: String,
    },
    /// Several listed skills share this name (the extension allows it): the caller names one
    /// by its URI.
    #[error("MCP server '{server}' lists {} skills named '{name}'; name one by its URI: {}", uris.len(), uris.join(", "))]
    Ambiguous {
        /// The server.
        server: String,
        /// The shared name.
        name: String,
        /// The URIs of the skills with that name.
        uris: Vec<String>,
    },
    /// The listing broke one of agcore's bounds (pages, entries, a repeated cursor).
    #[error("MCP server '{server}': skills/list {reason}")]
    Listing {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
    },
    /// The entry breaks a structural rule of the extension (its URI, name, manifest or a
    /// digest's form); such a skill is not loaded.
    #[error("MCP server '{server}': skill {uri} is not loadable: {reason}")]
    Invalid {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The rule it breaks.
        reason: String,
    },
    /// The skill's files are generated (`"resources": "dynamic"`): there is no digest to verify
    /// them against, and agcore loads no unverified skill.
    #[error(
        "MCP server '{server}': skill {uri} has no digests (its files are generated); agcore loads only verified skills"
    )]
    Unverifiable {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
    },
    /// A file declares more bytes than agcore reads for one skill file ([`MAX_SKILL_FILE_BYTES`](crate::tools::mcp::MAX_SKILL_FILE_BYTES)):
    /// not fetched.
    #[error("MCP server '{server}': {uri} declares {size} bytes, more than agcore reads ({limit})")]
    TooLarge {
        /// The server.
        server: String,
        /// The file.
        uri: String,
        /// The size the entry declares.
        size: u64,
        /// agcore's limit.
        limit: u64,
    },
    /// The file the server sent is not as long as the entry declares (checked before the digest;
    /// reading stops as soon as it is longer).
    #[error("MCP server '{server}': {uri} failed the size check: the listing declares {expected} bytes, the server sent {}", match actual { Some(actual) => format!("{actual}"), None => "more".to_owned() })]
    SizeMismatch {
        /// The server.
        server: String,
        /// The file.
        uri: String,
        /// The size the entry declares.
        expected: u64,
        /// The size received; `None` when reading stopped past the declared size.
        actual: Option<u64>,
    },
    /// The file's SHA-256 is not the entry's digest.
    #[error(
        "MCP server '{server}': {uri} failed the digest check: the listing declares {expected}, the content is {actual}"
    )]
    DigestMismatch {
        /// The server.
        server: String,
        /// The file.
        uri: String,
        /// The digest the entry declares.
        expected: String,
        /// The digest of what the server sent.
        actual: String,
    },
    /// The `resources/read` answer holds no usable content for the file (none for its URI,
    /// base64 that does not decode, a `SKILL.md` that is not UTF-8).
    #[error("MCP server '{server}': {uri} could not be read: {reason}")]
    Unreadable {
        /// The server.
        server: String,
        /// The file.
        uri: String,
        /// What was wrong.
        reason: String,
    },
    /// The fetched `SKILL.md` does not begin with a YAML frontmatter block, or the block is not
    /// a YAML mapping.
    #[error("MCP server '{server}': {uri} failed the frontmatter check: {reason}")]
    BadFrontmatter {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// What was wrong.
        reason: String,
    },
    /// The fetched frontmatter lacks a field the Agent Skills format requires (`name`,
    /// `description`), or has it as something other than a string.
    #[error("MCP server '{server}': {uri} failed the frontmatter check: no `{field}` string")]
    MissingField {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The missing field.
        field: String,
    },
    /// The fetched frontmatter's `name` is not the listed skill's name.
    #[error(
        "MCP server '{server}': {uri} failed the frontmatter check: its name is '{found}', the listing says '{listed}'"
    )]
    NameMismatch {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The listed name.
        listed: String,
        /// The name in the fetched file.
        found: String,
    },
    /// A frontmatter field of the fetched file differs from the listing's (or is only in one of
    /// them): what the user saw listed is not what the model would get.
    #[error(
        "MCP server '{server}': {uri} failed the frontmatter check: field `{field}` differs from the listing"
    )]
    FrontmatterMismatch {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        uri: String,
        /// The first differing field (in key order).
        field: String,
    },
    /// A supporting file the skill's entry does not list: reading it would be a read of
    /// unverifiable content, so it is refused without a request.
    #[error("MCP server '{server}': {uri} is not a file of skill {skill}")]
    Unlisted {
        /// The server.
        server: String,
        /// The skill's `SKILL.md` URI.
        skill: String,
        /// The file asked for.
        uri: String,
    },
    /// A request failed (transport, timeout, a JSON-RPC error from the server).
    #[error(transparent)]
    Request(#[from] ToolError),
}

impl From<McpSkillError> for ToolError {
    fn from(error: McpSkillError) -> Self {
        match error {
            McpSkillError::Request(error) => error,
            other => ToolError::McpError(other.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn server_text_is_escaped_and_cut() {
        let text = format!("a\u{1b}[2Jb{}", "x".repeat(500));
        let out = shown(&text);
        assert!(out.starts_with("a\\x1b[2Jb"), "{out}");
        assert!(!out.contains('\u{1b}'));
        assert_eq!(out.chars().count(), SHOWN_CHARS + 1, "{out}");
        assert!(out.ends_with('…'));
        assert_eq!(shown("skill://a/SKILL.md"), "skill://a/SKILL.md");
    }
}
