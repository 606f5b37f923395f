//! What the run records in its [`RunJournal`] before each effect, as [`LlmError::Journal`]
//! when the journal fails.

use crate::run::error::LlmError;
use crate::run::journal::{JournalEntry, RunJournal};
use crate::run::state::RunState;

/// Record `entry` in `journal` (if any), as an [`LlmError::Journal`] when it fails.
pub(crate) async fn record(
    journal: Option<&dyn RunJournal>,
    entry: JournalEntry<'_>,
) -> Result<(), LlmError> {
    let Some(journal) = journal else {
        return Ok(());
    };
    journal
        .record(entry)
        .await
        .map_err(|error| LlmError::Journal {
            message: error_chain(&error),
        })
}

/// Record `state` without its history ([`JournalEntry::Run`]); without a journal nothing is
/// cloned (this is on every tool turn).
pub(crate) async fn record_run(
    journal: Option<&dyn RunJournal>,
    state: &RunState,
) -> Result<(), LlmError> {
    match journal {
        Some(_) => record(journal, JournalEntry::Run(&state.without_messages())).await,
        None => Ok(()),
    }
}

/// `error` and its sources, `: `-separated.
fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
