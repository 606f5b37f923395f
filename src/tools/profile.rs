//! [`Profile`]: a named tool set (an allowlist) the model may be offered, e.g. `ask` (read-only
//! kinds), `write` (everything), `minimal` (nothing).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::kind::ToolKind;

/// One entry of a profile's allowlist, written as text in config files:
///
/// | Text | Matches |
/// |------|---------|
/// | `*` | every tool |
/// | `read_file` | the tool with this name |
/// | `mcp:github` | every tool of the MCP server `github` |
/// | `kind:read` | every tool of this [`ToolKind`] |
/// | `source:local`, `source:builtin`, `source:hosted` | every local / built-in / hosted tool |
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum ProfileEntry {
    /// Every tool.
    All,
    /// One tool, by name.
    Tool(String),
    /// Every tool of one MCP server.
    McpServer(String),
    /// Every tool of one kind.
    Kind(ToolKind),
    /// Every tool from one source.
    Source(ToolSource),
}

impl ProfileEntry {
    /// Whether `tool` matches this entry.
    pub fn matches(&self, tool: &dyn BaseTool) -> bool {
        match self {
            ProfileEntry::All => true,
            ProfileEntry::Tool(name) => tool.name() == name,
            ProfileEntry::McpServer(server) => {
                matches!(tool.source(), ToolSource::Mcp { server: ref s } if s == server)
            }
            ProfileEntry::Kind(kind) => tool.kind() == *kind,
            ProfileEntry::Source(source) => tool.source() == *source,
        }
    }
}

/// Why a profile entry's text could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid profile entry '{entry}': {reason}")]
pub struct InvalidProfileEntry {
    /// The text.
    pub entry: String,
    /// What is wrong, and what would be accepted.
    pub reason: String,
}

impl FromStr for ProfileEntry {
    type Err = InvalidProfileEntry;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let text = text.trim();
        let invalid = |reason: String| InvalidProfileEntry {
            entry: text.to_owned(),
            reason,
        };
        if text == "*" {
            return Ok(ProfileEntry::All);
        }
        let Some((prefix, rest)) = text.split_once(':') else {
            return if text.is_empty() {
                Err(invalid("it is empty".to_owned()))
            } else {
                Ok(ProfileEntry::Tool(text.to_owned()))
            };
        };
        match prefix {
            "mcp" if !rest.is_empty() => Ok(ProfileEntry::McpServer(rest.to_owned())),
            "mcp" => Err(invalid("name the server: `mcp:<server>`".to_owned())),
            "kind" => KIND_NAMES
                .iter()
                .find(|kind| kind.as_str() == rest)
                .map(|kind| ProfileEntry::Kind(*kind))
                .ok_or_else(|| {
                    invalid(format!(
                        "unknown kind '{rest}'; kinds are {}",
                        KIND_NAMES.map(ToolKind::as_str).join(", ")
                    ))
                }),
            "source" => match rest {
                "local" => Ok(ProfileEntry::Source(ToolSource::Local)),
                "builtin" | "built-in" => Ok(ProfileEntry::Source(ToolSource::Builtin)),
                "hosted" => Ok(ProfileEntry::Source(ToolSource::Hosted)),
                _ => Err(invalid(
                    "sources are `source:local`, `source:builtin` and `source:hosted`; use `mcp:<server>` for MCP tools"
                        .to_owned(),
                )),
            },
            _ => Err(invalid(
                "use a tool name, `*`, `mcp:<server>`, `kind:<kind>` or `source:<local|builtin>`"
                    .to_owned(),
            )),
        }
    }
}

const KIND_NAMES: [ToolKind; 9] = [
    ToolKind::Read,
    ToolKind::Edit,
    ToolKind::Delete,
    ToolKind::Move,
    ToolKind::Search,
    ToolKind::Execute,
    ToolKind::Fetch,
    ToolKind::Think,
    ToolKind::Other,
];

impl fmt::Display for ProfileEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProfileEntry::All => f.write_str("*"),
            ProfileEntry::Tool(name) => f.write_str(name),
            ProfileEntry::McpServer(server) => write!(f, "mcp:{server}"),
            ProfileEntry::Kind(kind) => write!(f, "kind:{kind}"),
            ProfileEntry::Source(ToolSource::Mcp { server }) => write!(f, "mcp:{server}"),
            ProfileEntry::Source(ToolSource::Builtin) => f.write_str("source:builtin"),
            ProfileEntry::Source(ToolSource::Local) => f.write_str("source:local"),
            ProfileEntry::Source(ToolSource::Hosted) => f.write_str("source:hosted"),
        }
    }
}

impl Serialize for ProfileEntry {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ProfileEntry {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// A named tool set: the tools a model may be offered while the profile is active.
///
/// In `agcore.toml`:
///
/// ```toml
/// [tools.profiles.review]
/// description = "Read code and comment on GitHub"
/// tools = ["kind:read", "kind:search", "mcp:github"]
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// What the profile is for (shown by `agcore tools`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
    /// The allowlist.
    #[serde(default)]
    pub tools: Vec<ProfileEntry>,
}

impl Profile {
    /// A profile allowing `tools`.
    pub fn new(
        description: impl Into<String>,
        tools: impl IntoIterator<Item = ProfileEntry>,
    ) -> Self {
        Profile {
            description: description.into(),
            tools: tools.into_iter().collect(),
        }
    }

    /// Whether the profile allows `tool`.
    pub fn allows(&self, tool: &dyn BaseTool) -> bool {
        self.tools.iter().any(|entry| entry.matches(tool))
    }

    /// `ask`: read-only kinds (read, search, think).
    pub fn ask() -> Self {
        Profile::new(
            "Read-only tools: read, search, think",
            [ToolKind::Read, ToolKind::Search, ToolKind::Think].map(ProfileEntry::Kind),
        )
    }

    /// `write`: every tool.
    pub fn write() -> Self {
        Profile::new("Every tool", [ProfileEntry::All])
    }

    /// `minimal`: no tools, just chat.
    pub fn minimal() -> Self {
        Profile::new("No tools, just chat", [])
    }
}

/// The built-in profiles: `ask`, `write`, `minimal`.
pub fn default_profiles() -> Vec<(String, Profile)> {
    vec![
        ("ask".to_owned(), Profile::ask()),
        ("write".to_owned(), Profile::write()),
        ("minimal".to_owned(), Profile::minimal()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_through_text() {
        for text in [
            "*",
            "read_file",
            "mcp:github",
            "kind:read",
            "source:local",
            "source:builtin",
        ] {
            let entry: ProfileEntry = text.parse().unwrap();
            assert_eq!(entry.to_string(), text);
        }
    }

    #[test]
    fn malformed_entries_are_errors_not_silent_names() {
        for bad in ["", "mcp:", "kind:reading", "source:remote", "tool:x"] {
            assert!(bad.parse::<ProfileEntry>().is_err(), "{bad} parsed");
        }
        let error = "kind:reading".parse::<ProfileEntry>().unwrap_err();
        assert!(error.reason.contains("read, edit"), "{error}");
    }
}
