//! The tools a team offers besides the run's own: each sub-agent under its name, each handoff
//! as `transfer_to_<agent>`.

use serde_json::{Value, json};

use crate::team::agent::Agent;
use crate::vocab::ToolDefinition;

/// The prefix of a handoff tool's name.
pub const TRANSFER_PREFIX: &str = "transfer_to_";

/// Whether `name` can be a tool name on every API (1 to 64 of `[A-Za-z0-9_-]`).
pub(crate) fn valid_agent_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The tool offering `agent` as a sub-agent.
pub(crate) fn agent_tool(agent: &Agent) -> ToolDefinition {
    let parameters = agent.input_schema().cloned().unwrap_or_else(|| {
        json!({
            "type": "object",
            "properties": {
                "task": {
                    "type": "string",
                    "description": "What the agent should do, with everything it needs to know: it does not see this conversation."
                }
            },
            "required": ["task"],
            "additionalProperties": false
        })
    });
    let description = if agent.description().is_empty() {
        format!(
            "Ask agent '{}' to do a task; it answers with its result.",
            agent.name()
        )
    } else {
        agent.description().to_owned()
    };
    ToolDefinition::function(agent.name(), description, parameters)
}

/// The tool handing the conversation to `agent`.
pub(crate) fn transfer_tool(agent: &Agent) -> ToolDefinition {
    let mut description = format!(
        "Hand the conversation to agent '{}', who answers the user from now on.",
        agent.name()
    );
    if !agent.description().is_empty() {
        description.push(' ');
        description.push_str(agent.description());
    }
    ToolDefinition::function(
        format!("{TRANSFER_PREFIX}{}", agent.name()),
        description,
        json!({"type": "object", "properties": {}, "additionalProperties": false}),
    )
}

/// A sub-agent's task from its call's arguments: `task` of `{"task": ...}`, or (with an input
/// schema) the arguments as JSON text. `Err`: what the model must fix.
pub(crate) fn task_of(agent: &Agent, arguments: &str) -> Result<String, String> {
    let value: Value = if arguments.trim().is_empty() {
        json!({})
    } else {
        serde_json::from_str(arguments).map_err(|error| {
            format!("the arguments are not valid JSON ({error}); send {{\"task\": \"...\"}}")
        })?
    };
    if agent.input_schema().is_some() {
        if let Some(schema) = agent.input_schema()
            && let Ok(validator) = jsonschema::validator_for(schema)
            && let Err(error) = validator.validate(&value)
        {
            return Err(format!(
                "the arguments do not match the agent's input schema: {error}"
            ));
        }
        return Ok(value.to_string());
    }
    match value.get("task").and_then(Value::as_str) {
        Some(task) if !task.trim().is_empty() => Ok(task.to_owned()),
        _ => Err("send {\"task\": \"...\"}: a non-empty string saying what to do".to_owned()),
    }
}
