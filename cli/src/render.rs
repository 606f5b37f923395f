//! Human rendering of stream events: answer text on stdout, tool activity on stderr (with a
//! spinner on a terminal).

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::time::Duration;

use agcore::llm::StreamEvent;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::Value;

/// Prints events for a human as they arrive.
pub struct HumanRenderer {
    spinner: Option<ProgressBar>,
    running: HashMap<String, String>,
    at_line_start: bool,
    interactive: bool,
    in_reasoning: bool,
}

impl HumanRenderer {
    /// A renderer; spinners only when stderr is a terminal.
    pub fn new() -> Self {
        HumanRenderer {
            spinner: None,
            running: HashMap::new(),
            at_line_start: true,
            interactive: std::io::stderr().is_terminal(),
            in_reasoning: false,
        }
    }

    /// Render one event.
    pub fn event(&mut self, event: &StreamEvent) {
        match event {
            StreamEvent::AssistantTextDelta { text } => {
                self.end_reasoning();
                print!("{text}");
                let _ = std::io::stdout().flush();
                self.at_line_start = text.ends_with('\n');
            }
            StreamEvent::ReasoningDelta { text } => {
                if !self.in_reasoning {
                    eprint!("\x1b[2m[thinking] ");
                    self.in_reasoning = true;
                }
                eprint!("{text}");
            }
            StreamEvent::ToolExecutionStarted {
                id,
                tool_name,
                input,
            } => {
                self.end_reasoning();
                self.newline();
                let label = format!("{tool_name}({})", short_arguments(input));
                if !self.interactive {
                    eprintln!("→ {label}");
                }
                self.running.insert(id.clone(), label);
                self.update_spinner();
            }
            StreamEvent::ToolExecutionCompleted {
                id,
                tool_name,
                output,
                is_error,
                duration_ms,
            } => {
                let label = self.running.remove(id).unwrap_or_else(|| tool_name.clone());
                let line = if *is_error {
                    format!(
                        "✗ {label} failed in {duration_ms} ms: {}",
                        one_line(output, 160)
                    )
                } else {
                    format!(
                        "✓ {label} ok in {duration_ms} ms → {}",
                        one_line(output, 100)
                    )
                };
                match &self.spinner {
                    Some(spinner) => spinner.println(line),
                    None => eprintln!("{line}"),
                }
                self.update_spinner();
            }
            StreamEvent::Error { message, .. } => {
                self.finish();
                eprintln!("error: {message}");
            }
            _ => {}
        }
    }

    /// End the output cleanly (final newline, spinner gone).
    pub fn finish(&mut self) {
        self.end_reasoning();
        if let Some(spinner) = self.spinner.take() {
            spinner.finish_and_clear();
        }
        self.newline();
    }

    fn newline(&mut self) {
        if !self.at_line_start {
            println!();
            self.at_line_start = true;
        }
    }

    fn end_reasoning(&mut self) {
        if self.in_reasoning {
            eprintln!("\x1b[0m");
            self.in_reasoning = false;
        }
    }

    fn update_spinner(&mut self) {
        if !self.interactive {
            return;
        }
        if self.running.is_empty() {
            if let Some(spinner) = self.spinner.take() {
                spinner.finish_and_clear();
            }
            return;
        }
        let spinner = self.spinner.get_or_insert_with(|| {
            let spinner = ProgressBar::new_spinner();
            spinner.set_style(
                ProgressStyle::with_template("{spinner} {msg} {elapsed}")
                    .unwrap_or_else(|_| ProgressStyle::default_spinner()),
            );
            spinner.enable_steady_tick(Duration::from_millis(100));
            spinner
        });
        let mut labels: Vec<&str> = self.running.values().map(String::as_str).collect();
        labels.sort_unstable();
        spinner.set_message(format!("running {}", labels.join(", ")));
    }
}

/// `key=value, ...` of a call's arguments, shortened.
pub fn short_arguments(input: &Value) -> String {
    let text = match input {
        Value::Object(map) => map
            .iter()
            .map(|(key, value)| format!("{key}={}", one_line(value, 40)))
            .collect::<Vec<_>>()
            .join(", "),
        other => one_line(other, 60),
    };
    truncate(&text, 80)
}

/// A value on one line, at most `limit` characters.
pub fn one_line(value: &Value, limit: usize) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    truncate(&text.replace(['\n', '\r'], " "), limit)
}

fn truncate(text: &str, limit: usize) -> String {
    if text.chars().count() <= limit {
        text.to_owned()
    } else {
        let mut cut: String = text.chars().take(limit.saturating_sub(1)).collect();
        cut.push('…');
        cut
    }
}
