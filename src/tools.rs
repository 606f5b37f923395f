//! Phase 2: the tool system.
//!
//! - [`BaseTool`]: the tool interface; [`Tool`]: the typed way to write one.
//! - [`ToolRegistry`]: registration, definitions for the model, permission-checked invocation.
//! - [`PermissionChecker`]: allow/deny rules evaluated before every call.
//! - [`McpClient`]: tools of any MCP server, as `BaseTool` adapters.
//! - [`builtin`]: opt-in file, search, shell and fetch tools confined to a workspace root.
//! - [`prelude`]: everything a tool author needs in one `use`.

pub mod base;
pub mod builtin;
pub mod error;
pub mod kind;
pub mod mcp;
pub mod permission;
pub mod registry;
pub mod typed;

pub use base::{BaseTool, ToolSource};
pub use error::ToolError;
pub use kind::ToolKind;
pub use mcp::McpClient;
pub use permission::{Permission, PermissionChecker, PermissionConfig};
pub use registry::{ToolCallRequest, ToolInvocation, ToolRegistry};
pub use typed::Tool;

/// What a tool author needs: `use agcore::tools::prelude::*;`.
pub mod prelude {
    pub use async_trait::async_trait;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};

    pub use crate::tools::{
        BaseTool, Permission, Tool, ToolError, ToolKind, ToolRegistry, ToolSource,
    };
}
