//! A typed tool, a registry with the default permissions, and the tool loop — streamed.
//!
//! Offline by default (a scripted model stands in for the LLM):
//!     cargo run --example quickstart
//! Against a real OpenAI-compatible server:
//!     AGCORE_MODEL=gpt-4o-mini OPENAI_API_KEY=... cargo run --example quickstart
//!     AGCORE_MODEL=qwen3 OPENAI_BASE_URL=http://127.0.0.1:11434/v1 cargo run --example quickstart

use std::sync::Arc;

use agcore::llm::testing::ScriptedModel;
use agcore::llm::{
    ChatModel, CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, StreamEvent, ToolCall,
};
use agcore::tools::prelude::*;
use futures::StreamExt;

/// Current weather of a city (demo data).
#[derive(Deserialize, JsonSchema)]
struct WeatherInput {
    /// The city, e.g. "Lisbon".
    city: String,
}

struct Weather;

impl Tool for Weather {
    type Input = WeatherInput;
    type Output = Value;
    const NAME: &'static str = "get_weather";

    fn kind() -> ToolKind {
        ToolKind::Fetch
    }

    fn title(&self, input: Result<&WeatherInput, &Value>) -> String {
        match input {
            Ok(input) => format!("Weather in {}", input.city),
            Err(_) => "Weather".to_owned(),
        }
    }

    async fn run(&self, input: WeatherInput) -> Result<Value, ToolError> {
        Ok(json!({"city": input.city, "temperature_c": 22, "conditions": "sunny"}))
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (model, name): (Arc<dyn ChatModel>, String) = match std::env::var("AGCORE_MODEL") {
        Ok(name) => (Arc::new(OpenAiClient::new(OpenAiConfig::from_env())?), name),
        Err(_) => {
            println!("(scripted model — set AGCORE_MODEL to use a real one)");
            let scripted = ScriptedModel::new()
                .reply_tool_calls(vec![ToolCall::new(
                    "call_1",
                    "get_weather",
                    r#"{"city":"Lisbon"}"#,
                )])
                .reply_text("It is sunny and 22 °C in Lisbon.");
            (Arc::new(scripted), "scripted".to_owned())
        }
    };
    let mut cycle = LlmCycle::new(model, CycleConfig::new(name)).with_system_prompt("Be concise.");
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register(Weather.erase())?;

    let mut events = cycle
        .submit_stream_with_tools("What's the weather in Lisbon?".to_string(), &registry)
        .await?;
    while let Some(event) = events.next().await {
        match event {
            StreamEvent::AssistantTextDelta { text } => print!("{text}"),
            StreamEvent::ToolExecutionStarted {
                tool_name, input, ..
            } => println!("→ {tool_name} {input}"),
            StreamEvent::ToolExecutionCompleted {
                output,
                is_error,
                duration_ms,
                ..
            } => {
                println!(
                    "{} {output} ({duration_ms} ms)",
                    if is_error { "✗" } else { "✓" }
                )
            }
            StreamEvent::Error { message, .. } => eprintln!("error: {message}"),
            _ => {}
        }
    }
    println!();
    drop(events);
    println!("history: {} messages", cycle.messages().len());
    Ok(())
}
