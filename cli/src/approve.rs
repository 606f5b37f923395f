//! Approvals on the command line: a terminal prompt (y = once, a = always, n = deny), `--yes`,
//! or deny when nobody can be asked.

use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
use async_trait::async_trait;
use rustyline::error::ReadlineError;
use tokio::sync::{Mutex, Notify};

use crate::render::{short_arguments, without_spinner};

/// The approver for this run: `--yes` allows every *ask*; a terminal prompts; otherwise deny
/// with a message saying how to allow.
pub fn approver_for(yes: bool) -> Arc<dyn Approver> {
    if yes {
        Arc::new(ApproveAll)
    } else if std::io::stdin().is_terminal() && std::io::stderr().is_terminal() {
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
        let _turn = self.one_at_a_time.lock().await;
        let question = format!(
            "\r\x1b[K? {} wants to run: {}\n  arguments: {}\n  ({})",
            request.tool,
            request.title,
            short_arguments(&request.arguments),
            request.reason
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
    use super::*;

    #[test]
    fn answers_map_to_decisions() {
        assert_eq!(parse_answer("y\n"), ApprovalDecision::AllowOnce);
        assert_eq!(parse_answer(" A "), ApprovalDecision::AllowForSession);
        assert!(matches!(parse_answer("n"), ApprovalDecision::Deny { .. }));
        assert!(matches!(parse_answer(""), ApprovalDecision::Deny { .. }));
    }
}
