//! The test suite's modules, one per area (each was a test binary of its own before).

mod api_key_environ;
mod chat_mcp_pty;
mod chat_pty;
mod commands;
mod context_cli;
mod hardening_display;
mod hooks_cli;
mod mcp_catalog;
mod mcp_complete;
mod mcp_login;
mod prompts_cli;
mod rules_cli;
mod run_cli;
mod run_json_errors;
mod sessions;
mod traces_cli;
mod trust;
mod usage_cli;
mod wire_cli;
mod private_store;
mod session_grants;
