//! The design's §7 `WeatherTool` and §2 usage example, compiled and run unchanged.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agcore::llm::types::ToolDefinition;

// ---- §7, verbatim (rustfmt::skip keeps the design's layout) --------------------------------
use agcore::tools::prelude::*;
use serde_json::Value;

struct WeatherTool;

#[rustfmt::skip]
#[async_trait]
impl BaseTool for WeatherTool {
    fn name(&self) -> &str { "get_weather" }
    fn description(&self) -> &str { "获取指定城市的当前天气" }
    fn parameters(&self) -> Value {
        serde_json::json!({
            "type": "object",
            "properties": {
                "city": { "type": "string", "description": "城市名称" }
            },
            "required": ["city"]
        })
    }

    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let city = args["city"].as_str()
            .ok_or_else(|| ToolError::InvalidArguments(
                "get_weather".into(), "缺少 city 参数".into()
            ))?;
        // 模拟天气查询
        Ok(serde_json::json!({ "city": city, "temperature": 22, "unit": "°C" }))
    }
}
// ---- end of §7 ------------------------------------------------------------------------------

/// The `read_file` tool the §2 example registers next to `WeatherTool`.
struct FileReadTool;

#[async_trait]
impl BaseTool for FileReadTool {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Read]
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        // No real file access in tests: echo what would be read.
        Ok(json!({"path": args["path"], "content": "hello"}))
    }
}

/// §2's usage example, verbatim between the markers.
#[rustfmt::skip]
async fn section_2(
    checker: PermissionChecker,
) -> Result<(Vec<ToolDefinition>, Vec<ToolInvocation>), ToolError> {
    // ---- §2, verbatim -----------------------------------------------------------------------
    let mut registry = ToolRegistry::new()
        .with_permission_checker(checker);

    registry.register(Arc::new(WeatherTool))?;
    registry.register(Arc::new(FileReadTool))?;

    // 获取 ToolDefinitions 传递给 LLM
    let tools = registry.definitions();

    // 收到 LLM 的 tool_calls 后执行
    let calls = vec![
        ("get_weather".into(), json!({"city": "Beijing"})),
        ("read_file".into(), json!({"path": "/tmp/data.txt"})),
    ];
    let results = registry.invoke_all(calls).await;
    // ---- end of §2 --------------------------------------------------------------------------
    Ok((tools, results))
}

#[tokio::test]
async fn design_section_2_usage_example_runs_unchanged() {
    let checker = PermissionChecker::new(PermissionConfig::default());
    let (tools, results) = section_2(checker).await.unwrap();

    assert_eq!(tools.len(), 2);
    assert_eq!(tools[0].function.name, "get_weather");
    assert_eq!(tools[1].function.name, "read_file");
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].tool_name, "get_weather");
    assert_eq!(
        results[0].output.as_ref().unwrap(),
        &json!({"city": "Beijing", "temperature": 22, "unit": "°C"})
    );
    assert_eq!(results[1].tool_name, "read_file");
    assert_eq!(results[1].output.as_ref().unwrap()["path"], "/tmp/data.txt");
}

#[tokio::test]
async fn design_section_7_weather_tool_reports_its_own_argument_error() {
    // Called directly, the example's own check answers.
    let error = WeatherTool.execute(json!({})).await.unwrap_err();
    assert!(
        matches!(&error, ToolError::InvalidArguments(tool, message) if tool == "get_weather" && message.contains("city"))
    );
    // Through the registry, schema validation answers first and names the field.
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(WeatherTool)).unwrap();
    let error = registry.invoke("get_weather", json!({})).await.unwrap_err();
    assert_eq!(
        error.to_string(),
        "invalid arguments for tool 'get_weather': missing required field `city`"
    );
}

// ---- The design's `invoke_all(calls: Vec<(String, Value)>) -> Vec<ToolInvocation>` ----------
// These two failed to compile against the earlier generic `invoke_all<I: IntoIterator>` (type
// annotations needed): the design's signature takes a `Vec<(String, Value)>`, so both infer.

#[tokio::test]
async fn design_invoke_all_accepts_an_empty_vec_literal() {
    let registry = ToolRegistry::new();
    let results: Vec<ToolInvocation> = registry.invoke_all(vec![]).await;
    assert!(results.is_empty());
}

#[tokio::test]
async fn design_invoke_all_accepts_a_collected_iterator() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(WeatherTool)).unwrap();
    let cities = ["Beijing", "Paris"];
    let results = registry
        .invoke_all(
            cities
                .into_iter()
                .map(|city| ("get_weather".into(), json!({ "city": city })))
                .collect(),
        )
        .await;
    let cities: Vec<&Value> = results
        .iter()
        .map(|r| &r.output.as_ref().unwrap()["city"])
        .collect();
    assert_eq!(cities, [&json!("Beijing"), &json!("Paris")]);
}

#[tokio::test]
async fn calls_with_their_own_ids_go_through_invoke_requests() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(WeatherTool)).unwrap();
    let results = registry
        .invoke_requests([
            ToolCallRequest::from_json("call_a", "get_weather", r#"{"city":"Rome"}"#),
            ToolCallRequest::new("call_b", "get_weather", json!({"city": "Oslo"})),
        ])
        .await;
    let ids: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["call_a", "call_b"]);
    assert_eq!(results[0].output.as_ref().unwrap()["city"], "Rome");
}
