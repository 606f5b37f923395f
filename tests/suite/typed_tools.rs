//! Typed tools: generated schemas (snapshotted with `insta`), descriptions from doc comments,
//! permissions from kinds, input errors with serde paths, titles and the model/caller split.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agcore::tools::prelude::*;
use agcore::tools::typed::input_schema;

/// Get the weather forecast for a city.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
struct ForecastInput {
    /// The city, e.g. `Berlin`.
    city: String,
    /// How many days ahead (1–7).
    #[schemars(range(min = 1, max = 7))]
    days: u8,
    /// Temperature unit; Celsius when absent.
    unit: Option<Unit>,
    /// Extra options.
    #[serde(default)]
    options: Options,
}

/// A temperature unit.
#[derive(Debug, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
enum Unit {
    /// Degrees Celsius.
    Celsius,
    /// Degrees Fahrenheit.
    Fahrenheit,
}

/// Options of a forecast.
#[derive(Debug, Default, Deserialize, Serialize, JsonSchema)]
struct Options {
    /// Include hourly values.
    #[serde(default)]
    hourly: bool,
    /// Only these fields.
    fields: Vec<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Forecast {
    city: String,
    days: Vec<f64>,
}

struct ForecastTool;

impl Tool for ForecastTool {
    type Input = ForecastInput;
    type Output = Forecast;
    const NAME: &'static str = "forecast";

    fn kind() -> ToolKind {
        ToolKind::Fetch
    }

    fn title(&self, input: Result<&ForecastInput, &Value>) -> String {
        match input {
            Ok(input) => format!("Forecast for {}", input.city),
            Err(raw) => match raw["city"].as_str() {
                Some(city) => format!("Forecast for {city}…"),
                None => "Forecast".to_owned(),
            },
        }
    }

    fn model_content(output: &Forecast) -> String {
        format!("{}: {:?}", output.city, output.days)
    }

    async fn run(&self, input: ForecastInput) -> Result<Forecast, ToolError> {
        Ok(Forecast {
            city: input.city,
            days: vec![21.5; input.days as usize],
        })
    }
}

/// Search with a query, in one of several modes.
#[allow(dead_code)] // only its schema is tested
#[derive(Debug, Deserialize, JsonSchema)]
struct SearchInput {
    /// What to search.
    query: Query,
}

/// A search query.
#[allow(dead_code)]
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(tag = "mode", rename_all = "snake_case")]
enum Query {
    /// Match text literally.
    Literal {
        /// The text.
        text: String,
    },
    /// Match a regular expression.
    Regex {
        /// The pattern.
        pattern: String,
        /// Case-insensitive.
        #[serde(default)]
        ignore_case: bool,
    },
}

/// A tree node (recursive types keep a `$ref` into `$defs`).
#[allow(dead_code)]
#[derive(Debug, Deserialize, JsonSchema)]
struct TreeInput {
    /// The root.
    root: Node,
}

/// A node.
#[allow(dead_code)]
#[derive(Debug, Deserialize, JsonSchema)]
struct Node {
    /// Its label.
    label: String,
    /// Its children.
    children: Vec<Node>,
}

/// Takes nothing.
#[derive(Debug, Deserialize, JsonSchema)]
struct NoInput {}

/// Walk the schema and assert what OpenAI-compatible servers need.
fn assert_openai_acceptable(schema: &Value) {
    assert_eq!(schema["type"], "object", "root must be an object: {schema}");
    assert!(
        schema.get("properties").is_some(),
        "root needs properties: {schema}"
    );
    assert!(schema.get("$schema").is_none());
    let text = schema.to_string();
    assert!(
        !text.contains("\"oneOf\""),
        "oneOf is rewritten as anyOf: {text}"
    );
    if text.contains("\"$ref\"") {
        assert!(
            schema.get("$defs").is_some(),
            "every $ref needs the root $defs: {text}"
        );
    }
}

/// A JSON snapshot with its keys sorted: the snapshot must not depend on serde_json's
/// `preserve_order` feature (on in a workspace with the ACP SDK), which keeps schemars' own order.
macro_rules! snapshot_sorted {
    ($name:expr, $value:expr) => {
        insta::with_settings!({ sort_maps => true }, {
            insta::assert_json_snapshot!($name, $value);
        })
    };
}

#[test]
fn schema_of_nested_structs_enums_and_options_is_inlined() {
    let (schema, description) = input_schema::<ForecastInput>();
    assert_eq!(
        description.as_deref(),
        Some("Get the weather forecast for a city.")
    );
    assert_openai_acceptable(&schema);
    assert!(!schema.to_string().contains("$ref"));
    snapshot_sorted!("forecast_schema", schema);
}

#[test]
fn schema_of_an_internally_tagged_enum_uses_any_of() {
    let (schema, _) = input_schema::<SearchInput>();
    assert_openai_acceptable(&schema);
    snapshot_sorted!("search_schema", schema);
}

#[test]
fn schema_of_a_recursive_type_keeps_defs_consistent() {
    let (schema, _) = input_schema::<TreeInput>();
    assert_openai_acceptable(&schema);
    snapshot_sorted!("tree_schema", schema);
}

#[test]
fn schema_of_an_empty_input_is_an_object_with_no_properties() {
    let (schema, _) = input_schema::<NoInput>();
    assert_openai_acceptable(&schema);
    snapshot_sorted!("empty_schema", schema);
}

#[test]
fn erased_tool_takes_name_description_and_permissions_from_the_types() {
    let tool = ForecastTool.erase();
    assert_eq!(tool.name(), "forecast");
    assert_eq!(tool.description(), "Get the weather forecast for a city.");
    assert_eq!(tool.kind(), ToolKind::Fetch);
    assert_eq!(tool.required_permissions(), [Permission::Network]);
    assert!(
        !tool.allow_in_restricted_mode(),
        "Network tools are cut in restricted mode"
    );
    assert_eq!(tool.parameters(), input_schema::<ForecastInput>().0);
}

#[test]
fn kinds_map_to_default_permissions() {
    assert_eq!(ToolKind::Execute.default_permissions(), [Permission::Shell]);
    assert_eq!(ToolKind::Fetch.default_permissions(), [Permission::Network]);
    assert_eq!(ToolKind::Delete.default_permissions(), [Permission::Delete]);
    assert_eq!(ToolKind::Edit.default_permissions(), [Permission::Write]);
    assert_eq!(ToolKind::Read.default_permissions(), [Permission::Read]);
    assert!(ToolKind::Think.default_permissions().is_empty());
}

#[tokio::test]
async fn input_errors_name_the_serde_path() {
    let tool = ForecastTool.erase();
    let error = tool
        .execute(json!({"city": "Berlin", "days": 2, "options": {"fields": [1]}}))
        .await
        .unwrap_err();
    match error {
        ToolError::InvalidArguments(name, message) => {
            assert_eq!(name, "forecast");
            assert!(
                message.starts_with("field `options.fields[0]`: invalid type: integer `1`"),
                "{message}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn registry_validation_names_the_field_before_the_typed_tool_runs() {
    let mut registry = ToolRegistry::new();
    registry.register(ForecastTool.erase()).unwrap();
    let error = registry
        .invoke(
            "forecast",
            json!({"city": "Berlin", "days": 9, "unit": "kelvin"}),
        )
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(
        text.contains("field `days`: 9 is greater than the maximum of 7"),
        "{text}"
    );
    assert!(text.contains("field `unit`"), "{text}");
    assert!(
        !text.contains("options"),
        "options has a serde default, so it is optional: {text}"
    );
}

#[test]
fn titles_work_on_valid_partial_and_garbage_input() {
    let tool = ForecastTool.erase();
    assert_eq!(
        tool.title(&json!({"city": "Oslo", "days": 1, "options": {"fields": []}})),
        "Forecast for Oslo"
    );
    assert_eq!(tool.title(&json!({"city": "Os"})), "Forecast for Os…");
    assert_eq!(tool.title(&json!("garbage")), "Forecast");
}

#[tokio::test]
async fn the_model_reads_model_content_while_the_caller_gets_the_full_output() {
    let mut registry = ToolRegistry::new();
    registry.register(ForecastTool.erase()).unwrap();
    let record = registry
        .invoke(
            "forecast",
            json!({"city": "Rome", "days": 2, "options": {"fields": []}}),
        )
        .await
        .unwrap();
    assert_eq!(registry.model_content(&record), "Rome: [21.5, 21.5]");
    let output = record.output.unwrap();
    assert_eq!(output, json!({"city": "Rome", "days": [21.5, 21.5]}));
}

/// An output whose JSON does not read back as itself (renamed on the way out only).
#[derive(Debug, Serialize, Deserialize)]
struct OneWay {
    #[serde(rename(serialize = "c"))]
    city: String,
}

struct OneWayTool;

impl Tool for OneWayTool {
    type Input = Value;
    type Output = OneWay;
    const NAME: &'static str = "one_way";

    fn kind() -> ToolKind {
        ToolKind::Other
    }

    fn model_content(output: &OneWay) -> String {
        format!("city {}", output.city)
    }

    async fn run(&self, _input: Value) -> Result<OneWay, ToolError> {
        Ok(OneWay {
            city: "Oslo".into(),
        })
    }
}

#[tokio::test]
async fn the_model_text_is_rendered_from_the_typed_output_not_its_json() {
    use agcore::tools::{ToolCallRequest, ToolOutcome};
    use futures::StreamExt;
    let mut registry = ToolRegistry::new();
    registry.register(OneWayTool.erase()).unwrap();
    let done: Vec<_> = registry
        .run_stream(vec![ToolCallRequest::new("c1", "one_way", json!({}))])
        .collect()
        .await;
    let call = &done[0].1;
    assert_eq!(call.answer.content, "city Oslo");
    assert!(!call.answer.is_error);
    assert!(
        matches!(&call.outcome, ToolOutcome::Ran { result: Ok(output) } if output["c"] == "Oslo")
    );
}
