//! The cost of control and insight (issue 14): client CPU per tool-loop turn with the GenAI
//! spans exported over OTLP vs no subscriber, and the cost of one `before_tool_call` +
//! `after_tool_call` dispatch with no hooks, one in-process hook, one command hook.
//!
//! ```text
//! cargo run --release --example control_bench -- [--runs 10] [--turns 50] [--calls 200]
//! ```
//!
//! The fake server (this binary in `serve` mode, a separate process, so the CPU measured here
//! is the client's alone) answers `POST /v1/chat/completions` statelessly — a call of the
//! no-op tool until `--turns` tool turns were made, then text — and `POST /v1/traces` (the
//! OTLP receiver) with an empty 200. CPU is `CLOCK_PROCESS_CPUTIME_ID` of the client process:
//! the export thread included. Figures are medians over `--runs` after two warm-up runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, ToolCall};
use agcore::run::hooks::{HookChain, Hooks, ToolCallDecision};
use agcore::tools::prelude::*;
use agcore::vocab::ToolAnswer;
use nix::time::{ClockId, clock_gettime};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use tracing_subscriber::layer::SubscriberExt;

fn cpu_now() -> Duration {
    Duration::from(clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap())
}

fn serve(turns: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        std::thread::spawn(move || {
            let _ = connection(stream, turns);
        });
    }
}

fn connection(stream: TcpStream, turns: usize) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let traces = line.contains("/v1/traces");
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            reader.read_line(&mut header)?;
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let (content_type, reply) = if traces {
            ("application/x-protobuf", String::new())
        } else {
            ("application/json", answer(&body, turns))
        };
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        writer.write_all(format!("{head}{reply}").as_bytes())?;
    }
}

fn answer(body: &[u8], turns: usize) -> String {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let turn = messages.iter().filter(|m| m["role"] == "assistant").count();
    let message = if turn < turns {
        json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": format!("call_{turn}"), "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})
    } else {
        json!({"role": "assistant", "content": "All done."})
    };
    let finish = if turn < turns { "tool_calls" } else { "stop" };
    json!({"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "fake-model",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100 + 20 * turn, "completion_tokens": 10, "total_tokens": 110 + 20 * turn}})
    .to_string()
}

struct Noop;

#[async_trait]
impl BaseTool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "Does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("ok"))
    }
}

/// An in-process hook on both tool events that looks at the call and lets it through.
struct Inspect;

#[async_trait]
impl Hooks for Inspect {
    async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
        if call.function.arguments.contains("rm -rf") {
            ToolCallDecision::deny("no")
        } else {
            ToolCallDecision::Allow
        }
    }
    async fn after_tool_call(&self, _call: &ToolCall, answer: &mut ToolAnswer) {
        std::hint::black_box(answer.content.len());
    }
}

/// A command hook as `agcore`'s `[hooks]` runs one: a process per event, the JSON event on
/// stdin, its stdout read (here `sh -c 'cat >/dev/null'`, which answers nothing: allow).
struct CommandHook;

impl CommandHook {
    async fn run(&self, event: Value) {
        let mut child = tokio::process::Command::new("sh")
            .args(["-c", "cat >/dev/null"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        use tokio::io::AsyncWriteExt;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(event.to_string().as_bytes()).await.unwrap();
        drop(stdin);
        child.wait_with_output().await.unwrap();
    }
}

#[async_trait]
impl Hooks for CommandHook {
    async fn before_tool_call(&self, call: &ToolCall) -> ToolCallDecision {
        self.run(json!({"event": "before_tool_call", "tool": call.function.name, "arguments": call.function.arguments}))
            .await;
        ToolCallDecision::Allow
    }
    async fn after_tool_call(&self, call: &ToolCall, answer: &mut ToolAnswer) {
        self.run(json!({"event": "after_tool_call", "tool": call.function.name, "output": answer.content}))
            .await;
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(|a, b| a.partial_cmp(b).unwrap());
    values[values.len() / 2]
}

fn arg(args: &[String], name: &str, default: usize) -> usize {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map_or(default, |v| v.parse().unwrap())
}

/// CPU ms per turn of one run of `turns` tool turns plus the answer.
async fn one_run(base_url: &str, turns: usize, hooks: HookChain) -> f64 {
    let client = OpenAiClient::new(OpenAiConfig::new(base_url)).unwrap();
    let mut config = CycleConfig::new("fake-model");
    config.max_turns = Some(u32::try_from(turns).unwrap() + 1);
    config.repeated_call_guard.limit = None;
    config.hooks = hooks;
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let mut cycle = LlmCycle::new(client, config);
    let start = cpu_now();
    let reply = cycle
        .submit_with_tools("go".into(), &registry)
        .await
        .unwrap();
    assert_eq!(reply.text(), "All done.");
    (cpu_now() - start).as_secs_f64() * 1000.0 / (turns + 1) as f64
}

/// One run's CPU ms/turn under each configuration, interleaved run by run (so a busy moment
/// of the machine hits every configuration alike); medians over `runs`.
fn loop_figures(base_url: &str, runs: usize, turns: usize, traced: &tracing::Dispatch) -> [f64; 3] {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut figures = [Vec::new(), Vec::new(), Vec::new()];
    for run in 0..runs + 2 {
        let plain = runtime.block_on(one_run(base_url, turns, HookChain::new()));
        let exported = tracing::dispatcher::with_default(traced, || {
            runtime.block_on(one_run(base_url, turns, HookChain::new()))
        });
        let hooked = runtime.block_on(one_run(
            base_url,
            turns,
            HookChain::new().with(Arc::new(Inspect)),
        ));
        if run >= 2 {
            for (list, figure) in figures.iter_mut().zip([plain, exported, hooked]) {
                list.push(figure);
            }
        }
    }
    figures.map(median)
}

/// Wall µs per call of the two tool-call events through `hooks`.
fn dispatch_figure(hooks: HookChain, calls: usize) -> f64 {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let call = ToolCall::new("call_1", "run_command", r#"{"command":"cargo test"}"#);
        let mut figures = Vec::new();
        for _ in 0..5 {
            let start = Instant::now();
            for _ in 0..calls {
                let allowed = hooks.before_tool_call(&call).await.unwrap();
                let answer = hooks.after_tool_call(&allowed, ToolAnswer::ok("ok")).await;
                std::hint::black_box(answer);
            }
            figures.push(start.elapsed().as_secs_f64() * 1e6 / calls as f64);
        }
        median(figures)
    })
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let turns = arg(&args, "--turns", 50);
    if args.get(1).map(String::as_str) == Some("serve") {
        serve(turns);
        return;
    }
    let runs = arg(&args, "--runs", 10);
    let calls = arg(&args, "--calls", 200);
    let mut server = Command::new(std::env::current_exe().unwrap())
        .args(["serve", "--turns", &turns.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut port = String::new();
    BufReader::new(server.stdout.take().unwrap())
        .read_line(&mut port)
        .unwrap();
    let origin = format!("http://127.0.0.1:{}", port.trim());
    let base_url = format!("{origin}/v1");

    // The spans exported over OTLP (http/protobuf, batch processor) to the fake server.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_endpoint(format!("{origin}/v1/traces"))
        .build()
        .unwrap();
    let provider = opentelemetry_sdk::trace::SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .build();
    let layer = tracing_opentelemetry::layer().with_tracer(provider.tracer("agcore"));
    let traced = tracing::Dispatch::new(tracing_subscriber::registry().with(layer));
    let [plain, traced, inproc] = loop_figures(&base_url, runs, turns, &traced);
    provider.shutdown().unwrap();

    let no_hooks = dispatch_figure(HookChain::new(), calls * 10);
    let one_inproc = dispatch_figure(HookChain::new().with(Arc::new(Inspect)), calls * 10);
    let one_command = dispatch_figure(HookChain::new().with(Arc::new(CommandHook)), calls);
    server.kill().unwrap();
    let _ = server.wait();

    println!("tool loop, {turns} tool turns + answer, client CPU ms/turn (median of {runs}):");
    println!("  no subscriber              {plain:.4}");
    println!(
        "  spans exported over OTLP   {traced:.4}  ({:.2}x)",
        traced / plain
    );
    println!(
        "  one in-process hook        {inproc:.4}  ({:.2}x)",
        inproc / plain
    );
    println!("hook dispatch, before_tool_call + after_tool_call, wall µs per call (median of 5):");
    println!("  no hooks                   {no_hooks:.3}");
    println!("  one in-process hook        {one_inproc:.3}");
    println!("  one command hook (sh)      {one_command:.1}");
}
