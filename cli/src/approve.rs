//! Approvals on the command line: a terminal prompt (y = once, a = always, n = deny), `--yes`,
//! or deny when nobody can be asked.

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use agcore::tools::approval::{ApprovalDecision, ApprovalRequest, ApproveAll, Approver, DenyAll};
use async_trait::async_trait;
use tokio::sync::Mutex;

use crate::render::short_arguments;

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
#[derive(Debug, Default)]
pub struct TerminalApprover {
    one_at_a_time: Mutex<()>,
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalDecision {
        let _turn = self.one_at_a_time.lock().await;
        let question = format!(
            "\r\x1b[K? {} wants to run {}({}) — {}\n  allow? [y] once  [a] always for this tool  [n] deny: ",
            request.tool,
            request.title,
            short_arguments(&request.arguments),
            request.reason
        );
        let answer = tokio::task::spawn_blocking(move || {
            eprint!("{question}");
            let _ = std::io::stderr().flush();
            let mut line = String::new();
            std::io::stdin().lock().read_line(&mut line).map(|_| line)
        })
        .await;
        match answer {
            Ok(Ok(line)) => parse_answer(&line),
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
