//! The model API a command talks to, and how much it reasons: the words of `--provider`,
//! `--model PROVIDER:NAME` and `--reasoning`. A leaf: the arguments, the config and the
//! settings all read these, and it reads none of them.

/// The default base URL of the OpenAI APIs when neither `--base-url`, the config, nor
/// `OPENAI_BASE_URL` set one.
pub const DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

/// The model APIs agcore speaks natively.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// OpenAI chat completions: api.openai.com and every OpenAI-compatible server.
    Openai,
    /// The OpenAI Responses API.
    OpenaiResponses,
    /// The Anthropic Messages API.
    Anthropic,
    /// The Gemini API (`generateContent`).
    Gemini,
}

impl Api {
    /// The names of `--provider`, `[model] provider`, `AGCORE_PROVIDER` and the `PROVIDER:`
    /// prefix of `--model`.
    pub const NAMES: [&'static str; 4] = ["openai", "openai-responses", "anthropic", "gemini"];

    /// The API named `name` (one of [`Api::NAMES`]).
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "openai" => Some(Api::Openai),
            "openai-responses" => Some(Api::OpenaiResponses),
            "anthropic" => Some(Api::Anthropic),
            "gemini" => Some(Api::Gemini),
            _ => None,
        }
    }

    /// The API's name.
    pub fn name(self) -> &'static str {
        match self {
            Api::Openai => "openai",
            Api::OpenaiResponses => "openai-responses",
            Api::Anthropic => "anthropic",
            Api::Gemini => "gemini",
        }
    }

    /// The vendor's public base URL, up to where the API's resource path begins.
    pub fn default_base_url(self) -> &'static str {
        match self {
            Api::Openai | Api::OpenaiResponses => DEFAULT_BASE_URL,
            Api::Anthropic => "https://api.anthropic.com/v1",
            Api::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }

    /// The variables that hold the API's key, in the order they are read.
    pub fn key_variables(self) -> &'static [&'static str] {
        match self {
            Api::Openai | Api::OpenaiResponses => &["OPENAI_API_KEY"],
            Api::Anthropic => &["ANTHROPIC_API_KEY"],
            Api::Gemini => &["GEMINI_API_KEY", "GOOGLE_API_KEY"],
        }
    }

    /// Whether the API is OpenAI's (where `OPENAI_BASE_URL` applies).
    pub fn is_openai(self) -> bool {
        matches!(self, Api::Openai | Api::OpenaiResponses)
    }
}

/// `name` as an [`Api`], or an error naming `source` and the valid names.
pub fn api_named(name: &str, source: &str) -> anyhow::Result<Api> {
    Api::parse(name).ok_or_else(|| {
        anyhow::anyhow!(
            "{source} {:?} is not a provider: expected one of {}",
            agcore::display::escape_for_terminal(name),
            Api::NAMES.join(", ")
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
