//! [`TeamError`]: what is wrong with a team's configuration, found before it runs.

/// A team's configuration problem; each names the path of the agent where it was found
/// (`main/researcher`: `researcher` called by `main`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum TeamError {
    /// Two agents have one name.
    #[error("agent '{name}' is defined twice")]
    DuplicateAgent {
        /// The name.
        name: String,
    },
    /// An agent name that cannot be a tool name.
    #[error(
        "agent name '{name}' is not a valid tool name (use 1 to 64 letters, digits, '_' or '-')"
    )]
    InvalidName {
        /// The name.
        name: String,
    },
    /// A sub-agent or handoff that is not in the team.
    #[error("{path}: no agent named '{name}' in the team{}", known_list(.known))]
    UnknownAgent {
        /// Where it is named.
        path: String,
        /// The unknown name.
        name: String,
        /// The team's agents.
        known: Vec<String>,
    },
    /// A tool list entry that matches no tool of the run.
    #[error("{path}: tool entry '{entry}' matches no tool of the run")]
    UnknownTool {
        /// The agent's path.
        path: String,
        /// The entry, as written.
        entry: String,
    },
    /// Sub-agents that call each other in a circle.
    #[error("sub-agents call each other in a cycle: {path}")]
    Cycle {
        /// The cycle, e.g. `main/researcher/main`.
        path: String,
    },
    /// An agent's tool name (its own name, or `transfer_to_` and its name) is taken by a
    /// tool of the run.
    #[error(
        "{path}: agent '{agent}' would be offered as '{tool}', which is a tool of the run already"
    )]
    NameClash {
        /// The agent's path.
        path: String,
        /// The agent.
        agent: String,
        /// The tool name taken.
        tool: String,
    },
}

fn known_list(known: &[String]) -> String {
    if known.is_empty() {
        String::new()
    } else {
        format!(" (agents: {})", known.join(", "))
    }
}
