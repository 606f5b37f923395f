//! Phase 2: the tool system.
//!
//! - [`BaseTool`]: the tool interface; [`Tool`]: the typed way to write one.
//! - [`ToolRegistry`]: registration, definitions for the model, permission-checked invocation.
//! - [`PermissionChecker`]: allow/deny rules evaluated before every call.
//! - [`ExposurePolicy`]: profiles, restricted mode, feature flags — which tools the model is
//!   offered and may run, every decision explained ([`ExposureReport`]).
//! - [`Approver`]: a human in the loop for permissions configured as *ask* ([`ApprovalPolicy`]).
//! - [`ToolsConfig`]: the `[tools]` section of `agcore.toml`.
//! - [`hosted`]: the provider's own tools (web search, code execution, ...) under the same
//!   gates.
//! - [`deferred`] tools and [`tool_search`]: large tool sets the model searches instead of
//!   being sent every schema.
//! - [`McpClient`]: tools of any MCP server, as `BaseTool` adapters.
//! - [`builtin`]: opt-in file, search, shell and fetch tools confined to a workspace root.
//! - [`prelude`]: everything a tool author needs in one `use`.

// Imports go one way: a module imports from its own group or the groups above it, never from
// one below, and never in a circle. The leaf vocabulary knows only itself; the error and the
// records of a call know the vocabulary; the policies know both; the registry and what builds
// on it know them all. `tests/suite/layering.rs` checks that the tools core and the MCP client have
// no import circle.
//
// Leaf vocabulary: what a tool is and needs, and why it is hidden or refused. (The private
// ones are re-exported where their items have always been: `permission`, `base`, `exposure`,
// `approval`.)
mod approver;
pub mod argument_kind;
pub mod call_digest;
mod capability;
pub mod kind;
mod reasons;
mod rule_action;
pub mod shell_syntax;
mod source;

// The error and the records of a call.
pub mod call;
pub mod context;
pub mod error;
pub mod event;
pub mod media;
pub mod outcome;
pub mod validate;

// The tool interface and the policies: permissions, approvals, profiles, rules, exposure.
pub mod approval;
pub(crate) mod approval_trace;
pub(crate) mod authorize;
pub mod base;
pub(crate) mod continuation;
pub mod exposure;
pub mod permission;
pub mod profile;
pub mod recheck;
pub mod rules;
pub(crate) mod shell_rules;

// The registry, and what builds on it.
pub mod builtin;
pub mod config;
pub mod deferred;
pub mod hosted;
pub mod mcp;
pub mod registry;
pub mod sandbox;
pub mod streaming;
pub mod tool_search;
pub mod typed;

pub use approval::{
    ApprovalDecision, ApprovalPolicy, ApprovalRequest, Approver, DeferAll, GrantRecorder,
    SessionGrant, UnannotatedTools,
};
pub use argument_kind::ArgumentKind;
pub use base::{BaseTool, ToolSource};
pub use call_digest::CallDigest;
pub use config::ToolsConfig;
pub use context::{ToolContext, ToolEvents};
pub use error::ToolError;
pub use event::{
    ToolCallCard, ToolCallStatus, ToolCallUpdate, ToolContent, ToolLocation, ToolProgress,
};
pub use exposure::{ExposurePolicy, ExposureReport, HiddenBecause};
pub use kind::ToolKind;
pub use mcp::McpClient;
pub use media::{MediaKind, ToolMedia};
pub use outcome::{CompletedCall, ToolOutcome};
pub use permission::{Permission, PermissionChecker, PermissionConfig};
pub use profile::{Profile, ProfileEntry};
pub use registry::{HANDOFF_PREFIX, ToolArguments, ToolCallRequest, ToolInvocation, ToolRegistry};
pub use rules::{ArgumentRule, ArgumentRules, RuleAction};
pub use streaming::{PartialInput, StreamingInput};
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
