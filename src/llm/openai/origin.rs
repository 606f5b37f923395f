//! Where a reply's reasoning text came from, so it goes back only there.
//!
//! `reasoning_content` / `reasoning` are plain message fields, not [`Artifact`]s, but they follow
//! the artifacts' cross-model rule: a server gets back only reasoning that it (the same base URL)
//! produced for the same model. A reply with reasoning carries one extra artifact recording
//! that origin; it is never sent (the request writes only call fields from artifacts). Like an
//! artifact without a model, reasoning without a recorded origin (a history written by hand or
//! imported, or saved before origins were recorded) goes to any server.

use serde_json::{Value, json};

use crate::vocab::{Artifact, ArtifactPlace, ArtifactProvider, OpenaiChatMessage};

/// The artifact key naming the server (base URL) that produced a reply's reasoning.
const KEY: &str = "reasoning_origin";

/// The server part of `base_url` that identifies it: without user info, query, fragment or a
/// trailing `/` (so neither credentials nor per-request parameters end up in a history).
pub(crate) fn server_of(base_url: &str) -> String {
    match url::Url::parse(base_url) {
        Ok(mut url) => {
            // Neither can fail on a URL with a host; a URL without one keeps what it has.
            let _ = url.set_username("");
            let _ = url.set_password(None);
            url.set_query(None);
            url.set_fragment(None);
            url.as_str().trim_end_matches('/').to_owned()
        }
        Err(_) => base_url
            .split(['?', '#'])
            .next()
            .unwrap_or_default()
            .trim_end_matches('/')
            .to_owned(),
    }
}

/// The artifact recording that a reply's reasoning came from `server` for `model`.
pub(crate) fn origin_artifact(model: &str, server: &str) -> Artifact {
    Artifact::new(
        ArtifactProvider::OpenaiChat,
        model,
        ArtifactPlace::On(0),
        json!({ KEY: server }),
    )
}

/// Whether `message`'s reasoning may go back in a request to `server` for `model`: it records
/// that origin, or none.
pub(crate) fn reasoning_is_from(message: &OpenaiChatMessage, model: &str, server: &str) -> bool {
    let mut origins = message
        .artifacts()
        .iter()
        .filter(|artifact| artifact.provider == ArtifactProvider::OpenaiChat)
        .filter_map(|artifact| {
            let origin = artifact.data.get(KEY).and_then(Value::as_str)?;
            Some((artifact.model.as_deref(), origin))
        })
        .peekable();
    origins.peek().is_none()
        || origins.any(|(made, origin)| made.is_none_or(|made| made == model) && origin == server)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_is_the_base_url_without_credentials_or_parameters() {
        assert_eq!(
            server_of("https://user:pa%40ss@api.deepseek.com/v1/?key=x#f"),
            "https://api.deepseek.com/v1"
        );
        assert_eq!(
            server_of("http://127.0.0.1:8080/v1"),
            "http://127.0.0.1:8080/v1"
        );
        assert_eq!(server_of("not a url?x=1"), "not a url");
    }

    #[test]
    fn reasoning_goes_back_only_to_its_server_and_model() {
        let message = OpenaiChatMessage::assistant_text("hi")
            .with_artifacts(vec![origin_artifact("deepseek-reasoner", "https://a/v1")]);
        assert!(reasoning_is_from(
            &message,
            "deepseek-reasoner",
            "https://a/v1"
        ));
        assert!(!reasoning_is_from(
            &message,
            "deepseek-chat",
            "https://a/v1"
        ));
        assert!(!reasoning_is_from(
            &message,
            "deepseek-reasoner",
            "https://b/v1"
        ));
        // No origin recorded (hand-made, imported, older): like an artifact without a model.
        assert!(reasoning_is_from(
            &OpenaiChatMessage::assistant_text("hi"),
            "deepseek-reasoner",
            "https://a/v1"
        ));
    }
}
