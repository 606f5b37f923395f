//! Phase 2: the tool system.
//!
//! - [`BaseTool`]: the tool interface; [`Tool`]: the typed way to write one.
//! - [`ToolRegistry`]: registration, definitions for the model, permission-checked invocation.
//! - [`PermissionChecker`]: allow/deny rules evaluated before every call.
//! - [`ExposurePolicy`]: profiles, restricted mode, feature flags — which tools the model is
//!   offered and may run, every decision explained ([`ExposureReport`]).
//! - [`Approver`]: a human in the loop for permissions configured as *ask* ([`ApprovalPolicy`]).
//! - [`ToolsConfig`]: the `[tools]` section of `agcore.toml`.
//! - [`McpClient`]: tools of any MCP server, as `BaseTool` adapters.
//! - [`builtin`]: opt-in file, search, shell and fetch tools confined to a workspace root.
//! - [`prelude`]: everything a tool author needs in one `use`.

pub mod approval;
pub(crate) mod approval_trace;
pub mod base;
pub mod builtin;
pub mod call;
pub mod config;
pub mod error;
pub mod exposure;
pub mod kind;
pub mod mcp;
pub mod media;
pub mod outcome;
pub mod permission;
pub mod profile;
pub mod registry;
pub mod rules;
pub mod typed;
pub mod validate;

pub use approval::{ApprovalDecision, ApprovalPolicy, ApprovalRequest, Approver, DeferAll};
pub use base::{BaseTool, ToolSource};
pub use config::ToolsConfig;
pub use error::ToolError;
pub use exposure::{ExposurePolicy, ExposureReport, HiddenBecause};
pub use kind::ToolKind;
pub use mcp::McpClient;
pub use media::{MediaKind, ToolMedia};
pub use outcome::{CompletedCall, ToolOutcome};
pub use permission::{Permission, PermissionChecker, PermissionConfig};
pub use profile::{Profile, ProfileEntry};
pub use registry::{ToolArguments, ToolCallRequest, ToolInvocation, ToolRegistry};
pub use rules::{ArgumentRule, ArgumentRules, RuleAction};
pub use typed::{Tool, TypedTool};

/// What a tool author needs: `use agcore::tools::prelude::*;`.
///
/// Brings the tool traits ([`BaseTool`], typed [`Tool`]), `#[async_trait]`, the derives a typed
/// tool's input needs (`Deserialize`, `Serialize`, `JsonSchema`), `json!`/`Value`, `Arc`, and
/// the registry, permission and error types.
pub mod prelude {
    pub use std::sync::Arc;

    pub use async_trait::async_trait;
    pub use schemars::JsonSchema;
    pub use serde::{Deserialize, Serialize};
    pub use serde_json::{Value, json};

    pub use crate::tools::{
        BaseTool, Permission, PermissionChecker, PermissionConfig, Tool, ToolCallRequest,
        ToolError, ToolInvocation, ToolKind, ToolRegistry, ToolSource,
    };
}
