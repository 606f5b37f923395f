//! One handler per kind of [`Effect`](crate::run::step::Effect): a plain async function over a
//! [`RunContext`] (what the run runs with), the [`RunState`](crate::run::state::RunState) and
//! an [`EventSink`] (where the events it makes go). The driver's loop is step → handle →
//! yield; the external-engine API calls the same handlers.
//!
//! - [`model`]: a model request (context engine, hooks, telemetry) → the step's next input.
//! - [`tools`]: a tool batch — keys, journaled starts, the registry's calls and the team's,
//!   answers shaped and recorded ([`observer`]).
//! - [`approval`]: approvals asked now, or refused when the run cannot wait.
//! - [`journal`]: what the run records before each effect.
//! - [`deferred`]: deferred tools — what is offered, and the calls the run answers itself.
//! - [`seat`]: the agent the run is with (a team's run), and a handoff's switch.
//! - [`finish`]: the end of a run (output guardrails, the last record).

pub(crate) mod approval;
pub(crate) mod deferred;
pub(crate) mod finish;
pub(crate) mod journal;
pub(crate) mod live;
pub(crate) mod model;
pub(crate) mod observer;
pub(crate) mod seat;
pub(crate) mod sink;
pub(crate) mod start;
pub(crate) mod team_calls;
pub(crate) mod tools;

pub(crate) use seat::RunContext;
pub(crate) use sink::EventSink;
