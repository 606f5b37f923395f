//! CPU of the context engine's work before one request (docs/9-context.md, "Figures"):
//! `context::prepare` — estimate (messages and tool definitions measured, no serialisation of
//! the history) and the threshold check, no compaction — on histories of 10 to 200 tool turns
//! with 4 KB outputs and 20 KB of tool definitions, in a window large enough not to compact.
//!
//! Then the engine's work per turn of a growing 200-turn session with 4–8 KB tool outputs:
//! each turn adds an assistant call and its output, then runs what the run driver runs around
//! one request (`prepare`, `measure`, `estimate`, `counted`, and learning from the usage), with
//! the calibrated ratio (model "bench") and with tiktoken o200k_base (model "gpt-4o"; its
//! tables are loaded before timing) far below the threshold and near it on every turn. Only
//! the delta is tokenized, sampled per text, and only on the first request and near the
//! threshold.
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
                &config.engine(),
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
    // Load the tiktoken tables before timing (once per process: about 130 ms).
    if let Some(counter) = agcore::context::tiktoken_for_model("gpt-4o") {
        runtime.block_on(counter.count(&["warm up"])).unwrap();
    }
    // The counter is used on the first request and near the threshold only: "far" is a
    // session far below it (the common case in a large window), "near" one within the margin
    // on every turn (a 5 % threshold in the same 10M window: the worst case, never compacting).
    for (model_name, threshold, place) in [
        ("bench", 0.8, "far"),
        ("gpt-4o", 0.8, "far"),
        ("gpt-4o", 0.05, "near"),
    ] {
        let mut runs: Vec<Duration> = (0..7)
            .map(|_| per_turn(&runtime, model_name, threshold, &tools))
            .collect();
        runs.sort();
        println!(
            "{}",
            json!({"session": "200 turns, 4-8 KB outputs", "model": model_name,
                   "estimator": if model_name == "bench" { "calibrated ratio" } else { "tiktoken o200k_base" },
                   "threshold": place,
                   "engine_us_per_turn_median_of_7": us(runs[3]), "min": us(runs[0]), "max": us(runs[6])})
        );
    }
}

fn output(turn: usize) -> String {
    let size = 4_096 + (turn.wrapping_mul(2_654_435_761) % 4_096);
    let mut text = format!("chunk {turn} of the log:\n");
    let mut line = 0usize;
    while text.len() < size {
        text.push_str(&format!(
            "line {line}: value={} status=ok path=/srv/app/module_{}.rs elapsed_ms={}\n",
            (turn * 31 + line * 7) % 977,
            line % 13,
            (line * turn) % 250
        ));
        line += 1;
    }
    text
}

/// Mean engine time per turn over a 200-turn session, for `model`.
fn per_turn(
    runtime: &tokio::runtime::Runtime,
    model_name: &str,
    threshold: f32,
    tools: &[ToolDefinition],
) -> Duration {
    let model = ScriptedModel::new();
    let mut config = CycleConfig::new(model_name);
    config.context_window = Some(10_000_000);
    config.context.threshold = threshold;
    let turns = 200;
    let outputs: Vec<String> = (0..turns).map(output).collect();
    let mut messages = history(0);
    let mut state = ContextState::default();
    let mut spent = Duration::ZERO;
    for (turn, text) in outputs.iter().enumerate() {
        let id = format!("call_{turn}");
        messages.push(OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                &id,
                "read_chunk",
                format!(r#"{{"n":{turn}}}"#),
            )],
        ));
        messages.push(OpenaiChatMessage::tool_result(&id, text.clone()));
        let mut committed = messages.len();
        let start = Instant::now();
        runtime.block_on(async {
            let prepared = prepare(
                &mut state,
                History {
                    messages: &mut messages,
                    committed: &mut committed,
                },
                turn == 0,
                &model,
                &config.engine(),
                tools,
            )
            .await;
            assert!(prepared.events.is_empty());
            state.measure(&config.engine(), &messages, tools).await;
        });
        let (estimate, bytes) = state.estimate(&messages, tools);
        let counted = state.counted(&messages, tools);
        let usage = Some(agcore::llm::Usage {
            prompt_tokens: estimate,
            completion_tokens: 20,
            total_tokens: estimate + 20,
            ..Default::default()
        });
        state.observe_usage(&config.engine(), bytes, usage);
        state.observe_counted(counted, usage);
        spent += start.elapsed();
    }
    assert_eq!(
        state.counter().is_some(),
        agcore::context::tiktoken_encoding(model_name).is_some()
    );
    spent / turns as u32
}

fn us(duration: Duration) -> f64 {
    (duration.as_secs_f64() * 1e7).round() / 10.0
}
