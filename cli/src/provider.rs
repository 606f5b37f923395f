//! The model API a command talks to, and how much it reasons: the words of `--provider`,
//! `--model PROVIDER:NAME` and `--reasoning`. A leaf: the arguments, the config and the
//! settings all read these, and it reads none of them.

use agcore::llm::providers::{self, Provider};

/// A model API agcore speaks natively: an entry of the library's provider table
/// ([`agcore::llm::providers`]), which holds its name, default base URL and key variables.
#[derive(Clone, Copy)]
pub struct Api(&'static Provider);

// The APIs the CLI (and its tests) name in code; the rest are reached through the table by name.
#[allow(non_upper_case_globals)]
impl Api {
    /// OpenAI chat completions: api.openai.com and every OpenAI-compatible server.
    pub const Openai: Api = Api(&agcore::llm::openai::PROVIDER);
    /// The OpenAI Responses API.
    #[cfg(test)]
    pub const OpenaiResponses: Api = Api(&agcore::llm::openai_responses::PROVIDER);
    /// The Anthropic Messages API.
    #[cfg(test)]
    pub const Anthropic: Api = Api(&agcore::llm::anthropic::PROVIDER);
    /// The Gemini API (`generateContent`).
    #[cfg(test)]
    pub const Gemini: Api = Api(&agcore::llm::gemini::PROVIDER);
}

impl PartialEq for Api {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Api {}

impl std::fmt::Debug for Api {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Api({})", self.0.name)
    }
}

impl Api {
    /// The names of `--provider`, `[model] provider`, `AGCORE_PROVIDER` and the `PROVIDER:`
    /// prefix of `--model`: every entry of the provider table.
    pub fn names() -> impl Iterator<Item = &'static str> {
        providers::names()
    }

    /// The API named `name` (one of [`Api::names`]).
    pub fn parse(name: &str) -> Option<Self> {
        providers::named(name).map(Api)
    }

    /// The API's name.
    pub fn name(self) -> &'static str {
        self.0.name
    }

    /// Its entry in the provider table.
    pub fn provider(self) -> &'static Provider {
        self.0
    }

    /// The vendor's public base URL, up to where the API's resource paths begin.
    pub fn default_base_url(self) -> &'static str {
        self.0.default_base_url
    }

    /// The variable that overrides the base URL (`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`, ...).
    pub fn base_url_variable(self) -> &'static str {
        self.0.base_url_variable
    }

    /// The variables that hold the API's key, in the order they are read.
    pub fn key_variables(self) -> &'static [&'static str] {
        self.0.key_variables
    }
}

/// `name` as an [`Api`], or an error naming `source` and the valid names.
pub fn api_named(name: &str, source: &str) -> anyhow::Result<Api> {
    Api::parse(name).ok_or_else(|| {
        anyhow::anyhow!(
            "{source} {:?} is not a provider: expected one of {}",
            agcore::display::escape_for_terminal(name),
            Api::names().collect::<Vec<_>>().join(", ")
        )
    })
}

/// `PROVIDER:NAME` split into the provider and the name; a prefix that names no provider is
/// part of the name (Ollama's `qwen3:8b`).
pub fn split_provider(model: &str) -> (Option<Api>, &str) {
    match model.split_once(':') {
        Some((prefix, name)) if !name.is_empty() => match Api::parse(prefix) {
            Some(api) => (Some(api), name),
            None => (None, model),
        },
        _ => (None, model),
    }
}

/// `--reasoning` / `[model] reasoning`: an effort, or a budget in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reasoning {
    /// No reasoning (where the model allows turning it off).
    Off,
    /// Little reasoning.
    Low,
    /// Some reasoning.
    Medium,
    /// Much reasoning.
    High,
    /// At most this many tokens of reasoning.
    Budget(u32),
}

/// Parse `off`, `low`, `medium`, `high` or a number of tokens greater than 0.
pub fn parse_reasoning(text: &str) -> Result<Reasoning, String> {
    match text.trim() {
        "off" | "none" => Ok(Reasoning::Off),
        "low" => Ok(Reasoning::Low),
        "medium" => Ok(Reasoning::Medium),
        "high" => Ok(Reasoning::High),
        other => other
            .parse::<u32>()
            .ok()
            .filter(|&tokens| tokens > 0)
            .map(Reasoning::Budget)
            .ok_or_else(|| {
                format!(
                    "expected off, low, medium, high or a number of tokens greater than 0, not {:?}",
                    agcore::display::escape_for_terminal(other)
                )
            }),
    }
}

impl<'de> serde::Deserialize<'de> for Reasoning {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(serde::Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Tokens(u64),
            Text(String),
        }
        let text = match Raw::deserialize(deserializer)? {
            Raw::Tokens(tokens) => tokens.to_string(),
            Raw::Text(text) => text,
        };
        parse_reasoning(&text).map_err(serde::de::Error::custom)
    }
}
