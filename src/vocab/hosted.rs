//! [`HostedTool`]: a tool the provider runs itself (web search, code execution, ...), as a
//! request asks for it in [`RequestOptions::hosted_tools`](crate::vocab::RequestOptions::hosted_tools).
//! Which API has which, and each one's wire shape, is [`crate::llm::hosted`].

use serde::{Deserialize, Serialize};

/// A tool the provider runs (see [`crate::llm::hosted`] for each API's set).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum HostedTool {
    /// Web search (Anthropic, Responses).
    WebSearch {
        /// At most this many searches per request (Anthropic's `max_uses`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_uses: Option<u32>,
        /// Only these domains (Anthropic's `allowed_domains`, Responses' `filters`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allowed_domains: Vec<String>,
        /// Never these domains (Anthropic's `blocked_domains`).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blocked_domains: Vec<String>,
    },
    /// Fetching a URL the conversation names (Anthropic).
    WebFetch {
        /// At most this many fetches per request.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_uses: Option<u32>,
        /// Only these domains.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        allowed_domains: Vec<String>,
        /// Never these domains.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        blocked_domains: Vec<String>,
    },
    /// Code run in the provider's sandbox (Anthropic, Gemini).
    CodeExecution,
    /// The Responses API's code interpreter, in an automatically created container.
    CodeInterpreter,
    /// Search over the Responses API's vector stores.
    FileSearch {
        /// The vector stores searched (the API requires at least one).
        #[serde(default)]
        vector_store_ids: Vec<String>,
        /// At most this many results.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        max_num_results: Option<u32>,
    },
    /// Grounding with Google Search (Gemini).
    GoogleSearch,
    /// Reading the URLs a prompt names (Gemini).
    UrlContext,
}

/// Every hosted tool name.
pub const NAMES: &[&str] = &[
    "web_search",
    "web_fetch",
    "code_execution",
    "code_interpreter",
    "file_search",
    "google_search",
    "url_context",
];

/// The hosted tool names of each API, by the API's name (`anthropic`, `openai-responses`,
/// `gemini`, `openai`), in the order errors and docs list them.
pub const SUPPORTED: &[(&str, &[&str])] = &[
    ("anthropic", &["web_search", "web_fetch", "code_execution"]),
    (
        "openai-responses",
        &["web_search", "code_interpreter", "file_search"],
    ),
    (
        "gemini",
        &["google_search", "code_execution", "url_context"],
    ),
    ("openai", &[]),
];

/// A hosted tool name agcore does not know.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no hosted tool is called `{name}`; known: {}", NAMES.join(", "))]
pub struct UnknownHostedTool {
    /// The name asked for.
    pub name: String,
}

impl HostedTool {
    /// The tool called `name` (`web_search`, ...) with default options; a `file_search` made
    /// this way has no vector store yet.
    ///
    /// # Errors
    /// [`UnknownHostedTool`] for a name not in [`NAMES`].
    pub fn from_name(name: &str) -> Result<HostedTool, UnknownHostedTool> {
        Ok(match name {
            "web_search" => HostedTool::WebSearch {
                max_uses: None,
                allowed_domains: Vec::new(),
                blocked_domains: Vec::new(),
            },
            "web_fetch" => HostedTool::WebFetch {
                max_uses: None,
                allowed_domains: Vec::new(),
                blocked_domains: Vec::new(),
            },
            "code_execution" => HostedTool::CodeExecution,
            "code_interpreter" => HostedTool::CodeInterpreter,
            "file_search" => HostedTool::FileSearch {
                vector_store_ids: Vec::new(),
                max_num_results: None,
            },
            "google_search" => HostedTool::GoogleSearch,
            "url_context" => HostedTool::UrlContext,
            _ => {
                return Err(UnknownHostedTool {
                    name: name.to_owned(),
                });
            }
        })
    }

    /// The tool's name (`web_search`, `code_execution`, ...): the `name` of its blocks on the
    /// Messages API, and what configuration and `--hosted-tool` call it.
    pub fn name(&self) -> &'static str {
        match self {
            HostedTool::WebSearch { .. } => "web_search",
            HostedTool::WebFetch { .. } => "web_fetch",
            HostedTool::CodeExecution => "code_execution",
            HostedTool::CodeInterpreter => "code_interpreter",
            HostedTool::FileSearch { .. } => "file_search",
            HostedTool::GoogleSearch => "google_search",
            HostedTool::UrlContext => "url_context",
        }
    }

    /// Whether the tool reaches the web (search, fetch, URL context), rather than running
    /// code or reading the provider's own stores.
    pub fn uses_network(&self) -> bool {
        matches!(
            self,
            HostedTool::WebSearch { .. }
                | HostedTool::WebFetch { .. }
                | HostedTool::GoogleSearch
                | HostedTool::UrlContext
        )
    }

    /// Whether the API called `api` (`anthropic`, `openai-responses`, `gemini`; any other
    /// name speaks chat completions, which has none) has this tool.
    pub fn supported_by_api_named(&self, api: &str) -> bool {
        SUPPORTED
            .iter()
            .any(|(of, names)| *of == api && names.contains(&self.name()))
    }

    /// Whether the tool runs code.
    pub fn runs_code(&self) -> bool {
        matches!(
            self,
            HostedTool::CodeExecution | HostedTool::CodeInterpreter
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_round_trips() {
        for name in NAMES {
            let tool = HostedTool::from_name(name).unwrap();
            assert_eq!(tool.name(), *name);
            let text = serde_json::to_string(&tool).unwrap();
            assert_eq!(serde_json::from_str::<HostedTool>(&text).unwrap(), tool);
        }
        assert!(HostedTool::from_name("web-search").is_err());
    }
}
