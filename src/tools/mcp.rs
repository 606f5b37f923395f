//! [`McpClient`]: the tools of any MCP server — over stdio or streamable HTTP — as
//! [`BaseTool`](crate::tools::BaseTool) adapters in a [`ToolRegistry`](crate::tools::ToolRegistry).
//!
//! Built on the official Rust SDK (`rmcp`) for the protocol; agcore adds the design's API,
//! bounded timeouts, typed errors, naming, permissions and process lifecycle:
//!
//! - [`McpTransport`]: how to reach the server (`Stdio { command, args }`, `Http { url, headers }`).
//! - [`McpClient`]: connect (`server/discover` for a 2026-07-28 server over HTTP, else
//!   initialize → initialized; [`McpNegotiation`]; bounded by the connect timeout),
//!   [`list_tools`](McpClient::list_tools) (all pages, cached, refreshed on
//!   `notifications/tools/list_changed`), [`call_tool`](McpClient::call_tool) (bounded by the
//!   request timeout; a timed-out request is cancelled on the server), [`close`](McpClient::close).
//! - [`McpHandle`]: a cheap clone of a connected client for concurrent calls (one connection,
//!   request ids multiplexed).
//! - [`McpToolAdapter`]: one server tool as a `BaseTool` (permissions from its annotations, with
//!   the spec's defaults for absent hints); [`register_mcp_tools`] registers several servers'
//!   tools into one registry, renaming on clashes. A tool agcore cannot use (a schema that does
//!   not compile, a repeated name) is skipped with a reason ([`SkippedMcpTool`]), not fatal.
//! - [`McpServersConfig`]: the de-facto standard `mcpServers` JSON file; `connect_all` starts
//!   every server concurrently.
//! - [`McpToolFilter`]: per-server `include` / `exclude` lists; a tool left out is listed with
//!   the rule ([`McpSkipReason::NotIncluded`], [`McpSkipReason::Excluded`]).
//! - Recovery: [`McpRetry`] for a server that fails to start
//!   ([`McpClient::with_startup_retry`]); [`McpClient::with_restarts`] starts a server that died
//!   again on the next call (bounded).
//! - Resources for the model: [`McpClient::resource_tools`] (`<server>__list_resources`,
//!   `<server>__read_resource`, read-only, bounded); subscriptions
//!   ([`McpClient::subscribe_resource`], [`McpResourceUpdate`]).
//! - Prompts for the model, when the user asks for them (MCP prompts are user-controlled):
//!   [`McpClient::prompt_tools`] (`<server>__list_prompts`, `<server>__get_prompt`).
//! - Skills (SEP-2640, [`skills`]): [`McpClient::list_skills`] without fetching a file,
//!   [`McpClient::load_skill`] verifying size, digest and frontmatter ([`McpSkillError`]).
//! - Media for the model: the image and audio blocks of a tool output ([`media_of`]) reach
//!   the run as generic [`ToolMedia`](crate::tools::media::ToolMedia) on the finished call
//!   (shown when `CycleConfig::accepts_images` is set).
//!
//! ```no_run
//! use agcore::tools::ToolRegistry;
//! use agcore::tools::mcp::{McpClient, McpTransport};
//!
//! # async fn demo() -> Result<(), agcore::tools::ToolError> {
//! let mut client = McpClient::new(
//!     "everything",
//!     McpTransport::Stdio {
//!         command: "npx".into(),
//!         args: vec!["-y".into(), "@modelcontextprotocol/server-everything".into()],
//!     },
//! )
//! .with_timeout(30);
//! client.connect().await?;
//! let echo = client.call_tool("echo", serde_json::json!({"message": "hi"})).await?;
//! assert_eq!(echo, "Echo: hi");
//!
//! let mut registry = ToolRegistry::new();
//! registry.register_all(client.into_tools())?;
//! # Ok(()) }
//! ```
//!
//! # Results
//!
//! A `tools/call` result becomes one [`serde_json::Value`] (see [`call_result_to_value`]):
//! `structuredContent` when the server sent it; otherwise the text content — one text block
//! as a JSON string, several joined with `"\n"` into one string; when any block is not text
//! (image, audio, embedded resource, resource link), the whole content as an array of typed
//! MCP content objects (`{"type": "image", "data": .., "mimeType": ..}`), nothing dropped.
//! `isError: true` becomes [`ToolError::ExecutionFailed`](crate::tools::ToolError) with the
//! server's text, so the model reads what went wrong.
//!
//! # Errors
//!
//! | what happened | error |
//! |---|---|
//! | called before `connect()` or after `close()` | `McpNotInitialized` |
//! | the program cannot start; the server exits or closes stdout (during `connect` or any call — at once, with exit status and last stderr lines); the server rejects a request (JSON-RPC error); an HTTP transport failure | `McpError` |
//! | `tools/list` breaks a bound: more than [`MAX_LIST_PAGES`] pages or [`MAX_LISTED_TOOLS`] tools, or a repeated cursor ([`McpListError`]; `connect` fails) | `McpError` |
//! | a stdio answer larger than [`MAX_MESSAGE_BYTES`] (that request fails at once; the connection stays) | `McpError` |
//! | a stdio request larger than [`MAX_MESSAGE_BYTES`] (not sent — a server would drop it unanswered; it fails at once, the connection stays) | `McpMessageTooLarge` |
//! | `initialize` or a request takes longer than its limit (the request is cancelled on the server) | `McpTimeout` |
//! | the tool answered `isError: true` | `ExecutionFailed(tool, server text)` |
//! | arguments that are not a JSON object | `InvalidArguments` |
//! | a bad `mcpServers` file ([`McpConfigError`], converts into `McpError`) | `McpConfigError` |
//!
//! # Processes
//!
//! A stdio server runs in its own process group. [`McpClient::close`] closes its stdin, waits
//! up to 2 s, sends SIGTERM to the group, waits 2 s more, then SIGKILL; dropping the client
//! (and its handles and adapters) does the same in the background, and a runtime that shuts
//! down kills the group at once — no zombies, no orphans (also for `npx`/`uvx` launchers).
//!
//! # Logging
//!
//! `tracing` targets: `agcore::mcp` (lifecycle, list changes, progress), `agcore::mcp::stderr`
//! (every stderr line of a stdio server, at `debug`), `agcore::mcp::log` (the server's
//! `notifications/message`, at their level).

mod adapter;
mod answers;
pub mod auth;
pub(crate) mod call_progress;
mod catalog;
mod client;
mod config;
mod config_error;
mod connection;
mod cross_app_config;
mod elicitation;
mod filter;
mod handle;
mod handler;
mod http_client;
mod lines;
mod listing;
mod media;
mod mrtr;
mod naming;
mod negotiation;
mod output_schema;
mod pending_cancels;
mod permissions;
mod progress;
mod prompt_tools;
mod recovery;
mod registration;
mod resource_tools;
mod result;
mod roots;
mod sampling;
mod shared;
mod skill_error;
mod skill_frontmatter;
mod skill_verify;
pub mod skills;
mod skipped;
mod stderr;
mod stdio;
mod subscriptions;
mod summary;
mod tasks;
mod trace;
mod transport;

pub use adapter::McpToolAdapter;
pub use catalog::{
    McpPrompt, McpPromptArgument, McpPromptMessage, McpResource, McpResourceContent,
    McpResourceTemplate,
};
pub use client::McpClient;
pub use config::{
    CONFIG_RESTARTS, CONFIG_STARTUP_RETRIES, McpServerConfig, McpServersConfig, connect_all,
};
pub use config_error::McpConfigError;
pub use connection::McpServerInfo;
pub use cross_app_config::{McpCrossAppConfig, McpIdTokenConfig};
pub use elicitation::{
    DeferElicitation, ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor,
    apply_schema_defaults, validate_elicited,
};
pub use filter::McpToolFilter;
pub use handle::McpHandle;
pub use listing::{McpCacheHint, McpListError};
pub use media::{MAX_MEDIA_BYTES, ModelMedia, media_for_model, media_message, media_of};
pub use mrtr::{MAX_INPUT_ROUNDS, MAX_REQUEST_STATE_BYTES};
pub use naming::{McpToolNaming, qualified_tool_name, sanitize_tool_name};
pub use negotiation::{McpNegotiation, STATELESS_PROTOCOL_VERSION, is_stateless_version};
pub use progress::{McpProgress, ProgressCallback};
pub use prompt_tools::McpPromptTool;
pub use recovery::McpRetry;
pub use registration::{
    McpRegistration, McpRegistrySync, RegisteredMcpTool, register_mcp_tools,
    register_mcp_tools_with_report,
};
pub use resource_tools::{MAX_RESOURCE_OUTPUT_BYTES, McpResourceTool};
pub use result::{call_result_to_value, content_to_model_text};
pub use sampling::{Sampler, SamplingReply, SamplingRequest, SamplingRole, SamplingTurn};
pub use skill_error::McpSkillError;
pub use skills::{MAX_SKILL_FILE_BYTES, MAX_SKILL_FILES, McpLoadedSkill, McpSkill, McpSkillFile};
pub use skipped::{McpSkipReason, SkippedMcpTool};
pub use subscriptions::McpResourceUpdate;
pub use summary::{McpServerStatus, McpToolSummary};
pub use tasks::{MAX_POLL, MAX_TASK_WAIT, MIN_POLL};
pub use transport::McpTransport;

/// The protocol version agcore's `initialize` handshake offers unless told otherwise
/// ([`McpClient::with_protocol_version`]): the newest with a handshake. A server that speaks
/// the stateless 2026-07-28 protocol is found with `server/discover` first ([`McpNegotiation`]);
/// this version is for the rest.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-11-25";

/// The default per-request timeout, in seconds.
pub const DEFAULT_REQUEST_TIMEOUT_SECS: u64 = 30;

/// The default connect (spawn + initialize) timeout, in seconds — generous for a cold `npx`.
pub const DEFAULT_CONNECT_TIMEOUT_SECS: u64 = 60;

/// The most `tools/list` pages agcore reads from one server ([`McpListError::TooManyPages`]).
pub const MAX_LIST_PAGES: usize = 100;

/// The most tools agcore accepts from one server's `tools/list` ([`McpListError::TooManyTools`]).
pub const MAX_LISTED_TOOLS: usize = 10_000;

/// The largest JSON-RPC message agcore reads from or sends to a stdio server (16 MiB, as rmcp
/// and its streamable HTTP client). A larger answer fails its request at once, saying so; a
/// larger request is not sent and fails at once with `ToolError::McpMessageTooLarge`.
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

/// How many stderr lines of a stdio server are kept for error messages.
pub const STDERR_TAIL_LINES: usize = 20;
