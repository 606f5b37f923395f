//! Questions of MCP servers when nobody is at a terminal, for `agcore run`: with a session, a
//! question asked inside a `tools/call` or by its task (protocol 2026-07-28) suspends the run
//! (exit code 3) and names what the server asks — for a URL question, the URL, which the
//! person opens by hand (agcore never opens it); `agcore run --session NAME --resume --answer
//! ANSWER` gives the answer (a JSON object of the form's fields, or `accept` / `decline` for a
//! URL question) and the call goes on from the server's stored `requestState` (or the same
//! task).

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
    /// Answer every question this way (`--answer`).
    Answer(Answer),
}

/// What `--answer` says.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A form's fields (a URL question is declined: a form answer does not answer it).
    Form(Map<String, Value>),
    /// `accept`: a URL question is accepted (the person opened the URL themselves); a form is
    /// accepted with its schema's defaults (declined by the library when they do not fit).
    Accept,
    /// `decline`: every question is declined.
    Decline,
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
        Unattended::Answer(answer) => Some(Arc::new(Answering {
            answer: answer.clone(),
        })),
        Unattended::Defer if !terminal => Some(Arc::new(DeferElicitation)),
        Unattended::Defer => None,
    }
}

/// Parse `--answer`: `accept`, `decline` or a JSON object.
pub fn parse_answer(text: &str) -> anyhow::Result<Answer> {
    match text.trim() {
        "accept" => return Ok(Answer::Accept),
        "decline" => return Ok(Answer::Decline),
        _ => {}
    }
    match serde_json::from_str(text) {
        Ok(Value::Object(content)) => Ok(Answer::Form(content)),
        Ok(_) => anyhow::bail!(
            "--answer takes a JSON object of the form's fields, e.g. '{{\"name\": \"Ada\"}}', \
             or accept / decline"
        ),
        Err(error) => {
            anyhow::bail!("--answer is not valid JSON (nor accept / decline): {error}")
        }
    }
}

/// Answers every question the same way (a form's values are checked against its schema by the
/// library: an answer that does not fit is declined). Never opens a URL: `accept` means the
/// person opened it.
struct Answering {
    answer: Answer,
}

#[async_trait]
impl Elicitor for Answering {
    async fn elicit(&self, request: &ElicitationRequest) -> ElicitationResponse {
        match (&self.answer, &request.mode) {
            (Answer::Form(content), ElicitationMode::Form { .. }) => ElicitationResponse::Accept {
                content: content.clone(),
            },
            (Answer::Accept, _) => ElicitationResponse::Accept {
                content: Map::new(),
            },
            (Answer::Form(_), ElicitationMode::Url { .. }) | (Answer::Decline, _) => {
                ElicitationResponse::Decline
            }
        }
    }

    /// URL questions are answered (accept / decline), never opened.
    fn supports_url(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(mode: ElicitationMode) -> ElicitationRequest {
        ElicitationRequest {
            server: "s".into(),
            message: "m".into(),
            mode,
        }
    }

    #[test]
    fn answers_parse_as_words_or_a_form() {
        assert_eq!(parse_answer("accept").unwrap(), Answer::Accept);
        assert_eq!(parse_answer(" decline ").unwrap(), Answer::Decline);
        let Answer::Form(form) = parse_answer(r#"{"name": "Ada"}"#).unwrap() else {
            panic!("not a form");
        };
        assert_eq!(form["name"], "Ada");
        assert!(parse_answer("[1]").is_err());
        assert!(parse_answer("yes").is_err());
    }

    #[tokio::test]
    async fn a_url_question_is_accepted_or_declined_as_answered_and_never_filled_as_a_form() {
        let url = || {
            request(ElicitationMode::Url {
                url: "https://example.invalid/".into(),
                elicitation_id: "e".into(),
            })
        };
        let form = || {
            request(ElicitationMode::Form {
                schema: Value::Null,
            })
        };
        let answering = |answer| Answering { answer };
        let accepted = answering(Answer::Accept).elicit(&url()).await;
        assert_eq!(
            accepted,
            ElicitationResponse::Accept {
                content: Map::new()
            }
        );
        let declined = answering(Answer::Decline).elicit(&url()).await;
        assert_eq!(declined, ElicitationResponse::Decline);
        let fields = Map::from_iter([("name".to_owned(), Value::from("Ada"))]);
        let by_form = answering(Answer::Form(fields.clone()));
        assert_eq!(by_form.elicit(&url()).await, ElicitationResponse::Decline);
        assert_eq!(
            by_form.elicit(&form()).await,
            ElicitationResponse::Accept { content: fields }
        );
        assert_eq!(
            answering(Answer::Decline).elicit(&form()).await,
            ElicitationResponse::Decline
        );
    }
}
