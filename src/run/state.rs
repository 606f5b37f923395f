//! [`RunState`]: one run of the tool loop as data — serialisable, versioned, and the only
//! place a run's progress lives.
//!
//! # Format (version 2)
//!
//! `serde_json::to_value(&state)` gives an object:
//!
//! | field | meaning |
//! |---|---|
//! | `version` | [`RUN_STATE_VERSION`]; version 1 (the same fields, no `artifacts` on messages) loads as 2; any other version is an error naming both |
//! | `messages` | the history, oldest first; only completed turns, plus the pending prompt |
//! | `committed` | how many of `messages` are committed: a failure keeps exactly these |
//! | `phase` | where the run is: `{"phase": "need_model"}`, `model_replied` (`reply`), `awaiting_tools` (`turn`), `awaiting_approval` (`turn`, `requests`), `finished` (`reply`), `failed` (`error`) |
//! | `turns` | model requests made so far by this run |
//! | `rules` | the limits the run was started with ([`RunRules`]; `usage_limits` and `prices` absent when unset) |
//! | `tools_offered` | whether the run has tools (tool calls run) or not (they are answered as not run) |
//! | `tool_choice_relaxed` | whether a forced `tool_choice` has been relaxed to `auto` (after the first request) |
//! | `repeats` | the repeated-call guard's streaks: `[{"tool", "arguments", "streak"}]` |
//! | `usage` | the usage summed over the run's requests, or `null` |
//! | `output_tool` | the final-answer tool's name (typed output, tool mode); absent when none |
//! | `tool_calls` | tool calls run so far by this run (absent when none) |
//! | `typed` | a typed run's output: `{"schema": {"name", "schema", ...}, "mode", "tool", "max_retries", "attempt"}`; absent when the run is not typed |
//! | `loaded_tools` | the deferred tools this run's `tool_search` calls loaded, in the order found ([`crate::tools::deferred`]); absent when none |
//! | `run_id` | the run's random id, given at its first tool turn (absent before): part of its calls' [idempotency keys](crate::run::idempotency) |
//!
//! A call of a tool turn (`turn.calls[]`) is `{"call", "started", "answer"}`, with `approved`,
//! `approved_for`, `media` and `idempotency_key` (see [`crate::run::idempotency`]) when set.
//!
//! A call of a tool turn may carry a `continuation` (absent when none): what its tool recorded
//! to be continued from (e.g. `{"mcp": "task", "server", "tool", "task_id"}`).
//!
//! Messages are [`OpenaiChatMessage`]s in their serde form; a failed tool message carries
//! `"is_error": true` (never sent to the model). Since version 2 an assistant message may carry
//! `artifacts` (continuation state of its API, kept verbatim: see [`crate::vocab::artifact`]);
//! a library of version 1 refuses such a state by its version rather than drop them unseen.

use serde::de::{self, Deserializer};
use serde::{Deserialize, Serialize};

use crate::run::config::{CycleConfig, RepeatedCallGuard};
use crate::run::output_schema::TypedRun;
use crate::run::usage::{Prices, UsageLimits};
use crate::tools::approval::{ApprovalDecision, ApprovalRequest};
use crate::tools::call_digest::CallDigest;
use crate::vocab::{ChatResponse, OpenaiChatMessage, ToolAnswer, ToolCall, Usage};

/// The version of the [`RunState`] format this library writes (and the newest it reads).
/// Version 2 added continuation `artifacts` to assistant messages; a version-1 state (which
/// has none) loads as version 2.
pub const RUN_STATE_VERSION: u32 = 2;

/// The oldest [`RunState`] version this library reads.
const OLDEST_RUN_STATE_VERSION: u32 = 1;

/// One run of the tool loop, between two steps (see [`crate::run::step`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunState {
    /// The format version, [`RUN_STATE_VERSION`].
    #[serde(deserialize_with = "known_version")]
    pub version: u32,
    /// The history, oldest first: completed turns, then (until the first turn completes) the
    /// prompt of this run.
    pub messages: Vec<OpenaiChatMessage>,
    /// How many of `messages` are committed; a failure or cancellation keeps only these.
    pub committed: usize,
    /// Where the run is.
    pub phase: Phase,
    /// Model requests made so far by this run.
    pub turns: u32,
    /// The limits the run was started with.
    pub rules: RunRules,
    /// Whether tool calls run (the run has tools) or are answered as not run.
    pub tools_offered: bool,
    /// Whether a forced `tool_choice` now goes out as `auto`: forced on every turn, the model
    /// could never give its final answer.
    pub tool_choice_relaxed: bool,
    /// The repeated-call guard's memory of the last tool turn.
    pub repeats: Vec<RepeatStreak>,
    /// Usage summed over this run's requests.
    pub usage: Option<Usage>,
    /// The final-answer tool of a typed run (tool mode): a call to it is answered by the run
    /// itself, and the run ends after the turn that called it. `None`: no such tool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tool: Option<String>,
    /// Tool calls run so far by this run (see [`crate::run::RunUsage::tool_calls`]).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub tool_calls: u32,
    /// Requests sent beyond one per turn: the attempts of retried requests and the context
    /// engine's own (summaries). They count in [`crate::run::RunUsage::requests`], budgets and
    /// cost like any request — the spend is real — but not in `max_turns`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub extra_requests: u32,
    /// A typed run's schema and mode: a run resumed from this state is still typed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub typed: Option<TypedRun>,
    /// A team's run: the agent the run is with (its name; a handoff changes it). Absent for a
    /// run without a team.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<String>,
    /// The run's id, random, given at its first tool turn and kept across suspensions and
    /// resumptions: its calls' idempotency keys derive from it ([`crate::run::idempotency`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// The deferred tools this run's `tool_search` calls loaded, in the order they were found:
    /// offered from the request after the search on, kept through suspension, resumption and
    /// compaction ([`crate::tools::deferred`]). A new run starts with those its history's
    /// search answers loaded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub loaded_tools: Vec<String>,
}

/// Where a run is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "phase", rename_all = "snake_case")]
pub enum Phase {
    /// The next effect is a model request (or, on start, the calls left unanswered).
    NeedModel,
    /// The model replied; the reply's rules are applied by the next step.
    ModelReplied {
        /// The reply.
        reply: ChatResponse,
    },
    /// A tool turn in progress: its calls run.
    AwaitingTools {
        /// The turn.
        turn: ToolTurn,
    },
    /// A tool turn waiting for decisions on some calls (the approver deferred them): the run
    /// is suspended. The other calls of the turn have their answers already.
    AwaitingApproval {
        /// The turn.
        turn: ToolTurn,
        /// What the approver was asked for each call that waits for a decision.
        requests: Vec<ApprovalRequest>,
    },
    /// The run ended with the model's final answer (committed to `messages`).
    Finished {
        /// The final reply, usage summed over the run.
        reply: ChatResponse,
    },
    /// The run failed; `messages` holds only committed turns.
    Failed {
        /// What went wrong, as text.
        error: String,
    },
}

/// A tool turn: the assistant message that called tools and one slot per call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolTurn {
    /// The assistant message with the calls (`None`: it is already in `messages`, a turn
    /// resumed from a history that ended with unanswered calls).
    pub assistant: Option<OpenaiChatMessage>,
    /// The calls, in call order.
    pub calls: Vec<TurnCall>,
}

/// One call of a tool turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnCall {
    /// The call as the model sent it (id and arguments normalised).
    pub call: ToolCall,
    /// Whether its tool started (from then on it may have had effects).
    pub started: bool,
    /// Its answer, once known.
    pub answer: Option<ToolAnswer>,
    /// Whether a decision given while the run was suspended allowed it (it then runs without
    /// asking the approver again).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub approved: bool,
    /// The call the decision was given for (its tool and arguments as shown): the call runs
    /// only while it is still that call. `None` in states of earlier versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub approved_for: Option<CallDigest>,
    /// The media its output carried, as a user message to follow the turn's tool messages
    /// (only when the model accepts images).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<OpenaiChatMessage>,
    /// A call of a sub-agent (a team's agent offered as a tool) that did not finish: the
    /// child's run as last recorded, to continue instead of starting it again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<Box<ChildRun>>,
    /// How the call goes on if it is run again, as its tool recorded it while it ran (an MCP
    /// task's id, a multi-round-trip request's state; see [`crate::run::JournalEntry::CallContinues`]).
    /// A restored call that started with a continuation is continued, not answered as
    /// interrupted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub continuation: Option<serde_json::Value>,
    /// The call's idempotency key, given before its tool first starts and the same on every
    /// retry and resumption ([`crate::run::idempotency`]). `None` until then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
}

/// The run of a sub-agent inside a call of its parent (see [`TurnCall::child`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildRun {
    /// The sub-agent's name.
    pub agent: String,
    /// The child's history as last recorded (when `run` is absent, or holds no messages).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub messages: Vec<OpenaiChatMessage>,
    /// The child's run in progress: a tool turn, or suspended for approvals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<RunState>,
    /// Decisions given while the whole run was suspended, on the child's pending calls: the
    /// child continues with them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<ChildDecision>,
}

/// A decision on a call inside a sub-agent, kept until the child continues.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChildDecision {
    /// The child's call id.
    pub call_id: String,
    /// The decision.
    pub answer: ApprovalDecision,
    /// The digest of the request it was given for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<CallDigest>,
}

impl ChildRun {
    /// The approvals the child (or a child of it) waits for.
    pub fn pending_approvals(&self) -> &[ApprovalRequest] {
        self.run.as_ref().map_or(&[], |run| run.pending_approvals())
    }
}

/// The limits a run applies, taken from [`CycleConfig`] when it starts.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RunRules {
    /// Model requests allowed in the run.
    pub max_turns: u32,
    /// Bytes of a tool's output the model reads (longer outputs are cut in the middle).
    pub tool_output_limit: usize,
    /// The repeated-call guard.
    pub repeated_call_guard: RepeatedCallGuard,
    /// Whether tool media reach the model ([`CycleConfig::accepts_images`]).
    #[serde(default)]
    pub accepts_images: bool,
    /// The most the run may spend.
    #[serde(default, skip_serializing_if = "UsageLimits::is_none")]
    pub usage_limits: UsageLimits,
    /// What the model's tokens cost (for `usage_limits.max_cost`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prices: Option<Prices>,
}

impl RunRules {
    /// The rules of `config`.
    pub fn of(config: &CycleConfig) -> Self {
        RunRules {
            max_turns: config.effective_max_turns(),
            tool_output_limit: config.tool_output_limit,
            repeated_call_guard: config.repeated_call_guard,
            accepts_images: config.accepts_images,
            usage_limits: config.usage_limits,
            prices: config.prices,
        }
    }
}

/// A call (tool and canonical arguments) and in how many consecutive tool turns it came.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepeatStreak {
    /// The tool name.
    pub tool: String,
    /// The arguments, canonical JSON text.
    pub arguments: String,
    /// Consecutive turns with this call.
    pub streak: u32,
}

impl RunState {
    /// A run over `messages` (a conversation's history, all committed), with `rules`; tool
    /// calls run when `tools_offered`. Its first step takes [`crate::run::Input::Start`].
    pub fn new(messages: Vec<OpenaiChatMessage>, rules: RunRules, tools_offered: bool) -> Self {
        RunState {
            version: RUN_STATE_VERSION,
            loaded_tools: crate::tools::tool_search::loaded_in_history(&messages),
            committed: messages.len(),
            messages,
            phase: Phase::NeedModel,
            turns: 0,
            rules,
            tools_offered,
            tool_choice_relaxed: false,
            repeats: Vec::new(),
            usage: None,
            output_tool: None,
            tool_calls: 0,
            extra_requests: 0,
            typed: None,
            agent: None,
            run_id: None,
        }
    }

    /// This state without its history (`messages` empty, the rest cloned): what a journal
    /// stores at each step, next to the history it already holds.
    pub fn without_messages(&self) -> RunState {
        RunState {
            version: self.version,
            messages: Vec::new(),
            committed: self.committed,
            phase: self.phase.clone(),
            turns: self.turns,
            rules: self.rules,
            tools_offered: self.tools_offered,
            tool_choice_relaxed: self.tool_choice_relaxed,
            repeats: self.repeats.clone(),
            usage: self.usage,
            output_tool: self.output_tool.clone(),
            tool_calls: self.tool_calls,
            extra_requests: self.extra_requests,
            typed: self.typed.clone(),
            agent: self.agent.clone(),
            run_id: self.run_id.clone(),
            loaded_tools: self.loaded_tools.clone(),
        }
    }

    /// The approvals a suspended run waits for (empty unless the phase is `AwaitingApproval`).
    pub fn pending_approvals(&self) -> &[ApprovalRequest] {
        match &self.phase {
            Phase::AwaitingApproval { requests, .. } => requests,
            _ => &[],
        }
    }

    /// The path of the agent whose call `call_id` waits for approval, e.g. `main/researcher`
    /// (`root`: the name of the agent the run started with); `None` when no pending call has
    /// that id, the run's own pending calls answer `root`.
    pub fn agent_of(&self, call_id: &str, root: &str) -> Option<String> {
        if !self
            .pending_approvals()
            .iter()
            .any(|r| r.call_id == call_id)
        {
            return None;
        }
        let own = self.agent.as_deref().unwrap_or(root).to_owned();
        let Phase::AwaitingApproval { turn, .. } = &self.phase else {
            return Some(own);
        };
        for call in &turn.calls {
            if let Some(child) = &call.child
                && let Some(run) = &child.run
                && let Some(inner) = run.agent_of(call_id, &child.agent)
            {
                return Some(format!("{own}/{inner}"));
            }
        }
        Some(own)
    }

    /// Record that the call with `call_id` of the current tool turn started (a journal
    /// replaying its entries).
    pub fn mark_started_id(&mut self, call_id: &str) {
        if let Some(call) = self.call_mut(call_id) {
            call.started = true;
        }
    }

    /// Record the answer of the call with `call_id` of the current tool turn, as it is (a
    /// journal replaying its entries: the answer was cut to the limit when it was recorded).
    pub fn record_answer_id(&mut self, call_id: &str, answer: ToolAnswer) {
        if let Some(call) = self.call_mut(call_id) {
            call.answer = Some(answer);
        }
    }

    /// Record the media message of the call with `call_id` of the current tool turn (a journal
    /// replaying its entries).
    pub fn record_media_id(&mut self, call_id: &str, message: OpenaiChatMessage) {
        if let Some(call) = self.call_mut(call_id) {
            call.media = Some(message);
        }
    }

    /// Record the continuation of the call with `call_id` of the current tool turn (a journal
    /// replaying its entries).
    pub fn record_continuation_id(&mut self, call_id: &str, continuation: serde_json::Value) {
        if let Some(call) = self.call_mut(call_id) {
            call.continuation = Some(continuation);
        }
    }

    /// Set the answer of the call at `position`, already cut to the limit.
    pub(crate) fn set_answer(&mut self, position: usize, answer: ToolAnswer) {
        if let Some(call) = self
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position))
        {
            call.answer = Some(answer);
        }
    }

    pub(crate) fn call_mut(&mut self, call_id: &str) -> Option<&mut TurnCall> {
        self.turn_mut()?
            .calls
            .iter_mut()
            .find(|call| call.call.id == call_id)
    }

    /// The committed history, what survives a failure or cancellation.
    pub fn committed_messages(&self) -> &[OpenaiChatMessage] {
        &self.messages[..self.committed.min(self.messages.len())]
    }

    /// The tool turn in progress, if any.
    pub fn turn_mut(&mut self) -> Option<&mut ToolTurn> {
        match &mut self.phase {
            Phase::AwaitingTools { turn } | Phase::AwaitingApproval { turn, .. } => Some(turn),
            _ => None,
        }
    }

    /// Record that the call at `position` of the current tool turn started.
    pub fn mark_started(&mut self, position: usize) {
        if let Some(call) = self
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position))
        {
            call.started = true;
        }
    }

    /// Record the answer of the call at `position` of the current tool turn (cut to the
    /// rules' output limit).
    pub fn record_answer(&mut self, position: usize, answer: ToolAnswer) {
        let limit = self.rules.tool_output_limit;
        if let Some(call) = self
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position))
        {
            call.answer = Some(crate::vocab::truncate_answer(answer, limit));
        }
    }

    /// Record the media message of the call at `position` (sent after the turn's tool
    /// messages).
    pub fn record_media(&mut self, position: usize, message: OpenaiChatMessage) {
        if let Some(call) = self
            .turn_mut()
            .and_then(|turn| turn.calls.get_mut(position))
        {
            call.media = Some(message);
        }
    }
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn known_version<'de, D: Deserializer<'de>>(deserializer: D) -> Result<u32, D::Error> {
    let version = u32::deserialize(deserializer)?;
    if (OLDEST_RUN_STATE_VERSION..=RUN_STATE_VERSION).contains(&version) {
        // An older state is a subset of this format: from now on it is written as this one.
        Ok(RUN_STATE_VERSION)
    } else {
        Err(de::Error::custom(format_args!(
            "run state version {version} is not supported: this library reads versions {OLDEST_RUN_STATE_VERSION} to {RUN_STATE_VERSION}"
        )))
    }
}
