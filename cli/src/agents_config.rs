//! `[agents.NAME]` of `agcore.toml`: a team of agents (see `docs/14-teams.md`), as written. What
//! the sections mean together — an agent naming an unknown agent or tool, a cycle of
//! sub-agents — is checked by the library when the team is built (`crate::team_build`).
//!
//! ```toml
//! [agents.researcher]
//! description = "Finds facts in the workspace and cites the file."
//! instructions = "You are a careful researcher. Answer with the file you read."
//! tools = ["read_file", "search_files"]     # profile entries (kind:read, mcp:NAME, ...)
//! max_turns = 6
//!
//! [agents.main]
//! instructions_file = "prompts/main.md"     # a template like --system-file (relative to this file)
//! agents = ["researcher"]                   # offered as tools
//! handoffs = ["billing"]                    # offered as transfer_to_billing
//! model = "anthropic:claude-sonnet-4-5"     # like --model (default: the run's)
//! parent_history = 4                        # the child sees the parent's last 4 messages
//! handoff_history = "no_tool_calls"         # full, no_tool_calls or last_user_message
//! output_schema = "answer.json"             # or inline: { type = "object", ... }
//! [agents.main.limits]                      # the keys of [limits]
//! max_requests = 12
//! ```

use std::collections::BTreeMap;
use std::path::PathBuf;

use agcore::llm::UsageLimits;
use agcore::tools::ProfileEntry;
use serde::Deserialize;

/// The longest agent name: it becomes a tool name (`researcher`, `transfer_to_billing`), and
/// tool names have at most 64 characters.
pub const MAX_AGENT_NAME: usize = 64 - "transfer_to_".len();

/// `[agents.NAME]`: one agent. Unknown keys are errors.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSection {
    /// What the agent does: its tool's description when it is a sub-agent or a handoff.
    pub description: Option<String>,
    /// Its system prompt, a minijinja template (variables from `--var`).
    pub instructions: Option<String>,
    /// Its system prompt from a file (relative to the config file), a template like
    /// `--system-file`.
    pub instructions_file: Option<PathBuf>,
    /// Its tools, as profile entries (`read_file`, `kind:read`, `mcp:github`); none given:
    /// every tool of the run.
    pub tools: Option<Vec<ProfileEntry>>,
    /// Sub-agents, offered to it as tools named like the agent.
    #[serde(default)]
    pub agents: Vec<String>,
    /// Agents it can hand the conversation to (`transfer_to_NAME`).
    #[serde(default)]
    pub handoffs: Vec<String>,
    /// Most model requests of one of its runs.
    pub max_turns: Option<u32>,
    /// Its model, `NAME` or `PROVIDER:NAME` like `--model` (default: the run's).
    pub model: Option<String>,
    /// Its budget (the keys of `[limits]`); the run's limits bound the whole team anyway.
    pub limits: Option<UsageLimits>,
    /// Its answer must be JSON matching this schema: a file (relative to the config file) or
    /// the schema inline.
    pub output_schema: Option<SchemaSource>,
    /// As a sub-agent, how many of the parent's last messages it sees before its task
    /// (default: none).
    pub parent_history: Option<usize>,
    /// What of the conversation it sees when the conversation is handed to it (default
    /// `full`).
    pub handoff_history: Option<HandoffHistoryName>,
}

/// `output_schema = "file.json"` or `output_schema = { type = "object", ... }`.
#[derive(Debug, Clone, Deserialize)]
#[serde(
    untagged,
    expecting = "a JSON Schema file (a string) or a schema inline (a table)"
)]
pub enum SchemaSource {
    /// A JSON file holding the schema.
    File(PathBuf),
    /// The schema itself.
    Inline(serde_json::Map<String, serde_json::Value>),
}

/// `handoff_history`: what an agent that takes over the conversation sees of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HandoffHistoryName {
    /// Everything.
    Full,
    /// Everything but tool calls and their answers.
    NoToolCalls,
    /// Only the last user message.
    LastUserMessage,
}

/// A problem of one `[agents.NAME]` section that needs no other section to see.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentConfigError {
    /// The name cannot be a tool name.
    #[error(
        "[agents.{name}]: an agent's name is its tool's name: 1 to {MAX_AGENT_NAME} of a-z, A-Z, 0-9, _ and -"
    )]
    BadName {
        /// The name, escaped for the terminal.
        name: String,
    },
    /// Both `instructions` and `instructions_file`.
    #[error("[agents.{name}]: give instructions or instructions_file, not both")]
    TwoInstructions {
        /// The agent.
        name: String,
    },
    /// A sub-agent or handoff entry that cannot name an agent.
    #[error("[agents.{name}] {key}: {entry:?} is not an agent name")]
    BadReference {
        /// The agent.
        name: String,
        /// `agents` or `handoffs`.
        key: &'static str,
        /// The entry, escaped for the terminal.
        entry: String,
    },
    /// `max_turns = 0`.
    #[error("[agents.{name}] max_turns: must be at least 1")]
    NoTurns {
        /// The agent.
        name: String,
    },
    /// `--agent NAME` names no `[agents.NAME]`.
    #[error("--agent {name}: no [agents.{name}] in the config{known}")]
    NoSuchAgent {
        /// The name, escaped for the terminal.
        name: String,
        /// `(agents: a, b)` or `(it has no [agents] section)`.
        known: String,
    },
}

/// Whether `name` can be an agent's (and so a tool's) name.
pub fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_AGENT_NAME
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Check each section on its own: names, `instructions` against `instructions_file`, the
/// references' spelling, `max_turns`. (Whether the references exist is the library's check.)
pub fn validate(agents: &BTreeMap<String, AgentSection>) -> Result<(), AgentConfigError> {
    let shown = |text: &str| agcore::display::escape_for_terminal(text).into_owned();
    for (name, section) in agents {
        if !is_agent_name(name) {
            return Err(AgentConfigError::BadName { name: shown(name) });
        }
        if section.instructions.is_some() && section.instructions_file.is_some() {
            return Err(AgentConfigError::TwoInstructions { name: name.clone() });
        }
        if section.max_turns == Some(0) {
            return Err(AgentConfigError::NoTurns { name: name.clone() });
        }
        for (key, entries) in [("agents", &section.agents), ("handoffs", &section.handoffs)] {
            if let Some(entry) = entries.iter().find(|entry| !is_agent_name(entry)) {
                return Err(AgentConfigError::BadReference {
                    name: name.clone(),
                    key,
                    entry: shown(entry),
                });
            }
        }
    }
    Ok(())
}

/// The section of `--agent NAME`, or an error listing the agents there are.
pub fn section<'a>(
    agents: &'a BTreeMap<String, AgentSection>,
    name: &str,
) -> Result<&'a AgentSection, AgentConfigError> {
    agents
        .get(name)
        .ok_or_else(|| AgentConfigError::NoSuchAgent {
            name: agcore::display::escape_for_terminal(name).into_owned(),
            known: if agents.is_empty() {
                " (it has no [agents] section)".to_owned()
            } else {
                format!(
                    " (agents: {})",
                    agents.keys().cloned().collect::<Vec<_>>().join(", ")
                )
            },
        })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// The `[agents]` part of a config file.
    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct AgcoreConfig {
        #[serde(default)]
        agents: BTreeMap<String, AgentSection>,
    }

    impl AgcoreConfig {
        fn parse(text: &str) -> Result<Self, String> {
            toml::from_str(text).map_err(|error: toml::de::Error| error.to_string())
        }
    }

    #[test]
    fn the_issue_s_example_parses() {
        let config = AgcoreConfig::parse(
            r#"
[agents.researcher]
description = "Finds facts in the workspace and cites the file."
instructions = "You are a careful researcher. Answer with the file you read."
tools = ["read_file", "search_files", "kind:read", "mcp:docs"]
max_turns = 6
parent_history = 2
handoff_history = "no_tool_calls"
output_schema = { type = "object", properties = { file = { type = "string" } } }
[agents.researcher.limits]
max_requests = 3
[agents.main]
instructions_file = "main.md"
agents = ["researcher"]
handoffs = ["billing"]
model = "anthropic:claude-sonnet-4-5"
output_schema = "answer.json"
[agents.billing]
"#,
        )
        .unwrap();
        validate(&config.agents).unwrap();
        let researcher = &config.agents["researcher"];
        assert_eq!(researcher.tools.as_ref().unwrap().len(), 4);
        assert_eq!(
            researcher.tools.as_ref().unwrap()[2],
            ProfileEntry::Kind(agcore::tools::ToolKind::Read)
        );
        assert_eq!(researcher.limits.unwrap().max_requests, Some(3));
        assert_eq!(
            researcher.handoff_history,
            Some(HandoffHistoryName::NoToolCalls)
        );
        assert!(matches!(
            researcher.output_schema,
            Some(SchemaSource::Inline(_))
        ));
        let main = &config.agents["main"];
        assert_eq!(main.agents, ["researcher"]);
        assert_eq!(main.handoffs, ["billing"]);
        assert!(matches!(main.output_schema, Some(SchemaSource::File(_))));
        assert!(config.agents["billing"].tools.is_none());
    }

    #[test]
    fn unknown_keys_and_bad_values_are_errors_naming_the_key() {
        let error = AgcoreConfig::parse("[agents.a]\ninstruction = \"x\"\n").unwrap_err();
        assert!(error.contains("instruction"), "{error}");
        let error = AgcoreConfig::parse("[agents.a]\ntools = [\"kind:nope\"]\n").unwrap_err();
        assert!(error.contains("unknown kind 'nope'"), "{error}");
        let error = AgcoreConfig::parse("[agents.a]\nhandoff_history = \"some\"\n").unwrap_err();
        assert!(error.contains("last_user_message"), "{error}");
        let error = AgcoreConfig::parse("[agents.a.limits]\nmax_request = 1\n").unwrap_err();
        assert!(error.contains("max_request"), "{error}");
        let error = AgcoreConfig::parse("[agents.a]\noutput_schema = 3\n").unwrap_err();
        assert!(error.contains("JSON Schema file"), "{error}");
    }

    #[test]
    fn sections_are_checked_one_by_one() {
        let check = |text: &str| validate(&AgcoreConfig::parse(text).unwrap().agents);
        assert!(check("[agents.ok_name-2]\n").is_ok());
        let error = check("[agents.\"a b\"]\n").unwrap_err().to_string();
        assert!(
            error.contains("[agents.a b]") && error.contains("a-z"),
            "{error}"
        );
        let error = check("[agents.a]\ninstructions = \"x\"\ninstructions_file = \"y\"\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("not both"), "{error}");
        let error = check("[agents.a]\nagents = [\"b/c\"]\n")
            .unwrap_err()
            .to_string();
        assert_eq!(error, "[agents.a] agents: \"b/c\" is not an agent name");
        let error = check("[agents.a]\nmax_turns = 0\n")
            .unwrap_err()
            .to_string();
        assert!(error.contains("at least 1"), "{error}");
        let long = "x".repeat(MAX_AGENT_NAME + 1);
        assert!(check(&format!("[agents.{long}]\n")).is_err());
    }

    #[test]
    fn an_unknown_agent_lists_the_known_ones() {
        let config = AgcoreConfig::parse("[agents.b]\n[agents.a]\n").unwrap();
        let error = section(&config.agents, "c").unwrap_err().to_string();
        assert_eq!(
            error,
            "--agent c: no [agents.c] in the config (agents: a, b)"
        );
        let error = section(&BTreeMap::new(), "c").unwrap_err().to_string();
        assert!(error.ends_with("(it has no [agents] section)"), "{error}");
    }
}
