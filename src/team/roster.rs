//! [`Team`]: the agents a run may use, checked before it starts ([`Team::check`]) and
//! described for people ([`Team::report`]).

use std::collections::BTreeSet;

use indexmap::IndexMap;
use serde::Serialize;

use crate::team::agent::Agent;
use crate::team::error::TeamError;
use crate::team::tools::{TRANSFER_PREFIX, valid_agent_name};
use crate::tools::base::ToolSource;
use crate::tools::exposure::ToolExposure;
use crate::tools::profile::{Profile, ProfileEntry};
use crate::tools::registry::ToolRegistry;

/// The default depth limit: a sub-agent of a sub-agent of a sub-agent, no deeper.
pub const DEFAULT_MAX_DEPTH: u32 = 3;

/// The agents of a team, by name.
///
/// ```
/// use agcore::team::{Agent, Team};
/// use agcore::tools::ToolRegistry;
///
/// let team = Team::new()
///     .with_agent(Agent::new("researcher").with_description("Finds facts."))
///     .with_agent(Agent::new("main").with_agents(vec!["researcher".into()]));
/// team.check("main", &ToolRegistry::new())?;
/// assert!(Team::new().with_agent(Agent::new("main").with_agents(vec!["main".into()]))
///     .check("main", &ToolRegistry::new())
///     .is_err());
/// # Ok::<(), agcore::team::TeamError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Team {
    agents: IndexMap<String, Agent>,
    duplicates: Vec<String>,
    max_depth: u32,
}

impl Default for Team {
    fn default() -> Self {
        Team {
            agents: IndexMap::new(),
            duplicates: Vec::new(),
            max_depth: DEFAULT_MAX_DEPTH,
        }
    }
}

/// One agent as `agcore agents list` shows it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AgentReport {
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its tool list as written (`None`: every tool of the run).
    pub tool_entries: Option<Vec<String>>,
    /// Every tool of the run, offered to it or hidden with the gates' reasons.
    pub tools: Vec<ToolExposure>,
    /// The agents it may call as tools.
    pub agents: Vec<String>,
    /// The agents it may hand off to (offered as `transfer_to_<agent>`).
    pub handoffs: Vec<String>,
    /// Its turn limit, if set.
    pub max_turns: Option<u32>,
    /// Its own model, if set.
    pub model: Option<String>,
    /// Whether its answer is typed.
    pub typed: bool,
}

impl Team {
    /// An empty team (depth limit [`DEFAULT_MAX_DEPTH`]).
    pub fn new() -> Self {
        Self::default()
    }

    /// Add `agent` (a second agent of one name is reported by [`Team::check`]).
    pub fn with_agent(mut self, agent: Agent) -> Self {
        if self.agents.contains_key(agent.name()) {
            self.duplicates.push(agent.name().to_owned());
        }
        self.agents.insert(agent.name().to_owned(), agent);
        self
    }

    /// How deep sub-agents may nest (the agent a run starts with is depth 0); a call past it
    /// is answered with an error the model reads.
    pub fn with_max_depth(mut self, depth: u32) -> Self {
        self.max_depth = depth;
        self
    }

    /// The depth limit.
    pub fn max_depth(&self) -> u32 {
        self.max_depth
    }

    /// The agent named `name`.
    pub fn agent(&self, name: &str) -> Option<&Agent> {
        self.agents.get(name)
    }

    /// The agents, in the order they were added.
    pub fn agents(&self) -> impl Iterator<Item = &Agent> {
        self.agents.values()
    }

    /// Check the team before a run that starts with agent `root`, over the run's `registry`:
    /// every sub-agent and handoff exists, every tool entry matches a tool, no agent's tool
    /// name is taken, sub-agents call each other in no cycle. Every agent is checked, not only
    /// those `root` reaches.
    ///
    /// # Errors
    /// The first [`TeamError`] found, naming the path where it is.
    pub fn check(&self, root: &str, registry: &ToolRegistry) -> Result<(), TeamError> {
        if let Some(name) = self.duplicates.first() {
            return Err(TeamError::DuplicateAgent { name: name.clone() });
        }
        let known: Vec<String> = self.agents.keys().cloned().collect();
        if !self.agents.contains_key(root) {
            return Err(TeamError::UnknownAgent {
                path: "(start)".to_owned(),
                name: root.to_owned(),
                known,
            });
        }
        let names: BTreeSet<&str> = registry.tools().map(|tool| tool.name()).collect();
        let servers: BTreeSet<String> = registry
            .tools()
            .filter_map(|tool| match tool.source() {
                ToolSource::Mcp { server } => Some(server),
                _ => None,
            })
            .collect();
        for agent in self.agents.values() {
            let path = agent.name();
            if !valid_agent_name(path) {
                return Err(TeamError::InvalidName {
                    name: path.to_owned(),
                });
            }
            for offered in [path.to_owned(), format!("{TRANSFER_PREFIX}{path}")] {
                if names.contains(offered.as_str()) {
                    return Err(TeamError::NameClash {
                        path: path.to_owned(),
                        agent: path.to_owned(),
                        tool: offered,
                    });
                }
            }
            for name in agent.agents().iter().chain(agent.handoffs()) {
                if !self.agents.contains_key(name) {
                    return Err(TeamError::UnknownAgent {
                        path: path.to_owned(),
                        name: name.clone(),
                        known: known.clone(),
                    });
                }
            }
            for entry in agent.tools().unwrap_or_default() {
                let matched = match entry {
                    ProfileEntry::Tool(name) => names.contains(name.as_str()),
                    ProfileEntry::McpServer(server) => servers.contains(server),
                    _ => true,
                };
                if !matched {
                    return Err(TeamError::UnknownTool {
                        path: path.to_owned(),
                        entry: entry.to_string(),
                    });
                }
            }
        }
        let mut stack = vec![root.to_owned()];
        self.no_cycle(&mut stack)?;
        for name in self.agents.keys() {
            let mut stack = vec![name.clone()];
            self.no_cycle(&mut stack)?;
        }
        Ok(())
    }

    /// Depth-first over the sub-agent edges from the last of `stack`.
    fn no_cycle(&self, stack: &mut Vec<String>) -> Result<(), TeamError> {
        let Some(agent) = stack.last().and_then(|name| self.agents.get(name)) else {
            return Ok(());
        };
        for child in agent.agents() {
            if stack.contains(child) {
                let mut path = stack.join("/");
                path.push('/');
                path.push_str(child);
                return Err(TeamError::Cycle { path });
            }
            stack.push(child.clone());
            self.no_cycle(stack)?;
            stack.pop();
        }
        Ok(())
    }

    /// Each agent with what it is offered and why anything else is hidden, for `provider`
    /// and `model` (its own model's, when it has one).
    pub fn report(&self, registry: &ToolRegistry, provider: &str, model: &str) -> Vec<AgentReport> {
        self.agents
            .values()
            .map(|agent| {
                let narrowed = agent_registry(registry, agent, agent.name());
                let registry = narrowed.as_ref().unwrap_or(registry);
                let (provider, model) = match agent.model() {
                    Some((own, config)) => (own.provider(), config.model.as_str()),
                    None => (provider, model),
                };
                AgentReport {
                    name: agent.name().to_owned(),
                    description: agent.description().to_owned(),
                    tool_entries: agent
                        .tools()
                        .map(|entries| entries.iter().map(ToString::to_string).collect()),
                    tools: registry.explain(provider, model).tools,
                    agents: agent.agents().to_vec(),
                    handoffs: agent.handoffs().to_vec(),
                    max_turns: agent.max_turns(),
                    model: agent.model().map(|(_, config)| config.model.clone()),
                    typed: agent.output_schema().is_some(),
                }
            })
            .collect()
    }
}

/// `registry` as `agent` (at `path`) sees it; `None` when it lists no tools of its own (it
/// sees them all).
pub(crate) fn agent_registry(
    registry: &ToolRegistry,
    agent: &Agent,
    path: &str,
) -> Option<ToolRegistry> {
    agent
        .tools()
        .map(|entries| registry.narrowed_for_agent(path, Profile::new("", entries.iter().cloned())))
}
