//! [`Permission`]: a capability a tool declares, as written in config files. Whether a
//! declared permission passes is [`crate::tools::permission`]'s part.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A capability a tool needs.
///
/// Written in config files as `read`, `write`, `delete`, `network`, `shell`, `filesystem`, or
/// `custom:<name>` (any other string is a custom permission too).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Permission {
    /// Read-only access (read files, query data).
    Read,
    /// Create or modify files or data.
    Write,
    /// Delete files or data.
    Delete,
    /// Network access (HTTP requests, ...).
    Network,
    /// Run shell commands.
    Shell,
    /// File-system operations other than read/write/delete.
    FileSystem,
    /// A custom, namespaced permission (e.g. `db:admin`).
    Custom(String),
}

impl fmt::Display for Permission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Permission::Read => f.write_str("Read"),
            Permission::Write => f.write_str("Write"),
            Permission::Delete => f.write_str("Delete"),
            Permission::Network => f.write_str("Network"),
            Permission::Shell => f.write_str("Shell"),
            Permission::FileSystem => f.write_str("FileSystem"),
            Permission::Custom(name) => write!(f, "Custom({name})"),
        }
    }
}

impl FromStr for Permission {
    type Err = std::convert::Infallible;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let lower = text.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "read" => Permission::Read,
            "write" => Permission::Write,
            "delete" => Permission::Delete,
            "network" => Permission::Network,
            "shell" => Permission::Shell,
            "filesystem" | "file_system" => Permission::FileSystem,
            _ => {
                let name = text.trim();
                let name = name
                    .strip_prefix("custom:")
                    .or_else(|| name.strip_prefix("Custom:"))
                    .unwrap_or(name);
                Permission::Custom(name.to_owned())
            }
        })
    }
}

impl Serialize for Permission {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self {
            Permission::Custom(name) => serializer.serialize_str(&format!("custom:{name}")),
            other => serializer.serialize_str(&other.to_string().to_ascii_lowercase()),
        }
    }
}

impl<'de> Deserialize<'de> for Permission {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        let Ok(permission) = text.parse();
        Ok(permission)
    }
}
