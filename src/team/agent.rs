//! [`Agent`]: one member of a [`crate::team::Team`] — its instructions, tools, model, the
//! agents it may call and hand off to, and its limits.

use std::sync::Arc;

use serde_json::Value;

use crate::llm::model::ChatModel;
use crate::run::config::CycleConfig;
use crate::run::output_schema::{OutputSchema, SavedSchema};
use crate::run::usage::UsageLimits;
use crate::team::guardrail::Guardrail;
use crate::tools::profile::ProfileEntry;

/// What a sub-agent sees of its parent's history besides its task.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ParentHistory {
    /// Nothing: the task is the child's only user message (the default).
    #[default]
    None,
    /// The parent's last `n` user and assistant text messages (tool calls and results left
    /// out), before the task.
    Last(usize),
}

/// What an agent sees of the conversation when it receives a handoff.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum HandoffHistory {
    /// Everything (the default).
    #[default]
    Full,
    /// The user and assistant text of earlier turns, without tool calls and results; the
    /// turn that handed off is kept whole.
    NoToolCalls,
    /// Only the last user message and the turn that handed off.
    LastUserMessage,
}

/// One agent of a team.
///
/// ```
/// use agcore::team::Agent;
///
/// let researcher = Agent::new("researcher")
///     .with_description("Finds facts in the workspace and cites the file.")
///     .with_instructions("You are a careful researcher. Answer with the file you read.")
///     .with_tools(vec!["read_file".parse()?, "kind:search".parse()?])
///     .with_max_turns(6);
/// assert_eq!(researcher.name(), "researcher");
/// # Ok::<(), agcore::tools::profile::InvalidProfileEntry>(())
/// ```
#[derive(Clone)]
pub struct Agent {
    name: String,
    description: String,
    instructions: String,
    tools: Option<Vec<ProfileEntry>>,
    agents: Vec<String>,
    handoffs: Vec<String>,
    max_turns: Option<u32>,
    usage_limits: UsageLimits,
    model: Option<(Arc<dyn ChatModel>, CycleConfig)>,
    output: Option<SavedSchema>,
    input_schema: Option<Value>,
    parent_history: ParentHistory,
    handoff_history: HandoffHistory,
    input_guardrails: Vec<Arc<dyn Guardrail>>,
    output_guardrails: Vec<Arc<dyn Guardrail>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent")
            .field("name", &self.name)
            .field("tools", &self.tools)
            .field("agents", &self.agents)
            .field("handoffs", &self.handoffs)
            .field("max_turns", &self.max_turns)
            .field("own_model", &self.model.as_ref().map(|(_, c)| &c.model))
            .finish_non_exhaustive()
    }
}

impl Agent {
    /// An agent named `name` (its tool name when offered to a parent: letters, digits, `_`
    /// and `-`), with the run's tools and model and no instructions.
    pub fn new(name: impl Into<String>) -> Self {
        Agent {
            name: name.into(),
            description: String::new(),
            instructions: String::new(),
            tools: None,
            agents: Vec::new(),
            handoffs: Vec::new(),
            max_turns: None,
            usage_limits: UsageLimits::default(),
            model: None,
            output: None,
            input_schema: None,
            parent_history: ParentHistory::None,
            handoff_history: HandoffHistory::Full,
            input_guardrails: Vec::new(),
            output_guardrails: Vec::new(),
        }
    }

    /// What the agent does: the description of its tool (as a sub-agent) and of its
    /// `transfer_to_` tool (as a handoff).
    pub fn with_description(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// Its system prompt, already rendered.
    pub fn with_instructions(mut self, instructions: impl Into<String>) -> Self {
        self.instructions = instructions.into();
        self
    }

    /// The tools it may use, as profile entries over the run's tools (`read_file`,
    /// `kind:read`, `mcp:github`, ...). Without: every tool of the run. Either way every gate
    /// of the run (permissions, rules, approvals, restricted mode) still applies.
    pub fn with_tools(mut self, tools: Vec<ProfileEntry>) -> Self {
        self.tools = Some(tools);
        self
    }

    /// The agents it may call as tools (each named like the agent, arguments
    /// `{"task": string}` unless the agent has an input schema).
    pub fn with_agents(mut self, agents: Vec<String>) -> Self {
        self.agents = agents;
        self
    }

    /// The agents it may hand the conversation to (offered as `transfer_to_<agent>`).
    pub fn with_handoffs(mut self, handoffs: Vec<String>) -> Self {
        self.handoffs = handoffs;
        self
    }

    /// Model requests it may make in one run (as a sub-agent: per call).
    pub fn with_max_turns(mut self, max_turns: u32) -> Self {
        self.max_turns = Some(max_turns);
        self
    }

    /// What one call of it (as a sub-agent) may spend; its parent's remaining budget bounds
    /// it too.
    pub fn with_usage_limits(mut self, limits: UsageLimits) -> Self {
        self.usage_limits = limits;
        self
    }

    /// Its own model and configuration (model name, request options); without, its parent's.
    pub fn with_model(mut self, model: Arc<dyn ChatModel>, config: CycleConfig) -> Self {
        self.model = Some((model, config));
        self
    }

    /// A typed final answer: as a sub-agent, its answer is checked against `schema` and its
    /// parent reads it as JSON.
    pub fn with_output_schema(mut self, schema: OutputSchema) -> Self {
        self.output = Some(schema.saved());
        self
    }

    /// The JSON Schema of its arguments as a sub-agent, instead of `{"task": string}`; the
    /// arguments, as JSON text, are then its task.
    pub fn with_input_schema(mut self, schema: Value) -> Self {
        self.input_schema = Some(schema);
        self
    }

    /// What it sees of its parent's history when called as a sub-agent.
    pub fn with_parent_history(mut self, history: ParentHistory) -> Self {
        self.parent_history = history;
        self
    }

    /// What it sees of the conversation when it receives a handoff.
    pub fn with_handoff_history(mut self, history: HandoffHistory) -> Self {
        self.handoff_history = history;
        self
    }

    /// A check of its input (the prompt, or its task) before its model sees it.
    pub fn with_input_guardrail(mut self, guardrail: Arc<dyn Guardrail>) -> Self {
        self.input_guardrails.push(guardrail);
        self
    }

    /// A check of its final answer before its caller sees it.
    pub fn with_output_guardrail(mut self, guardrail: Arc<dyn Guardrail>) -> Self {
        self.output_guardrails.push(guardrail);
        self
    }

    /// Its name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its description.
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Its instructions (system prompt).
    pub fn instructions(&self) -> &str {
        &self.instructions
    }

    /// Its tool list (`None`: every tool of the run).
    pub fn tools(&self) -> Option<&[ProfileEntry]> {
        self.tools.as_deref()
    }

    /// The agents it may call.
    pub fn agents(&self) -> &[String] {
        &self.agents
    }

    /// The agents it may hand off to.
    pub fn handoffs(&self) -> &[String] {
        &self.handoffs
    }

    /// Its turn limit, if set.
    pub fn max_turns(&self) -> Option<u32> {
        self.max_turns
    }

    /// Its usage limits.
    pub fn usage_limits(&self) -> &UsageLimits {
        &self.usage_limits
    }

    /// Its own model and configuration, if set.
    pub fn model(&self) -> Option<&(Arc<dyn ChatModel>, CycleConfig)> {
        self.model.as_ref()
    }

    /// Its output schema, if typed.
    pub fn output_schema(&self) -> Option<&SavedSchema> {
        self.output.as_ref()
    }

    /// Its input schema, if set.
    pub fn input_schema(&self) -> Option<&Value> {
        self.input_schema.as_ref()
    }

    /// What it sees of its parent's history as a sub-agent.
    pub fn parent_history(&self) -> ParentHistory {
        self.parent_history
    }

    /// What it sees on a handoff.
    pub fn handoff_history(&self) -> HandoffHistory {
        self.handoff_history
    }

    /// Its input guardrails.
    pub fn input_guardrails(&self) -> &[Arc<dyn Guardrail>] {
        &self.input_guardrails
    }

    /// Its output guardrails.
    pub fn output_guardrails(&self) -> &[Arc<dyn Guardrail>] {
        &self.output_guardrails
    }
}
