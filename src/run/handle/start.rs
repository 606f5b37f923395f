//! Where a run starts: its first state and input (a new run over the history, or a saved one
//! continued with decisions), the agent it starts with, and the input guardrails.

use crate::run::config::CycleConfig;
use crate::run::continued;
use crate::run::error::LlmError;
use crate::run::handle::RunContext;
use crate::run::output_schema::TypedRun;
use crate::run::state::{RunRules, RunState};
use crate::run::step::{Decision, Input, rerun_idempotent};
use crate::team::{Agent, GuardrailStage, Team, check_guardrails, current_agent_in};
use crate::tools::approval::ApprovalRequest;
use crate::tools::registry::ToolRegistry;
use crate::vocab::{OpenaiChatMessage, ToolDefinition};

/// Where a run starts.
pub(crate) enum Start {
    /// A new run over the cycle's history: this prompt, or none (continue the history).
    Prompt(Option<String>),
    /// A saved run (suspended, or stopped mid-turn), with decisions on its pending approvals.
    State {
        state: Box<RunState>,
        decisions: Vec<Decision>,
    },
}

/// Where a run is in a team's tree of runs.
#[derive(Clone)]
pub(crate) struct TeamRun<'a> {
    pub team: &'a Team,
    /// The agent the run starts with, unless the state or the history's last handoff says
    /// another.
    pub entry: String,
    /// The path of the agent that called this run (`None`: the root run).
    pub parent_path: Option<String>,
    /// How deep in the tree this run is (the root: 0).
    pub depth: u32,
    /// The parent's `execute_tool` span of the call that runs this one.
    pub parent_span: Option<tracing::Span>,
}

/// What a run starts from, besides where ([`Start`]).
pub(crate) struct Opening<'r> {
    pub history: &'r mut Vec<OpenaiChatMessage>,
    pub registry: Option<&'r ToolRegistry>,
    pub team: Option<&'r TeamRun<'r>>,
    pub config: &'r CycleConfig,
    pub output_tool: Option<&'r ToolDefinition>,
    pub typed: Option<TypedRun>,
}

/// The run's first state and input.
pub(crate) async fn first_state(start: Start, opening: Opening<'_>) -> (RunState, Input) {
    let Opening {
        history,
        registry,
        team,
        config,
        output_tool,
        typed,
    } = opening;
    match start {
        Start::Prompt(prompt) => {
            let messages = std::mem::take(history);
            let mut state = RunState::new(messages, RunRules::of(config), registry.is_some());
            state.output_tool = output_tool.map(|tool| tool.name().to_owned());
            state.typed = typed;
            (state, Input::Start { prompt })
        }
        Start::State { state, decisions } => {
            let mut state = *state;
            if typed.is_some() {
                state.typed = typed;
            }
            if let Some(registry) = registry {
                let team_agent = team.and_then(|team| {
                    let name = state.agent.as_deref().unwrap_or(&team.entry);
                    team.team.agent(name)
                });
                // A sub-agent's call continues its child: it is safe to run again.
                rerun_idempotent(&mut state, |name| {
                    team_agent.is_some_and(|agent| agent.agents().iter().any(|a| a == name))
                        || registry.is_idempotent(name)
                });
                continued::rerun_continued(&mut state);
                remember_grants(registry, state.pending_approvals(), &decisions);
                continued::give_up_denied(&state, &decisions, registry).await;
            }
            // The saved run's history replaces the cycle's.
            history.clear();
            let input = if decisions.is_empty() {
                Input::Start { prompt: None }
            } else {
                Input::Decisions(decisions)
            };
            (state, input)
        }
    }
}

/// The agent the run is with: as saved, else where the history's last handoff went, else the
/// one the request names (and the state says so).
pub(crate) fn entry_agent<'t>(
    team: Option<&TeamRun<'t>>,
    state: &mut RunState,
) -> Option<&'t Agent> {
    let team = team?;
    let name = state
        .agent
        .clone()
        .or_else(|| current_agent_in(team.team, &team.entry, &state.messages))
        .unwrap_or_else(|| team.entry.clone());
    let agent = team.team.agent(&name);
    state.agent = Some(name);
    agent
}

/// The agent's input guardrails on a new prompt, before the model sees it: the error that
/// stops the run, if one trips.
pub(crate) async fn input_guardrails(cx: &RunContext<'_>, input: &Input) -> Option<LlmError> {
    let (
        Some(agent),
        Input::Start {
            prompt: Some(prompt),
        },
    ) = (cx.agent, input)
    else {
        return None;
    };
    check_guardrails(
        agent,
        &cx.path_of(agent.name()),
        GuardrailStage::Input,
        prompt,
    )
    .await
}

/// Remember the session-wide grants among `decisions` (on `pending`'s calls) in the registry.
fn remember_grants(registry: &ToolRegistry, pending: &[ApprovalRequest], decisions: &[Decision]) {
    for decision in decisions {
        if let Some(request) = pending.iter().find(|r| r.call_id == decision.call_id) {
            registry.remember_grant(request, &decision.answer);
        }
    }
}
