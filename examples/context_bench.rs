//! CPU of the context engine's work before one request (docs/9-context.md, "Figures"):
//! `context::prepare` — estimate (messages and tool definitions measured, no serialisation of
//! the history) and the threshold check, no compaction — on histories of 10 to 200 tool turns
//! with 4 KB outputs and 20 KB of tool definitions, in a window large enough not to compact.
//!
//! ```text
//! cargo run --release --example context_bench
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::{Duration, Instant};

use agcore::context::{ContextState, History, prepare};
use agcore::llm::testing::ScriptedModel;
use agcore::llm::{CycleConfig, OpenaiChatMessage, ToolCall, ToolDefinition};
use serde_json::json;

fn history(turns: usize) -> Vec<OpenaiChatMessage> {
    let mut messages = vec![
        OpenaiChatMessage::system("You are a coding assistant."),
        OpenaiChatMessage::user_text("Read the files."),
    ];
    for turn in 0..turns {
        let id = format!("call_{turn}");
        messages.push(OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                &id,
                "read_file",
                format!(r#"{{"path":"src/{turn}.rs"}}"#),
            )],
        ));
        messages.push(OpenaiChatMessage::tool_result(
            &id,
            "fn main() {}\n".repeat(315),
        ));
    }
    messages
}

fn tools() -> Vec<ToolDefinition> {
    (0..20)
        .map(|i| {
            ToolDefinition::function(
                format!("tool_{i}"),
                "A tool with a long description. ".repeat(12),
                json!({"type": "object", "properties": {
                    "path": {"type": "string", "description": "The path of the file to read, relative to the workspace root."},
                    "offset": {"type": "integer", "minimum": 1}, "limit": {"type": "integer", "minimum": 1},
                    "pattern": {"type": "string", "description": "A regular expression."}}}),
            )
        })
        .collect()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let model = ScriptedModel::new();
    let mut config = CycleConfig::new("bench");
    config.context_window = Some(10_000_000);
    let tools = tools();
    let tool_bytes = serde_json::to_string(&tools).unwrap().len();
    for turns in [10, 50, 100, 200] {
        let mut messages = history(turns);
        let mut committed = messages.len();
        let mut state = ContextState::default();
        let iterations = 2_000;
        let start = Instant::now();
        for _ in 0..iterations {
            let prepared = runtime.block_on(prepare(
                &mut state,
                History {
                    messages: &mut messages,
                    committed: &mut committed,
                },
                false,
                &model,
                &config,
                &tools,
            ));
            assert!(prepared.events.is_empty());
        }
        let per_call = start.elapsed() / iterations;
        let bytes: usize = serde_json::to_string(&messages).unwrap().len();
        println!(
            "{}",
            json!({"tool_turns": turns, "messages": messages.len(), "history_json_bytes": bytes,
                   "tool_definition_bytes": tool_bytes, "prepare_us": us(per_call)})
        );
    }
}

fn us(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e7).round() / 10.0
}
