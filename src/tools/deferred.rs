//! Deferred tools: registered, gated and run like any other tool, but their schemas are not
//! sent until the model finds them with [`tool_search`](crate::tools::tool_search).
//!
//! A registry defers tools by entries like a profile's (`mcp:github`, a tool name, `kind:...`:
//! [`ToolRegistry::with_deferred_tools`]; `[tools] deferred` in `agcore.toml`;
//! `"deferLoading": true` on an MCP server). A run then offers
//! ([`ToolRegistry::offered_definitions`]): the tools that are not deferred, in registration
//! order; `tool_search` when any exposed tool is deferred; and the tools its searches loaded,
//! in the order they were found — appended, so that the start of the tool list (and a
//! provider's prompt cache over it) stays the same as tools are loaded.
//!
//! The run answers `tool_search` itself ([`ToolRegistry::answer_deferred_call`]) and keeps the
//! loaded set in its state ([`crate::run::RunState::loaded_tools`]). The gates are the
//! registry's: only exposed tools are searched (a hidden tool is never found), and a found tool
//! runs through the registry with its usual permission checks and approvals — a search result
//! never widens anything. A deferred tool the model names before a search loaded it is answered
//! with an error that says to search first.

use std::sync::Arc;

use crate::tools::base::BaseTool;
use crate::tools::registry::{ToolRegistry, definition_of};
use crate::tools::tool_search::{self, SearchArguments, TOOL_SEARCH, ToolIndex};
use crate::vocab::{ToolAnswer, ToolCall, ToolDefinition};

impl ToolRegistry {
    /// Whether this registry runs `tool_search` for `provider`/`model`: some exposed tool is
    /// deferred, and no registered tool has that name already.
    pub fn offers_tool_search(&self, provider: &str, model: &str) -> bool {
        self.get(TOOL_SEARCH).is_none()
            && self
                .exposed_tools(provider, model)
                .any(|tool| self.is_deferred(tool.as_ref()))
    }

    /// What a run whose searches loaded `loaded` offers the model for `provider`/`model`: the
    /// exposed tools that are not deferred (registration order), `tool_search` (when
    /// [`ToolRegistry::offers_tool_search`]), then the loaded tools that are exposed, in
    /// `loaded`'s order. Without deferred tools it equals
    /// [`ToolRegistry::exposed_definitions`].
    pub fn offered_definitions(
        &self,
        provider: &str,
        model: &str,
        loaded: &[String],
    ) -> Vec<ToolDefinition> {
        if !self.offers_tool_search(provider, model) {
            return self.exposed_definitions(provider, model);
        }
        let exposed: Vec<&Arc<dyn BaseTool>> = self.exposed_tools(provider, model).collect();
        let mut offered: Vec<ToolDefinition> = exposed
            .iter()
            .filter(|tool| !self.is_deferred(&****tool))
            .map(|tool| definition_of(&***tool))
            .collect();
        offered.push(tool_search::definition());
        offered.extend(loaded.iter().filter_map(|name| {
            exposed
                .iter()
                .find(|tool| tool.name() == name && self.is_deferred(&****tool))
                .map(|tool| definition_of(&***tool))
        }));
        offered
    }

    /// What a run offers an API with native tool search (Anthropic's): every exposed tool, the
    /// deferred ones marked [`defer_loading`](crate::vocab::FunctionDefinition::defer_loading)
    /// for the API's own search, and no local `tool_search`. The same gates as
    /// [`ToolRegistry::offered_definitions`]: a hidden tool is never sent, so never found.
    pub fn native_definitions(&self, provider: &str, model: &str) -> Vec<ToolDefinition> {
        self.exposed_tools(provider, model)
            .map(|tool| {
                let mut definition = definition_of(tool.as_ref());
                definition.function.defer_loading = self.is_deferred(tool.as_ref());
                definition
            })
            .collect()
    }

    /// The deferred tools exposed for `provider`/`model` that best match `query`, best first
    /// (at most `limit`). Hidden tools are not searched.
    pub fn search_deferred(
        &self,
        provider: &str,
        model: &str,
        query: &str,
        limit: usize,
    ) -> Vec<ToolDefinition> {
        let candidates: Vec<ToolDefinition> = self
            .exposed_tools(provider, model)
            .filter(|tool| self.is_deferred(tool.as_ref()))
            .map(|tool| definition_of(tool.as_ref()))
            .collect();
        let index = ToolIndex::new(&candidates);
        index
            .search(query, limit)
            .into_iter()
            .filter_map(|position| candidates.get(position).cloned())
            .collect()
    }

    /// The run's answers to the calls of one tool turn (`(position, call)`) that are the
    /// run's to give: `tool_search` calls (their finds are added to `loaded`), and calls of
    /// deferred tools that no search had loaded before this turn (refused, with the way to load
    /// them: a tool found in this turn is callable from the next request on). The other calls
    /// are the registry's to run.
    pub fn answer_deferred_calls<'a>(
        &self,
        provider: &str,
        model: &str,
        calls: impl IntoIterator<Item = (usize, &'a ToolCall)>,
        loaded: &mut Vec<String>,
    ) -> Vec<(usize, ToolAnswer)> {
        if !self.offers_tool_search(provider, model) {
            return Vec::new();
        }
        let before = loaded.len();
        let mut answers = Vec::new();
        for (position, call) in calls {
            let name = call.function.name.as_str();
            if name == TOOL_SEARCH {
                answers.push((position, self.answer_search(provider, model, call, loaded)));
            } else if self
                .exposed_tools(provider, model)
                .any(|tool| tool.name() == name && self.is_deferred(tool.as_ref()))
                && !loaded
                    .get(..before)
                    .is_some_and(|l| l.iter().any(|n| n == name))
            {
                answers.push((
                    position,
                    ToolAnswer::error(format_args!(
                        "tool '{name}' is not loaded yet: call {TOOL_SEARCH} with what you want \
                         to do first; the tools it finds can be called from your next request on"
                    )),
                ));
            }
        }
        answers
    }

    fn answer_search(
        &self,
        provider: &str,
        model: &str,
        call: &ToolCall,
        loaded: &mut Vec<String>,
    ) -> ToolAnswer {
        let arguments = match SearchArguments::parse(&call.function.arguments) {
            Ok(arguments) => arguments,
            Err(error) => return ToolAnswer::error(error),
        };
        let found = self.search_deferred(provider, model, &arguments.query, arguments.limit());
        for tool in &found {
            if !loaded.contains(&tool.function.name) {
                loaded.push(tool.function.name.clone());
            }
        }
        ToolAnswer::ok(tool_search::answer_text(&found))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use async_trait::async_trait;
    use serde_json::{Value, json};

    use crate::tools::base::BaseTool;
    use crate::tools::error::ToolError;
    use crate::tools::permission::{Permission, PermissionChecker, PermissionConfig};
    use crate::tools::profile::ProfileEntry;
    use crate::tools::registry::ToolRegistry;
    use crate::tools::tool_search::TOOL_SEARCH;
    use crate::vocab::{ToolCall, ToolDefinition};

    struct Fixed(&'static str, &'static str, Vec<Permission>);

    #[async_trait]
    impl BaseTool for Fixed {
        fn name(&self) -> &str {
            self.0
        }
        fn description(&self) -> &str {
            self.1
        }
        fn parameters(&self) -> Value {
            json!({"type": "object"})
        }
        fn required_permissions(&self) -> Vec<Permission> {
            self.2.clone()
        }
        async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
            Ok(Value::Null)
        }
    }

    fn registry() -> ToolRegistry {
        let mut registry = ToolRegistry::new()
            .with_permission_checker(PermissionChecker::new(PermissionConfig::default()))
            .with_deferred_tools(
                ["db_query", "db_drop", "repo_issue"].map(|n| ProfileEntry::Tool(n.to_owned())),
            );
        for tool in [
            Fixed("echo", "Echo the text back", vec![]),
            Fixed(
                "db_query",
                "Run a SQL query on the database",
                vec![Permission::Read],
            ),
            Fixed("db_drop", "Drop a database table", vec![Permission::Delete]),
            Fixed("repo_issue", "Open an issue in the repository", vec![]),
        ] {
            if let Err(error) = registry.register(Arc::new(tool)) {
                panic!("{error}");
            }
        }
        registry
    }

    fn names(tools: &[ToolDefinition]) -> Vec<&str> {
        tools
            .iter()
            .map(|tool| tool.function.name.as_str())
            .collect()
    }

    fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
        ToolCall::new(id, name, arguments.to_string())
    }

    #[test]
    fn loaded_tools_are_appended_after_the_search_tool_in_the_order_found() {
        let registry = registry();
        assert_eq!(
            names(&registry.offered_definitions("openai", "m", &[])),
            ["echo", TOOL_SEARCH]
        );
        let loaded = ["repo_issue".to_owned(), "db_query".to_owned()];
        assert_eq!(
            names(&registry.offered_definitions("openai", "m", &loaded)),
            ["echo", TOOL_SEARCH, "repo_issue", "db_query"]
        );
        // Without deferred tools nothing changes.
        let plain = ToolRegistry::new();
        assert!(!plain.offers_tool_search("openai", "m"));
    }

    #[test]
    fn a_search_loads_only_exposed_tools_and_a_found_tool_is_callable_from_the_next_turn() {
        let registry = registry();
        let mut loaded = Vec::new();
        let turn = [
            call("a", "db_query", json!({})),
            call("s", TOOL_SEARCH, json!({"query": "database table sql"})),
        ];
        let answers =
            registry.answer_deferred_calls("openai", "m", turn.iter().enumerate(), &mut loaded);
        assert_eq!(
            loaded,
            ["db_query"],
            "db_drop needs Delete, which is denied: hidden"
        );
        assert_eq!(answers.len(), 2);
        assert!(answers[0].1.is_error && answers[0].1.content.contains("not loaded yet"));
        assert!(
            answers[1]
                .1
                .content
                .starts_with("Loaded for your next request: db_query")
        );
        // The next turn: the found tool is the registry's to run; a hidden one too (its gate
        // refuses it, without saying it exists); echo was never deferred.
        let next = [
            call("b", "db_query", json!({})),
            call("c", "db_drop", json!({})),
            call("d", "echo", json!({})),
        ];
        let answers =
            registry.answer_deferred_calls("openai", "m", next.iter().enumerate(), &mut loaded);
        assert!(answers.is_empty(), "{answers:?}");
    }

    #[test]
    fn bad_search_arguments_are_told_to_the_model() {
        let registry = registry();
        let mut loaded = Vec::new();
        let turn = [call("s", TOOL_SEARCH, json!({"q": "x"}))];
        let answers =
            registry.answer_deferred_calls("openai", "m", turn.iter().enumerate(), &mut loaded);
        assert!(
            answers[0].1.is_error && answers[0].1.content.contains("query"),
            "{answers:?}"
        );
        assert!(loaded.is_empty());
    }

    #[test]
    fn a_deferred_entry_that_matches_nothing_is_a_problem() {
        let registry =
            registry().with_deferred_tools([ProfileEntry::McpServer("githb".to_owned())]);
        let problems = registry
            .check_exposure()
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            problems.contains("deferred entry 'mcp:githb' matches no registered tool"),
            "{problems}"
        );
    }
}
