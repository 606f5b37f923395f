//! `agcore restate serve` against the real Restate server (1.7.12, `.ci/restate`), each test in
//! a fresh network namespace with only loopback (see `support::restate`): the endpoint is
//! registered through the admin API and invoked through the ingress; the model is a fake
//! chat-completions server on 127.0.0.1 that counts its requests, the tools are `run_command`
//! calls that count their runs in files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use serde_json::{Value, json};
use tokio::io::copy_bidirectional;
use tokio::net::{TcpListener, TcpStream};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

use crate::support::restate::{
    ADMIN, Endpoint, IDENTITY_PUBLIC_KEY, INGRESS, PATIENCE, Restate, call, inside_netns, lines,
    query, server_binary, wait_until,
};
use crate::support::{Reply, agcore, assert_history_valid, base_url, fake_openai, request_bodies};

/// Run the async body `test` in the test's network namespace (see `support::restate`).
fn in_netns<F: std::future::Future<Output = ()>>(name: &str, test: impl FnOnce() -> F) {
    if !inside_netns(&format!("suite::restate_server::{name}")) {
        return;
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test());
}

/// `agcore.toml` with shell commands allowed (and asked about, with `ask`).
fn config(dir: &Path, ask: bool) {
    let ask = if ask { "ask = [\"shell\"]\n" } else { "" };
    std::fs::write(
        dir.join("agcore.toml"),
        format!(
            "[tools]\n{ask}[tools.permissions]\nallowed = [\"read\", \"shell\"]\ndenied = []\n"
        ),
    )
    .unwrap();
}

/// The endpoint's flags: the fake model, the directory's config, the built-in tools.
fn endpoint_args(model: &MockServer) -> Vec<String> {
    [
        "--base-url",
        &base_url(model),
        "--model",
        "fake-model",
        "--config",
        "agcore.toml",
        "--tools",
        "builtin",
    ]
    .map(str::to_owned)
    .to_vec()
}

/// A `run_command` call of `command`.
fn command(id: &str, command: &str) -> Reply {
    Reply::tool(
        id,
        "run_command",
        &json!({ "command": command }).to_string(),
    )
}

/// The idempotency key of the one line `TAG KEY` that `lines` must be (a key as
/// `agcore::run::idempotency` derives it: `agk1_` and 32 hex digits).
fn key_in(lines: &[String], tag: &str) -> String {
    let [line] = lines else {
        panic!("expected one line `{tag} KEY`, got {lines:?}");
    };
    let key = line
        .strip_prefix(&format!("{tag} "))
        .unwrap_or_else(|| panic!("{line:?} is not `{tag} KEY`"));
    assert!(
        key.len() == 37
            && key.starts_with("agk1_")
            && key[5..].chars().all(|c| c.is_ascii_hexdigit()),
        "{key:?} is not an idempotency key"
    );
    key.to_owned()
}

/// The answer the model read for the call `id` (its `tool` message in `body`).
fn answer_in(body: &Value, id: &str) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool" && m["tool_call_id"] == id)
        .map(|m| m["content"].to_string())
        .unwrap_or_else(|| panic!("no answer to {id} in {body}"))
}

#[test]
fn endpoint_killed_mid_tool_resumes_without_rerunning_finished_work() {
    in_netns(
        "endpoint_killed_mid_tool_resumes_without_rerunning_finished_work",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, false);
            let runs_a = dir.join("runs-a");
            let runs_b = dir.join("runs-b");
            // Each command writes the idempotency key it was given.
            let model = fake_openai(vec![
                command(
                    "call-a",
                    &format!("echo a $AGCORE_IDEMPOTENCY_KEY >> {}", runs_a.display()),
                ),
                // Killed while it runs: the second line is never written.
                command(
                    "call-b",
                    &format!(
                        "echo b $AGCORE_IDEMPOTENCY_KEY >> {0}; sleep 30; echo late >> {0}",
                        runs_b.display()
                    ),
                ),
                Reply::text("finished"),
            ])
            .await;
            let restate = Restate::start(&binary, dir).await;
            let mut endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            restate.register(&endpoint.uri()).await;

            let run = tokio::spawn(async { call("s1", "run", Some(&json!("go"))).await });
            wait_until("the second tool runs", || async {
                lines(&runs_b).len() == 1
            })
            .await;
            endpoint.kill();
            endpoint.restart().await;
            let (status, answer) = run.await.unwrap();

            assert_eq!((status, answer), (200, json!("finished")));
            // The finished call did not run again, the cut-off one was not re-run.
            let key_a = key_in(&lines(&runs_a), "a");
            let key_b = key_in(&lines(&runs_b), "b");
            assert_ne!(key_a, key_b);
            // The two finished model requests were not sent again: three in all.
            let bodies = request_bodies(&model).await;
            assert_eq!(bodies.len(), 3, "{bodies:#?}");
            assert!(answer_in(&bodies[2], "call-a").contains("Exit code: 0"));
            // The restarted endpoint replayed the run and gave the cut-off call the key the
            // killed one had given it: the interrupted answer names it.
            let cut = answer_in(&bodies[2], "call-b");
            assert!(cut.contains("interrupted"), "{cut}");
            assert!(cut.contains(&key_b), "{cut} does not name {key_b}");

            let (status, state) = call("s1", "state", None).await;
            assert_eq!(status, 200);
            let messages = state["messages"].as_array().unwrap();
            assert_history_valid(messages);
            let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
            assert_eq!(
                roles,
                [
                    "system",
                    "user",
                    "assistant",
                    "tool",
                    "assistant",
                    "tool",
                    "assistant"
                ]
            );
            assert_eq!(state["pending"], json!([]));
        },
    );
}

#[test]
fn endpoint_killed_mid_idempotent_tool_runs_it_again_with_the_same_key() {
    in_netns(
        "endpoint_killed_mid_idempotent_tool_runs_it_again_with_the_same_key",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            // `run_command` counted as idempotent: a call cut off by a crash runs again.
            std::fs::write(
                dir.join("agcore.toml"),
                "[tools]\nidempotent = [\"run_command\"]\n[tools.permissions]\n\
                 allowed = [\"read\", \"shell\"]\ndenied = []\n",
            )
            .unwrap();
            let runs_a = dir.join("runs-a");
            let runs_i = dir.join("runs-i");
            let model = fake_openai(vec![
                command(
                    "call-a",
                    &format!("echo a $AGCORE_IDEMPOTENCY_KEY >> {}", runs_a.display()),
                ),
                // Its first run waits (and is killed); the second finishes, naming its run.
                command(
                    "call-i",
                    &format!(
                        "echo i $AGCORE_IDEMPOTENCY_KEY >> {0}; runs=$(wc -l < {0}); \
                         if [ $runs -lt 2 ]; then sleep 30; fi; echo run $runs of call-i",
                        runs_i.display()
                    ),
                ),
                Reply::text("finished"),
            ])
            .await;
            let restate = Restate::start(&binary, dir).await;
            let mut endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            restate.register(&endpoint.uri()).await;

            let run = tokio::spawn(async { call("s5", "run", Some(&json!("go"))).await });
            wait_until("the idempotent tool runs", || async {
                lines(&runs_i).len() == 1
            })
            .await;
            endpoint.kill();
            endpoint.restart().await;
            let (status, answer) = run.await.unwrap();

            assert_eq!((status, answer), (200, json!("finished")));
            // The finished call did not run again (its tool is idempotent too); the cut-off
            // one ran twice, both times with the key the run gave it.
            let key_a = key_in(&lines(&runs_a), "a");
            let runs = lines(&runs_i);
            assert_eq!(runs.len(), 2, "{runs:?}");
            let key_i = key_in(&runs[..1], "i");
            assert_eq!(key_in(&runs[1..], "i"), key_i);
            assert_ne!(key_a, key_i);
            // The two finished model requests were not sent again: three in all; the model
            // read the second run's result, not an interrupted answer.
            let bodies = request_bodies(&model).await;
            assert_eq!(bodies.len(), 3, "{bodies:#?}");
            assert!(answer_in(&bodies[2], "call-a").contains("Exit code: 0"));
            let rerun = answer_in(&bodies[2], "call-i");
            assert!(rerun.contains("run 2 of call-i"), "{rerun}");
            assert!(rerun.contains("Exit code: 0"), "{rerun}");
            assert!(!rerun.contains("interrupted"), "{rerun}");

            let (status, state) = call("s5", "state", None).await;
            assert_eq!(status, 200);
            let messages = state["messages"].as_array().unwrap();
            assert_history_valid(messages);
            let roles: Vec<&str> = messages.iter().filter_map(|m| m["role"].as_str()).collect();
            assert_eq!(
                roles,
                [
                    "system",
                    "user",
                    "assistant",
                    "tool",
                    "assistant",
                    "tool",
                    "assistant"
                ]
            );
            assert_eq!(state["pending"], json!([]));
        },
    );
}

#[test]
fn approval_waits_across_endpoint_restart_and_is_decided_through_approve() {
    in_netns(
        "approval_waits_across_endpoint_restart_and_is_decided_through_approve",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, true);
            let runs_c = dir.join("runs-c");
            let runs_d = dir.join("runs-d");
            let model = fake_openai(vec![
                command("call-c", &format!("echo c >> {}", runs_c.display())),
                Reply::text("approved done"),
                command("call-d", &format!("echo d >> {}", runs_d.display())),
                Reply::text("denied done"),
            ])
            .await;
            let restate = Restate::start(&binary, dir).await;
            let mut endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            restate.register(&endpoint.uri()).await;

            // Allowed after the endpoint restarted.
            let run = tokio::spawn(async { call("s2", "run", Some(&json!("first"))).await });
            let pending = wait_for_pending("s2").await;
            assert_eq!(pending[0]["id"], "call-c");
            assert_eq!(pending[0]["tool"], "run_command");
            assert!(
                pending[0]["arguments"]["command"]
                    .as_str()
                    .unwrap()
                    .contains("runs-c")
            );
            assert!(lines(&runs_c).is_empty(), "ran before approval");
            endpoint.kill();
            endpoint.restart().await;
            // An id that is not pending: 404 naming the session, the id and the pending ids.
            let (status, error) = call(
                "s2",
                "approve",
                Some(&json!({"id": "call-x", "allow": true})),
            )
            .await;
            assert_eq!(status, 404, "{error}");
            let message = error["message"].as_str().unwrap();
            for part in ["s2", "call-x", "call-c"] {
                assert!(message.contains(part), "{message}");
            }
            let (status, decided) = call(
                "s2",
                "approve",
                Some(&json!({"id": "call-c", "allow": true})),
            )
            .await;
            assert_eq!(status, 200, "{decided}");
            assert_eq!(
                decided,
                json!({"id": "call-c", "allow": true, "resolved": true})
            );
            assert_eq!(run.await.unwrap(), (200, json!("approved done")));
            assert_eq!(lines(&runs_c), ["c"]);

            // Denied with a message: the model reads it, the tool never runs.
            let run = tokio::spawn(async { call("s2", "run", Some(&json!("second"))).await });
            let pending = wait_for_pending("s2").await;
            assert_eq!(pending[0]["id"], "call-d");
            let (status, decided) = call(
                "s2",
                "approve",
                Some(&json!({"id": "call-d", "allow": false, "message": "not on a Friday"})),
            )
            .await;
            assert_eq!(
                (status, decided),
                (
                    200,
                    json!({"id": "call-d", "allow": false, "resolved": true})
                )
            );
            assert_eq!(run.await.unwrap(), (200, json!("denied done")));
            assert!(lines(&runs_d).is_empty());
            let bodies = request_bodies(&model).await;
            assert_eq!(bodies.len(), 4);
            let denied = answer_in(&bodies[3], "call-d");
            assert!(denied.contains("not on a Friday"), "{denied}");

            let (_, state) = call("s2", "state", None).await;
            assert_eq!(state["pending"], json!([]));
            let messages = state["messages"].as_array().unwrap();
            assert_history_valid(messages);
            let users: Vec<&Value> = messages.iter().filter(|m| m["role"] == "user").collect();
            assert_eq!(users.len(), 2);
        },
    );
}

/// A `run_command` call that writes `NAME KEY` (its idempotency key) to `NAME-key`, marks
/// itself started, and waits (bounded) for `other` to have started too: it answers
/// `together` when both ran at the same time, `alone` otherwise.
fn meets(dir: &Path, name: &str, other: &str) -> (String, String, String) {
    let key = dir.join(format!("{name}-key"));
    let mine = dir.join(format!("{name}-started"));
    let theirs = dir.join(format!("{other}-started"));
    let script = format!(
        "echo {name} $AGCORE_IDEMPOTENCY_KEY > {key}; touch {mine}; i=0; \
         while [ ! -e {theirs} ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done; \
         if [ -e {theirs} ]; then echo together; else echo alone; fi",
        key = key.display(),
        mine = mine.display(),
        theirs = theirs.display(),
    );
    (
        format!("call-{name}"),
        "run_command".to_owned(),
        json!({ "command": script }).to_string(),
    )
}

#[test]
fn a_turns_calls_run_concurrently_under_the_hooks_with_their_keys() {
    in_netns(
        "a_turns_calls_run_concurrently_under_the_hooks_with_their_keys",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            // Shell and network allowed (the MCP demo server's `meta` needs the network
            // permission); a before_tool_call hook that denies any command mentioning
            // "forbidden"; the demo MCP server answering `meta` with its request's `_meta`.
            std::fs::write(
                dir.join("agcore.toml"),
                format!(
                    "[tools]\n[tools.permissions]\nallowed = [\"read\", \"shell\", \"network\"]\n\
                     denied = []\n\
                     [[hooks.before_tool_call]]\ncommand = [\"sh\", \"-c\", \"grep -q forbidden && \
                     {{ echo 'no forbidden commands' >&2; exit 2; }}; exit 0\"]\n\
                     [mcp.servers.demo]\ncommand = {:?}\nargs = [\"mcp-demo-server\", \"--echo-meta\"]\n",
                    env!("CARGO_BIN_EXE_agcore")
                ),
            )
            .unwrap();
            let forbidden = dir.join("forbidden-ran");
            let model = fake_openai(vec![
                Reply::Tools(vec![
                    meets(dir, "x", "y"),
                    meets(dir, "y", "x"),
                    (
                        "call-z".to_owned(),
                        "run_command".to_owned(),
                        json!({"command": format!("echo forbidden > {}", forbidden.display())})
                            .to_string(),
                    ),
                    ("call-m".to_owned(), "meta".to_owned(), "{}".to_owned()),
                ]),
                Reply::text("finished"),
            ])
            .await;
            let restate = Restate::start(&binary, dir).await;
            let endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            restate.register(&endpoint.uri()).await;

            let (status, answer) = call("s3", "run", Some(&json!("go"))).await;
            assert_eq!((status, answer), (200, json!("finished")));
            let bodies = request_bodies(&model).await;
            assert_eq!(bodies.len(), 2, "{bodies:#?}");
            // The two calls ran at the same time (one after the other, each would wait alone).
            for id in ["call-x", "call-y"] {
                let answer = answer_in(&bodies[1], id);
                assert!(answer.contains("together"), "{id}: {answer}");
            }
            // The hook denied the third: the model reads its reason, the command never ran.
            let denied = answer_in(&bodies[1], "call-z");
            assert!(denied.contains("no forbidden commands"), "{denied}");
            assert!(!forbidden.exists());
            // Each call had its own key.
            let key_x = key_in(&lines(&dir.join("x-key")), "x");
            let key_y = key_in(&lines(&dir.join("y-key")), "y");
            assert_ne!(key_x, key_y);
            // The MCP call carried its own key in `_meta`.
            let meta = answer_in(&bodies[1], "call-m");
            let key_m = meta
                .split("io.agcore/idempotency-key")
                .nth(1)
                .and_then(|rest| rest.split("agk1_").nth(1))
                .map(|rest| format!("agk1_{}", &rest[..32]))
                .unwrap_or_else(|| panic!("no key in _meta: {meta}"));
            assert!(key_m[5..].chars().all(|c| c.is_ascii_hexdigit()), "{meta}");
            assert!(key_m != key_x && key_m != key_y, "{meta}");

            let (_, state) = call("s3", "state", None).await;
            let messages = state["messages"].as_array().unwrap();
            assert_history_valid(messages);
            let tools = messages.iter().filter(|m| m["role"] == "tool").count();
            assert_eq!(tools, 4, "{messages:#?}");
        },
    );
}

/// Run `agcore restate register ARGS…` in `dir` (blocking, off the runtime's threads): its
/// exit status, stdout and stderr.
async fn register_cli(dir: &Path, args: &[&str]) -> (bool, String, String) {
    let mut command = agcore(dir);
    command.args(["restate", "register"]).args(args);
    let output = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn an_endpoint_started_before_restate_serves_once_registered() {
    in_netns(
        "an_endpoint_started_before_restate_serves_once_registered",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, false);
            let model = fake_openai(vec![Reply::text("hello")]).await;
            // The endpoint first: it never dials Restate, so it starts and waits.
            let endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            let _restate = Restate::start(&binary, dir).await;

            let (ok, stdout, stderr) =
                register_cli(dir, &["--admin", ADMIN, "--endpoint", &endpoint.uri()]).await;
            assert!(ok, "{stdout}\n{stderr}");
            assert!(
                stdout.contains(&format!("registered {} as deployment dp_", endpoint.uri())),
                "{stdout}"
            );
            let service = stdout
                .lines()
                .find(|line| {
                    line.trim_start()
                        .starts_with("AgentSession (VirtualObject): ")
                })
                .unwrap_or_else(|| panic!("no AgentSession line in {stdout}"));
            for handler in ["run", "approve", "state"] {
                assert!(service.contains(handler), "{service}");
            }
            let (status, answer) = call("s4", "run", Some(&json!("hi"))).await;
            assert_eq!((status, answer), (200, json!("hello")));

            // An endpoint Restate cannot reach: Restate's own error, and a failure.
            let (ok, stdout, stderr) = register_cli(
                dir,
                &["--admin", ADMIN, "--endpoint", "http://127.0.0.1:9099"],
            )
            .await;
            assert!(!ok, "{stdout}");
            assert!(
                stderr.contains("Restate did not register http://127.0.0.1:9099 (HTTP "),
                "{stderr}"
            );
        },
    );
}

#[test]
fn register_with_an_unreachable_admin_exits_at_once_naming_it() {
    // A port nothing listens on: the listener is gone before the command runs.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let admin = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let output = agcore(dir.path())
        .args([
            "restate",
            "register",
            "--admin",
            &admin,
            "--endpoint",
            "http://127.0.0.1:9080",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("could not reach Restate's admin API at {admin}")),
        "{stderr}"
    );
}

/// The calls `session`'s run waits on, once there are some.
async fn wait_for_pending(session: &str) -> Vec<Value> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let (status, state) = call(session, "state", None).await;
        if status == 200
            && let Some(calls) = state["pending"].as_array()
            && !calls.is_empty()
        {
            return calls.clone();
        }
        assert!(
            Instant::now() < deadline,
            "no call of {session} waits for approval: {state}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

/// Answers from the request itself, so that concurrent sessions each get their own script:
/// a user message gets a `run_command` call echoing it; a tool answer gets the final text
/// `done: ` and that answer.
struct EchoModel;

impl Respond for EchoModel {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let last = body["messages"].as_array().unwrap().last().unwrap().clone();
        let message = if last["role"] == "user" {
            let prompt = last["content"].as_str().unwrap();
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "id": format!("call-{prompt}"), "type": "function",
                "function": {"name": "run_command",
                    "arguments": json!({"command": format!("echo {prompt}")}).to_string()}}]})
        } else {
            let answer = last["content"].as_str().unwrap_or_default();
            json!({"role": "assistant", "content": format!("done: {}", answer.trim())})
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

/// A TCP proxy on `listen` handing each connection to the next of `backends` in turn; counts
/// the connections each got.
async fn round_robin(listen: &str, backends: Vec<String>) -> Arc<Vec<AtomicUsize>> {
    let listener = TcpListener::bind(listen).await.unwrap();
    let counts: Arc<Vec<AtomicUsize>> =
        Arc::new(backends.iter().map(|_| AtomicUsize::new(0)).collect());
    let served = Arc::clone(&counts);
    tokio::spawn(async move {
        let mut next = 0;
        loop {
            let Ok((mut inbound, _)) = listener.accept().await else {
                return;
            };
            let index = next % backends.len();
            next += 1;
            served[index].fetch_add(1, Ordering::SeqCst);
            let backend = backends[index].clone();
            tokio::spawn(async move {
                if let Ok(mut outbound) = TcpStream::connect(&backend).await {
                    // As a load balancer would: small frames pass at once both ways.
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let _ = copy_bidirectional(&mut inbound, &mut outbound).await;
                }
            });
        }
    });
    counts
}

#[test]
fn three_endpoints_serve_fifty_sessions_without_interleaving() {
    in_netns(
        "three_endpoints_serve_fifty_sessions_without_interleaving",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, false);
            let model = MockServer::start().await;
            Mock::given(method("POST"))
                .and(path("/v1/chat/completions"))
                .respond_with(EchoModel)
                .mount(&model)
                .await;
            let restate = Restate::start(&binary, dir).await;
            let args = endpoint_args(&model);
            let mut endpoints = Vec::new();
            for port in [9081, 9082, 9083] {
                endpoints.push(Endpoint::start(dir, &format!("127.0.0.1:{port}"), &args).await);
            }
            // One deployment URI in front of the three, as a load balancer would be.
            let served = round_robin(
                "127.0.0.1:9080",
                endpoints
                    .iter()
                    .map(|e| e.uri().trim_start_matches("http://").to_owned())
                    .collect(),
            )
            .await;
            restate.register("http://127.0.0.1:9080").await;

            let started = Instant::now();
            let runs = (0..50).map(|i| async move {
                let session = format!("session-{i}");
                let prompt = format!("p{i:02}");
                let (status, answer) = call(&session, "run", Some(&json!(prompt))).await;
                (session, prompt, status, answer)
            });
            let results = futures::future::join_all(runs).await;
            let elapsed = started.elapsed();
            for (session, prompt, status, answer) in &results {
                assert_eq!(*status, 200, "{session}: {answer}");
                let answer = answer.as_str().unwrap();
                assert!(
                    answer.starts_with("done: ") && answer.contains(prompt.as_str()),
                    "{session}: {answer}"
                );
            }
            let counts: Vec<usize> = served.iter().map(|c| c.load(Ordering::SeqCst)).collect();
            assert!(
                counts.iter().all(|&c| c > 0),
                "connections per endpoint: {counts:?}"
            );
            // Each session's history is its own run, whole: nothing of another session in it.
            for (session, prompt, _, _) in &results {
                let (_, state) = call(session, "state", None).await;
                let messages = state["messages"].as_array().unwrap();
                assert_history_valid(messages);
                assert_eq!(messages.len(), 5, "{session}: {messages:#?}");
                assert_eq!(messages[1]["content"], json!(prompt));
                assert_eq!(
                    messages[2]["tool_calls"][0]["id"],
                    json!(format!("call-{prompt}"))
                );
                let text = serde_json::to_string(&messages[1..]).unwrap();
                for (other, other_prompt, _, _) in &results {
                    if other != session {
                        assert!(
                            !text.contains(&format!("\"{other_prompt}")),
                            "{session} holds {other}'s messages"
                        );
                    }
                }
            }
            let requests = request_bodies(&model).await.len();
            assert_eq!(requests, 100);
            // Two model turns per session.
            eprintln!(
                "restate: 50 sessions over 3 endpoints in {elapsed:.2?}: {:.1} turns/s, connections {counts:?}",
                100.0 / elapsed.as_secs_f64()
            );
        },
    );
}

#[test]
fn bad_input_gets_clear_terminal_errors() {
    in_netns("bad_input_gets_clear_terminal_errors", || async {
        let Some(binary) = server_binary() else {
            return;
        };
        let dir = tempfile::tempdir().unwrap();
        let dir = dir.path();
        config(dir, false);
        let model = fake_openai(vec![Reply::text("unused")]).await;
        let restate = Restate::start(&binary, dir).await;
        let endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
        restate.register(&endpoint.uri()).await;

        // A session that never ran: empty lists.
        let (status, state) = call("never-ran", "state", None).await;
        assert_eq!(status, 200);
        assert_eq!(
            state,
            json!({"session": "never-ran", "messages": [], "pending": []})
        );
        // Nothing pending there: 404 naming the session and the id.
        let (status, error) = call(
            "never-ran",
            "approve",
            Some(&json!({"id": "call-1", "allow": true})),
        )
        .await;
        assert_eq!(status, 404, "{error}");
        let message = error["message"].as_str().unwrap();
        assert!(
            message.contains("never-ran")
                && message.contains("call-1")
                && message.contains("pending: none"),
            "{message}"
        );
        // Malformed: 400 saying what approve takes, at once (a terminal error, not retried).
        for malformed in [
            json!({"allow": true}),
            json!({"id": "call-1", "allow": "yes"}),
            json!(["call-1"]),
        ] {
            let (status, error) = call("never-ran", "approve", Some(&malformed)).await;
            assert_eq!(status, 400, "{malformed}: {error}");
            assert!(
                error["message"].as_str().unwrap().contains("approve takes"),
                "{error}"
            );
        }
        // A prompt that is not a JSON string.
        let (status, error) = call("never-ran", "run", Some(&json!({"prompt": "hi"}))).await;
        assert_eq!(status, 400, "{error}");
        assert!(request_bodies(&model).await.is_empty());
    });
}

#[test]
fn serve_on_an_address_in_use_exits_at_once_naming_it() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let dir = tempfile::tempdir().unwrap();
    let mut child = agcore(dir.path())
        .args([
            "restate",
            "serve",
            "--bind",
            &address,
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("agcore restate serve kept running on a taken address");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!status.success());
    assert!(
        stderr.contains(&address) && stderr.contains("could not bind"),
        "{stderr}"
    );
}

#[test]
fn a_verified_endpoint_serves_restate_and_refuses_unsigned_requests() {
    in_netns(
        "a_verified_endpoint_serves_restate_and_refuses_unsigned_requests",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, false);
            let model = fake_openai(vec![Reply::text("signed hello")]).await;
            let restate = Restate::start_signing(&binary, dir).await;
            let mut args = endpoint_args(&model);
            args.extend(["--identity-key".to_owned(), IDENTITY_PUBLIC_KEY.to_owned()]);
            let endpoint = Endpoint::start(dir, "127.0.0.1:9080", &args).await;
            // Restate signs discovery and invocations: both are served.
            restate.register(&endpoint.uri()).await;
            assert_eq!(
                call("signed", "run", Some(&json!("hi"))).await,
                (200, json!("signed hello"))
            );
            // Straight to the endpoint, unsigned: refused before anything runs.
            let direct = reqwest::Client::builder()
                .http2_prior_knowledge()
                .timeout(PATIENCE)
                .build()
                .unwrap();
            for (method, path) in [
                (reqwest::Method::GET, "/discover"),
                (reqwest::Method::POST, "/invoke/AgentSession/run"),
            ] {
                let response = direct
                    .request(method, format!("{}{path}", endpoint.uri()))
                    .header("content-type", "application/vnd.restate.invocation.v5")
                    .send()
                    .await
                    .unwrap();
                assert_eq!(response.status().as_u16(), 401, "{path}");
            }
            assert_eq!(request_bodies(&model).await.len(), 1);
            let log = lines(&dir.join("endpoint-127.0.0.1_9080.log")).join("\n");
            assert!(log.contains("requests are verified"), "{log}");
        },
    );
}

#[test]
fn a_raw_awakeable_resolution_does_not_approve_a_call() {
    in_netns(
        "a_raw_awakeable_resolution_does_not_approve_a_call",
        || async {
            let Some(binary) = server_binary() else {
                return;
            };
            let dir = tempfile::tempdir().unwrap();
            let dir = dir.path();
            config(dir, true);
            let runs = dir.join("runs");
            let model = fake_openai(vec![
                command("call-f", &format!("echo f >> {}", runs.display())),
                Reply::text("approved done"),
            ])
            .await;
            let restate = Restate::start(&binary, dir).await;
            let endpoint = Endpoint::start(dir, "127.0.0.1:9080", &endpoint_args(&model)).await;
            restate.register(&endpoint.uri()).await;
            let run = tokio::spawn(async { call("s-forged", "run", Some(&json!("go"))).await });
            assert_eq!(wait_for_pending("s-forged").await[0]["id"], "call-f");
            // Whoever reaches the ingress resolves the awakeable the run waits on, without
            // `approve`: with the decision alone, then with a made-up proof.
            for forged in [
                json!({"allow": true}),
                json!({"allow": true, "proof": "00".repeat(32)}),
            ] {
                let awakeable = pending_awakeable("s-forged").await;
                let response = reqwest::Client::new()
                    .post(format!("{INGRESS}/restate/awakeables/{awakeable}/resolve"))
                    .json(&forged)
                    .timeout(PATIENCE)
                    .send()
                    .await
                    .unwrap();
                assert!(response.status().is_success(), "{}", response.status());
                // The run took it and waits on a new awakeable — or, were it approved, went on.
                wait_until("the run took the forged resolution", || async {
                    run.is_finished() || pending_awakeable("s-forged").await != awakeable
                })
                .await;
                assert!(
                    lines(&runs).is_empty(),
                    "a raw resolution {forged} approved the call"
                );
            }
            let (status, decided) = call(
                "s-forged",
                "approve",
                Some(&json!({"id": "call-f", "allow": true})),
            )
            .await;
            assert_eq!(status, 200, "{decided}");
            assert_eq!(run.await.unwrap(), (200, json!("approved done")));
            assert_eq!(lines(&runs), ["f"]);
        },
    );
}

/// The awakeable `session`'s waiting call is kept with (the object's state, read through the
/// admin API's query engine, which the `state` handler does not show).
async fn pending_awakeable(session: &str) -> String {
    let rows = query(&format!(
        "SELECT value_utf8 FROM state WHERE service_name = 'AgentSession' \
         AND service_key = '{session}' AND key = 'pending'"
    ))
    .await;
    let Some(text) = rows.first().and_then(|row| row["value_utf8"].as_str()) else {
        return String::new();
    };
    let pending: Value = serde_json::from_str(text).unwrap();
    pending[0]["awakeable"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

#[test]
fn serve_on_a_network_address_without_an_identity_key_refuses_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let output = agcore(dir.path())
        .args([
            "restate",
            "serve",
            "--bind",
            "0.0.0.0:0",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
        ])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert!(
        stderr.contains("--identity-key") && stderr.contains("0.0.0.0:0"),
        "{stderr}"
    );
    let help = agcore(dir.path())
        .args(["restate", "serve", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--identity-key") && help.contains("loopback"),
        "{help}"
    );
}
