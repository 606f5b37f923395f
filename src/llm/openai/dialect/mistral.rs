//! Mistral's chat completions (`https://api.mistral.ai/v1`): OpenAI-compatible but for three
//! names. A forced tool call is `tool_choice: "any"` (the form every Mistral model and
//! version accepts), the seed is `random_seed`, and the output limit is `max_tokens` (Mistral
//! rejects fields it does not know, such as `max_completion_tokens`, with a 422).

use std::borrow::Cow;

use serde_json::Value;

use crate::llm::model::WireApi;
use crate::llm::openai::{Dialect, connect};
use crate::llm::provider::Provider;
use crate::vocab::{RequestOptions, ToolChoice};

/// Mistral in the provider table: `mistral`, `MISTRAL_BASE_URL`, `MISTRAL_API_KEY`.
pub const PROVIDER: Provider = Provider {
    name: "mistral",
    api: WireApi::ChatCompletions,
    default_base_url: "https://api.mistral.ai/v1",
    base_url_variable: "MISTRAL_BASE_URL",
    key_variables: &["MISTRAL_API_KEY"],
    connect: |connection| connect(connection, &Mistral),
};

/// Mistral's [`Dialect`].
#[derive(Debug, Default, Clone, Copy)]
pub struct Mistral;

impl Dialect for Mistral {
    fn options<'a>(&self, options: Cow<'a, RequestOptions>) -> Cow<'a, RequestOptions> {
        let forced = matches!(options.tool_choice, Some(ToolChoice::Required));
        if !forced && options.seed.is_none() && options.max_completion_tokens.is_none() {
            return options;
        }
        let mut options = options.into_owned();
        if forced {
            options.tool_choice = None;
            options
                .extra
                .entry("tool_choice")
                .or_insert(Value::from("any"));
        }
        if let Some(seed) = options.seed.take() {
            options
                .extra
                .entry("random_seed")
                .or_insert(Value::from(seed));
        }
        if let Some(max) = options.max_completion_tokens.take() {
            options.max_tokens = Some(max);
        }
        Cow::Owned(options)
    }
}
