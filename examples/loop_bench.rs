//! Client CPU per tool-loop turn against a local fake OpenAI server (PERFORMANCE.md, "Tool loop").
//!
//! ```text
//! cargo run --release --example loop_bench -- [--runs 20] [--turns 50] [--runtime current|multi]
//!     [--provider floor|openai|openai-responses|anthropic|gemini|all]  # the wire API (default
//!                                           # openai: chat completions); floor: a minimal hand-written
//!                                           # loop on reqwest + serde_json, no agcore (loop_bench/floor.rs);
//!                                           # all: the floor, then each API in turn, same server
//!     [--peer .venv-bench/bin/python]      # also run examples/peers/agents_sdk_loop.py
//!     [--base-url http://127.0.0.1:PORT/v1] # use a running `serve` instead of starting one
//!     [--journal]                           # also through `run_with`: without a journal, with a
//!                                           # journal that writes nothing, and with every step
//!                                           # journaled to SQLite
//!     [--context on|off|both|tiktoken|all]  # the context engine (estimate before each request); default on
//!                                           # on: the calibrated ratio ("fake-model"); tiktoken: the model is
//!                                           # called "gpt-4o", so the engine counts with tiktoken o200k_base;
//!                                           # all: off, on and tiktoken in the same run
//!     [--output-bytes N]                    # the tool returns N bytes of log lines (default "ok")
//! cargo run --release --example loop_bench -- serve   # only the fake server; prints its port
//! ```
//!
//! The fake server is this binary in `serve` mode, a separate process, so the CPU measured here
//! (`CLOCK_PROCESS_CPUTIME_ID`, all threads of the client process) is the client's alone. It
//! answers statelessly from the request body in the wire format its path names (chat
//! completions, Responses, Anthropic Messages, Gemini): while fewer than `--turns` tool results
//! are in the request it calls the no-op tool, then it answers with text — as SSE events when
//! the request streams, else as one JSON body. Every API's replies carry the same content.
//!
//! A turn is one model request: turn k's CPU runs from the start of request k to the start of
//! request k+1 (HTTP, JSON both ways, the tool, history), the last turn to the end of the call.
//! Each configuration runs `--runs` times after two warm-up runs, the configurations' runs
//! interleaved (one run of each in turn); figures are medians over runs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "loop_bench/floor.rs"]
mod floor;
#[path = "loop_bench/native.rs"]
mod native;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{
    AnthropicClient, AnthropicConfig, ChatModel, ChatRequest, ChatResponse, CycleConfig,
    GeminiClient, GeminiConfig, LlmCycle, ModelStream, OpenAiClient, OpenAiConfig,
    OpenAiResponsesClient, OpenAiResponsesConfig, ProviderError,
};
use agcore::tools::prelude::*;
use futures::StreamExt;
use nix::time::{ClockId, clock_gettime};

fn cpu_now() -> Duration {
    Duration::from(clock_gettime(ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap())
}

// ---------------------------------------------------------------------------------------------
// The fake server (`serve` mode): HTTP/1.1 keep-alive, a thread per connection.

fn serve(turns: usize) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("{}", listener.local_addr().unwrap().port());
    std::io::stdout().flush().unwrap();
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        std::thread::spawn(move || {
            let _ = handle_connection(stream, turns);
        });
    }
}

fn handle_connection(stream: TcpStream, turns: usize) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    let mut seq = 0usize;
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        let path = line.split_whitespace().nth(1).unwrap_or("").to_owned();
        let mut length = 0usize;
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
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
        seq += 1;
        let (content_type, reply) = answer(&path, &body, turns, seq);
        let head = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n\r\n",
            reply.len()
        );
        let mut out = head.into_bytes();
        out.extend_from_slice(reply.as_bytes());
        writer.write_all(&out)?;
    }
}

/// The reply to one request, in the wire format of its `path`: a call of `noop` until `turns`
/// tool turns were made.
fn answer(path: &str, body: &[u8], turns: usize, seq: usize) -> (&'static str, String) {
    let request: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    if path.ends_with("/responses") {
        return native::responses(&request, turns, seq);
    }
    if path.ends_with("/messages") {
        return native::anthropic(&request, turns, seq);
    }
    if path.contains(":generateContent") || path.contains(":streamGenerateContent") {
        return native::gemini(path, &request, turns, seq);
    }
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last_user = messages
        .iter()
        .rposition(|m| m["role"] == "user")
        .unwrap_or(0);
    let turn = messages[last_user..]
        .iter()
        .filter(|m| m["role"] == "assistant")
        .count();
    let stream = request["stream"] == json!(true);
    let id = format!("chatcmpl-{seq}");
    let usage = json!({"prompt_tokens": 100 + 20 * turn, "completion_tokens": 10, "total_tokens": 110 + 20 * turn});
    let call_id = format!("call_{turn:04}_{seq}");
    if !stream {
        let message = if turn < turns {
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": call_id, "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})
        } else {
            json!({"role": "assistant", "content": "All done.", "refusal": null})
        };
        let finish = if turn < turns { "tool_calls" } else { "stop" };
        let body = json!({"id": id, "object": "chat.completion", "created": 1_732_963_500,
            "model": "fake-model", "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "message": message, "logprobs": null, "finish_reason": finish}],
            "usage": usage});
        return ("application/json", body.to_string());
    }
    let chunk = |delta: Value, finish: Value| {
        json!({"id": id, "object": "chat.completion.chunk", "created": 1_732_963_500,
            "model": "fake-model", "system_fingerprint": "fp_fake",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}]})
    };
    let mut chunks = vec![chunk(
        json!({"role": "assistant", "content": null}),
        Value::Null,
    )];
    if turn < turns {
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "id": call_id, "type": "function",
                "function": {"name": "noop", "arguments": ""}}]}),
            Value::Null,
        ));
        chunks.push(chunk(
            json!({"tool_calls": [{"index": 0, "function": {"arguments": "{}"}}]}),
            Value::Null,
        ));
        chunks.push(chunk(json!({}), json!("tool_calls")));
    } else {
        chunks.push(chunk(json!({"content": "All"}), Value::Null));
        chunks.push(chunk(json!({"content": " done."}), Value::Null));
        chunks.push(chunk(json!({}), json!("stop")));
    }
    chunks.push(
        json!({"id": id, "object": "chat.completion.chunk", "created": 1_732_963_500,
        "model": "fake-model", "choices": [], "usage": usage}),
    );
    let mut sse = String::new();
    for chunk in chunks {
        sse.push_str("data: ");
        sse.push_str(&chunk.to_string());
        sse.push_str("\n\n");
    }
    sse.push_str("data: [DONE]\n\n");
    ("text/event-stream", sse)
}

// ---------------------------------------------------------------------------------------------
// The client side.

/// The no-op tool the fake model calls.
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
        json!({"type": "object", "properties": {}})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!(OUTPUT.get().map_or("ok", String::as_str)))
    }
}

/// What the tool returns (`--output-bytes`).
static OUTPUT: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// The context engine's configuration of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Engine {
    Off,
    Ratio,
    Tiktoken,
}

impl Engine {
    fn label(self) -> &'static str {
        match self {
            Engine::Off => "off",
            Engine::Ratio => "on (calibrated ratio)",
            Engine::Tiktoken => "on (tiktoken o200k_base)",
        }
    }
}

/// Records the process CPU clock at the start of every model request.
struct Timed {
    inner: Arc<dyn ChatModel>,
    starts: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl ChatModel for Timed {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        self.starts.lock().unwrap().push(cpu_now());
        self.inner.chat(request).await
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        self.starts.lock().unwrap().push(cpu_now());
        self.inner.chat_stream(request).await
    }

    fn provider(&self) -> &str {
        self.inner.provider()
    }

    fn api(&self) -> agcore::llm::WireApi {
        self.inner.api()
    }
}

/// The client of `provider` for the fake server at `origin` (`http://127.0.0.1:PORT`).
fn client(provider: &str, origin: &str) -> Arc<dyn ChatModel> {
    let v1 = format!("{origin}/v1");
    match provider {
        "openai-responses" => {
            Arc::new(OpenAiResponsesClient::new(OpenAiResponsesConfig::new(v1)).unwrap())
        }
        "anthropic" => {
            let mut config = AnthropicConfig::new(v1).with_api_key("bench");
            // The fake bills nothing; cache breakpoints would only add bytes.
            config.cache = false;
            Arc::new(AnthropicClient::new(config).unwrap())
        }
        "gemini" => Arc::new(
            GeminiClient::new(GeminiConfig::new(format!("{origin}/v1beta")).with_api_key("bench"))
                .unwrap(),
        ),
        _ => Arc::new(OpenAiClient::new(OpenAiConfig::new(v1)).unwrap()),
    }
}

/// How a `--journal` run records its steps.
#[derive(Clone)]
enum Journal {
    /// Through `run_with`, without a journal: the baseline of the two below.
    None,
    /// A journal that takes every record and writes nothing: the run's own journaling work.
    Discard,
    /// Every step into a new session of this store.
    Store(Arc<dyn agcore::session::SessionStore>),
}

impl Journal {
    fn label(&self) -> &'static str {
        match self {
            Journal::None => "run_with, no journal",
            Journal::Discard => "journal that writes nothing",
            Journal::Store(_) => "sqlite session journal",
        }
    }
}

/// Takes every record, writes nothing.
struct Discard;

#[async_trait::async_trait]
impl agcore::run::RunJournal for Discard {
    async fn record(
        &self,
        entry: agcore::run::JournalEntry<'_>,
    ) -> Result<(), agcore::run::JournalError> {
        // Encoded as a store would, so the figure includes the serialisation.
        let encoded = match entry {
            agcore::run::JournalEntry::Run(state) => serde_json::to_string(state).map(|s| s.len()),
            agcore::run::JournalEntry::History(messages) => {
                serde_json::to_string(messages.last().unwrap()).map(|s| s.len())
            }
            _ => Ok(0),
        };
        std::hint::black_box(encoded.unwrap());
        Ok(())
    }
}

/// CPU per turn of one whole tool-loop call; with `journal`, the run goes through
/// `run_with` and records its steps as the [`Journal`] says.
async fn one_call(
    client: &Arc<dyn ChatModel>,
    registry: &ToolRegistry,
    turns: usize,
    streaming: bool,
    journal: Option<&Journal>,
    context: Engine,
) -> Vec<Duration> {
    let starts = Arc::new(Mutex::new(Vec::new()));
    let model = Timed {
        inner: client.clone(),
        starts: starts.clone(),
    };
    let model_name = if context == Engine::Tiktoken {
        "gpt-4o"
    } else {
        "fake-model"
    };
    let mut config = CycleConfig::new(model_name);
    config.max_turns = Some(u32::try_from(turns).unwrap() + 1);
    config.repeated_call_guard.limit = None;
    // Room for every turn: this measures the estimate, not compaction.
    config.context_window = Some(10_000_000);
    config.tool_output_limit = usize::MAX;
    if context == Engine::Off {
        config.context = agcore::llm::ContextConfig::off();
    }
    let mut cycle = LlmCycle::new(model, config).with_system_prompt("You are a benchmark.");
    let begin = cpu_now();
    if let Some(journal) = journal {
        static SESSION: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let name = format!(
            "bench-{}",
            SESSION.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let session = match journal {
            Journal::Store(store) => Some(
                agcore::session::SessionJournal::open(store.clone(), &name)
                    .await
                    .unwrap()
                    .0,
            ),
            _ => None,
        };
        let mut request = agcore::run::RunRequest::prompt("Go").with_tools(registry);
        match (journal, &session) {
            (Journal::Discard, _) => request = request.with_journal(&Discard),
            (_, Some(session)) => request = request.with_journal(session),
            _ => {}
        }
        if streaming {
            let mut items = cycle.run_with_stream(request);
            while let Some(item) = items.next().await {
                if let agcore::run::RunItem::Failed(error) = item {
                    panic!("{error}");
                }
            }
        } else {
            cycle.run_with(request).await.unwrap();
        }
    } else if streaming {
        let mut stream = cycle
            .submit_stream_with_tools("Go".into(), registry)
            .await
            .unwrap();
        while let Some(event) = stream.next().await {
            if let agcore::llm::StreamEvent::Error { message, .. } = event {
                panic!("{message}");
            }
        }
    } else {
        cycle
            .submit_with_tools("Go".into(), registry)
            .await
            .unwrap();
    }
    let end = cpu_now();
    assert_eq!(cycle.messages().len(), 3 + 2 * turns);
    let mut marks = starts.lock().unwrap().clone();
    assert_eq!(marks.len(), turns + 1);
    marks[0] = begin;
    marks.push(end);
    marks.windows(2).map(|w| w[1] - w[0]).collect()
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn mean_ms(turns: &[Duration]) -> f64 {
    turns.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e3 / turns.len() as f64
}

#[allow(clippy::too_many_arguments)]
async fn bench(
    provider: &str,
    origin: &str,
    runs: usize,
    turns: usize,
    streaming: bool,
    runtime: &str,
    journal: Option<&Journal>,
    context: Engine,
) {
    let client = client(provider, origin);
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let mut per_run = Vec::new();
    for run in 0..runs + 2 {
        let cpu = one_call(&client, &registry, turns, streaming, journal, context).await;
        if run >= 2 {
            per_run.push(cpu);
        }
    }
    let mean = median(per_run.iter().map(|c| mean_ms(c)).collect());
    let first = median(per_run.iter().map(|c| mean_ms(&c[..10])).collect());
    let last = median(
        per_run
            .iter()
            .map(|c| mean_ms(&c[turns - 10..turns]))
            .collect(),
    );
    println!(
        "{}",
        json!({
            "client": format!("agcore ({runtime}-thread runtime)"),
            "provider": provider,
            "mode": if streaming { "stream" } else { "blocking" },
            "journal": journal.map(Journal::label),
            "context_engine": context.label(),
            "tool_output_bytes": OUTPUT.get().map_or(2, String::len),
            "runs": runs, "tool_turns": turns,
            "cpu_ms_per_turn_mean": round(mean),
            "cpu_ms_turns_1_10": round(first),
            "cpu_ms_turns_last_10": round(last),
            "growth_last_vs_first": round(last / first),
        })
    );
}

/// One configuration of [`interleaved`].
struct Config {
    provider: &'static str,
    streaming: bool,
    context: Engine,
    /// `None`: the floor client.
    client: Option<Arc<dyn ChatModel>>,
    per_run: Vec<Vec<Duration>>,
}

/// `bench` for every provider, context and mode, their runs interleaved.
async fn interleaved(
    providers: &[&'static str],
    contexts: &[Engine],
    origin: &str,
    runs: usize,
    turns: usize,
    runtime: &str,
) {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Noop)).unwrap();
    let http = reqwest::Client::new();
    let url = format!("{origin}/v1/chat/completions");
    let output = OUTPUT.get().map_or("ok", String::as_str);
    let mut configs = Vec::new();
    for &provider in providers {
        let (client, engines) = match provider {
            "floor" => (None, &[Engine::Off][..]),
            _ => (Some(client(provider, origin)), contexts),
        };
        for &context in engines {
            for streaming in [false, true] {
                configs.push(Config {
                    provider,
                    streaming,
                    context,
                    client: client.clone(),
                    per_run: Vec::new(),
                });
            }
        }
    }
    for run in 0..runs + 2 {
        for config in &mut configs {
            let cpu = match &config.client {
                None => floor::one_call(&http, &url, turns, config.streaming, output).await,
                Some(client) => {
                    one_call(
                        client,
                        &registry,
                        turns,
                        config.streaming,
                        None,
                        config.context,
                    )
                    .await
                }
            };
            if run >= 2 {
                config.per_run.push(cpu);
            }
        }
    }
    for config in &configs {
        let per_run = &config.per_run;
        let mean = median(per_run.iter().map(|c| mean_ms(c)).collect());
        let first = median(per_run.iter().map(|c| mean_ms(&c[..10])).collect());
        let last = median(
            per_run
                .iter()
                .map(|c| mean_ms(&c[turns - 10..turns]))
                .collect(),
        );
        let (client, provider) = match config.client {
            None => (
                format!("floor: reqwest + serde_json, no agcore ({runtime}-thread runtime)"),
                "openai",
            ),
            Some(_) => (
                format!("agcore ({runtime}-thread runtime)"),
                config.provider,
            ),
        };
        println!(
            "{}",
            json!({
                "client": client,
                "provider": provider,
                "mode": if config.streaming { "stream" } else { "blocking" },
                "context_engine": if config.client.is_some() { Some(config.context.label()) } else { None },
                "tool_output_bytes": output.len(),
                "runs": runs, "tool_turns": turns, "interleaved": configs.len(),
                "cpu_ms_per_turn_mean": round(mean),
                "cpu_ms_turns_1_10": round(first),
                "cpu_ms_turns_last_10": round(last),
                "growth_last_vs_first": round(last / first),
            })
        );
    }
}

fn round(value: f64) -> f64 {
    (value * 1000.0).round() / 1000.0
}

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let turns: usize = arg(&args, "--turns").map_or(50, |v| v.parse().unwrap());
    if args.get(1).map(String::as_str) == Some("serve") {
        serve(turns);
        return;
    }
    let runs: usize = arg(&args, "--runs").map_or(20, |v| v.parse().unwrap());
    let runtime = arg(&args, "--runtime").unwrap_or_else(|| "current".into());
    assert!(turns >= 10, "--turns must be at least 10");

    // `--base-url` uses a server started with `loop_bench serve` (e.g. to profile the client alone).
    let mut server = None;
    let origin = match arg(&args, "--base-url") {
        Some(url) => url.trim_end_matches('/').trim_end_matches("/v1").to_owned(),
        None => {
            let mut child = Command::new(std::env::current_exe().unwrap())
                .args(["serve", "--turns", &turns.to_string()])
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let mut port = String::new();
            BufReader::new(child.stdout.take().unwrap())
                .read_line(&mut port)
                .unwrap();
            server = Some(child);
            format!("http://127.0.0.1:{}", port.trim())
        }
    };
    let base_url = format!("{origin}/v1");
    const PROVIDERS: [&str; 5] = ["floor", "openai", "openai-responses", "anthropic", "gemini"];
    let providers: Vec<&'static str> = match arg(&args, "--provider").as_deref() {
        Some("all") => PROVIDERS.to_vec(),
        Some(one) => vec![
            *PROVIDERS
                .iter()
                .find(|p| **p == one)
                .unwrap_or_else(|| panic!("unknown --provider {one}")),
        ],
        None => vec!["openai"],
    };

    let rt = match runtime.as_str() {
        "multi" => tokio::runtime::Builder::new_multi_thread(),
        _ => tokio::runtime::Builder::new_current_thread(),
    }
    .enable_all()
    .build()
    .unwrap();
    if let Some(bytes) = arg(&args, "--output-bytes") {
        let bytes: usize = bytes.parse().unwrap();
        let mut text = String::new();
        let mut line = 0;
        while text.len() < bytes {
            text.push_str(&format!(
                "line {line}: value={} status=ok path=/srv/app/module_{}.rs elapsed_ms={}\n",
                line * 7 % 977,
                line % 13,
                line * 3 % 250
            ));
            line += 1;
        }
        text.truncate(bytes);
        OUTPUT.set(text).unwrap();
    }
    let contexts: &[Engine] = match arg(&args, "--context").as_deref() {
        Some("off") => &[Engine::Off],
        Some("both") => &[Engine::Ratio, Engine::Off],
        Some("tiktoken") => &[Engine::Tiktoken],
        Some("all") => &[Engine::Off, Engine::Ratio, Engine::Tiktoken],
        _ => &[Engine::Ratio],
    };
    // Every configuration's runs are interleaved (run 1 of each, then run 2 of each, ...), so a
    // change in the machine's load falls on all of them alike and the ratios stay comparable.
    rt.block_on(interleaved(
        &providers, contexts, &origin, runs, turns, &runtime,
    ));
    // `--journal`: the same runs recording every step in a SQLite session store (issue 11).
    if args.iter().any(|a| a == "--journal") {
        let dir = std::env::temp_dir().join(format!("agcore-loop-bench-{}", std::process::id()));
        let store: Arc<dyn agcore::session::SessionStore> = Arc::new(
            rt.block_on(agcore::session::SqliteStore::open(dir.join("sessions.db")))
                .unwrap(),
        );
        for journal in [Journal::None, Journal::Discard, Journal::Store(store)] {
            for streaming in [false, true] {
                rt.block_on(bench(
                    providers[0],
                    &origin,
                    runs,
                    turns,
                    streaming,
                    &runtime,
                    Some(&journal),
                    contexts[0],
                ));
            }
        }
        let _ = std::fs::remove_dir_all(dir);
    }

    if let Some(python) = arg(&args, "--peer") {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/examples/peers/agents_sdk_loop.py"
        );
        let peer_runs = arg(&args, "--peer-runs").unwrap_or_else(|| "5".into());
        let status = Command::new(python)
            .args([
                script,
                "--base-url",
                &base_url,
                "--turns",
                &turns.to_string(),
            ])
            .args(["--runs", &peer_runs])
            .status()
            .unwrap();
        assert!(status.success(), "the peer failed");
    }
    if let Some(mut server) = server {
        let _ = server.kill();
        let _ = server.wait();
    }
}
