//! [`ToolKind`]: what a tool does, in the Agent Client Protocol's categories.

use serde::{Deserialize, Serialize};

use crate::tools::capability::Permission;

/// What a tool does (the ACP tool kinds). A UI picks icons and wording from it; agcore derives
/// default permissions from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    /// Reads files or data.
    Read,
    /// Modifies files or data.
    Edit,
    /// Deletes files or data.
    Delete,
    /// Moves or renames.
    Move,
    /// Searches.
    Search,
    /// Runs commands or code.
    Execute,
    /// Fetches from the network.
    Fetch,
    /// Internal reasoning or planning; no side effects.
    Think,
    /// Anything else.
    #[default]
    Other,
}

impl ToolKind {
    /// The permissions a tool of this kind needs unless it declares its own:
    /// Read/Search → Read, Edit → Write, Move → Write, Delete → Delete, Execute → Shell,
    /// Fetch → Network, Think/Other → none.
    pub fn default_permissions(self) -> Vec<Permission> {
        match self {
            ToolKind::Read | ToolKind::Search => vec![Permission::Read],
            ToolKind::Edit | ToolKind::Move => vec![Permission::Write],
            ToolKind::Delete => vec![Permission::Delete],
            ToolKind::Execute => vec![Permission::Shell],
            ToolKind::Fetch => vec![Permission::Network],
            ToolKind::Think | ToolKind::Other => Vec::new(),
        }
    }

    /// Whether the kind only reads (Read, Search, Think).
    pub fn is_read_only(self) -> bool {
        matches!(self, ToolKind::Read | ToolKind::Search | ToolKind::Think)
    }

    /// The lowercase name (`read`, `edit`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Read => "read",
            ToolKind::Edit => "edit",
            ToolKind::Delete => "delete",
            ToolKind::Move => "move",
            ToolKind::Search => "search",
            ToolKind::Execute => "execute",
            ToolKind::Fetch => "fetch",
            ToolKind::Think => "think",
            ToolKind::Other => "other",
        }
    }
}

impl std::fmt::Display for ToolKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
