//! Questions of MCP servers when nobody is at a terminal, for `agcore run`: with a session, a
//! question asked inside a `tools/call` (protocol 2026-07-28) suspends the run (exit code 3)
//! and names what the server asks; `agcore run --session NAME --resume --answer JSON` gives the
//! answer (a JSON object of the form's fields) and the call goes on from the server's stored
//! `requestState`.

use std::sync::{Arc, OnceLock};

use agcore::tools::mcp::{
    DeferElicitation, ElicitationMode, ElicitationRequest, ElicitationResponse, Elicitor,
};
use async_trait::async_trait;
use serde_json::{Map, Value};

/// What answers when nobody can be asked (set once, before the servers start).
#[derive(Debug, Clone)]
pub enum Unattended {
    /// The run can wait: suspend on a question.
    Defer,
    /// Answer every form with these values (`--answer`).
    Answer(Map<String, Value>),
}

static UNATTENDED: OnceLock<Unattended> = OnceLock::new();

/// Set how questions are answered without a terminal (the first call wins).
pub fn set(mode: Unattended) {
    let _ = UNATTENDED.set(mode);
}

/// The elicitor `--answer` gives (used even at a terminal: the user said what to answer), or
/// without a terminal the deferring one of a run that can wait.
pub fn elicitor(terminal: bool) -> Option<Arc<dyn Elicitor>> {
    match UNATTENDED.get()? {
        Unattended::Answer(content) => Some(Arc::new(Answer {
            content: content.clone(),
        })),
        Unattended::Defer if !terminal => Some(Arc::new(DeferElicitation)),
        Unattended::Defer => None,
    }
}

/// Parse `--answer`: a JSON object.
pub fn parse_answer(text: &str) -> anyhow::Result<Map<String, Value>> {
    match serde_json::from_str(text) {
        Ok(Value::Object(content)) => Ok(content),
        Ok(_) => anyhow::bail!(
            "--answer takes a JSON object of the form's fields, e.g. '{{\"name\": \"Ada\"}}'"
        ),
        Err(error) => anyhow::bail!("--answer is not valid JSON: {error}"),
    }
}

/// Answers every form with the same values (checked against the form's schema by the
/// library: an answer that does not fit is declined); declines URL questions.
struct Answer {
    content: Map<String, Value>,
}

#[async_trait]
impl Elicitor for Answer {
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse {
        match request.mode {
            ElicitationMode::Form { .. } => ElicitationResponse::Accept {
                content: self.content.clone(),
            },
            ElicitationMode::Url { .. } => ElicitationResponse::Decline,
        }
    }

    fn supports_url(&self) -> bool {
        false
    }
}
