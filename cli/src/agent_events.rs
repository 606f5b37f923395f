//! A team's events as `agcore run --json` prints them: a sub-agent's event is the event itself
//! with `"agent": "main/researcher"` added (one flat object per line, like every other event;
//! an error event of a child's stream, should one come, is `"type": "agent_error"` so that the
//! only `"type": "error"` line stays the one that ends the run); a handoff is
//! `{"type": "handoff", "from": "main", "to": "billing"}`.

use agcore::llm::StreamEvent;
use serde_json::Value;

/// The JSON object of `event`, a sub-agent's flattened with its agent path.
pub fn json_event(event: &StreamEvent) -> serde_json::Result<Value> {
    let StreamEvent::FromAgent { agent, event } = event else {
        return serde_json::to_value(event);
    };
    let mut value = serde_json::to_value(&**event)?;
    if let Value::Object(object) = &mut value {
        if object.get("type").and_then(Value::as_str) == Some("error") {
            object.insert("type".to_owned(), Value::from("agent_error"));
        }
        object.insert("agent".to_owned(), Value::from(agent.as_str()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_child_s_event_is_flat_with_its_agent_path() {
        let event = StreamEvent::FromAgent {
            agent: "main/researcher".to_owned(),
            event: Box::new(StreamEvent::ToolExecutionStarted {
                id: "c1".to_owned(),
                tool_name: "read_file".to_owned(),
                input: serde_json::json!({"path": "a"}),
            }),
        };
        let value = json_event(&event).unwrap();
        assert_eq!(value["type"], "tool_execution_started");
        assert_eq!(value["agent"], "main/researcher");
        assert_eq!(value["tool_name"], "read_file");
        assert!(value.get("event").is_none(), "{value}");
        let error = StreamEvent::FromAgent {
            agent: "main/researcher".to_owned(),
            event: Box::new(StreamEvent::Error {
                kind: agcore::llm::ErrorKind::Server,
                message: "HTTP 500".to_owned(),
            }),
        };
        assert_eq!(json_event(&error).unwrap()["type"], "agent_error");
        let handoff = StreamEvent::Handoff {
            from: "main".to_owned(),
            to: "billing".to_owned(),
        };
        assert_eq!(
            json_event(&handoff).unwrap(),
            serde_json::json!({"type": "handoff", "from": "main", "to": "billing"})
        );
    }
}
