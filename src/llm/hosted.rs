//! [`HostedTool`]: a tool the provider runs itself — web search, web fetch, code execution,
//! file search, URL context — turned on per request in
//! [`RequestOptions::hosted_tools`](crate::vocab::RequestOptions::hosted_tools).
//!
//! Each API has its own set, and its own wire shape for each (written by the backend's
//! encoder):
//!
//! | tool | Anthropic Messages | OpenAI Responses | Gemini |
//! |---|---|---|---|
//! | [`HostedTool::WebSearch`] | `web_search_20250305` | `web_search` | — |
//! | [`HostedTool::WebFetch`] | `web_fetch_20250910` (beta `web-fetch-2025-09-10`) | — | — |
//! | [`HostedTool::CodeExecution`] | `code_execution_20250825` (beta `code-execution-2025-08-25`) | — | `codeExecution` |
//! | [`HostedTool::CodeInterpreter`] | — | `code_interpreter`, container `auto` | — |
//! | [`HostedTool::FileSearch`] | — | `file_search` | — |
//! | [`HostedTool::GoogleSearch`] | — | — | `googleSearch` |
//! | [`HostedTool::UrlContext`] | — | — | `urlContext` |
//!
//! A tool the API does not have fails the request with
//! [`ProviderError::UnsupportedHostedTool`](crate::llm::ProviderError::UnsupportedHostedTool),
//! which names what each API supports: a hosted tool is never silently dropped. Chat
//! completions have none. The blocks the tools produce come back as artifacts, verbatim and in
//! place (see [`crate::vocab::artifact`]); which of them a run offers is gated like its own
//! tools (`crate::tools::hosted`).
//!
//! ```
//! use agcore::llm::WireApi;
//! use agcore::llm::hosted::HostedTool;
//!
//! let search = HostedTool::from_name("web_search")?;
//! assert!(search.check(WireApi::AnthropicMessages).is_ok());
//! let error = search.check(WireApi::Gemini).unwrap_err();
//! assert!(error.to_string().contains("gemini: google_search, code_execution, url_context"));
//! # Ok::<(), agcore::llm::hosted::UnknownHostedTool>(())
//! ```

use serde_json::{Map, Value, json};

use crate::llm::model::WireApi;
pub use crate::vocab::hosted::{HostedTool, NAMES, SUPPORTED, UnknownHostedTool};

/// A hosted tool the request's API does not have.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the {} API has no hosted tool `{tool}`; hosted tools by API: {}", api.as_str(), supported_list())]
pub struct UnsupportedHostedTool {
    /// The tool's name.
    pub tool: String,
    /// The API of the request.
    pub api: WireApi,
}

/// `anthropic: web_search, web_fetch, code_execution; openai-responses: ...; openai: none`.
fn supported_list() -> String {
    SUPPORTED
        .iter()
        .map(|(api, names)| {
            let names = if names.is_empty() {
                "none".to_owned()
            } else {
                names.join(", ")
            };
            format!("{api}: {names}")
        })
        .collect::<Vec<_>>()
        .join("; ")
}

impl HostedTool {
    /// Whether `api` has this tool.
    pub fn supported_by(&self, api: WireApi) -> bool {
        self.supported_by_api_named(api.as_str())
    }

    /// `Ok` when `api` has this tool.
    ///
    /// # Errors
    /// [`UnsupportedHostedTool`], naming each API's tools.
    pub fn check(&self, api: WireApi) -> Result<(), UnsupportedHostedTool> {
        if self.supported_by(api) {
            Ok(())
        } else {
            Err(UnsupportedHostedTool {
                tool: self.name().to_owned(),
                api,
            })
        }
    }

    /// The tool's entry in a Messages API `tools` list, and the beta it needs, if any.
    pub(crate) fn anthropic(&self) -> Result<(Value, Option<&'static str>), UnsupportedHostedTool> {
        let (kind, beta, mut entry) = match self {
            HostedTool::WebSearch {
                max_uses,
                allowed_domains,
                blocked_domains,
            } => (
                "web_search_20250305",
                None,
                limits(*max_uses, allowed_domains, blocked_domains),
            ),
            HostedTool::WebFetch {
                max_uses,
                allowed_domains,
                blocked_domains,
            } => (
                "web_fetch_20250910",
                Some("web-fetch-2025-09-10"),
                limits(*max_uses, allowed_domains, blocked_domains),
            ),
            HostedTool::CodeExecution => (
                "code_execution_20250825",
                Some("code-execution-2025-08-25"),
                Map::new(),
            ),
            _ => return Err(self.unsupported(WireApi::AnthropicMessages)),
        };
        entry.insert("type".into(), Value::String(kind.into()));
        entry.insert("name".into(), Value::String(self.name().into()));
        Ok((Value::Object(entry), beta))
    }

    /// The tool's entry in a Responses API `tools` list.
    pub(crate) fn responses(&self) -> Result<Value, UnsupportedHostedTool> {
        Ok(match self {
            HostedTool::WebSearch {
                allowed_domains, ..
            } if !allowed_domains.is_empty() => {
                json!({"type": "web_search", "filters": {"allowed_domains": allowed_domains}})
            }
            HostedTool::WebSearch { .. } => json!({"type": "web_search"}),
            HostedTool::CodeInterpreter => {
                json!({"type": "code_interpreter", "container": {"type": "auto"}})
            }
            HostedTool::FileSearch {
                vector_store_ids,
                max_num_results,
            } => {
                let mut entry =
                    json!({"type": "file_search", "vector_store_ids": vector_store_ids});
                if let Some(max) = max_num_results {
                    entry["max_num_results"] = json!(max);
                }
                entry
            }
            _ => return Err(self.unsupported(WireApi::Responses)),
        })
    }

    /// The tool's entry in a Gemini `tools` list.
    pub(crate) fn gemini(&self) -> Result<Value, UnsupportedHostedTool> {
        Ok(match self {
            HostedTool::GoogleSearch => json!({"googleSearch": {}}),
            HostedTool::CodeExecution => json!({"codeExecution": {}}),
            HostedTool::UrlContext => json!({"urlContext": {}}),
            _ => return Err(self.unsupported(WireApi::Gemini)),
        })
    }

    fn unsupported(&self, api: WireApi) -> UnsupportedHostedTool {
        UnsupportedHostedTool {
            tool: self.name().to_owned(),
            api,
        }
    }
}

/// Anthropic's `max_uses` / `allowed_domains` / `blocked_domains`, those that are set.
fn limits(max_uses: Option<u32>, allowed: &[String], blocked: &[String]) -> Map<String, Value> {
    let mut entry = Map::new();
    if let Some(max) = max_uses {
        entry.insert("max_uses".into(), json!(max));
    }
    if !allowed.is_empty() {
        entry.insert("allowed_domains".into(), json!(allowed));
    }
    if !blocked.is_empty() {
        entry.insert("blocked_domains".into(), json!(blocked));
    }
    entry
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_supported_somewhere() {
        for name in NAMES {
            let tool = HostedTool::from_name(name).unwrap();
            assert!(
                SUPPORTED
                    .iter()
                    .any(|(api, _)| tool.supported_by_api_named(api)),
                "{name}"
            );
        }
    }

    #[test]
    fn chat_completions_have_none_and_the_error_names_every_api() {
        let error = HostedTool::CodeInterpreter
            .check(WireApi::ChatCompletions)
            .unwrap_err();
        let text = error.to_string();
        assert!(text.starts_with("the openai API has no hosted tool `code_interpreter`"));
        assert!(text.contains("anthropic: web_search, web_fetch, code_execution"));
        assert!(text.contains("openai-responses: web_search, code_interpreter, file_search"));
        assert!(text.contains("openai: none"));
    }

    #[test]
    fn each_api_gets_its_own_shape() {
        let search = HostedTool::WebSearch {
            max_uses: Some(3),
            allowed_domains: vec!["example.com".into()],
            blocked_domains: Vec::new(),
        };
        assert_eq!(
            search.anthropic().unwrap(),
            (
                json!({"type": "web_search_20250305", "name": "web_search", "max_uses": 3, "allowed_domains": ["example.com"]}),
                None
            )
        );
        assert_eq!(
            search.responses().unwrap(),
            json!({"type": "web_search", "filters": {"allowed_domains": ["example.com"]}})
        );
        assert!(search.gemini().is_err());
        assert_eq!(
            HostedTool::CodeExecution.anthropic().unwrap().1,
            Some("code-execution-2025-08-25")
        );
        assert_eq!(
            HostedTool::CodeExecution.gemini().unwrap(),
            json!({"codeExecution": {}})
        );
        assert!(HostedTool::CodeExecution.responses().is_err());
    }
}
