//! What the tests share: a fake Anthropic Messages server ([`anthropic_fake`]), where the real MCP servers are and skip-or-fail ([`mcp`]), fake model
//! servers for the context engine ([`context`]) and for hooks, rules and limits ([`control`]),
//! the session stores under test ([`session`]), a span recorder ([`trace`]), and an
//! OAuth-protected MCP server speaking DPoP ([`oauth_fake`]).

pub mod anthropic_fake;
pub mod bedrock_fake;
pub mod context;
pub mod control;
pub mod gemini_fake;
pub mod mcp;
pub mod oauth_fake;
pub mod require;
pub mod responses_fake;
pub mod session;
pub mod team_fake;
pub mod trace;
