//! What tools that talk cost (issue 32): the event path per tool call, partial parsing of a
//! streamed call's arguments, and the time to a call's first update.
//!
//! ```text
//! cargo run --release --example tool_events_bench -- [--runs 20]
//! ```
//!
//! In-process, against the scripted model (no HTTP: what is measured is the run's own work).
//! CPU is the process's (`CLOCK_PROCESS_CPUTIME_ID`), medians over `--runs` after one warm-up.
//! - `event_path`: one turn of 100 calls of a no-op tool, then a text reply; CPU per call
//!   with a tool that reports nothing and with one that reports 10 updates.
//! - `event_path_sqlite_journal`: the same, every step and update journaled to a SQLite
//!   session store (each update is one append).
//! - `partial_parsing`: one call whose 100,000-byte arguments stream in 10,000 fragments; CPU
//!   of the run with input updates off (nothing parsed early) and on, and the updates sent.
//! - `first_update`: from the consumer receiving the call's first argument bytes to it
//!   receiving the call's first update.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agcore::llm::testing::ScriptedModel;
use agcore::llm::{CycleConfig, LlmCycle, StreamEvent, ToolCall};
use agcore::tools::ToolCallUpdate;
use agcore::tools::prelude::*;
use futures::StreamExt;
use nix::time::{ClockId, clock_gettime};
use serde_json::json;

fn cpu_now() -> Duration {
    Duration::from(clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap())
}

/// Reports `updates` progress updates, then returns.
struct Talker {
    updates: u64,
}

#[async_trait]
impl BaseTool for Talker {
    fn name(&self) -> &str {
        "talk"
    }
    fn description(&self) -> &str {
        "Reports progress"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    fn title(&self, input: &Value) -> String {
        let bytes = input["content"].as_str().map_or(0, str::len);
        format!("Write {bytes} bytes")
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        for done in 0..self.updates {
            agcore::tools::context::report(ToolCallUpdate::progress(
                done + 1,
                Some(self.updates),
                None,
            ));
        }
        Ok(json!("ok"))
    }
}

struct Measured {
    cpu: Duration,
    updates: usize,
    first_update: Option<Duration>,
}

async fn run(model: ScriptedModel, registry: &ToolRegistry) -> Measured {
    let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
    let start = cpu_now();
    let mut stream = cycle
        .submit_stream_with_tools("go".into(), registry)
        .await
        .unwrap();
    let (mut updates, mut first_bytes, mut first_update) = (0, None, None);
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::ToolCallDelta { arguments, .. } if !arguments.is_empty() => {
                first_bytes.get_or_insert_with(Instant::now);
            }
            StreamEvent::ToolCallUpdate { .. } => {
                updates += 1;
                if let Some(at) = first_bytes {
                    first_update.get_or_insert_with(|| at.elapsed());
                }
            }
            _ => {}
        }
    }
    drop(stream);
    Measured {
        cpu: cpu_now() - start,
        updates,
        first_update,
    }
}

/// One turn of `CALLS` calls journaled to a SQLite session store; CPU per call.
async fn event_path_journaled(updates: u64, runs: usize) -> f64 {
    use agcore::run::{RunItem, RunRequest};
    use agcore::session::{SessionJournal, SessionStore, SqliteStore};
    let registry = registry(updates, false);
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn SessionStore> =
        Arc::new(SqliteStore::open(dir.path().join("s.db")).await.unwrap());
    let mut per_call = Vec::new();
    for i in 0..=runs {
        let name = format!("s{i}");
        let (journal, _) = SessionJournal::open(store.clone(), &name).await.unwrap();
        let calls = (0..JOURNALED_CALLS)
            .map(|n| ToolCall::new(format!("c{n}"), "talk", "{}"))
            .collect();
        let model = ScriptedModel::new()
            .reply_tool_calls(calls)
            .reply_text("done");
        let mut cycle = LlmCycle::new(model, CycleConfig::new("m"));
        let start = cpu_now();
        let mut stream = cycle.run_with_stream(
            RunRequest::prompt("go")
                .with_tools(&registry)
                .with_journal(&journal),
        );
        while let Some(item) = stream.next().await {
            if let RunItem::Failed(error) = item {
                panic!("{error}");
            }
        }
        drop(stream);
        if i > 0 {
            per_call.push((cpu_now() - start).as_secs_f64() * 1e6 / JOURNALED_CALLS as f64);
        }
    }
    median(per_call)
}

/// Calls per journaled turn (each update is a store append: fewer calls keep it short).
const JOURNALED_CALLS: usize = 20;

fn registry(updates: u64, input_updates: bool) -> ToolRegistry {
    let mut registry = ToolRegistry::new().with_input_updates(input_updates);
    registry.register(Arc::new(Talker { updates })).unwrap();
    registry
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

const CALLS: usize = 100;

async fn event_path(updates: u64, runs: usize) -> f64 {
    let registry = registry(updates, false);
    let mut per_call = Vec::new();
    for i in 0..=runs {
        let calls = (0..CALLS)
            .map(|n| ToolCall::new(format!("c{n}"), "talk", "{}"))
            .collect();
        let model = ScriptedModel::new()
            .reply_tool_calls(calls)
            .reply_text("done");
        let measured = run(model, &registry).await;
        assert_eq!(measured.updates, CALLS * updates as usize);
        if i > 0 {
            per_call.push(measured.cpu.as_secs_f64() * 1e6 / CALLS as f64);
        }
    }
    median(per_call)
}

async fn partial_parsing(input_updates: bool, runs: usize) -> (f64, usize, Option<f64>) {
    let registry = registry(0, input_updates);
    let content = "x".repeat(100_000 - 16);
    let arguments = json!({"content": content}).to_string();
    let (mut cpu, mut sent, mut first) = (Vec::new(), 0, Vec::new());
    for i in 0..=runs {
        let model = ScriptedModel::new()
            .with_chunk_size(arguments.len() / 10_000)
            .reply_tool_calls(vec![ToolCall::new("c", "talk", arguments.clone())])
            .reply_text("done");
        let measured = run(model, &registry).await;
        if i > 0 {
            cpu.push(measured.cpu.as_secs_f64() * 1e3);
            sent = measured.updates;
            if let Some(at) = measured.first_update {
                first.push(at.as_secs_f64() * 1e6);
            }
        }
    }
    let first = (!first.is_empty()).then(|| median(first));
    (median(cpu), sent, first)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let runs = args
        .iter()
        .position(|a| a == "--runs")
        .and_then(|i| args.get(i + 1))
        .map_or(20, |n| n.parse().unwrap());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let quiet = event_path(0, runs).await;
        let talking = event_path(10, runs).await;
        println!(
            "{}",
            json!({"event_path": {
                "calls_per_turn": CALLS,
                "cpu_us_per_call_no_updates": (quiet * 10.0).round() / 10.0,
                "cpu_us_per_call_10_updates": (talking * 10.0).round() / 10.0,
                "cpu_us_per_update": ((talking - quiet) / 10.0 * 100.0).round() / 100.0,
            }})
        );
        let quiet = event_path_journaled(0, runs.min(3)).await;
        let talking = event_path_journaled(10, runs.min(3)).await;
        println!(
            "{}",
            json!({"event_path_sqlite_journal": {
                "calls_per_turn": JOURNALED_CALLS,
                "cpu_us_per_call_no_updates": (quiet * 10.0).round() / 10.0,
                "cpu_us_per_call_10_updates": (talking * 10.0).round() / 10.0,
                "cpu_us_per_update": ((talking - quiet) / 10.0 * 100.0).round() / 100.0,
            }})
        );
        let (off, _, _) = partial_parsing(false, runs).await;
        let (on, updates, first) = partial_parsing(true, runs).await;
        println!(
            "{}",
            json!({"partial_parsing": {
                "fragments": 10_000, "argument_bytes": 100_000,
                "cpu_ms_run_updates_off": (off * 100.0).round() / 100.0,
                "cpu_ms_run_updates_on": (on * 100.0).round() / 100.0,
                "updates_sent": updates,
            }, "first_update_us_after_first_argument_bytes": first.map(|us| us.round())})
        );
    });
}
