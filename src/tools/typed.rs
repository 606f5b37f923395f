//! [`Tool`]: the typed way to write a tool. Input is a Rust type with a derived JSON Schema,
//! the description is its doc comment, and the tool is erased into `Arc<dyn BaseTool>` for the
//! registry.

use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use async_trait::async_trait;

use crate::tools::streaming::StreamingInput;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::tools::argument_kind::ArgumentKind;
use crate::tools::base::{BaseTool, ToolSource, default_model_content};
use crate::tools::error::ToolError;
use crate::tools::kind::ToolKind;
use crate::tools::permission::Permission;

/// A tool with typed input and output.
///
/// ```
/// use agcore::tools::prelude::*;
///
/// /// Add two numbers.
/// #[derive(Deserialize, JsonSchema)]
/// struct AddInput {
///     /// The first number.
///     a: f64,
///     /// The second number.
///     b: f64,
/// }
///
/// struct Add;
///
/// impl Tool for Add {
///     type Input = AddInput;
///     type Output = f64;
///     const NAME: &'static str = "add";
///     fn kind() -> ToolKind { ToolKind::Think }
///     async fn run(&self, input: AddInput) -> Result<f64, ToolError> {
///         Ok(input.a + input.b)
///     }
/// }
///
/// let tool = Add.erase();
/// assert_eq!(tool.name(), "add");
/// assert_eq!(tool.description(), "Add two numbers.");
/// ```
pub trait Tool: Send + Sync + Sized + 'static {
    /// The arguments. Its doc comment becomes the tool's description; its fields' doc comments
    /// become the parameters' descriptions.
    type Input: DeserializeOwned + JsonSchema + Send;
    /// The result, as the caller sees it.
    type Output: Serialize + DeserializeOwned + Send;

    /// The tool's unique name (`^[a-zA-Z0-9_-]{1,64}$`).
    const NAME: &'static str;

    /// What the tool does; also decides its default permissions.
    fn kind() -> ToolKind;

    /// The description the model reads. Default: the `Input` type's doc comment.
    fn description() -> String {
        input_schema::<Self::Input>().1.unwrap_or_default()
    }

    /// The permissions a call needs. Default: derived from [`Tool::kind`].
    fn permissions() -> Vec<Permission> {
        Self::kind().default_permissions()
    }

    /// A human title for a call, from its input (`Err` holds the raw input when it did not
    /// parse — titles must work on partial input too).
    fn title(&self, input: Result<&Self::Input, &Value>) -> String {
        let _ = input;
        Self::NAME.to_owned()
    }

    /// Whether the tool may be offered in restricted mode. Default: unless its permissions
    /// include `Network` or `Shell`.
    fn allow_in_restricted_mode() -> bool {
        !Self::permissions()
            .iter()
            .any(|p| matches!(p, Permission::Network | Permission::Shell))
    }

    /// Whether the tool works with this provider and model.
    fn supports_provider(provider: &str, model: &str) -> bool {
        let _ = (provider, model);
        true
    }

    /// Feature flags that must be enabled for the tool to be offered.
    fn required_flags() -> Vec<String> {
        Vec::new()
    }

    /// What the model reads of an output. Default: a string as its text, anything else as
    /// compact JSON. The caller always gets the full output.
    fn model_content(output: &Self::Output) -> String {
        serde_json::to_value(output)
            .map(|value| default_model_content(&value))
            .unwrap_or_default()
    }

    /// A timeout for one call, overriding the registry's default (see
    /// [`BaseTool::timeout`]); `None` (the default) leaves it to the registry.
    fn timeout(&self) -> Option<std::time::Duration> {
        None
    }

    /// Whether running a call twice has the effect of running it once (see
    /// [`BaseTool::idempotent`]); by default not.
    fn idempotent(&self) -> bool {
        false
    }

    /// Where the tool comes from (built-in tools say [`ToolSource::Builtin`]).
    fn source() -> ToolSource {
        ToolSource::Local
    }

    /// What an argument holds, for rules on arguments (see [`BaseTool::argument_kind`]). By
    /// default: plain text.
    fn argument_kind(argument: &str) -> ArgumentKind {
        let _ = argument;
        ArgumentKind::Text
    }

    /// The value the tool will act on for an argument (see [`BaseTool::normalize_argument`]).
    /// By default: none of its own.
    fn normalize_argument(&self, argument: &str, value: &Value) -> Option<String> {
        let _ = (argument, value);
        None
    }

    /// Run the tool.
    fn run(
        &self,
        input: Self::Input,
    ) -> impl Future<Output = Result<Self::Output, ToolError>> + Send;

    /// Whether the tool receives a call's input while the model streams it (see
    /// [`BaseTool::supports_input_streaming`]); by default not.
    fn supports_input_streaming() -> bool {
        false
    }

    /// Watch a call's input as it streams, to prepare and report — never to act (see
    /// [`BaseTool::watch_input`] and [`crate::tools::streaming`]). By default: nothing.
    fn watch_input(&self, input: StreamingInput) -> impl Future<Output = ()> + Send {
        drop(input);
        std::future::ready(())
    }

    /// Erase into the registry's `Arc<dyn BaseTool>`.
    fn erase(self) -> Arc<dyn BaseTool> {
        Arc::new(TypedTool::new(self))
    }
}

/// The JSON Schema of `T` as OpenAI-compatible servers accept it — an object at the root, no
/// `$schema`, sub-schemas inlined (only recursive types keep `$ref`s into a root `$defs`),
/// `oneOf` written as `anyOf` — and the type's description (its doc comment), which is moved
/// out of the schema into the tool description.
pub fn input_schema<T: JsonSchema>() -> (Value, Option<String>) {
    let settings = schemars::generate::SchemaSettings::draft2020_12().with(|settings| {
        settings.inline_subschemas = true;
        settings.meta_schema = None;
    });
    let schema = settings.into_generator().into_root_schema_for::<T>();
    let mut value = schema.to_value();
    one_of_to_any_of(&mut value);
    let mut description = None;
    if let Some(object) = value.as_object_mut() {
        object.remove("$schema");
        object.remove("title");
        description = object
            .remove("description")
            .and_then(|d| d.as_str().map(str::to_owned));
        if object.get("type").is_none() {
            object.insert("type".to_owned(), Value::String("object".to_owned()));
        }
        if object.get("type").and_then(Value::as_str) == Some("object")
            && !object.contains_key("properties")
        {
            object.insert("properties".to_owned(), Value::Object(Default::default()));
        }
    }
    (value, description)
}

/// A [`Tool`] erased into a [`BaseTool`]. Schema and description are computed once.
pub struct TypedTool<T: Tool> {
    tool: T,
    description: String,
    parameters: Value,
    _marker: PhantomData<fn() -> T>,
}

impl<T: Tool> TypedTool<T> {
    /// Wrap `tool`.
    pub fn new(tool: T) -> Self {
        let (parameters, _) = input_schema::<T::Input>();
        TypedTool {
            tool,
            description: T::description(),
            parameters,
            _marker: PhantomData,
        }
    }

    /// The wrapped tool.
    pub fn inner(&self) -> &T {
        &self.tool
    }
}

#[async_trait]
impl<T: Tool> BaseTool for TypedTool<T> {
    fn name(&self) -> &str {
        T::NAME
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Value {
        self.parameters.clone()
    }

    fn required_permissions(&self) -> Vec<Permission> {
        T::permissions()
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let input: T::Input = deserialize_input(T::NAME, args)?;
        let output = self.tool.run(input).await?;
        to_json::<T>(&output)
    }

    async fn execute_rendered(&self, args: Value) -> Result<(Value, String), ToolError> {
        let input: T::Input = deserialize_input(T::NAME, args)?;
        let output = self.tool.run(input).await?;
        // Rendered from the typed output: no round trip through JSON.
        let text = T::model_content(&output);
        Ok((to_json::<T>(&output)?, text))
    }

    fn kind(&self) -> ToolKind {
        T::kind()
    }

    fn title(&self, input: &Value) -> String {
        match serde_json::from_value::<T::Input>(input.clone()) {
            Ok(parsed) => self.tool.title(Ok(&parsed)),
            Err(_) => self.tool.title(Err(input)),
        }
    }

    fn model_content(&self, output: &Value) -> String {
        // Only for records made outside the registry's run path (`execute_rendered`).
        match serde_json::from_value::<T::Output>(output.clone()) {
            Ok(typed) => T::model_content(&typed),
            Err(_) => default_model_content(output),
        }
    }

    fn source(&self) -> ToolSource {
        T::source()
    }

    fn required_flags(&self) -> Vec<String> {
        T::required_flags()
    }

    fn supports_provider(&self, provider: &str, model: &str) -> bool {
        T::supports_provider(provider, model)
    }

    fn allow_in_restricted_mode(&self) -> bool {
        T::allow_in_restricted_mode()
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        self.tool.timeout()
    }

    fn idempotent(&self) -> bool {
        self.tool.idempotent()
    }

    fn argument_kind(&self, argument: &str) -> ArgumentKind {
        T::argument_kind(argument)
    }

    fn normalize_argument(&self, argument: &str, value: &Value) -> Option<String> {
        self.tool.normalize_argument(argument, value)
    }

    fn supports_input_streaming(&self) -> bool {
        T::supports_input_streaming()
    }

    async fn watch_input(&self, input: StreamingInput) {
        self.tool.watch_input(input).await;
    }
}

/// Deserialise the input; the error names the path of the offending field (`opts.unit`).
pub(crate) fn deserialize_input<I: DeserializeOwned>(
    tool: &str,
    args: Value,
) -> Result<I, ToolError> {
    serde_path_to_error::deserialize(args).map_err(|error| {
        let path = error.path().to_string();
        let at = if path == "." {
            "the arguments".to_owned()
        } else {
            format!("field `{path}`")
        };
        ToolError::InvalidArguments(tool.to_owned(), format!("{at}: {}", error.into_inner()))
    })
}

/// Keywords whose value is a map from names to schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "$defs",
    "definitions",
    "patternProperties",
    "dependentSchemas",
];
/// Keywords whose value is one schema or a list of schemas.
const SCHEMA_SLOTS: &[&str] = &[
    "items",
    "prefixItems",
    "additionalProperties",
    "unevaluatedProperties",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "anyOf",
    "allOf",
    "propertyNames",
];

/// Rewrite `oneOf` as `anyOf` everywhere: serde picks the first matching alternative (like
/// `anyOf`), and OpenAI's strict mode and many local servers accept only `anyOf`.
pub(crate) fn one_of_to_any_of(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    if !object.contains_key("anyOf")
        && let Some(alternatives) = object.remove("oneOf")
    {
        object.insert("anyOf".to_owned(), alternatives);
    }
    for (key, value) in object.iter_mut() {
        if SCHEMA_MAPS.contains(&key.as_str()) {
            if let Some(map) = value.as_object_mut() {
                map.values_mut().for_each(one_of_to_any_of);
            }
        } else if SCHEMA_SLOTS.contains(&key.as_str()) {
            match value {
                Value::Array(list) => list.iter_mut().for_each(one_of_to_any_of),
                other => one_of_to_any_of(other),
            }
        }
    }
}

/// A typed output as the JSON the caller gets.
fn to_json<T: Tool>(output: &T::Output) -> Result<Value, ToolError> {
    serde_json::to_value(output).map_err(|error| {
        ToolError::ExecutionFailed(
            T::NAME.to_owned(),
            format!("output not serialisable: {error}"),
        )
    })
}
