//! A tool that does a built-in's work by other means (the editor's buffers, its terminal) keeps
//! everything else of the built-in: name, schema, kind, title, permissions, rules, timeouts,
//! restricted mode, streamed input. So every gate applies exactly as to the built-in; only
//! `execute` changes hands. [`delegate_to_builtin!`] writes those methods.

/// Inside `impl BaseTool for T`, where `T` has a field `builtin: Arc<dyn BaseTool>`: every
/// method but `execute` answered by the built-in. (`watch_input` is async and so written in
/// each `#[async_trait]` impl: the attribute does not see into a macro's expansion.)
macro_rules! delegate_to_builtin {
    () => {
        fn name(&self) -> &str {
            self.builtin.name()
        }

        fn description(&self) -> &str {
            self.builtin.description()
        }

        fn parameters(&self) -> serde_json::Value {
            self.builtin.parameters()
        }

        fn current_description(&self) -> std::borrow::Cow<'_, str> {
            self.builtin.current_description()
        }

        fn required_permissions(&self) -> Vec<agcore::tools::Permission> {
            self.builtin.required_permissions()
        }

        fn permissions_assumed(&self) -> bool {
            self.builtin.permissions_assumed()
        }

        fn kind(&self) -> agcore::tools::ToolKind {
            self.builtin.kind()
        }

        fn title(&self, input: &serde_json::Value) -> String {
            self.builtin.title(input)
        }

        fn model_content(&self, output: &serde_json::Value) -> String {
            self.builtin.model_content(output)
        }

        fn media(&self, output: &serde_json::Value) -> Vec<agcore::tools::ToolMedia> {
            self.builtin.media(output)
        }

        fn source(&self) -> agcore::tools::ToolSource {
            self.builtin.source()
        }

        fn required_flags(&self) -> Vec<String> {
            self.builtin.required_flags()
        }

        fn supports_provider(&self, provider: &str, model: &str) -> bool {
            self.builtin.supports_provider(provider, model)
        }

        fn allow_in_restricted_mode(&self) -> bool {
            self.builtin.allow_in_restricted_mode()
        }

        fn timeout(&self) -> Option<std::time::Duration> {
            self.builtin.timeout()
        }

        fn idempotent(&self) -> bool {
            self.builtin.idempotent()
        }

        fn argument_kind(&self, argument: &str) -> agcore::tools::ArgumentKind {
            self.builtin.argument_kind(argument)
        }

        fn normalize_argument(&self, argument: &str, value: &serde_json::Value) -> Option<String> {
            self.builtin.normalize_argument(argument, value)
        }

        fn supports_input_streaming(&self) -> bool {
            self.builtin.supports_input_streaming()
        }
    };
}

pub(crate) use delegate_to_builtin;
