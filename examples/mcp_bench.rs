//! `tools/call echo` throughput and latency of agcore's `McpClient` against any stdio MCP server,
//! with the same CLI and JSON fields as `mcp-bench-rmcp` (../shared/perf) so both run side by
//! side:
//!
//! ```text
//! cargo run --release --example mcp_bench -- [--calls 2000] [--conc 32] [--warmup 50]
//!     [--modes seq,spawn,join_all] [--runtime multi|current] [--label NAME] -- SERVER_CMD [ARGS...]
//! ```
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

use agcore::tools::mcp::{McpClient, McpHandle, McpTransport};
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
    if args.server.is_empty() {
        return Err("usage: mcp_bench [options] -- SERVER_CMD [ARGS...]".into());
    }
    if args.label.is_empty() {
        args.label = args.server.join(" ");
    }
    Ok(args)
}

async fn echo(handle: &McpHandle, i: usize) -> Result<u64, Error> {
    let started = Instant::now();
    let reply = handle
        .call_tool("echo", json!({"message": format!("m{i}")}))
        .await?;
    let ns = started.elapsed().as_nanos() as u64;
    if reply != Value::String(format!("Echo: m{i}")) {
        return Err(format!("bad echo reply for m{i}: {reply}").into());
    }
    Ok(ns)
}

async fn worker(
    handle: McpHandle,
    next: Arc<AtomicUsize>,
    calls: usize,
) -> Result<Vec<u64>, Error> {
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
        "impl": "agcore", "runtime": args.runtime, "server": args.label, "mode": sample.mode,
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
    let transport = McpTransport::Stdio {
        command: args.server[0].clone(),
        args: args.server[1..].to_vec(),
    };
    let started = Instant::now();
    let mut client = McpClient::new("bench", transport);
    client.connect().await?;
    let init_ms = started.elapsed().as_secs_f64() * 1000.0;
    let tools = client.list_tools().await?;
    if !tools.iter().any(|tool| tool.name() == "echo") {
        return Err("server has no `echo` tool".into());
    }
    let handle = client.handle();
    for _ in 0..args.warmup {
        echo(&handle, 0).await?;
    }
    let me = std::process::id();
    for mode in &args.modes {
        let next = Arc::new(AtomicUsize::new(0));
        let (server0, cpu0, t0) = (children_cpu_ns(), cpu_ns(me, false), Instant::now());
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
        let server_ns = children_cpu_ns().saturating_sub(server0);
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
    client.close().await?;
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
