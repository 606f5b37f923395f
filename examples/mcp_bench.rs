//! `tools/call echo` throughput and latency of agcore's `McpClient` against any stdio MCP server
//! or streamable-HTTP URL, with the same CLI and JSON fields as `mcp-bench-rmcp` (../shared/perf)
//! so both run side by side — and, with `--impl rmcp`, of a raw rmcp 3.11 client built into the
//! same binary (same compiler flags, same run):
//!
//! ```text
//! cargo run --release --example mcp_bench -- [--calls 2000] [--conc 32] [--warmup 50]
//!     [--modes seq,spawn,join_all] [--runtime multi|current] [--label NAME] [--impl agcore|rmcp]
//!     [--server-pid PID] [--lifecycle session|stateless]
//!     (--url http://127.0.0.1:PORT/mcp | -- SERVER_CMD [ARGS...])
//! ```
//!
//! `--lifecycle`: `session` (default) opens with the `initialize` handshake (2025-11-25) for
//! both clients; `stateless` with `server/discover` (2026-07-28: no session, every request
//! carries its version and capabilities) — agcore's `McpNegotiation::Stateless`, rmcp's
//! `ClientLifecycleMode::Discover`. Against one rmcp server (`mcp-demo-server --http ADDR`)
//! both generations are served by the same process.
//!
//! `--server-pid` names the server process (tree) whose CPU is counted for an HTTP server that is
//! not this process's child.
//!
//! Modes: `seq` one call at a time; `spawn` `--conc` tasks (each with an `McpHandle`) pulling
//! call indices from a shared counter; `join_all` the same workers as plain futures on the main
//! task. Fields: `calls_per_s`, `p50_us`, `p99_us`, `cpu_us_per_call` (this process's CPU over
//! the timed section — all threads, from `/proc/self/task/*/schedstat`), `server_cpu_us_per_call`
//! (the server's process tree, same source), `init_ms` (spawn + initialize + tools/list).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use agcore::tools::mcp::{McpClient, McpHandle, McpNegotiation, McpTransport};
use agcore::tools::sandbox::SandboxPolicy;
use rmcp::model::{CallToolRequestParams, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, Peer, RoleClient, RunningService};
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error + Send + Sync>;

/// CPU ns of every thread of process `pid` (and, with `tree`, of its descendants).
fn cpu_ns(pid: u32, tree: bool) -> u64 {
    let mut total = 0;
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return 0;
    };
    for task in tasks.flatten() {
        let path = task.path();
        if let Ok(stat) = std::fs::read_to_string(path.join("schedstat")) {
            total += stat
                .split_whitespace()
                .next()
                .and_then(|ns| ns.parse::<u64>().ok())
                .unwrap_or(0);
        }
        if tree && let Ok(children) = std::fs::read_to_string(path.join("children")) {
            for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                total += cpu_ns(child, true);
            }
        }
    }
    total
}

/// CPU ns of this process's children (the server and what it started).
fn children_cpu_ns() -> u64 {
    let me = std::process::id();
    let mut total = 0;
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) {
        for task in tasks.flatten() {
            if let Ok(children) = std::fs::read_to_string(task.path().join("children")) {
                for child in children.split_whitespace().filter_map(|c| c.parse().ok()) {
                    total += cpu_ns(child, true);
                }
            }
        }
    }
    total
}

struct Args {
    calls: usize,
    conc: usize,
    warmup: usize,
    modes: Vec<String>,
    runtime: String,
    label: String,
    server: Vec<String>,
    url: Option<String>,
    implementation: String,
    server_pid: Option<u32>,
    /// `session` (the `initialize` handshake) or `stateless` (`server/discover`).
    lifecycle: String,
}

fn parse_args() -> Result<Args, Error> {
    let mut args = Args {
        calls: 2000,
        conc: 32,
        warmup: 50,
        modes: vec!["seq".into(), "spawn".into(), "join_all".into()],
        runtime: "multi".into(),
        label: String::new(),
        server: vec![],
        url: None,
        implementation: "agcore".into(),
        server_pid: None,
        lifecycle: "session".into(),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--calls" => args.calls = value()?.parse()?,
            "--conc" => args.conc = value()?.parse()?,
            "--warmup" => args.warmup = value()?.parse()?,
            "--modes" => args.modes = value()?.split(',').map(str::to_string).collect(),
            "--runtime" => args.runtime = value()?,
            "--label" => args.label = value()?,
            "--url" => args.url = Some(value()?),
            "--impl" => args.implementation = value()?,
            "--server-pid" => args.server_pid = Some(value()?.parse()?),
            "--lifecycle" => args.lifecycle = value()?,
            "--" => {
                args.server = it.collect();
                break;
            }
            other => {
                return Err(
                    format!("unknown argument {other} (server command goes after --)").into(),
                );
            }
        }
    }
    if args.server.is_empty() && args.url.is_none() {
        return Err("usage: mcp_bench [options] (--url URL | -- SERVER_CMD [ARGS...])".into());
    }
    if args.label.is_empty() {
        args.label = args.url.clone().unwrap_or_else(|| args.server.join(" "));
    }
    Ok(args)
}

/// Who makes the calls: agcore's handle, or a raw rmcp peer.
#[derive(Clone)]
enum Caller {
    Agcore(McpHandle),
    Rmcp(Peer<RoleClient>),
}

async fn echo(handle: &Caller, i: usize) -> Result<u64, Error> {
    let started = Instant::now();
    let reply = match handle {
        Caller::Agcore(handle) => {
            handle
                .call_tool("echo", json!({"message": format!("m{i}")}))
                .await?
        }
        Caller::Rmcp(peer) => {
            let mut arguments = serde_json::Map::new();
            arguments.insert("message".into(), json!(format!("m{i}")));
            let mut params = CallToolRequestParams::new("echo");
            params.arguments = Some(arguments);
            let result = peer.call_tool(params).await?;
            let text = result
                .content
                .first()
                .and_then(|block| block.as_text())
                .map(|text| text.text.clone())
                .unwrap_or_default();
            Value::String(text)
        }
    };
    let ns = started.elapsed().as_nanos() as u64;
    if reply != Value::String(format!("Echo: m{i}")) {
        return Err(format!("bad echo reply for m{i}: {reply}").into());
    }
    Ok(ns)
}

/// The lifecycle `--lifecycle` names, for rmcp.
fn rmcp_lifecycle(args: &Args) -> Result<ClientLifecycleMode, Error> {
    match args.lifecycle.as_str() {
        "session" => Ok(ClientLifecycleMode::Initialize),
        "stateless" => Ok(ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        }),
        other => Err(format!("--lifecycle session|stateless, not {other}").into()),
    }
}

/// The lifecycle `--lifecycle` names, for agcore.
fn agcore_negotiation(args: &Args) -> Result<McpNegotiation, Error> {
    match args.lifecycle.as_str() {
        "session" => Ok(McpNegotiation::Initialize),
        "stateless" => Ok(McpNegotiation::Stateless),
        other => Err(format!("--lifecycle session|stateless, not {other}").into()),
    }
}

/// A raw rmcp client (protocol pinned to 2025-11-25, as agcore asks, for a session), over HTTP
/// or stdio.
async fn raw_rmcp(args: &Args) -> Result<RunningService<RoleClient, ClientConfig>, Error> {
    let lifecycle = rmcp_lifecycle(args)?;
    let version: ProtocolVersion = serde_json::from_value(json!("2025-11-25"))?;
    let config = ClientConfig::new(
        Default::default(),
        Implementation::new("bench-rmcp", "0.1.0"),
    )
    .with_protocol_version(version);
    Ok(match &args.url {
        Some(url) => {
            config
                .serve_with_lifecycle(
                    rmcp::transport::StreamableHttpClientTransport::from_uri(url.as_str()),
                    lifecycle,
                )
                .await?
        }
        None => {
            let mut command = tokio::process::Command::new(&args.server[0]);
            command.args(&args.server[1..]);
            config
                .serve_with_lifecycle(rmcp::transport::TokioChildProcess::new(command)?, lifecycle)
                .await?
        }
    })
}

async fn worker(handle: Caller, next: Arc<AtomicUsize>, calls: usize) -> Result<Vec<u64>, Error> {
    let mut latencies = Vec::new();
    loop {
        let i = next.fetch_add(1, Ordering::Relaxed);
        if i >= calls {
            return Ok(latencies);
        }
        latencies.push(echo(&handle, i).await?);
    }
}

struct Sample {
    mode: String,
    conc: usize,
    elapsed: f64,
    cpu_ns: u64,
    server_ns: u64,
    latencies: Vec<u64>,
}

fn report(args: &Args, sample: Sample, init_ms: f64) {
    let mut latencies = sample.latencies;
    latencies.sort_unstable();
    let quantile = |p: f64| {
        latencies[((p * latencies.len() as f64) as usize).min(latencies.len() - 1)] as f64 / 1000.0
    };
    let calls = args.calls as f64;
    let row = json!({
        "impl": args.implementation,
        "transport": if args.url.is_some() { "http" } else { "stdio" },
        "runtime": args.runtime, "server": args.label, "mode": sample.mode,
        "lifecycle": args.lifecycle,
        "conc": sample.conc, "calls": args.calls,
        "elapsed_s": (sample.elapsed * 1000.0).round() / 1000.0,
        "calls_per_s": (calls / sample.elapsed).round(),
        "p50_us": (quantile(0.5) * 10.0).round() / 10.0,
        "p99_us": (quantile(0.99) * 10.0).round() / 10.0,
        "cpu_us_per_call": (sample.cpu_ns as f64 / 1000.0 / calls * 10.0).round() / 10.0,
        "server_cpu_us_per_call": (sample.server_ns as f64 / 1000.0 / calls * 10.0).round() / 10.0,
        "init_ms": (init_ms * 100.0).round() / 100.0,
    });
    println!("{row}");
}

async fn run(args: Args) -> Result<(), Error> {
    let transport = match &args.url {
        Some(url) => McpTransport::Http {
            url: url.clone(),
            headers: Default::default(),
        },
        None => McpTransport::Stdio {
            command: args.server[0].clone(),
            args: args.server[1..].to_vec(),
        },
    };
    let started = Instant::now();
    let mut client = None;
    let mut raw = None;
    let handle = match args.implementation.as_str() {
        "agcore" => {
            // Unsandboxed by choice, as the raw rmcp client it is compared with starts it.
            let mut agcore = McpClient::new("bench", transport)
                .with_sandbox_policy(SandboxPolicy::full())
                .with_negotiation(agcore_negotiation(&args)?);
            agcore.connect().await?;
            let tools = agcore.list_tools().await?;
            if !tools.iter().any(|tool| tool.name() == "echo") {
                return Err("server has no `echo` tool".into());
            }
            let handle = Caller::Agcore(agcore.handle());
            client = Some(agcore);
            handle
        }
        "rmcp" => {
            let service = raw_rmcp(&args).await?;
            let tools = service.list_all_tools().await?;
            if !tools.iter().any(|tool| tool.name == "echo") {
                return Err("server has no `echo` tool".into());
            }
            let handle = Caller::Rmcp(service.peer().clone());
            raw = Some(service);
            handle
        }
        other => return Err(format!("--impl agcore|rmcp, not {other}").into()),
    };
    let init_ms = started.elapsed().as_secs_f64() * 1000.0;
    for _ in 0..args.warmup {
        echo(&handle, 0).await?;
    }
    let me = std::process::id();
    for mode in &args.modes {
        let next = Arc::new(AtomicUsize::new(0));
        let server_cpu = || match args.server_pid {
            Some(pid) => cpu_ns(pid, true),
            None => children_cpu_ns(),
        };
        let (server0, cpu0, t0) = (server_cpu(), cpu_ns(me, false), Instant::now());
        let (conc, latencies) = match mode.as_str() {
            "seq" => {
                let mut latencies = Vec::with_capacity(args.calls);
                for i in 0..args.calls {
                    latencies.push(echo(&handle, i).await?);
                }
                (1, latencies)
            }
            "spawn" => {
                let tasks: Vec<_> = (0..args.conc)
                    .map(|_| tokio::spawn(worker(handle.clone(), next.clone(), args.calls)))
                    .collect();
                let mut latencies = Vec::with_capacity(args.calls);
                for task in tasks {
                    latencies.extend(task.await??);
                }
                (args.conc, latencies)
            }
            "join_all" => {
                let results = futures::future::join_all(
                    (0..args.conc).map(|_| worker(handle.clone(), next.clone(), args.calls)),
                )
                .await;
                let mut latencies = Vec::with_capacity(args.calls);
                for result in results {
                    latencies.extend(result?);
                }
                (args.conc, latencies)
            }
            other => return Err(format!("unknown mode {other}").into()),
        };
        let elapsed = t0.elapsed().as_secs_f64();
        let cpu = cpu_ns(me, false).saturating_sub(cpu0);
        let server_ns = server_cpu().saturating_sub(server0);
        assert_eq!(latencies.len(), args.calls);
        let sample = Sample {
            mode: mode.clone(),
            conc,
            elapsed,
            cpu_ns: cpu,
            server_ns,
            latencies,
        };
        report(&args, sample, init_ms);
    }
    if let Some(mut client) = client {
        client.close().await?;
    }
    if let Some(service) = raw {
        service.cancel().await?;
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let args = parse_args()?;
    let runtime = match args.runtime.as_str() {
        "multi" => tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()?,
        "current" => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?,
        other => return Err(format!("--runtime multi|current, not {other}").into()),
    };
    runtime.block_on(run(args))
}
