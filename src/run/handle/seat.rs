//! [`RunContext`]: what a run runs with — the cycle's model and configuration, the tools, the
//! journal — and, in a team's run, the agent it is with now (its model, instructions and tools),
//! which a handoff switches before the next request.

use std::borrow::Cow;
use std::sync::Arc;

use crate::llm::model::ChatModel;
use crate::run::config::CycleConfig;
use crate::run::event::StreamEvent;
use crate::run::handle::deferred;
use crate::run::handle::start::TeamRun;
use crate::run::journal::RunJournal;
use crate::run::model_turn::Mode;
use crate::run::state::RunState;
use crate::run::step::relaxed_tool_choice;
use crate::run::telemetry::{self, Server};
use crate::team::tools as team_tools;
use crate::team::{Agent, AgentCell, Team, agent_registry, handoff_filter};
use crate::tools::registry::ToolRegistry;
use crate::vocab::{OpenaiChatMessage, RequestOptions, ToolDefinition};

/// What every handler of one run reads.
pub(crate) struct RunContext<'r> {
    /// The conversation's model and configuration (an agent without its own runs with them).
    pub cycle_model: &'r Arc<dyn ChatModel>,
    pub base_config: &'r CycleConfig,
    /// The run's tools (a team's run always has a registry: its agents are tools).
    pub registry: Option<&'r ToolRegistry>,
    /// Where progress is recorded before each effect.
    pub journal: Option<&'r dyn RunJournal>,
    /// Whether a deferred approval suspends the run (else it refuses the call).
    pub suspend: bool,
    pub mode: Mode,
    /// A typed run's final-answer tool (see [`RunState::output_tool`]).
    pub output_tool: Option<ToolDefinition>,
    pub team: Option<TeamRun<'r>>,
    /// The agent path everything the run polls sees (see `team::scope`).
    pub agent_cell: AgentCell,
    /// The run's `invoke_agent` span.
    pub agent_span: tracing::Span,
    /// The agent the run is with now; the rest of the fields are its seat.
    pub agent: Option<&'r Agent>,
    pub model: &'r dyn ChatModel,
    pub model_arc: Arc<dyn ChatModel>,
    pub config: &'r CycleConfig,
    /// The run's tools narrowed to the agent's list.
    pub narrowed: Option<ToolRegistry>,
    /// What the model is offered, built once per seat (a registry's schemas can be large).
    pub tools: Cow<'r, [ToolDefinition]>,
    /// The configuration's options with only the hosted tools the gates let through, when
    /// the gates took some away (`tools::hosted`).
    pub gated: Option<RequestOptions>,
    /// The options with the tool choice relaxed, for a request that asks for it.
    pub relaxed: Option<RequestOptions>,
    pub server: Option<Server>,
    /// How many of the run's loaded (deferred, found by a search) tools `tools` offers: a
    /// search that loads more makes the next request rebuild it.
    pub offered_loaded: usize,
}

impl<'r> RunContext<'r> {
    /// The context of an external engine's request or call: the conversation's model and
    /// configuration, the tools the engine offers, no journal (the engine keeps its own), no
    /// team, blocking requests, and calls that wait are left unanswered (the engine asks).
    pub(crate) fn external(
        model: &'r Arc<dyn ChatModel>,
        config: &'r CycleConfig,
        tools: &'r [ToolDefinition],
    ) -> Self {
        RunContext {
            cycle_model: model,
            base_config: config,
            registry: None,
            journal: None,
            suspend: true,
            mode: Mode::Blocking,
            output_tool: None,
            team: None,
            agent_cell: AgentCell::default(),
            agent_span: tracing::Span::none(),
            agent: None,
            model: &**model,
            model_arc: Arc::clone(model),
            config,
            narrowed: None,
            tools: Cow::Borrowed(tools),
            gated: None,
            relaxed: relaxed_tool_choice(&config.options),
            server: telemetry::server_of(&**model),
            offered_loaded: 0,
        }
    }

    /// The options of the next request (before relaxing the tool choice).
    pub(crate) fn options(&self) -> &RequestOptions {
        self.gated.as_ref().unwrap_or(&self.config.options)
    }

    /// The configuration's options narrowed to the hosted tools the agent's tools' gates let
    /// through; `None` when nothing is taken away (or the run has no tools to gate with).
    fn gated_options(&self) -> Option<RequestOptions> {
        let asked = &self.config.options.hosted_tools;
        let registry = self.tools().filter(|_| !asked.is_empty())?;
        let offered =
            registry.offered_hosted_tools(asked, self.model.provider(), &self.config.model);
        (offered.len() != asked.len()).then(|| RequestOptions {
            hosted_tools: offered,
            ..self.config.options.clone()
        })
    }

    /// The tools the agent runs with now.
    pub(crate) fn tools(&self) -> Option<&ToolRegistry> {
        self.narrowed.as_ref().or(self.registry)
    }

    /// The team the run is in, if any.
    pub(crate) fn team(&self) -> Option<&'r Team> {
        self.team.as_ref().map(|team| team.team)
    }

    /// `name`'s path in the team's tree (`parent/name`; the root's agents: `name`).
    pub(crate) fn path_of(&self, name: &str) -> String {
        match self
            .team
            .as_ref()
            .and_then(|team| team.parent_path.as_deref())
        {
            Some(parent) => format!("{parent}/{name}"),
            None => name.to_owned(),
        }
    }

    /// Seat `agent` (or, for `None`, the cycle itself): its model, configuration, tools and
    /// instructions from the next request on.
    pub(crate) fn seat(&mut self, agent: Option<&'r Agent>, state: &mut RunState) {
        self.agent = agent;
        self.model = &**self.cycle_model;
        self.model_arc = Arc::clone(self.cycle_model);
        self.config = self.base_config;
        if let Some(agent) = agent {
            if let Some((model, config)) = agent.model() {
                self.model = &**model;
                self.model_arc = Arc::clone(model);
                self.config = config;
            }
            let path = self.path_of(agent.name());
            self.narrowed = self
                .registry
                .and_then(|registry| agent_registry(registry, agent, &path));
            set_system_prompt(state, agent.instructions());
            *self.agent_cell.lock().unwrap_or_else(|p| p.into_inner()) = Some(Arc::from(path));
        }
        self.offer(state);
        self.gated = self.gated_options();
        self.relaxed = relaxed_tool_choice(self.options());
        self.server = telemetry::server_of(self.model);
    }

    /// Apply a handoff to agent `to` made in the last tool turn: the state's agent, the
    /// history as the new agent sees it, and its seat; the event that says so.
    pub(crate) fn hand_off(&mut self, state: &mut RunState, to: &str) -> Option<StreamEvent> {
        let next = self.team()?.agent(to)?;
        let from = state.agent.clone().unwrap_or_default();
        state.agent = Some(to.to_owned());
        if state.committed == state.messages.len() {
            let history = std::mem::take(&mut state.messages);
            state.messages = handoff_filter(history, next.handoff_history());
            state.committed = state.messages.len();
        }
        self.seat(Some(next), state);
        Some(StreamEvent::Handoff {
            from: self.path_of(&from),
            to: self.path_of(to),
        })
    }

    /// Build what the model is offered again when a search loaded tools since it was built.
    pub(crate) fn reoffer(&mut self, state: &RunState) {
        if state.loaded_tools.len() != self.offered_loaded {
            self.offer(state);
        }
    }

    /// Build what the model is offered (once per seat, and when a search loads tools).
    fn offer(&mut self, state: &RunState) {
        self.tools = Cow::Owned(self.offered_tools(&state.loaded_tools));
        self.offered_loaded = state.loaded_tools.len();
    }

    /// What the model is offered: the agent's tools (the deferred ones once a search `loaded`
    /// them), its sub-agents and handoffs, and a typed run's final-answer tool.
    fn offered_tools(&self, loaded: &[String]) -> Vec<ToolDefinition> {
        let mut tools = match self.tools() {
            Some(registry) => deferred::offered(self.model, registry, &self.config.model, loaded),
            None => Vec::new(),
        };
        if let (Some(agent), Some(team)) = (self.agent, self.team()) {
            let agents = agent.agents().iter().filter_map(|name| team.agent(name));
            tools.extend(agents.map(team_tools::agent_tool));
            let handoffs = agent.handoffs().iter().filter_map(|name| team.agent(name));
            tools.extend(handoffs.map(team_tools::transfer_tool));
        }
        tools.extend(self.output_tool.clone());
        tools
    }
}

/// Replace (or set) the history's system prompt with an agent's instructions; none: keep it.
fn set_system_prompt(state: &mut RunState, instructions: &str) {
    if instructions.is_empty() {
        return;
    }
    let message = OpenaiChatMessage::system(instructions);
    match state.messages.first_mut() {
        Some(first @ OpenaiChatMessage::System { .. }) => *first = message,
        _ => {
            state.messages.insert(0, message);
            state.committed = state.committed.saturating_add(1);
        }
    }
}
