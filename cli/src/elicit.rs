//! Elicitation on the command line: a server's question (`elicitation/create`) asked in the
//! terminal, one field at a time from the requested schema, each answer checked against its
//! field; every text the server sent is escaped for display. Without a terminal no elicitor is
//! set, so agcore does not offer elicitation and declines any request (logged).

use std::io::{IsTerminal, Write};
use std::sync::Arc;

use agcore::display::escape_for_terminal;
use agcore::tools::mcp::{
    ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor, McpClient,
};
use async_trait::async_trait;
use rustyline::error::ReadlineError;
use serde_json::{Map, Value};
use tokio::sync::Mutex;

use crate::approve::raise_interrupt;
use crate::render::without_spinner;

/// How often a field is asked again after an answer that does not fit.
const FIELD_ATTEMPTS: usize = 3;

/// `client` answering elicitations in the terminal (when there is one) and offering the
/// current directory as its root.
pub fn interactive(client: McpClient) -> McpClient {
    let client = match std::env::current_dir() {
        Ok(dir) => client.with_roots(vec![dir]),
        Err(_) => client,
    };
    let terminal = std::io::stdin().is_terminal() && std::io::stderr().is_terminal();
    if let Some(elicitor) = crate::elicit_unattended::elicitor(terminal) {
        client.with_elicitor(elicitor)
    } else if terminal {
        client.with_elicitor(Arc::new(TerminalElicitor::default()))
    } else {
        client
    }
}

/// Asks in the terminal, one elicitation at a time.
#[derive(Debug, Default)]
pub struct TerminalElicitor {
    one_at_a_time: Mutex<()>,
}

#[async_trait]
impl Elicitor for TerminalElicitor {
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse {
        let _turn = self.one_at_a_time.lock().await;
        let request = request.clone();
        let answer = tokio::task::spawn_blocking(move || {
            without_spinner(|| -> Result<ElicitationResponse, ReadlineError> {
                let mut editor = rustyline::DefaultEditor::new()?;
                ask(&mut editor, &request)
            })
        })
        .await;
        match answer {
            Ok(Ok(response)) => response,
            Ok(Err(ReadlineError::Interrupted)) => {
                raise_interrupt();
                ElicitationResponse::Cancel
            }
            _ => ElicitationResponse::Decline,
        }
    }
}

fn ask(
    editor: &mut rustyline::DefaultEditor,
    request: &ElicitationRequest,
) -> Result<ElicitationResponse, ReadlineError> {
    eprintln!(
        "\r\x1b[K? MCP server '{}' asks: {}",
        escape_for_terminal(&request.server),
        escape_for_terminal(&request.message)
    );
    let _ = std::io::stderr().flush();
    match &request.mode {
        ElicitationMode::Url { url, .. } => {
            eprintln!("  open this URL: {}", escape_for_terminal(url));
            let line = editor.readline("  [y] done/accept  [n] decline  [c] cancel: ")?;
            Ok(match line.trim() {
                "y" | "Y" | "yes" => ElicitationResponse::Accept {
                    content: Map::new(),
                },
                "c" | "C" => ElicitationResponse::Cancel,
                _ => ElicitationResponse::Decline,
            })
        }
        ElicitationMode::Form { schema } => {
            let line = editor.readline("  [y] answer  [n] decline  [c] cancel: ")?;
            match line.trim() {
                "y" | "Y" | "yes" => {}
                "c" | "C" => return Ok(ElicitationResponse::Cancel),
                _ => return Ok(ElicitationResponse::Decline),
            }
            let mut content = Map::new();
            for field in fields(schema) {
                match ask_field(editor, &field)? {
                    Some(value) => {
                        content.insert(field.name.clone(), value);
                    }
                    None if field.required && field.default.is_none() => {
                        eprintln!("  no valid answer for a required field: declined");
                        return Ok(ElicitationResponse::Decline);
                    }
                    None => {}
                }
            }
            Ok(ElicitationResponse::Accept { content })
        }
    }
}

/// Ask one field until the answer fits (a few times); `None` = left empty (the default, if
/// any, is filled in by agcore).
fn ask_field(
    editor: &mut rustyline::DefaultEditor,
    field: &Field,
) -> Result<Option<Value>, ReadlineError> {
    eprintln!("  {}", field.describe());
    for _ in 0..FIELD_ATTEMPTS {
        let line = editor.readline(&format!("  {}: ", escape_for_terminal(&field.name)))?;
        if line.trim().is_empty() {
            return Ok(None);
        }
        match field.parse(line.trim()) {
            Ok(value) => return Ok(Some(value)),
            Err(problem) => eprintln!("  {problem}; try again"),
        }
    }
    Ok(None)
}

/// One primitive field of a requested schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Field {
    /// The property name.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean` or `array` (a multi-select, comma-separated).
    pub kind: String,
    /// Title / description for the user.
    pub label: Option<String>,
    /// Allowed values (an enum).
    pub choices: Vec<String>,
    /// The schema's default.
    pub default: Option<Value>,
    /// Listed in `required`.
    pub required: bool,
    /// Bounds (length for strings, value for numbers).
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
}

/// The fields of a requested (flat object) schema, in order.
pub fn fields(schema: &Value) -> Vec<Field> {
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .map(|(name, property)| {
            let text = |key: &str| property.get(key).and_then(Value::as_str).map(str::to_owned);
            let number = |keys: [&str; 2]| {
                keys.iter()
                    .find_map(|key| property.get(*key).and_then(Value::as_f64))
            };
            // A multi-select (`type: array`) takes its choices from `items`.
            let choices_of = property.get("items").unwrap_or(property);
            let choices = choices_of
                .get("enum")
                .or_else(|| choices_of.get("oneOf"))
                .or_else(|| choices_of.get("anyOf"))
                .and_then(Value::as_array)
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|item| {
                            item.as_str()
                                .or_else(|| item.get("const").and_then(Value::as_str))
                                .map(str::to_owned)
                        })
                        .collect()
                })
                .unwrap_or_default();
            Field {
                name: name.clone(),
                kind: text("type").unwrap_or_else(|| "string".to_owned()),
                label: text("title").or_else(|| text("description")),
                choices,
                default: property.get("default").cloned(),
                required: required.contains(&name.as_str()),
                min: number(["minimum", "minLength"]),
                max: number(["maximum", "maxLength"]),
            }
        })
        .collect()
}

impl Field {
    /// The line shown before the field's prompt (escaped).
    pub fn describe(&self) -> String {
        let mut text = format!("{} ({}", self.name, self.kind);
        if self.required {
            text.push_str(", required");
        }
        text.push(')');
        if let Some(label) = &self.label {
            text.push_str(&format!(" — {label}"));
        }
        if !self.choices.is_empty() {
            text.push_str(&format!(" [one of: {}]", self.choices.join(", ")));
        }
        if let Some(default) = &self.default {
            text.push_str(&format!(" (empty = {default})"));
        }
        escape_for_terminal(&text).into_owned()
    }

    /// The typed value of an answer, or what is wrong with it.
    pub fn parse(&self, answer: &str) -> Result<Value, String> {
        let value = match self.kind.as_str() {
            "integer" => answer
                .parse::<i64>()
                .map(Value::from)
                .map_err(|_| "not a whole number".to_owned())?,
            "number" => answer
                .parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .map(Value::from)
                .ok_or_else(|| "not a number".to_owned())?,
            "boolean" => match answer.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" => Value::Bool(true),
                "n" | "no" | "false" => Value::Bool(false),
                _ => return Err("answer yes or no".to_owned()),
            },
            "array" => {
                let items: Vec<&str> = answer.split(',').map(str::trim).collect();
                if let Some(bad) = items.iter().find(|item| {
                    !self.choices.is_empty() && !self.choices.iter().any(|c| c == *item)
                }) {
                    return Err(format!(
                        "'{bad}' is not one of: {}",
                        self.choices.join(", ")
                    ));
                }
                return Ok(Value::from(items));
            }
            _ => Value::String(answer.to_owned()),
        };
        if !self.choices.is_empty() && !self.choices.iter().any(|choice| choice == answer) {
            return Err(format!("not one of: {}", self.choices.join(", ")));
        }
        let measure = match &value {
            Value::String(text) => Some(text.chars().count() as f64),
            Value::Number(number) => number.as_f64(),
            _ => None,
        };
        if let Some(measure) = measure {
            if self.min.is_some_and(|min| measure < min) {
                return Err(format!(
                    "below the minimum {}",
                    self.min.unwrap_or_default()
                ));
            }
            if self.max.is_some_and(|max| measure > max) {
                return Err(format!(
                    "above the maximum {}",
                    self.max.unwrap_or_default()
                ));
            }
        }
        Ok(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn schema() -> Value {
        json!({"type": "object", "properties": {
            "name": {"type": "string", "title": "Name\u{1b}[2J", "minLength": 2},
            "age": {"type": "integer", "minimum": 0, "default": 30},
            "status": {"type": "string", "enum": ["active", "inactive"]},
            "ok": {"type": "boolean"},
            "tags": {"type": "array", "items": {"anyOf": [{"const": "a"}, {"const": "b"}]}}
        }, "required": ["name"]})
    }

    #[test]
    fn fields_come_from_the_schema_and_answers_are_checked() {
        let fields = fields(&schema());
        let by = |name: &str| fields.iter().find(|f| f.name == name).unwrap().clone();
        let name = by("name");
        assert!(name.required);
        assert!(!name.describe().contains('\u{1b}'), "{}", name.describe());
        assert!(name.parse("x").is_err());
        assert_eq!(name.parse("Jo"), Ok(json!("Jo")));
        let age = by("age");
        assert_eq!(age.parse("41"), Ok(json!(41)));
        assert!(age.parse("4.5").is_err());
        assert!(age.parse("-1").is_err());
        assert!(age.describe().contains("empty = 30"));
        let status = by("status");
        assert!(status.parse("gone").is_err());
        assert_eq!(status.parse("active"), Ok(json!("active")));
        assert_eq!(by("ok").parse("yes"), Ok(json!(true)));
        assert!(by("ok").parse("maybe").is_err());
        assert_eq!(by("tags").parse("a, b"), Ok(json!(["a", "b"])));
        assert!(by("tags").parse("a,c").is_err());
    }
}
