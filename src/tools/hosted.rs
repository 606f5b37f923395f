//! Hosted tools under the registry's gates: each [`HostedTool`] has a [`ToolKind`] and
//! permissions like a local tool, and passes the same exposure gates — profile, restricted
//! mode, flags, the permission checker — before a request turns it on.
//!
//! | tool | kind | permissions |
//! |---|---|---|
//! | `web_search`, `google_search` | search | Network |
//! | `web_fetch`, `url_context` | fetch | Network |
//! | `code_execution`, `code_interpreter` | execute | Shell |
//! | `file_search` | search | Read |
//!
//! So restricted mode (an untrusted workspace) hides web search, fetch and code execution,
//! and the default permissions (which deny Shell) hide code execution until Shell is allowed.
//! The provider runs the tool, so no call of it can be asked about: a permission that would
//! be asked hides it too ([`HiddenBecause::NeedsApproval`]). Each reason is in
//! [`ToolRegistry::hosted_exposure`], which `agcore tools` lists.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tools::base::{BaseTool, ToolSource};
use crate::tools::capability::Permission;
use crate::tools::error::ToolError;
use crate::tools::exposure::{ExposurePolicy, HiddenBecause, ToolExposure};
use crate::tools::kind::ToolKind;
use crate::tools::registry::ToolRegistry;
use crate::vocab::HostedTool;

/// The kind of a hosted tool: searches are Search, fetches Fetch, code Execute.
pub fn kind_of(tool: &HostedTool) -> ToolKind {
    match tool {
        HostedTool::WebFetch { .. } | HostedTool::UrlContext => ToolKind::Fetch,
        HostedTool::CodeExecution | HostedTool::CodeInterpreter => ToolKind::Execute,
        _ => ToolKind::Search,
    }
}

/// The permissions a hosted tool needs: Network for the web, Shell for code, Read for
/// file search.
pub fn permissions_of(tool: &HostedTool) -> Vec<Permission> {
    if tool.uses_network() {
        vec![Permission::Network]
    } else if tool.runs_code() {
        vec![Permission::Shell]
    } else {
        vec![Permission::Read]
    }
}

/// A hosted tool seen by the gates as the [`BaseTool`] it would be; never run here.
struct Gated<'a>(&'a HostedTool);

#[async_trait]
impl BaseTool for Gated<'_> {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn description(&self) -> &str {
        "a tool the model's provider runs"
    }

    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }

    fn required_permissions(&self) -> Vec<Permission> {
        permissions_of(self.0)
    }

    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Err(ToolError::NotFound(format!(
            "{} runs at the model's provider, not here",
            self.0.name()
        )))
    }

    fn kind(&self) -> ToolKind {
        kind_of(self.0)
    }

    fn source(&self) -> ToolSource {
        ToolSource::Hosted
    }
}

impl ToolRegistry {
    /// Why the gates hide `tool` from a request to `provider`/`model` (empty: it is offered).
    fn hosted_reasons(&self, tool: &HostedTool, provider: &str, model: &str) -> Vec<HiddenBecause> {
        let default = ExposurePolicy::default();
        let policy = self.exposure().unwrap_or(&default);
        let gated = Gated(tool);
        let mut reasons = policy.gate(&gated);
        // A provider's name is its API's (`anthropic`, ...); any other speaks chat completions.
        if !tool.supported_by_api_named(provider) {
            reasons.push(HiddenBecause::Provider {
                provider: provider.to_owned(),
                model: model.to_owned(),
            });
        }
        let decision = self.permission_decision(&gated);
        if !decision.refused.is_empty() {
            reasons.push(HiddenBecause::Permissions {
                refused: decision.refused,
            });
        } else if !decision.ask.is_empty() {
            reasons.push(HiddenBecause::NeedsApproval {
                permissions: decision.ask,
            });
        }
        reasons
    }

    /// The exposure of each hosted tool in `tools` for `provider`/`model`, explained like
    /// [`ToolRegistry::explain`]'s (source `hosted`).
    pub fn hosted_exposure(
        &self,
        tools: &[HostedTool],
        provider: &str,
        model: &str,
    ) -> Vec<ToolExposure> {
        tools
            .iter()
            .map(|tool| {
                let hidden_because = self.hosted_reasons(tool, provider, model);
                ToolExposure {
                    name: tool.name().to_owned(),
                    source: ToolSource::Hosted,
                    kind: kind_of(tool),
                    permissions: permissions_of(tool),
                    ask: Vec::new(),
                    exposed: hidden_because.is_empty(),
                    hidden_because,
                    rules: Vec::new(),
                }
            })
            .collect()
    }

    /// The hosted tools of `tools` a request to `provider`/`model` may turn on: those the
    /// gates let through. One the provider's API does not have is kept, so that the request
    /// fails with `ProviderError::UnsupportedHostedTool` rather than go without
    /// it unsaid.
    pub fn offered_hosted_tools(
        &self,
        tools: &[HostedTool],
        provider: &str,
        model: &str,
    ) -> Vec<HostedTool> {
        tools
            .iter()
            .filter(|tool| {
                let reasons = self.hosted_reasons(tool, provider, model);
                let hidden = reasons
                    .iter()
                    .any(|reason| !matches!(reason, HiddenBecause::Provider { .. }));
                if hidden {
                    tracing::info!(
                        tool = tool.name(),
                        reasons = %crate::tools::exposure::describe_reasons(&reasons),
                        "a hosted tool is not offered"
                    );
                }
                !hidden
            })
            .cloned()
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::permission::{PermissionChecker, PermissionConfig};

    fn allow_all() -> PermissionConfig {
        PermissionConfig {
            allowed: vec![
                Permission::Read,
                Permission::Network,
                Permission::Shell,
                Permission::Write,
                Permission::Delete,
            ],
            denied: Vec::new(),
            allow_unspecified: true,
        }
    }

    fn all() -> Vec<HostedTool> {
        crate::vocab::hosted::NAMES
            .iter()
            .map(|name| HostedTool::from_name(name).unwrap())
            .collect()
    }

    #[test]
    fn restricted_mode_hides_the_web_and_code_and_says_why() {
        let registry = ToolRegistry::new()
            .with_exposure(ExposurePolicy::default().with_restricted_mode(true))
            .with_permission_checker(PermissionChecker::new(allow_all()));
        let offered = registry.offered_hosted_tools(&all(), "openai-responses", "m");
        assert_eq!(offered, vec![HostedTool::from_name("file_search").unwrap()]);
        let report = registry.hosted_exposure(&all(), "anthropic", "m");
        let search = &report[0];
        assert_eq!(search.name, "web_search");
        assert_eq!(search.kind, ToolKind::Search);
        assert!(!search.exposed);
        assert_eq!(
            search.hidden_because,
            vec![HiddenBecause::RestrictedMode {
                permissions: vec![Permission::Network]
            }]
        );
    }

    #[test]
    fn code_execution_waits_for_shell_and_an_ask_hides_it() {
        // The default permissions deny Shell.
        let registry = ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
        let code = [HostedTool::CodeExecution];
        assert!(
            registry
                .offered_hosted_tools(&code, "anthropic", "m")
                .is_empty()
        );
        let open = ToolRegistry::new().with_permission_checker(PermissionChecker::new(allow_all()));
        assert_eq!(open.offered_hosted_tools(&code, "anthropic", "m"), code);
        // An API without the tool: kept, so the request fails naming who has it.
        assert_eq!(open.offered_hosted_tools(&code, "openai", "m"), code);
        let report = open.hosted_exposure(&code, "openai", "m");
        assert!(matches!(
            report[0].hidden_because[..],
            [HiddenBecause::Provider { .. }]
        ));
    }
}
