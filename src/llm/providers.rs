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

use std::sync::Arc;

use crate::llm::error::ProviderError;
use crate::llm::model::{ChatModel, WireApi};
use crate::llm::transport::TransportSettings;
use crate::vocab::ArtifactProvider;

/// Every provider, in the order the CLI lists them.
pub static PROVIDERS: &[Provider] = &[
    crate::llm::openai::PROVIDER,
    crate::llm::openai_responses::PROVIDER,
    crate::llm::anthropic::PROVIDER,
    crate::llm::gemini::PROVIDER,
    crate::llm::openai::dialect::mistral::PROVIDER,
];

/// The provider called `name`.
pub fn named(name: &str) -> Option<&'static Provider> {
    PROVIDERS.iter().find(|provider| provider.name == name)
}

/// The names of all providers.
pub fn names() -> impl Iterator<Item = &'static str> {
    PROVIDERS.iter().map(|provider| provider.name)
}

/// One model API agcore connects to by name.
#[derive(Debug)]
pub struct Provider {
    /// The name of `--provider`, `[model] provider` and the `PROVIDER:` prefix of `--model`.
    pub name: &'static str,
    /// The wire API it speaks.
    pub api: WireApi,
    /// The vendor's public base URL, up to where the API's resource paths begin.
    pub default_base_url: &'static str,
    /// The variable that overrides the base URL (`OPENAI_BASE_URL`, ...).
    pub base_url_variable: &'static str,
    /// The variables that hold the key, in the order they are read.
    pub key_variables: &'static [&'static str],
    /// A model for a connection.
    pub connect: fn(Connection) -> Result<Arc<dyn ChatModel>, ProviderError>,
}

impl Provider {
    /// The artifacts its API reads back.
    pub fn artifact_provider(&self) -> ArtifactProvider {
        self.api.artifact_provider()
    }

    /// The connection the environment describes: the base URL variable (else the default) and
    /// the first key variable set; empty variables count as unset.
    pub fn from_env(&self) -> Connection {
        self.from_lookup(|name| std::env::var(name).ok())
    }

    /// [`Provider::from_env`] over `lookup` instead of the process environment.
    pub fn from_lookup(&self, lookup: impl Fn(&str) -> Option<String>) -> Connection {
        let var = |name: &str| lookup(name).filter(|value| !value.is_empty());
        Connection {
            provider: self.name.to_owned(),
            base_url: var(self.base_url_variable)
                .unwrap_or_else(|| self.default_base_url.to_owned()),
            api_key: self.key_variables.iter().find_map(|name| var(name)),
            transport: TransportSettings::default(),
        }
    }

    /// A model for `connection`.
    ///
    /// # Errors
    /// [`ProviderError::Other`] when the base URL, the key or a header is invalid.
    pub fn connect(&self, connection: Connection) -> Result<Arc<dyn ChatModel>, ProviderError> {
        (self.connect)(connection)
    }
}

/// Where and how to reach one provider's server.
#[derive(Clone)]
pub struct Connection {
    /// The provider name the model reports (an OpenAI-compatible server may go by its own:
    /// `ollama`, `vllm`, ...).
    pub provider: String,
    /// The base URL, up to where the API's resource paths begin.
    pub base_url: String,
    /// The key, if any; never printed.
    pub api_key: Option<String>,
    /// Timeouts, limits, extra headers and query.
    pub transport: TransportSettings,
}

impl Connection {
    /// A connection to `base_url` for the provider `provider`, without a key, default transport.
    pub fn new(provider: impl Into<String>, base_url: impl Into<String>) -> Self {
        Connection {
            provider: provider.into(),
            base_url: base_url.into(),
            api_key: None,
            transport: TransportSettings::default(),
        }
    }

    /// With `key`.
    #[must_use]
    pub fn with_api_key(mut self, key: impl Into<String>) -> Self {
        self.api_key = Some(key.into());
        self
    }

    /// With these transport settings.
    #[must_use]
    pub fn with_transport(mut self, transport: TransportSettings) -> Self {
        self.transport = transport;
        self
    }
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("transport", &self.transport)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
