//! [`RunRequest`] and [`Conversation::run_with`]: a run that can suspend for approvals, be continued
//! from its saved [`RunState`] (here or in another process), and record its progress in a
//! [`RunJournal`].
//!
//! ```no_run
//! # async fn demo(cycle: &mut agcore::Conversation, registry: &agcore::tools::ToolRegistry)
//! # -> Result<(), agcore::llm::LlmError> {
//! use agcore::run::{Decision, RunOutcome, RunRequest};
//! // The registry's approver answers `ApprovalDecision::Defer` (e.g. `DeferAll`).
//! match cycle.run_with(RunRequest::prompt("Deploy it").with_tools(registry)).await? {
//!     RunOutcome::Finished(reply) => println!("{}", reply.text()),
//!     RunOutcome::Suspended(suspension) => {
//!         // Store `suspension.state()` (it is serde), ask someone, then — any time later,
//!         // in any process — continue with the decisions:
//!         let decisions = suspension
//!             .requests()
//!             .iter()
//!             .map(|request| Decision::allow(&request.call_id))
//!             .collect();
//!         let state = suspension.into_state();
//!         let again = RunRequest::from_state(state).with_decisions(decisions);
//!         cycle.run_with(again.with_tools(registry)).await?;
//!     }
//! }
//! # Ok(()) }
//! ```

use std::pin::Pin;

use futures::{Stream, StreamExt};

use crate::run::conversation::Conversation;
use crate::run::driver::{Drive, LoopItem, Start, TeamRun};
use crate::run::error::LlmError;
use crate::run::event::StreamEvent;
use crate::run::journal::RunJournal;
use crate::run::model_turn::Mode;
use crate::run::output_schema::OutputSchema;
use crate::run::state::RunState;
use crate::run::step::Decision;
use crate::run::typed_output::TypedOutput;
use crate::team::Team;
use crate::tools::approval::ApprovalRequest;
use crate::tools::registry::ToolRegistry;
use crate::vocab::ChatResponse;

/// What to run: where it starts (a prompt, the cycle's history, or a saved run), with which
/// tools and journal. Deferred approvals suspend it ([`RunOutcome::Suspended`]).
pub struct RunRequest<'a> {
    start: RequestStart,
    decisions: Vec<Decision>,
    tools: Option<&'a ToolRegistry>,
    journal: Option<&'a dyn RunJournal>,
    /// A typed run's schema and options ([`RunRequest::with_output_schema`]).
    output: Option<(OutputSchema, TypedOutput)>,
    /// A team and the agent to start with ([`RunRequest::with_team`]).
    team: Option<(&'a Team, String)>,
}

enum RequestStart {
    Prompt(Option<String>),
    State(Box<RunState>),
}

impl std::fmt::Debug for RunRequest<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let start = match &self.start {
            RequestStart::Prompt(Some(_)) => "prompt",
            RequestStart::Prompt(None) => "continue",
            RequestStart::State(_) => "saved state",
        };
        f.debug_struct("RunRequest")
            .field("start", &start)
            .field("tools", &self.tools.map(ToolRegistry::len))
            .field("journal", &self.journal.is_some())
            .finish()
    }
}

impl<'a> RunRequest<'a> {
    /// A run of `prompt` over the cycle's history.
    pub fn prompt(prompt: impl Into<String>) -> Self {
        Self::start(RequestStart::Prompt(Some(prompt.into())))
    }

    /// A run that continues the cycle's history without a new message (its unanswered tool
    /// calls run first), as [`Conversation::resume_with_tools`].
    pub fn resume() -> Self {
        Self::start(RequestStart::Prompt(None))
    }

    /// Continue a saved run: a [`Suspension`]'s state, or a state restored from a journal
    /// after a crash (a started, unfinished call is answered as interrupted unless its tool
    /// is [idempotent](crate::tools::BaseTool::idempotent); a finished one is not run again).
    /// The state's history replaces the cycle's.
    pub fn from_state(state: RunState) -> Self {
        Self::start(RequestStart::State(Box::new(state)))
    }

    /// Decisions on a suspended state's pending approvals (see [`RunRequest::from_state`]).
    /// A pending call without a decision is put to the registry's approver again; each
    /// decision must name a pending call ([`LlmError::NotPending`] otherwise).
    pub fn with_decisions(mut self, decisions: Vec<Decision>) -> Self {
        self.decisions = decisions;
        self
    }

    /// Run the registry's tools (without: tool calls are returned, not run).
    pub fn with_tools(mut self, registry: &'a ToolRegistry) -> Self {
        self.tools = Some(registry);
        self
    }

    /// Record progress in `journal` before each effect.
    pub fn with_journal(mut self, journal: &'a dyn RunJournal) -> Self {
        self.journal = Some(journal);
        self
    }

    /// Make it a typed run: the final answer must match `schema`, got into shape as `options`
    /// say. Run it with [`Conversation::run_typed_with`] or [`Conversation::run_typed_with_stream`]; the
    /// schema and mode are kept in the run's state ([`RunState::typed`]), so a suspended or
    /// interrupted typed run resumes typed from [`RunRequest::from_state`] alone.
    pub fn with_output_schema(mut self, schema: OutputSchema, options: &TypedOutput) -> Self {
        self.output = Some((schema, options.clone()));
        self
    }

    /// Run with a team (see [`crate::team`]): starting with agent `agent` — or, when the
    /// history's last handoff went to another agent of the team, with that one — whose
    /// instructions become the system prompt, whose tool list narrows the request's tools,
    /// and whose sub-agents and handoffs are offered as tools. Check the team first
    /// ([`Team::check`]); an agent the team does not have runs as a plain run.
    pub fn with_team(mut self, team: &'a Team, agent: impl Into<String>) -> Self {
        self.team = Some((team, agent.into()));
        self
    }

    fn start(start: RequestStart) -> Self {
        RunRequest {
            start,
            decisions: Vec::new(),
            tools: None,
            journal: None,
            output: None,
            team: None,
        }
    }

    /// The typed run's schema and options, if any, taken out of the request.
    pub(crate) fn take_output(&mut self) -> Option<(OutputSchema, TypedOutput)> {
        self.output.take()
    }

    /// The driver's view, after checking the decisions.
    pub(crate) fn into_drive(self, mode: Mode) -> Result<Drive<'a>, LlmError> {
        if self.output.is_some() {
            // Never dropped without a word: an untyped run of a typed request is a mistake.
            return Err(LlmError::Other(
                "the request has an output schema: run it with Conversation::run_typed_with"
                    .to_owned(),
            ));
        }
        let decisions = self.decisions;
        let start = match self.start {
            RequestStart::Prompt(prompt) => {
                if let Some(decision) = decisions.first() {
                    return Err(LlmError::NotPending {
                        call_id: decision.call_id.clone(),
                    });
                }
                Start::Prompt(prompt)
            }
            RequestStart::State(state) => {
                let pending = state.pending_approvals();
                if let Some(decision) = decisions
                    .iter()
                    .find(|d| !pending.iter().any(|r| r.call_id == d.call_id))
                {
                    return Err(LlmError::NotPending {
                        call_id: decision.call_id.clone(),
                    });
                }
                Start::State { state, decisions }
            }
        };
        Ok(Drive {
            start,
            registry: self.tools,
            journal: self.journal,
            suspend: true,
            mode,
            output_tool: None,
            typed: None,
            team: self.team.map(|(team, entry)| TeamRun {
                team,
                entry,
                parent_path: None,
                depth: 0,
                parent_span: None,
            }),
        })
    }
}

/// How a run that may suspend ended (failures are the `Err` of [`Conversation::run_with`]).
#[derive(Debug)]
// Returned once per run: the reply is not worth a box for the caller to unwrap.
#[allow(clippy::large_enum_variant)]
pub enum RunOutcome {
    /// The model's final answer (usage summed over the run).
    Finished(ChatResponse),
    /// The run waits for decisions on some calls.
    Suspended(Suspension),
}

/// A suspended run: its state (serialisable; everything needed to continue) and the calls
/// waiting for a decision. Continue with [`RunRequest::from_state`] +
/// [`RunRequest::with_decisions`]. Until then the cycle's history holds the committed turns
/// only: the suspended turn (whose other calls may have run) lives in the state.
#[derive(Debug, Clone, PartialEq)]
pub struct Suspension {
    state: Box<RunState>,
}

impl Suspension {
    pub(crate) fn new(state: Box<RunState>) -> Self {
        Suspension { state }
    }

    /// What each waiting call's approver was asked, in call order.
    pub fn requests(&self) -> &[ApprovalRequest] {
        self.state.pending_approvals()
    }

    /// The run's state.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The run's state, to store or to continue.
    pub fn into_state(self) -> RunState {
        *self.state
    }
}

/// What [`Conversation::run_with_stream`] yields: events as they happen, then exactly one of
/// `Finished`, `Suspended` or `Failed`.
#[derive(Debug)]
#[non_exhaustive]
pub enum RunItem {
    /// A streaming event (text deltas, tool calls starting and finishing, turns completing).
    Event(StreamEvent),
    /// The run finished with the model's final answer.
    Finished(ChatResponse),
    /// The run suspended.
    Suspended(Suspension),
    /// The run failed; the cycle keeps the committed turns.
    Failed(LlmError),
}

/// The stream of [`Conversation::run_with_stream`].
pub type RunStream<'a> = Pin<Box<dyn Stream<Item = RunItem> + Send + 'a>>;

impl Conversation {
    /// Run `request` until the model's final answer or a suspension.
    ///
    /// # Errors
    /// Every error of [`Conversation::run`]; [`LlmError::Journal`] when the journal could not
    /// record a step (the run stops before its next effect); [`LlmError::NotPending`] for a
    /// decision on a call that does not wait for one.
    pub async fn run_with(&mut self, request: RunRequest<'_>) -> Result<RunOutcome, LlmError> {
        let drive = request.into_drive(Mode::Blocking)?;
        let mut items = std::pin::pin!(crate::run::driver::drive(self, drive));
        while let Some(item) = items.next().await {
            match item {
                LoopItem::Event(_) => {}
                LoopItem::Done(reply) => return Ok(RunOutcome::Finished(*reply)),
                LoopItem::Suspended(state) => {
                    return Ok(RunOutcome::Suspended(Suspension { state }));
                }
                LoopItem::Failed(error) => return Err(error),
            }
        }
        Err(LlmError::Other("the run ended without a result".to_owned()))
    }

    /// Streaming form of [`Conversation::run_with`]: events, then the outcome as the last item.
    pub fn run_with_stream<'a>(&'a mut self, request: RunRequest<'a>) -> RunStream<'a> {
        let drive = match request.into_drive(Mode::Streaming) {
            Ok(drive) => drive,
            Err(error) => return Box::pin(futures::stream::iter([RunItem::Failed(error)])),
        };
        Box::pin(drive_items(self, drive))
    }
}

fn drive_items<'a>(
    cycle: &'a mut Conversation,
    drive: Drive<'a>,
) -> impl Stream<Item = RunItem> + Send + 'a {
    crate::run::driver::drive(cycle, drive).map(|item| match item {
        LoopItem::Event(event) => RunItem::Event(event),
        LoopItem::Done(reply) => RunItem::Finished(*reply),
        LoopItem::Suspended(state) => RunItem::Suspended(Suspension { state }),
        LoopItem::Failed(error) => RunItem::Failed(error),
    })
}
