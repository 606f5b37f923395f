//! The test suite's modules, one per area (each was a test binary of its own before).

mod api_key_environ;
mod chat_mcp_pty;
mod chat_pty;
mod cli_hardening;
mod commands;
mod context_cli;
mod hardening_display;
mod hooks_cli;
mod mcp_catalog;
mod mcp_complete;
mod mcp_login;
mod mcp_login_errors;
mod model_timeouts;
mod private_store;
mod prompts_cli;
mod rules_cli;
mod run_cli;
mod run_json_errors;
mod session_grants;
mod sessions;
mod traces_cli;
mod trust;
mod typed_session;
mod unannotated_mcp;
mod usage_cli;
mod wire_cli;
