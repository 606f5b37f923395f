//! Approvals on the command line: a terminal prompt (y = once, a = always, n = deny), `--yes`,
//! or deny when nobody can be asked.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
use async_trait::async_trait;
use rustyline::error::ReadlineError;
use tokio::sync::{Mutex, Notify};

use agcore::display::{escape_for_terminal, head_and_tail};
use serde_json::Value;
use unicode_width::{UnicodeWidthChar, UnicodeWidthStr};

use crate::render::without_spinner;

/// The approver for this run: `--yes` allows every *ask*; a terminal prompts; otherwise deny
/// with a message saying how to allow.
pub fn approver_for(yes: bool) -> Arc<dyn Approver> {
    if yes {
        Arc::new(ApproveAll)
    } else if can_ask_terminal() {
        Arc::new(TerminalApprover::default())
    } else {
        Arc::new(DenyAll {
            message: Some(
                "nobody could approve this call: agcore runs non-interactively; the user can rerun with --yes to allow it"
                    .to_owned(),
            ),
        })
    }
}

/// Whether someone at a terminal can answer approval questions (stdin and stderr are one).
pub fn can_ask_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stderr().is_terminal()
}

/// Asks on the terminal, one question at a time.
///
/// The answer is read with rustyline, i.e. with the terminal in raw mode: Ctrl-C at the
/// question is a key press, not a signal. It denies the call and raises an interrupt ([`raise_interrupt`]), which
/// `agcore chat` takes as "cancel the turn". A read that outlives its question (a plain
/// blocking `read_line` after the turn was dropped) would swallow the next line typed at the
/// chat prompt; reading in raw mode until the user answers avoids that.
#[derive(Debug, Default)]
pub struct TerminalApprover {
    one_at_a_time: Mutex<()>,
}

/// Ctrl-C presses so far: by the chat's signal handler, or at an approval prompt. A turn
/// remembers the count when it starts and is cancelled when the count moves.
static INTERRUPTS: AtomicU64 = AtomicU64::new(0);
static INTERRUPTED: Notify = Notify::const_new();

/// Record a Ctrl-C and wake whoever waits in [`interrupted_since`].
pub fn raise_interrupt() {
    INTERRUPTS.fetch_add(1, Ordering::SeqCst);
    INTERRUPTED.notify_waiters();
}

/// How many Ctrl-C presses were recorded so far.
pub fn interrupt_count() -> u64 {
    INTERRUPTS.load(Ordering::SeqCst)
}

/// Completes once a Ctrl-C is recorded after the count was `start`.
pub async fn interrupted_since(start: u64) {
    loop {
        let notified = INTERRUPTED.notified();
        let mut notified = std::pin::pin!(notified);
        // Register before checking, so a raise between the check and the wait is not lost.
        notified.as_mut().enable();
        if interrupt_count() != start {
            return;
        }
        notified.await;
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        // A team's agent asks through the same approver: say which one (`main/researcher`).
        let agent = agcore::team::current_agent_path();
        let _turn = self.one_at_a_time.lock().await;
        let question = format!(
            "\r\x1b[K{}",
            question_of(agent.as_deref(), request, terminal_width())
        );
        let answer = tokio::task::spawn_blocking(move || {
            without_spinner(|| {
                eprintln!("{question}");
                let _ = std::io::stderr().flush();
                let mut editor = rustyline::DefaultEditor::new()?;
                editor.readline("  allow? [y] once  [a] always for this tool  [n] deny: ")
            })
        })
        .await;
        match answer {
            Ok(Ok(line)) => parse_answer(&line),
            Ok(Err(ReadlineError::Interrupted)) => {
                raise_interrupt();
                ApprovalDecision::Deny {
                    message: Some("the user cancelled".to_owned()),
                }
            }
            Ok(Err(ReadlineError::Eof)) => ApprovalDecision::Deny {
                message: Some("the user denied this call".to_owned()),
            },
            _ => ApprovalDecision::Deny {
                message: Some("the user could not be asked".to_owned()),
            },
        }
    }
}

/// A value longer than this many characters is shown as head + tail (with its exact size).
const HUGE_VALUE_CHARS: usize = 4000;
/// How much of a huge value's start and end the question shows.
const HUGE_HEAD_CHARS: usize = 1500;
const HUGE_TAIL_CHARS: usize = 1000;
/// Marks a wrapped line's continuation: no line of an argument can pose as a new line of the
/// question.
const CONTINUATION: &str = "    ↳ ";

/// The approval question: the tool, the call's title, *every* argument in full — escaped (a
/// control, bidi or invisible character is shown as `\x1b`, `\u{202e}`, a newline as `\n`),
/// wrapped at `width` columns with each continuation line marked, a huge value as head + tail
/// with its exact length — and why approval is needed.
///
/// A call of a team's agent names the agent first (`? main/researcher › write_file wants ...`).
pub fn question_of(agent: Option<&str>, request: &ApprovalRequest, width: usize) -> String {
    let agent = agent.map_or_else(String::new, |agent| {
        format!("{} › ", escape_for_terminal(agent))
    });
    let mut lines = vec![format!(
        "? {agent}{} wants to run: {}",
        escape_for_terminal(&request.tool),
        escape_for_terminal(&request.title)
    )];
    match &request.arguments {
        Value::Object(map) if map.is_empty() => lines.push("  arguments: none".to_owned()),
        Value::Object(map) => {
            lines.push(format!("  arguments ({}):", map.len()));
            for (key, value) in map {
                argument_lines(&mut lines, &escape_for_terminal(key), value, width);
            }
        }
        other => argument_lines(&mut lines, "arguments", other, width),
    }
    lines.push(format!("  ({})", escape_for_terminal(&request.reason)));
    lines.join("\n")
}

/// `  key: value` wrapped at `width`; a huge value says how big it is and what was left out.
fn argument_lines(lines: &mut Vec<String>, key: &str, value: &Value, width: usize) {
    let raw = match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let chars = raw.chars().count();
    let (label, shown) = if chars > HUGE_VALUE_CHARS {
        (
            format!("  {key} ({} bytes, {chars} chars): ", raw.len()),
            head_and_tail(&raw, HUGE_HEAD_CHARS, HUGE_TAIL_CHARS),
        )
    } else {
        (
            format!("  {key}: "),
            std::borrow::Cow::Borrowed(raw.as_str()),
        )
    };
    let text = format!("{label}{}", escape_for_terminal(&shown));
    let marker_width = CONTINUATION.width();
    let mut line = String::new();
    let mut used = 0;
    let mut first = true;
    for c in text.chars() {
        // Display columns, not characters: a wide character takes two, so the terminal never
        // wraps a line on its own (its wrapped part would carry no marker).
        let columns = c.width().unwrap_or(0);
        let room = if first {
            width
        } else {
            width.saturating_sub(marker_width)
        }
        .max(20);
        if used + columns > room {
            push_line(lines, std::mem::take(&mut line), first);
            first = false;
            used = 0;
        }
        line.push(c);
        used += columns;
    }
    push_line(lines, line, first);
}

fn push_line(lines: &mut Vec<String>, line: String, first: bool) {
    lines.push(if first {
        line
    } else {
        format!("{CONTINUATION}{line}")
    });
}

/// The terminal's width (stderr's, where the question goes), else `COLUMNS`, else 100 — less
/// one column, so a full line does not make the terminal wrap.
fn terminal_width() -> usize {
    let columns = console::Term::stderr()
        .size_checked()
        .map(|(_, columns)| usize::from(columns))
        .or_else(|| {
            std::env::var("COLUMNS")
                .ok()
                .and_then(|columns| columns.parse::<usize>().ok())
        })
        .unwrap_or(100);
    columns.saturating_sub(1).max(40)
}

/// y/yes → once, a/always → for the session, anything else → deny.
pub fn parse_answer(line: &str) -> ApprovalDecision {
    match line.trim().to_ascii_lowercase().as_str() {
        "y" | "yes" => ApprovalDecision::AllowOnce,
        "a" | "always" => ApprovalDecision::AllowForSession,
        _ => ApprovalDecision::Deny {
            message: Some("the user denied this call".to_owned()),
        },
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use agcore::tools::ToolKind;

    fn request(arguments: Value) -> ApprovalRequest {
        ApprovalRequest {
            tool: "run_command".to_owned(),
            call_id: "call_1".to_owned(),
            title: "Run ls".to_owned(),
            kind: ToolKind::Execute,
            arguments,
            permissions: Vec::new(),
            reason: "shell needs approval".to_owned(),
            digest: None,
        }
    }

    #[test]
    fn the_question_shows_every_argument_in_full_and_escaped() {
        let command = format!("ls -la{}; touch x", " ".repeat(120));
        let text = question_of(
            None,
            &request(serde_json::json!({"command": command, "cwd": "\u{1b}[8m.\u{202e}"})),
            80,
        );
        let joined: String = text
            .lines()
            .map(|line| line.strip_prefix(CONTINUATION).unwrap_or(line))
            .collect();
        assert!(joined.contains(&format!("command: {command}")), "{text}");
        assert!(text.contains("cwd: \\x1b[8m.\\u{202e}"), "{text}");
        assert!(text.lines().all(|line| line.width() <= 80), "{text}");
        // Wide characters count two columns.
        let wide = question_of(
            None,
            &request(serde_json::json!({"c": "日".repeat(100)})),
            60,
        );
        assert!(wide.lines().all(|line| line.width() <= 60), "{wide}");
        assert_eq!(wide.matches('日').count(), 100, "{wide}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}'),
            "{text}"
        );
    }

    #[test]
    fn a_huge_argument_shows_its_size_its_end_and_what_follows() {
        let huge = format!("{}THE END", "a".repeat(100_000));
        let text = question_of(
            None,
            &request(serde_json::json!({"a": huge, "b": "after"})),
            100,
        );
        assert!(text.contains("a (100007 bytes, 100007 chars): "), "{text}");
        assert!(text.contains("… 97507 more chars …"), "{text}");
        let joined: String = text.lines().collect();
        assert!(joined.contains("THE END"), "{text}");
        assert!(text.contains("  b: after"), "{text}");
    }

    #[test]
    fn a_team_s_call_names_its_agent_first() {
        let text = question_of(
            Some("main/researcher"),
            &request(serde_json::json!({"command": "ls"})),
            80,
        );
        assert!(
            text.starts_with("? main/researcher › run_command wants to run: Run ls"),
            "{text}"
        );
        let plain = question_of(None, &request(serde_json::json!({"command": "ls"})), 80);
        assert!(plain.starts_with("? run_command wants to run"), "{plain}");
    }

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(parse_answer("y\n"), ApprovalDecision::AllowOnce);
        assert_eq!(parse_answer(" A "), ApprovalDecision::AllowForSession);
        assert!(matches!(parse_answer("n"), ApprovalDecision::Deny { .. }));
        assert!(matches!(parse_answer(""), ApprovalDecision::Deny { .. }));
    }
}
