//! agcore agent runs on [Restate](https://restate.dev): the [`AgentSession`] Virtual Object,
//! keyed by session name, served over HTTP/2 cleartext with Restate's service protocol (the
//! endpoint does not register itself: [`register`] — `agcore restate register` — or
//! `restate deployments register URL` does).
//!
//! Handlers (names and shapes are an interface; scripts depend on them):
//! - `run` (exclusive): the prompt as a JSON string in, the final answer as a JSON string out.
//!   Each model request and each tool call is one journaled `ctx.run` step; a call that needs
//!   approval waits on an awakeable.
//! - `approve` (shared): `{"id", "allow", "message"?}` in, `{"id", "allow", "resolved": true}`
//!   out; a malformed input is a terminal error 400, an id with no pending call a 404.
//! - `state` (shared): `{"session", "messages", "pending": [{"id", "tool", "arguments"}]}`.
//!
//! The run itself is agcore's step machine ([`agcore::run::step`]), driven here with the
//! effects of [`agcore::run::external`].

mod agent;
mod approval_proof;
mod message_limit;
mod register;
mod run_handler;
mod serve;
mod session;
mod wire;

pub use agent::Agent;
pub use message_limit::{MAX_MESSAGE, MAX_REQUEST, MessageLimitError};
pub use register::{RegisterError, Registered, RegisteredService, register};
pub use serve::{Access, ServeError, bind, serve};
pub use session::AgentSession;
pub use wire::{ApproveInput, ApproveOutput, PendingCall, SessionState};
