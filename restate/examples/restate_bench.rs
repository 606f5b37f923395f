//! The cost of running agent turns on Restate: per-turn overhead of an `AgentSession` endpoint
//! over the same run done locally (same fake model, same tool), and turns/s for 50 concurrent
//! sessions over 3 endpoints behind one deployment URI.
//!
//!     bash .ci/install-mcp-servers.sh      # the pinned Restate server, into .ci/restate
//!     cargo run --release -p agcore-restate --example restate_bench [-- --runs 50 --rounds 3]
//!         [--server-config FILE]   # TOML appended to the server's config (durability settings)
//!
//! Runs as root: it re-executes itself in a fresh network namespace with only loopback (the
//! Restate server looks up its latest release at every start), where the server, the three
//! endpoints (in this process), a round-robin TCP proxy and the fake model listen on 127.0.0.1.
//! Every wait is bounded (a run that takes longer than 30 s fails the bench).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig};
use agcore::tools::prelude::*;
use serde_json::{Value, json};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const INSIDE: &str = "RESTATE_BENCH_NETNS";
const ADMIN: &str = "http://127.0.0.1:9070";
const INGRESS: &str = "http://127.0.0.1:8080";
const LIMIT: Duration = Duration::from_secs(30);

type Error = Box<dyn std::error::Error + Send + Sync>;

fn main() -> ExitCode {
    if std::env::var_os(INSIDE).is_none() {
        // Again, inside a namespace with only loopback.
        let status = std::env::current_exe().and_then(|exe| {
            Command::new("unshare")
                .args([
                    "-n",
                    "--",
                    "sh",
                    "-c",
                    "ip link set lo up && exec \"$0\" \"$@\"",
                ])
                .arg(exe)
                .args(std::env::args().skip(1))
                .env(INSIDE, "1")
                .status()
        });
        return match status {
            Ok(status) if status.success() => ExitCode::SUCCESS,
            Ok(_) => ExitCode::FAILURE,
            Err(error) => {
                eprintln!(
                    "restate_bench: could not start in a network namespace (unshare -n, as root): {error}"
                );
                ExitCode::FAILURE
            }
        };
    }
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("restate_bench: {error}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(async { tokio::time::timeout(Duration::from_secs(600), bench()).await })
    {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(error)) => {
            eprintln!("restate_bench: {error}");
            ExitCode::FAILURE
        }
        Err(_) => {
            eprintln!("restate_bench: gave up after 10 minutes");
            ExitCode::FAILURE
        }
    }
}

/// `--NAME N`, else `default`.
fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// `--NAME VALUE`, if given.
fn arg_text(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .cloned()
}

/// Echo of its text (the bench's tool: nothing slow, so what is measured is the engine).
#[derive(Deserialize, JsonSchema)]
struct EchoInput {
    /// The text.
    text: String,
}

struct Echo;

impl Tool for Echo {
    type Input = EchoInput;
    type Output = Value;
    const NAME: &'static str = "echo";

    fn kind() -> ToolKind {
        ToolKind::Read
    }

    fn title(&self, _input: Result<&EchoInput, &Value>) -> String {
        "Echo".to_owned()
    }

    async fn run(&self, input: EchoInput) -> Result<Value, ToolError> {
        Ok(json!({ "echo": input.text }))
    }
}

/// A user message gets an `echo` call of it; a tool answer the final text `done: ANSWER`.
struct EchoModel;

impl Respond for EchoModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        let last = body["messages"]
            .as_array()
            .and_then(|m| m.last())
            .cloned()
            .unwrap_or(Value::Null);
        let message = if last["role"] == "user" {
            let prompt = last["content"].as_str().unwrap_or_default();
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call-{prompt}"), "type": "function",
                "function": {"name": "echo", "arguments": json!({"text": prompt}).to_string()}}]})
        } else {
            let answer = last["content"].as_str().unwrap_or_default();
            json!({"role": "assistant", "content": format!("done: {answer}")})
        };
        let finish = if message["tool_calls"].is_array() {
            "tool_calls"
        } else {
            "stop"
        };
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-echo", "object": "chat.completion", "created": 1_700_000_000,
            "model": "fake-model",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }))
    }
}

fn cycle(model: &MockServer) -> Result<LlmCycle, Error> {
    let client = OpenAiClient::new(OpenAiConfig::new(format!("{}/v1", model.uri())))?;
    Ok(LlmCycle::new(client, CycleConfig::new("fake-model")).with_system_prompt("Be brief."))
}

fn registry() -> Result<ToolRegistry, Error> {
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register(Echo.erase())?;
    Ok(registry)
}

async fn bench() -> Result<(), Error> {
    let runs = arg("--runs", 50);
    let rounds = arg("--rounds", 3);
    let model = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(EchoModel)
        .mount(&model)
        .await;

    // Local: the same runs, in this process, no engine.
    let tools = registry()?;
    let started = Instant::now();
    for i in 0..runs {
        let mut local = cycle(&model)?;
        let reply = local
            .submit_with_tools(format!("local-{i}"), &tools)
            .await?;
        if !reply.text().contains(&format!("local-{i}")) {
            return Err(format!("local run {i} answered {:?}", reply.text()).into());
        }
    }
    let local_turn = started.elapsed() / (2 * runs as u32);

    // The Restate server and three endpoints behind a round-robin proxy.
    let dir = tempfile::tempdir()?;
    let extra = match arg_text("--server-config") {
        Some(file) => std::fs::read_to_string(&file).map_err(|error| format!("{file}: {error}"))?,
        None => String::new(),
    };
    let server = Server::start(dir.path(), &extra)?;
    let client = reqwest::Client::builder().timeout(LIMIT).build()?;
    wait_for(&client, &format!("{ADMIN}/health")).await?;
    wait_for(&client, &format!("{INGRESS}/restate/health")).await?;
    let agent = agcore_restate::Agent::new(cycle(&model)?, registry()?);
    let mut backends = Vec::new();
    for port in [9081_u16, 9082, 9083] {
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let listener = agcore_restate::bind(address).await?;
        tokio::spawn(agcore_restate::serve(
            listener,
            Arc::clone(&agent),
            agcore_restate::Access::unverified(),
            std::future::pending::<()>(),
        ));
        backends.push(address);
    }

    // One endpoint, sequential: the per-turn overhead.
    register(&client, "http://127.0.0.1:9081").await?;
    let started = Instant::now();
    for i in 0..runs {
        run(&client, &format!("seq-{i}")).await?;
    }
    let restate_turn = started.elapsed() / (2 * runs as u32);

    // Three endpoints, 50 sessions at once.
    tokio::spawn(proxy(TcpListener::bind("127.0.0.1:9080").await?, backends));
    register(&client, "http://127.0.0.1:9080").await?;
    let mut rates = Vec::new();
    for round in 0..rounds {
        let started = Instant::now();
        let all = (0..50).map(|i| {
            let client = client.clone();
            async move { run(&client, &format!("r{round}-s{i}")).await }
        });
        for result in futures::future::join_all(all).await {
            result?;
        }
        rates.push(100.0 / started.elapsed().as_secs_f64());
    }
    rates.sort_by(f64::total_cmp);
    let median = rates.get(rates.len() / 2).copied().unwrap_or_default();
    println!(
        "{}",
        json!({
            "runs": runs,
            "local_ms_per_turn": local_turn.as_secs_f64() * 1e3,
            "restate_ms_per_turn": restate_turn.as_secs_f64() * 1e3,
            "overhead_ms_per_turn": (restate_turn.as_secs_f64() - local_turn.as_secs_f64()) * 1e3,
            "sessions_50_endpoints_3_turns_per_s_median": median,
            "turns_per_s_rounds": rates,
        })
    );
    drop(server);
    Ok(())
}

/// Run one session's prompt through the ingress; its answer must echo the prompt.
async fn run(client: &reqwest::Client, session: &str) -> Result<(), Error> {
    let response = client
        .post(format!("{INGRESS}/AgentSession/{session}/run"))
        .json(&json!(session))
        .send()
        .await?;
    let status = response.status();
    let answer: Value = response.json().await?;
    if !status.is_success() || !answer.as_str().unwrap_or_default().contains(session) {
        return Err(format!("{session}: {status} {answer}").into());
    }
    Ok(())
}

async fn register(client: &reqwest::Client, uri: &str) -> Result<(), Error> {
    let response = client
        .post(format!("{ADMIN}/deployments"))
        .json(&json!({"uri": uri, "force": true}))
        .send()
        .await?;
    if !response.status().is_success() {
        return Err(format!("registering {uri}: {}", response.text().await?).into());
    }
    Ok(())
}

async fn wait_for(client: &reqwest::Client, url: &str) -> Result<(), Error> {
    let deadline = Instant::now() + LIMIT;
    loop {
        if let Ok(response) = client.get(url).send().await
            && response.status().is_success()
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{url} did not answer in {LIMIT:?}").into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each connection to the next backend in turn.
async fn proxy(listener: TcpListener, backends: Vec<SocketAddr>) {
    let mut next = 0;
    while let Ok((mut inbound, _)) = listener.accept().await {
        let backend = backends[next % backends.len()];
        next += 1;
        tokio::spawn(async move {
            if let Ok(mut outbound) = TcpStream::connect(backend).await {
                // As a load balancer would: small frames pass at once both ways.
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let _ = copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}

/// The Restate server (`.ci/restate`), killed when dropped.
struct Server(Child);

impl Server {
    fn start(dir: &std::path::Path, extra: &str) -> Result<Server, Error> {
        let binary = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(
            "../.ci/restate/node_modules/@restatedev/restate-server-linux-x64/bin/restate-server",
        );
        let config = dir.join("restate.toml");
        std::fs::write(
            &config,
            format!(
                "node-name = \"bench\"\nbase-dir = \"{}\"\nlisten-mode = \"tcp\"\n\
                 bind-address = \"127.0.0.1:5122\"\nadvertised-address = \"http://127.0.0.1:5122/\"\n\
                 disable-telemetry = true\ndefault-num-partitions = 4\n\
                 [admin]\nbind-address = \"127.0.0.1:9070\"\ndisable-web-ui = true\n\
                 [ingress]\nbind-address = \"127.0.0.1:8080\"\n\
                 [worker.invoker]\nhttp2-streams-per-connection-limit = 4\n{extra}\n",
                dir.join("data").display()
            ),
        )?;
        let log = std::fs::File::create(dir.join("restate.log"))?;
        let child = Command::new(&binary)
            .arg("--no-logo")
            .arg("--config-file")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .map_err(|error| {
                format!(
                    "{}: {error} (run .ci/install-mcp-servers.sh)",
                    binary.display()
                )
            })?;
        Ok(Server(child))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
