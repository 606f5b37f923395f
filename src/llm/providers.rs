//! The provider table: every model API agcore connects to by name — its name, wire API,
//! default base URL, the variables of its base URL and key, and how to connect it. The
//! backends' `from_env`, the CLI's `--provider`, `--model PROVIDER:NAME` and its key handling
//! all read this one table. Each entry lives in its provider's folder; adding a provider is
//! its folder plus one line here.
//!
//! ```
//! use agcore::llm::providers;
//!
//! let anthropic = providers::named("anthropic").unwrap();
//! assert_eq!(anthropic.key_variables, ["ANTHROPIC_API_KEY"]);
//! assert!(providers::names().any(|name| name == "gemini"));
//! ```

pub use crate::llm::provider::{CloudSettings, Connection, Provider};

/// Every provider, in the order the CLI lists them.
pub static PROVIDERS: &[Provider] = &[
    crate::llm::openai::PROVIDER,
    crate::llm::openai_responses::PROVIDER,
    crate::llm::anthropic::PROVIDER,
    crate::llm::gemini::PROVIDER,
    crate::llm::openai::dialect::mistral::PROVIDER,
    crate::llm::bedrock::PROVIDER,
];

/// The provider called `name`.
pub fn named(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|provider| provider.name == name)
}

/// The names of all providers.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|provider| provider.name)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::model::WireApi;

    #[test]
    fn names_are_unique_and_every_api_has_its_own_entry() {
        let mut names: Vec<_> = names().collect();
        names.sort_unstable();
        let count = names.len();
        names.dedup();
        assert_eq!(names.len(), count);
        for api in [
            WireApi::ChatCompletions,
            WireApi::Responses,
            WireApi::AnthropicMessages,
            WireApi::Gemini,
            WireApi::BedrockConverse,
        ] {
            let entry = named(api.as_str()).unwrap();
            assert_eq!(entry.api, api);
            assert_eq!(entry.artifact_provider(), api.artifact_provider());
        }
    }

    #[test]
    fn from_lookup_reads_the_base_url_and_the_first_key_set() {
        let gemini = named("gemini").unwrap();
        let connection = gemini.from_lookup(|name| match name {
            "GEMINI_BASE_URL" => Some("http://127.0.0.1:9/v1beta".into()),
            "GEMINI_API_KEY" => Some(String::new()),
            "GOOGLE_API_KEY" => Some("AIza-google".into()),
            _ => None,
        });
        assert_eq!(connection.base_url, "http://127.0.0.1:9/v1beta");
        assert_eq!(connection.api_key.as_deref(), Some("AIza-google"));
        assert!(!format!("{connection:?}").contains("AIza"));
        let connection = gemini.from_lookup(|_| None);
        assert_eq!(connection.base_url, gemini.default_base_url);
        assert_eq!(connection.api_key, None);
    }
}
