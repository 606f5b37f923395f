//! The hosted tools a run turns on: `--hosted-tool NAME` (repeatable), else the config's
//! `[model.hosted_tools_by_provider]` entry for the provider, else `[model] hosted_tools`.
//! An entry is a name (`"web_search"`) or a table with the tool's options
//! (`{ type = "file_search", vector_store_ids = ["vs_1"] }`). A tool the provider's API does
//! not have is an error before any request, naming what each API has.

use agcore::llm::WireApi;
use agcore::llm::hosted::HostedTool;

use crate::config::{HostedToolSetting, ModelSection};

/// The hosted tools of `flags` (names), else of the config for `provider`.
///
/// # Errors
/// An unknown name.
pub fn chosen(
    flags: &[String],
    section: &ModelSection,
    provider: &str,
) -> anyhow::Result<Vec<HostedTool>> {
    if !flags.is_empty() {
        return flags
            .iter()
            .map(|name| Ok(HostedTool::from_name(name)?))
            .collect();
    }
    section
        .hosted_tools_by_provider
        .get(provider)
        .unwrap_or(&section.hosted_tools)
        .iter()
        .map(|setting| match setting {
            HostedToolSetting::Name(name) => Ok(HostedTool::from_name(name)?),
            HostedToolSetting::Tool(tool) => Ok(tool.clone()),
        })
        .collect()
}

/// `Ok` when `api` has every tool of `tools`.
///
/// # Errors
/// The first tool it does not have, naming what each API has.
pub fn check(tools: &[HostedTool], api: WireApi) -> anyhow::Result<()> {
    for tool in tools {
        tool.check(api)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(text: &str) -> ModelSection {
        toml::from_str(text).unwrap()
    }

    #[test]
    fn flags_win_then_the_provider_table_then_the_list() {
        let section = section(
            r#"
hosted_tools = ["web_search", { type = "file_search", vector_store_ids = ["vs_1"] }]
[hosted_tools_by_provider]
gemini = ["google_search"]
"#,
        );
        let tools = chosen(&[], &section, "openai-responses").unwrap();
        assert_eq!(tools.len(), 2);
        assert_eq!(
            tools[1],
            HostedTool::FileSearch {
                vector_store_ids: vec!["vs_1".into()],
                max_num_results: None
            }
        );
        assert_eq!(
            chosen(&[], &section, "gemini").unwrap(),
            vec![HostedTool::GoogleSearch]
        );
        assert_eq!(
            chosen(&["code_execution".into()], &section, "gemini").unwrap(),
            vec![HostedTool::CodeExecution]
        );
        let error = chosen(&["web-search".into()], &section, "gemini").unwrap_err();
        assert!(error.to_string().contains("known: web_search"), "{error}");
        let error = check(&tools, WireApi::Gemini).unwrap_err();
        assert!(
            error.to_string().contains("gemini: google_search"),
            "{error}"
        );
        assert!(check(&tools, WireApi::Responses).is_ok());
    }
}
