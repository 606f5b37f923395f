//! What a team costs the client: CPU per sub-agent call over a direct tool call, and memory
//! per concurrently running child.
//!
//! ```text
//! cargo run --release --example team_bench -- [--calls 2000] [--children 100]
//! ```
//!
//! The model is in-process (no HTTP, no JSON on a wire), so the figures are the run's own
//! work: the tool loop, the registry, and for a sub-agent the child's run (its registry
//! view, history, budget, events, journal-free driver) and its one extra model request.
//! - **CPU per call**: a parent turn calling one no-op tool, against a parent turn calling a
//!   sub-agent that answers at once; `CLOCK_PROCESS_CPUTIME_ID` over `--calls` runs each, after
//!   a warm-up; the ratio is the figure.
//! - **RSS per child**: a parent turn calling `--children` sub-agents at once; every child's
//!   model request waits at a barrier until all have arrived, and the last one reads the
//!   process's resident set then; (that − the RSS before the run) / children.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{
    ChatModel, ChatRequest, ChatResponse, CycleConfig, LlmCycle, ModelStream, ProviderError,
};
use agcore::run::{RunOutcome, RunRequest};
use agcore::team::{Agent, Team};
use agcore::tools::prelude::*;
use agcore::vocab::{FunctionCall, OpenaiChatMessage, ToolCall};
use nix::time::{ClockId, clock_gettime};

fn cpu_now() -> Duration {
    Duration::from(clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap())
}

/// Resident set size of this process, in bytes.
fn rss() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap();
    let pages: u64 = statm.split_whitespace().nth(1).unwrap().parse().unwrap();
    pages * 4096
}

/// What the parent calls in its first turn.
#[derive(Clone, Copy)]
enum Mode {
    Direct,
    SubAgent,
    FanOut(usize),
}

struct BenchModel {
    mode: Mode,
    barrier: Option<Arc<tokio::sync::Barrier>>,
    peak: Arc<Mutex<u64>>,
}

fn call(id: String, name: &str, arguments: &str) -> ToolCall {
    ToolCall {
        id,
        kind: "function".to_owned(),
        function: FunctionCall {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
        },
    }
}

fn reply(message: OpenaiChatMessage) -> ChatResponse {
    ChatResponse {
        message,
        stop_reason: None,
        usage: None,
        model: None,
        id: None,
    }
}

#[async_trait]
impl ChatModel for BenchModel {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        let system = request.messages[0].text().unwrap_or_default();
        if system.starts_with("WORKER") {
            if let Some(barrier) = &self.barrier
                && barrier.wait().await.is_leader()
            {
                *self.peak.lock().unwrap() = rss();
            }
            return Ok(reply(OpenaiChatMessage::assistant_text("ok")));
        }
        let answered = request
            .messages
            .iter()
            .any(|m| matches!(m, OpenaiChatMessage::Tool { .. }));
        if answered {
            return Ok(reply(OpenaiChatMessage::assistant_text("done")));
        }
        let task = r#"{"task":"answer ok"}"#;
        let calls = match self.mode {
            Mode::Direct => vec![call("c0".into(), "noop", "{}")],
            Mode::SubAgent => vec![call("c0".into(), "worker", task)],
            Mode::FanOut(n) => (0..n)
                .map(|i| call(format!("c{i}"), "worker", task))
                .collect(),
        };
        Ok(reply(OpenaiChatMessage::assistant_tool_calls(None, calls)))
    }

    async fn chat_stream(&self, _request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        Err(ProviderError::Other(
            "the bench runs without streaming".to_owned(),
        ))
    }
}

struct Noop;

#[async_trait]
impl BaseTool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {}})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("ok"))
    }
}

fn team() -> Team {
    Team::new()
        .with_agent(
            Agent::new("worker")
                .with_instructions("WORKER. Answer ok.")
                .with_tools(vec![]),
        )
        .with_agent(
            Agent::new("main")
                .with_instructions("PARENT. Delegate.")
                .with_agents(vec!["worker".into()]),
        )
}

async fn one_run(
    mode: Mode,
    registry: &ToolRegistry,
    team: &Team,
    barrier: Option<Arc<tokio::sync::Barrier>>,
    peak: Arc<Mutex<u64>>,
) {
    let model = BenchModel {
        mode,
        barrier,
        peak,
    };
    let mut cycle = LlmCycle::new(model, CycleConfig::new("bench"));
    let request = RunRequest::prompt("go").with_tools(registry);
    let request = match mode {
        Mode::Direct => request,
        _ => request.with_team(team, "main"),
    };
    let outcome = cycle.run_with(request).await.unwrap();
    assert!(matches!(outcome, RunOutcome::Finished(ref r) if r.text() == "done"));
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let value = |flag: &str, default: usize| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .map_or(default, |v| v.parse().unwrap())
    };
    let calls = value("--calls", 2000);
    let children = value("--children", 100);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Noop)).unwrap();
        let team = team();
        team.check("main", &registry).unwrap();
        let peak = Arc::new(Mutex::new(0));
        let mut per_call = Vec::new();
        for mode in [Mode::Direct, Mode::SubAgent] {
            for _ in 0..calls / 10 {
                one_run(mode, &registry, &team, None, peak.clone()).await;
            }
            let start = cpu_now();
            for _ in 0..calls {
                one_run(mode, &registry, &team, None, peak.clone()).await;
            }
            per_call.push((cpu_now() - start) / u32::try_from(calls).unwrap());
        }
        println!(
            "CPU per parent run with one call: direct tool {:.1} µs, sub-agent {:.1} µs, ratio {:.2}×",
            per_call[0].as_secs_f64() * 1e6,
            per_call[1].as_secs_f64() * 1e6,
            per_call[1].as_secs_f64() / per_call[0].as_secs_f64()
        );
        let before = rss();
        let barrier = Arc::new(tokio::sync::Barrier::new(children));
        one_run(Mode::FanOut(children), &registry, &team, Some(barrier), peak.clone()).await;
        let during = *peak.lock().unwrap();
        println!(
            "RSS with {children} children running at once: {:.1} MiB before, {:.1} MiB during, {:.1} KiB per child",
            before as f64 / 1048576.0,
            during as f64 / 1048576.0,
            during.saturating_sub(before) as f64 / 1024.0 / children as f64
        );
    });
}
