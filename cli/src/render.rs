//! Human rendering of stream events: answer text on stdout, tool activity on stderr (with a
//! spinner on a terminal), a line for each compaction, and the chat prompt's `[12.3k/32k]`
//! context label.

use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Duration;

use agcore::context::{CompactionTier, ContextUsage};
use agcore::display::{
    escape_for_terminal, escape_keeping_lines, head_and_tail, is_unsafe_for_terminal,
};
use agcore::llm::StreamEvent;
use agcore::tools::ToolCallCard;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::Value;

/// The spinner on screen, if any, so an approval prompt can hide it while it asks.
static ACTIVE_SPINNER: Mutex<Option<ProgressBar>> = Mutex::new(None);

fn set_active_spinner(spinner: Option<ProgressBar>) {
    if let Ok(mut slot) = ACTIVE_SPINNER.lock() {
        *slot = spinner;
    }
}

/// Run `f` (which uses the terminal, e.g. asks a question) with the spinner hidden and
/// stopped, so it does not redraw over the question; the spinner comes back afterwards.
pub fn without_spinner<R>(f: impl FnOnce() -> R) -> R {
    let spinner = ACTIVE_SPINNER.lock().ok().and_then(|slot| slot.clone());
    let Some(spinner) = spinner else {
        return f();
    };
    spinner.disable_steady_tick();
    spinner.set_draw_target(ProgressDrawTarget::hidden());
    let result = f();
    spinner.set_draw_target(ProgressDrawTarget::stderr());
    spinner.enable_steady_tick(Duration::from_millis(100));
    result
}

/// Prints events for a human as they arrive.
pub struct HumanRenderer {
    spinner: Option<ProgressBar>,
    running: HashMap<String, String>,
    at_line_start: bool,
    interactive: bool,
    stdout_is_terminal: bool,
    in_reasoning: bool,
    show_reasoning: bool,
    /// What each running call reported (title, diffs), by the same key as `running`.
    cards: HashMap<String, ToolCallCard>,
}

impl HumanRenderer {
    /// A renderer; spinners only when stderr is a terminal.
    pub fn new() -> Self {
        HumanRenderer {
            spinner: None,
            running: HashMap::new(),
            at_line_start: true,
            interactive: std::io::stderr().is_terminal(),
            stdout_is_terminal: std::io::stdout().is_terminal(),
            in_reasoning: false,
            show_reasoning: true,
            cards: HashMap::new(),
        }
    }

    /// Whether reasoning deltas are shown (dimmed, on stderr); shown unless turned off.
    pub fn with_reasoning(mut self, show: bool) -> Self {
        self.show_reasoning = show;
        self
    }

    /// Render one event.
    pub fn event(&mut self, event: &StreamEvent) {
        self.event_of(None, event);
    }

    /// Render one event of the run's agent (`None`) or of a sub-agent (its path): a
    /// sub-agent's tool lines and errors carry its path; its text is its parent's tool answer,
    /// shown in the parent's tool line rather than on stdout.
    fn event_of(&mut self, agent: Option<&str>, event: &StreamEvent) {
        match event {
            StreamEvent::FromAgent { agent, event } => self.event_of(Some(agent), event),
            StreamEvent::Handoff { from, to } => {
                self.end_reasoning();
                self.newline();
                eprintln!("{}", handoff_line(from, to));
            }
            StreamEvent::Error { message, .. } if agent.is_some() => {
                let line = format!(
                    "✗ {} failed: {}",
                    agent_label(agent),
                    one_line(&Value::from(message.as_str()), 160)
                );
                match &self.spinner {
                    Some(spinner) => spinner.suspend(|| eprintln!("{line}")),
                    None => eprintln!("{line}"),
                }
            }
            _ if agent.is_some() && !is_tool_event(event) => {}
            StreamEvent::AssistantTextDelta { text } => {
                self.end_reasoning();
                print!("{}", answer_text(text, self.stdout_is_terminal));
                let _ = std::io::stdout().flush();
                self.at_line_start = text.ends_with('\n');
            }
            StreamEvent::ReasoningDelta { text } if self.show_reasoning => {
                if !self.in_reasoning {
                    eprint!("\x1b[2m[thinking] ");
                    self.in_reasoning = true;
                }
                eprint!("{}", escape_keeping_lines(text));
            }
            StreamEvent::ToolExecutionStarted {
                id,
                tool_name,
                input,
            } => {
                self.end_reasoning();
                self.newline();
                let label = format!(
                    "{}{}({})",
                    agent_label(agent),
                    escape_for_terminal(tool_name),
                    short_arguments(input)
                );
                if !self.interactive {
                    eprintln!("→ {label}");
                }
                self.running.insert(running_key(agent, id), label);
                self.update_spinner();
            }
            StreamEvent::ToolCallUpdate { id, update } => {
                // The title line improves as the call streams in and runs.
                let key = running_key(agent, id);
                let card = self
                    .cards
                    .entry(key.clone())
                    .or_insert_with(|| ToolCallCard::new(id.clone(), String::new()));
                card.apply(update);
                if update.title.is_some()
                    && let Some(label) = self.running.get_mut(&key)
                {
                    *label = format!("{}{}", agent_label(agent), escape_for_terminal(&card.title));
                    self.update_spinner();
                }
            }
            StreamEvent::ToolExecutionCompleted {
                id,
                tool_name,
                output,
                is_error,
                duration_ms,
            } => {
                let key = running_key(agent, id);
                let card = self.cards.remove(&key);
                let label = self.running.remove(&key).unwrap_or_else(|| {
                    format!("{}{}", agent_label(agent), escape_for_terminal(tool_name))
                });
                // An edit shows its diff under its line.
                let diffs = card
                    .map(|card| crate::tool_cards::card_diffs(&card, self.interactive))
                    .unwrap_or_default();
                let diff = (!diffs.is_empty()).then(|| diffs.join("\n"));
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
                let line = match diff {
                    Some(diff) => format!("{line}\n{diff}"),
                    None => line,
                };
                if self.running.is_empty() {
                    // The last one: clear the spinner first so it does not flash back.
                    self.update_spinner();
                    eprintln!("{line}");
                } else {
                    // `suspend` rather than `println`: the line must not be lost while an
                    // approval prompt has the spinner hidden.
                    match &self.spinner {
                        Some(spinner) => spinner.suspend(|| eprintln!("{line}")),
                        None => eprintln!("{line}"),
                    }
                    self.update_spinner();
                }
            }
            StreamEvent::Error { message, .. } => {
                self.finish();
                eprintln!("error: {}", escape_keeping_lines(message));
            }
            StreamEvent::ContextCompacted { .. }
            | StreamEvent::HistoryRepaired { .. }
            | StreamEvent::Retry { .. }
            | StreamEvent::ModelSwitch { .. } => {
                if let Some(line) = event_line(event) {
                    self.end_reasoning();
                    self.newline();
                    eprintln!("{line}");
                }
            }
            _ => {}
        }
    }

    /// End the output cleanly (final newline, spinner gone).
    pub fn finish(&mut self) {
        self.end_reasoning();
        if let Some(spinner) = self.spinner.take() {
            set_active_spinner(None);
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
                set_active_spinner(None);
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
            set_active_spinner(Some(spinner.clone()));
            spinner
        });
        let mut labels: Vec<&str> = self.running.values().map(String::as_str).collect();
        labels.sort_unstable();
        spinner.set_message(format!("running {}", labels.join(", ")));
    }
}

impl Drop for HumanRenderer {
    fn drop(&mut self) {
        // A cancelled turn drops the renderer mid-way: stop the spinner's ticker with it.
        if let Some(spinner) = self.spinner.take() {
            set_active_spinner(None);
            spinner.finish_and_clear();
        }
    }
}

/// Whether a sub-agent's event is shown: its tool activity is, its text and reasoning are not.
fn is_tool_event(event: &StreamEvent) -> bool {
    matches!(
        event,
        StreamEvent::ToolExecutionStarted { .. }
            | StreamEvent::ToolCallUpdate { .. }
            | StreamEvent::ToolExecutionCompleted { .. }
    )
}

/// `main/researcher › ` before a sub-agent's tool line (nothing for the run's own agent).
fn agent_label(agent: Option<&str>) -> String {
    agent.map_or_else(String::new, |agent| {
        format!("{} › ", escape_for_terminal(agent))
    })
}

/// A running call's key: call ids are unique per run, not across a team's runs.
fn running_key(agent: Option<&str>, id: &str) -> String {
    format!("{}\u{0}{id}", agent.unwrap_or_default())
}

/// The line a handoff prints (stderr).
pub fn handoff_line(from: &str, to: &str) -> String {
    format!(
        "⇢ handoff: {} → {} (the conversation goes on with {})",
        escape_for_terminal(from),
        escape_for_terminal(to),
        escape_for_terminal(to)
    )
}

/// `key=value, ...` of a call's arguments for a live tool line: each value escaped (see
/// [`agcore::display::escape_for_terminal`]) and, when long, cut in the middle with the number
/// of characters left out — never silently at the end. The approval question shows the whole
/// call instead ([`crate::approve::question_of`]).
pub fn short_arguments(input: &Value) -> String {
    match input {
        // Keys sorted: the same line whatever order serde_json's map keeps (the ACP SDK turns
        // on its `preserve_order`).
        Value::Object(map) => {
            let mut entries: Vec<_> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            entries
                .into_iter()
                .map(|(key, value)| format!("{}={}", escape_for_terminal(key), one_line(value, 60)))
                .collect::<Vec<_>>()
                .join(", ")
        }
        other => one_line(other, 80),
    }
}

/// A value on one line, escaped, at most about `limit` characters: a longer one keeps its
/// head and tail around `… N more chars …`.
pub fn one_line(value: &Value, limit: usize) -> String {
    let text = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let tail = limit / 3;
    let shown = head_and_tail(&text, limit.saturating_sub(tail), tail);
    escape_for_terminal(&shown).into_owned()
}

/// `json` (serialised by serde_json) with every character unsafe for a terminal written as a
/// JSON `\uXXXX` escape: the same JSON value, but no raw bidi override, C1 control or DEL
/// reaches the terminal (serde_json escapes only U+0000–U+001F).
pub fn json_for_terminal(json: String) -> String {
    // Newlines and tabs outside strings are the pretty printer's layout (inside strings
    // serde_json already escapes them).
    let unsafe_char = |c: char| c != '\n' && c != '\t' && is_unsafe_for_terminal(c);
    if !json.chars().any(unsafe_char) {
        return json;
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if unsafe_char(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The answer text as printed on stdout: escaped (newlines and tabs kept) when stdout is a
/// terminal, raw when it is a pipe or file (there it is the program's output, byte for byte).
pub fn answer_text(text: &str, stdout_is_terminal: bool) -> std::borrow::Cow<'_, str> {
    if stdout_is_terminal {
        escape_keeping_lines(text)
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// `[12.3k/32k]`.
pub fn usage_label(usage: ContextUsage) -> String {
    format!(
        "[{}/{}]",
        short(usage.tokens),
        short(u64::from(usage.window))
    )
}

fn short(tokens: u64) -> String {
    match tokens {
        0..1_000 => tokens.to_string(),
        1_000..10_000 => format!("{:.1}k", tokens as f64 / 1_000.0),
        _ => format!("{}k", (tokens as f64 / 1_000.0).round()),
    }
}

/// The line for a compaction or repair event (`None` for other events).
pub fn event_line(event: &StreamEvent) -> Option<String> {
    match event {
        StreamEvent::ContextCompacted {
            tier,
            tokens_before,
            tokens_after,
            messages,
            window,
        } => {
            let how = match tier {
                CompactionTier::StubToolOutputs => "old tool outputs stubbed",
                CompactionTier::Summary => "older turns summarised",
                CompactionTier::DropTurns => "oldest turns dropped",
                _ => "compacted",
            };
            Some(format!(
                "⋯ context compacted (tier {}: {how}, {messages} messages): {} → {} of {} tokens",
                tier.number(),
                short(*tokens_before),
                short(*tokens_after),
                short(*window)
            ))
        }
        StreamEvent::HistoryRepaired { kind, detail } => Some(format!(
            "⋯ history repaired ({}): {}",
            serde_json::to_value(kind)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            agcore::display::escape_for_terminal(detail)
        )),
        StreamEvent::Retry {
            attempt,
            max_attempts,
            delay_ms,
            error,
            ..
        } => Some(format!(
            "⋯ stream disconnected — retrying ({attempt}/{max_attempts}) in {:.1}s: {}",
            Duration::from_millis(*delay_ms).as_secs_f64(),
            agcore::display::escape_for_terminal(error)
        )),
        StreamEvent::ModelSwitch { from, to, reason } => Some(format!(
            "⋯ model {} failed — switching to {}: {}",
            agcore::display::escape_for_terminal(from),
            agcore::display::escape_for_terminal(to),
            agcore::display::escape_for_terminal(reason)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn live_lines_show_the_end_of_a_long_argument_and_no_raw_escape() {
        let command = format!("ls -la{}; touch x", " ".repeat(120));
        let line = short_arguments(&serde_json::json!({"command": command}));
        assert!(line.ends_with("; touch x"), "{line}");
        assert!(line.contains("more chars"), "{line}");
        let line = short_arguments(&serde_json::json!({"c": "\u{1b}[2K\u{1b}[1Gx"}));
        assert_eq!(line, "c=\\x1b[2K\\x1b[1Gx");
    }

    #[test]
    fn json_stays_the_same_value_without_unsafe_characters() {
        let value = serde_json::json!({"t": "a\u{202e}b\u{7f}\u{e0041}\u{1b}"});
        let text = json_for_terminal(serde_json::to_string(&value).unwrap());
        assert!(!text.chars().any(is_unsafe_for_terminal), "{text}");
        assert_eq!(serde_json::from_str::<Value>(&text).unwrap(), value);
    }

    #[test]
    fn labels_are_short() {
        let usage = |tokens, window| ContextUsage {
            tokens,
            window,
            measured: true,
        };
        assert_eq!(usage_label(usage(12_345, 32_768)), "[12k/33k]");
        assert_eq!(usage_label(usage(1_234, 8_192)), "[1.2k/8.2k]");
        assert_eq!(usage_label(usage(0, 8_192)), "[0/8.2k]");
    }

    #[test]
    fn a_retry_and_a_switch_are_one_safe_line_each() {
        let line = event_line(&StreamEvent::Retry {
            attempt: 2,
            max_attempts: 5,
            delay_ms: 1_200,
            kind: agcore::llm::ErrorKind::Stream,
            error: "stream error: gone\u{1b}[2J".to_owned(),
        })
        .unwrap();
        assert_eq!(
            line,
            "⋯ stream disconnected — retrying (2/5) in 1.2s: stream error: gone\\x1b[2J"
        );
        let line = event_line(&StreamEvent::ModelSwitch {
            from: "a".to_owned(),
            to: "b\n".to_owned(),
            reason: "HTTP 503".to_owned(),
        })
        .unwrap();
        assert!(!line.chars().any(is_unsafe_for_terminal), "{line}");
        assert!(
            line.starts_with("⋯ model a failed — switching to b"),
            "{line}"
        );
    }

    #[test]
    fn team_lines_name_the_agent_escaped() {
        assert_eq!(
            handoff_line("main", "bill\u{1b}[2J"),
            "⇢ handoff: main → bill\\x1b[2J (the conversation goes on with bill\\x1b[2J)"
        );
        assert_eq!(agent_label(Some("main/researcher")), "main/researcher › ");
        assert_eq!(agent_label(None), "");
        assert_ne!(running_key(Some("a"), "c1"), running_key(None, "c1"));
    }

    #[test]
    fn a_compaction_is_one_line() {
        let line = event_line(&StreamEvent::ContextCompacted {
            tier: CompactionTier::Summary,
            tokens_before: 7_000,
            tokens_after: 3_000,
            messages: 12,
            window: 8_192,
        })
        .unwrap();
        assert_eq!(
            line,
            "⋯ context compacted (tier 2: older turns summarised, 12 messages): 7.0k → 3.0k of 8.2k tokens"
        );
    }
}
