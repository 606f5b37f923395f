//! OTLP export of the GenAI spans (issue 14, item 1): `agcore run` with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its spans over http/protobuf to a receiver on
//! 127.0.0.1 that decodes them with the official `opentelemetry-proto` definitions. A
//! two-turn tool run (one tool failing) gives the span tree `invoke_agent` → `chat m` ×2 and
//! `execute_tool {name}` ×2, with the conventions' attributes; content only when opted in; an
//! unreachable collector does not fail the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use assert_cmd::Command;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
use opentelemetry_proto::tonic::trace::v1::Span;
use opentelemetry_proto::tonic::trace::v1::status::StatusCode;
use prost::Message;
use support::{Reply, agcore, base_url, fake_openai};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// An OTLP/HTTP receiver: decodes each `POST /v1/traces` body as an
/// `ExportTraceServiceRequest`.
struct Receiver(Arc<Mutex<Vec<ExportTraceServiceRequest>>>);

impl Respond for Receiver {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        assert_eq!(
            request.headers.get("content-type").unwrap(),
            "application/x-protobuf"
        );
        let decoded = ExportTraceServiceRequest::decode(request.body.as_slice()).unwrap();
        self.0.lock().unwrap().push(decoded);
        ResponseTemplate::new(200).insert_header("content-type", "application/x-protobuf")
    }
}

async fn receiver() -> (MockServer, Arc<Mutex<Vec<ExportTraceServiceRequest>>>) {
    let server = MockServer::start().await;
    let received = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/traces"))
        .respond_with(Receiver(received.clone()))
        .mount(&server)
        .await;
    (server, received)
}

/// A span's attributes as text (ints as their decimal text).
fn attributes(span: &Span) -> BTreeMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(text)) => text.clone(),
                Some(Any::IntValue(n)) => n.to_string(),
                Some(Any::BoolValue(b)) => b.to_string(),
                Some(Any::DoubleValue(d)) => d.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

/// Run the two-turn tool run with `env`; every span the receiver got, and the service name.
async fn traced_run(env: &[(&str, &str)]) -> (Vec<Span>, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    let model = fake_openai(vec![
        support::Reply::Tools(vec![
            (
                "call_ls".into(),
                "list_directory".into(),
                r#"{"path":"."}"#.into(),
            ),
            (
                "call_read".into(),
                "read_file".into(),
                r#"{"path":"missing.txt"}"#.into(),
            ),
        ]),
        Reply::text("One file; the other is missing."),
    ])
    .await;
    let (collector, received) = receiver().await;
    let mut command = agcore(dir.path());
    command.args(["run", "--base-url", &base_url(&model), "--model", "m"]);
    command.args(["--no-stream", "--tools", "builtin", "the secret prompt"]);
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    command.env("OTEL_SERVICE_NAME", "agcore-test");
    for (name, value) in env {
        command.env(name, value);
    }
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let requests = received.lock().unwrap().clone();
    let mut spans = Vec::new();
    let mut services = Vec::new();
    for request in requests {
        for resource in request.resource_spans {
            for attribute in resource.resource.iter().flat_map(|r| &r.attributes) {
                if attribute.key == "service.name"
                    && let Some(Any::StringValue(name)) =
                        attribute.value.as_ref().and_then(|v| v.value.clone())
                {
                    services.push(name);
                }
            }
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
    }
    (spans, services)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_run_exports_the_genai_span_tree_without_content() {
    let (spans, services) = traced_run(&[]).await;
    assert!(services.iter().all(|s| s == "agcore-test") && !services.is_empty());
    let named = |name: &str| -> Vec<&Span> { spans.iter().filter(|s| s.name == name).collect() };
    let agent = named("invoke_agent");
    assert_eq!(
        agent.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    let agent = agent[0];
    assert!(
        agent.parent_span_id.is_empty(),
        "the run's span is the root"
    );
    let chats = named("chat m");
    let ls = named("execute_tool list_directory");
    let read = named("execute_tool read_file");
    assert_eq!((chats.len(), ls.len(), read.len()), (2, 1, 1));
    for child in chats.iter().chain(&ls).chain(&read) {
        assert_eq!(child.trace_id, agent.trace_id);
        assert_eq!(
            child.parent_span_id, agent.span_id,
            "{} is a child of invoke_agent",
            child.name
        );
    }
    assert_eq!(
        spans.len(),
        5,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );

    let agent_attributes = attributes(agent);
    assert_eq!(agent_attributes["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(agent_attributes["gen_ai.usage.input_tokens"], "20");
    for chat in &chats {
        let a = attributes(chat);
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "openai");
        assert_eq!(a["gen_ai.request.model"], "m");
        assert_eq!(a["gen_ai.response.model"], "fake-model");
        assert_eq!(a["gen_ai.usage.input_tokens"], "10");
        assert_eq!(a["gen_ai.usage.output_tokens"], "5");
        assert!(
            !a.contains_key("gen_ai.input.messages"),
            "content without opt-in: {a:?}"
        );
        assert!(!a.contains_key("gen_ai.output.messages"));
        assert_eq!(chat.kind, 3, "client span"); // SPAN_KIND_CLIENT
    }
    let reasons: Vec<String> = chats
        .iter()
        .map(|c| attributes(c)["gen_ai.response.finish_reasons"].clone())
        .collect();
    assert!(
        reasons.contains(&r#"["tool_calls"]"#.to_owned())
            && reasons.contains(&r#"["stop"]"#.to_owned()),
        "{reasons:?}"
    );

    let ls = attributes(ls[0]);
    assert_eq!(ls["gen_ai.tool.name"], "list_directory");
    assert_eq!(ls["gen_ai.tool.call.id"], "call_ls");
    assert!(!ls.contains_key("error.type"));
    assert!(!ls.contains_key("gen_ai.tool.call.arguments"));
    let failed = read[0];
    assert_eq!(attributes(failed)["error.type"], "tool_error");
    assert_eq!(
        failed.status.as_ref().unwrap().code,
        StatusCode::Error as i32
    );
    for span in &spans {
        for value in attributes(span).values() {
            assert!(
                !value.contains("the secret prompt"),
                "content leaked into {}",
                span.name
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn content_is_exported_only_when_opted_in() {
    let (spans, _) =
        traced_run(&[("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "true")]).await;
    let first_chat = spans
        .iter()
        .filter(|s| s.name == "chat m")
        .min_by_key(|s| s.start_time_unix_nano)
        .unwrap();
    let a = attributes(first_chat);
    assert!(
        a["gen_ai.input.messages"].contains("the secret prompt"),
        "{a:?}"
    );
    assert!(
        a["gen_ai.output.messages"].contains("list_directory"),
        "{a:?}"
    );
    let read = spans
        .iter()
        .find(|s| s.name == "execute_tool read_file")
        .unwrap();
    let a = attributes(read);
    assert_eq!(a["gen_ai.tool.call.arguments"], r#"{"path":"missing.txt"}"#);
    assert!(a["gen_ai.tool.call.result"].starts_with("Error: "), "{a:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_collector_does_not_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bound, then closed.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let model = fake_openai(vec![Reply::text("Hi.")]).await;
    let mut command = agcore(dir.path());
    command.args([
        "run",
        "--base-url",
        &base_url(&model),
        "--model",
        "m",
        "hello",
    ]);
    command.env(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        format!("http://127.0.0.1:{port}"),
    );
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(String::from_utf8(output.stdout).unwrap().trim(), "Hi.");
}

/// A streamable-HTTP MCP server (JSON responses): `initialize` (session `sess-1`),
/// `tools/list` with one tool `lookup`, `tools/call`; notifications accepted; no SSE stream.
struct McpServer;

impl Respond for McpServer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if request.method.as_str() != "POST" {
            return ResponseTemplate::new(405);
        }
        let body: serde_json::Value = serde_json::from_slice(&request.body).unwrap();
        let Some(id) = body.get("id").cloned() else {
            return ResponseTemplate::new(202);
        };
        let result = match body["method"].as_str().unwrap_or_default() {
            "initialize" => serde_json::json!({
                "protocolVersion": body["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "fake", "version": "1"},
            }),
            "tools/list" => serde_json::json!({"tools": [{
                "name": "lookup",
                "description": "Look a key up",
                "inputSchema": {"type": "object", "properties": {"key": {"type": "string"}}},
                "annotations": {"readOnlyHint": false, "destructiveHint": false, "openWorldHint": false},
            }]}),
            "tools/call" => serde_json::json!({"content": [{"type": "text", "text": "the value"}]}),
            _ => serde_json::json!({}),
        };
        ResponseTemplate::new(200)
            .insert_header("mcp-session-id", "sess-1")
            .set_body_json(serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The `traceparent` that names `span` as the parent.
fn traceparent_of(span: &Span) -> String {
    format!("00-{}-{}-01", hex(&span.trace_id), hex(&span.span_id))
}

/// Issue 14: a tool run through a streamable-HTTP MCP server exports MCP client spans
/// (`initialize`, `tools/list`, `tools/call lookup` — the last a child of its
/// `execute_tool` span) with the MCP conventions' attributes; `chat` spans carry
/// `server.address`/`server.port`; the approval is an event of the call's span; and the MCP
/// server (header and `_meta`) and the model server (opted in) receive a `traceparent` with the
/// exported trace id and the span that made the request as parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_mcp_tool_run_exports_mcp_spans_and_propagates_trace_context() {
    let dir = tempfile::tempdir().unwrap();
    let mcp = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(McpServer)
        .mount(&mcp)
        .await;
    let model = fake_openai(vec![
        Reply::tool("call_mcp", "lookup", r#"{"key":"k"}"#),
        Reply::text("Found it."),
    ])
    .await;
    let config = dir.path().join("traced.toml");
    std::fs::write(
        &config,
        format!(
            "[model]\npropagate_trace_context = true\n[tools]\nask = [\"write\"]\n\
             [tools.permissions]\nallowed = [\"read\", \"write\"]\ndenied = []\n\
             [mcp.servers.fake]\nurl = \"{}/mcp\"\n",
            mcp.uri()
        ),
    )
    .unwrap();
    let (collector, received) = receiver().await;
    let mut command = agcore(dir.path());
    command.args(["run", "--base-url", &base_url(&model), "--model", "m"]);
    command.args(["--no-stream", "--yes", "--config"]);
    command.arg(&config);
    command.arg("look k up");
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let spans: Vec<Span> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| s.spans.clone())
        .collect();
    let names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    let one = |name: &str| -> &Span {
        let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(found.len(), 1, "{name} in {names:?}");
        found[0]
    };
    let agent = one("invoke_agent");
    let tool = one("execute_tool lookup");
    let call = one("tools/call lookup");
    let initialize = one("initialize");
    let list = one("tools/list");
    assert_eq!(tool.parent_span_id, agent.span_id);
    assert_eq!(
        (call.trace_id.clone(), call.parent_span_id.clone()),
        (agent.trace_id.clone(), tool.span_id.clone()),
        "tools/call is a child of execute_tool"
    );
    let mcp_port = mcp.address().port().to_string();
    for span in [initialize, list, call] {
        let a = attributes(span);
        assert_eq!(span.kind, 3, "{} is a client span", span.name); // SPAN_KIND_CLIENT
        assert_eq!(a["mcp.method.name"], span.name.split(' ').next().unwrap());
        assert_eq!(a["network.transport"], "tcp");
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["server.port"], mcp_port);
        assert!(!a.contains_key("error.type"), "{a:?}");
    }
    let a = attributes(call);
    assert_eq!(a["gen_ai.tool.name"], "lookup");
    assert_eq!(a["mcp.session.id"], "sess-1");
    assert_eq!(attributes(list)["mcp.session.id"], "sess-1");

    // server.address / server.port on the model requests.
    let model_port = model.address().port().to_string();
    let chats: Vec<&Span> = spans.iter().filter(|s| s.name == "chat m").collect();
    assert_eq!(chats.len(), 2);
    for chat in &chats {
        let a = attributes(chat);
        assert_eq!(a["server.address"], "127.0.0.1");
        assert_eq!(a["server.port"], model_port);
    }

    // The approval (`--yes` allows the call, which needs `write`) is an event of its span.
    let approval = tool
        .events
        .iter()
        .find(|e| e.name == "approval")
        .unwrap_or_else(|| panic!("{:?}", tool.events));
    let event: BTreeMap<String, String> = approval
        .attributes
        .iter()
        .map(
            |kv| match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Any::StringValue(text)) => (kv.key.clone(), text.clone()),
                other => (kv.key.clone(), format!("{other:?}")),
            },
        )
        .collect();
    assert_eq!(event["agcore.approval.decision"], "allowed");
    assert_eq!(event["agcore.approval.by"], "approver");
    assert_eq!(event["gen_ai.tool.call.id"], "call_mcp");

    // traceparent: the MCP server got each request's own span as parent, in the header and
    // in `params._meta`.
    let posts: Vec<(serde_json::Value, Option<String>)> = mcp
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.method.as_str() == "POST")
        .map(|r| {
            (
                serde_json::from_slice(&r.body).unwrap(),
                r.headers
                    .get("traceparent")
                    .map(|v| v.to_str().unwrap().to_owned()),
            )
        })
        .collect();
    for (method, span) in [
        ("initialize", initialize),
        ("tools/list", list),
        ("tools/call", call),
    ] {
        let (body, header) = posts
            .iter()
            .find(|(body, _)| body["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {posts:?}"));
        let expected = traceparent_of(span);
        assert_eq!(
            header.as_deref(),
            Some(expected.as_str()),
            "{method} header"
        );
        assert_eq!(
            body["params"]["_meta"]["traceparent"], expected,
            "{method} _meta"
        );
    }
    // The model server (opted in): each chat request with its chat span as parent.
    let mut sent: Vec<String> = model
        .received_requests()
        .await
        .unwrap()
        .iter()
        .filter(|r| r.url.path() == "/v1/chat/completions")
        .map(|r| {
            r.headers
                .get("traceparent")
                .unwrap()
                .to_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let mut expected: Vec<String> = chats.iter().map(|c| traceparent_of(c)).collect();
    sent.sort();
    expected.sort();
    assert_eq!(sent, expected);
}

/// Without the opt-in, the model server gets no `traceparent` (it is a third party by
/// default); and without export nobody does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_server_gets_no_traceparent_unless_opted_in() {
    let dir = tempfile::tempdir().unwrap();
    let model = fake_openai(vec![Reply::text("Hi."), Reply::text("Hi.")]).await;
    let (collector, _received) = receiver().await;
    for export in [true, false] {
        let mut command = agcore(dir.path());
        command.args(["run", "--base-url", &base_url(&model), "--model", "m", "hi"]);
        if export {
            command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
        }
        let output = Command::from_std(command).output().unwrap();
        assert!(output.status.success(), "{output:?}");
    }
    let requests = model.received_requests().await.unwrap();
    let chats: Vec<_> = requests
        .iter()
        .filter(|r| r.url.path() == "/v1/chat/completions")
        .collect();
    assert_eq!(chats.len(), 2);
    assert!(chats.iter().all(|r| r.headers.get("traceparent").is_none()));
}

/// Over stdio too: the real demo server (its stdin copied to a file by `tee`) gets each
/// request's `traceparent` in `params._meta`; the spans say `network.transport=pipe`, and
/// `tools/call echo` is a child of `execute_tool echo`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_mcp_server_gets_the_trace_context_in_meta() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("stdin.jsonl");
    let model = fake_openai(vec![
        Reply::tool("call_echo", "echo", r#"{"message":"hi"}"#),
        Reply::text("Echoed."),
    ])
    .await;
    let config = dir.path().join("traced.toml");
    let line = format!(
        "tee {} | {} mcp-demo-server",
        log.display(),
        env!("CARGO_BIN_EXE_agcore")
    );
    std::fs::write(
        &config,
        format!("[mcp.servers.demo]\ncommand = \"sh\"\nargs = [\"-c\", {line:?}]\n"),
    )
    .unwrap();
    let (collector, received) = receiver().await;
    let mut command = agcore(dir.path());
    command.args(["run", "--base-url", &base_url(&model), "--model", "m"]);
    command.args(["--no-stream", "--config"]);
    command.arg(&config);
    command.arg("echo hi");
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let spans: Vec<Span> = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| s.spans.clone())
        .collect();
    let one = |name: &str| -> &Span {
        let found: Vec<&Span> = spans.iter().filter(|s| s.name == name).collect();
        assert_eq!(
            found.len(),
            1,
            "{name} in {:?}",
            spans.iter().map(|s| &s.name).collect::<Vec<_>>()
        );
        found[0]
    };
    let tool = one("execute_tool echo");
    let call = one("tools/call echo");
    let initialize = one("initialize");
    assert_eq!(call.parent_span_id, tool.span_id);
    for span in [initialize, call, one("tools/list")] {
        let a = attributes(span);
        assert_eq!(a["network.transport"], "pipe");
        assert!(!a.contains_key("server.address") && !a.contains_key("mcp.session.id"));
    }
    let sent: Vec<serde_json::Value> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    for (method, span) in [("initialize", initialize), ("tools/call", call)] {
        let request = sent
            .iter()
            .find(|m| m["method"] == method)
            .unwrap_or_else(|| panic!("no {method} in {sent:?}"));
        assert_eq!(
            request["params"]["_meta"]["traceparent"],
            traceparent_of(span),
            "{method}"
        );
    }
    assert!(
        String::from_utf8(output.stdout)
            .unwrap()
            .contains("Echoed."),
        "the run went on"
    );
}

/// Every attribute of `span` and of its events, with where it is.
fn every_attribute(
    span: &Span,
) -> Vec<(String, &opentelemetry_proto::tonic::common::v1::KeyValue)> {
    let own = span
        .attributes
        .iter()
        .map(|kv| (format!("span {:?}", span.name), kv));
    let events = span.events.iter().flat_map(|event| {
        event
            .attributes
            .iter()
            .map(move |kv| (format!("event {:?} of {:?}", event.name, span.name), kv))
    });
    own.chain(events).collect()
}

/// The attributes that are numbers (the GenAI, MCP and HTTP conventions, and agcore's own), and
/// the string attributes whose value may happen to be digits (ids).
const NUMERIC: &[&str] = &[
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "server.port",
    "agcore.compaction.tier",
    "agcore.compaction.tokens_before",
    "agcore.compaction.tokens_after",
    "agcore.compaction.messages",
    "agcore.compaction.window",
    "tier",
    "tokens_before",
    "tokens_after",
    "messages",
    "window",
];
const TEXT_IDS: &[&str] = &[
    "gen_ai.tool.call.id",
    "gen_ai.response.id",
    "mcp.session.id",
    "mcp.request.id",
];

/// One traced run of `agcore run --tools builtin` with the MCP server `fake` (streamable HTTP,
/// tool `lookup`) reading a.txt, b.txt and c.txt, then looking `k` up: the spans exported.
async fn traced_tool_run(extra: &[&str]) -> (Vec<Span>, u16, u16) {
    let dir = tempfile::tempdir().unwrap();
    for name in ["a", "b", "c"] {
        let text: String = (0..200)
            .map(|i| format!("{name} line {i}: the quick brown fox jumps\n"))
            .collect();
        std::fs::write(dir.path().join(format!("{name}.txt")), text).unwrap();
    }
    let mcp = MockServer::start().await;
    Mock::given(path("/mcp"))
        .respond_with(McpServer)
        .mount(&mcp)
        .await;
    let model = fake_openai(vec![
        Reply::tool("call_a", "read_file", r#"{"path":"a.txt"}"#),
        Reply::tool("call_b", "read_file", r#"{"path":"b.txt"}"#),
        Reply::tool("call_c", "read_file", r#"{"path":"c.txt"}"#),
        Reply::tool("call_mcp", "lookup", r#"{"key":"k"}"#),
        Reply::text("Done."),
    ])
    .await;
    let config = dir.path().join("traced.toml");
    std::fs::write(
        &config,
        format!(
            "[tools]\nask = [\"write\"]\n[tools.permissions]\nallowed = [\"read\", \"write\"]\n\
             denied = []\n[mcp.servers.fake]\nurl = \"{}/mcp\"\n",
            mcp.uri()
        ),
    )
    .unwrap();
    let (collector, received) = receiver().await;
    let mut command = agcore(dir.path());
    command.args(["run", "--base-url", &base_url(&model), "--model", "m"]);
    command.args(["--yes", "--tools", "builtin", "--config"]);
    command.arg(&config);
    command.args(extra);
    command.arg("read the files, then look k up");
    command.env("OTEL_EXPORTER_OTLP_ENDPOINT", collector.uri());
    let output = Command::from_std(command).output().unwrap();
    assert!(output.status.success(), "{output:?}");
    let spans = received
        .lock()
        .unwrap()
        .iter()
        .flat_map(|r| &r.resource_spans)
        .flat_map(|r| &r.scope_spans)
        .flat_map(|s| s.spans.clone())
        .collect();
    (spans, model.address().port(), mcp.address().port())
}

/// OTel numbers are integers: runs with usage (the fake reports it on whole replies), a
/// compaction (the streamed replies carry no usage, so the engine counts the request: the
/// built-in tools' definitions alone are about 20 KB, and the third read passes a 16k window),
/// built-in and MCP tool calls over streamable HTTP (`server.port` on both servers' spans)
/// export every numeric attribute of every span and span event as `intValue` — decoded from the
/// protobuf the receiver got, not read back through text — and no attribute carries a number
/// as a string.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_numeric_attribute_is_exported_as_an_integer() {
    let (whole, model_port, mcp_port) = traced_tool_run(&["--no-stream"]).await;
    let (streamed, _, _) = traced_tool_run(&["--context-window", "16384"]).await;
    let spans: Vec<Span> = whole.iter().chain(&streamed).cloned().collect();

    let mut checked: BTreeMap<&str, usize> = BTreeMap::new();
    let mut wrong = Vec::new();
    for span in &spans {
        for (place, kv) in every_attribute(span) {
            let value = kv.value.as_ref().and_then(|v| v.value.as_ref());
            let key = kv.key.as_str();
            if let Some(numeric) = NUMERIC.iter().find(|name| **name == key) {
                match value {
                    Some(Any::IntValue(n)) if *n >= 0 => *checked.entry(numeric).or_default() += 1,
                    other => wrong.push(format!("{place}: {key} = {other:?}")),
                }
            } else if let Some(Any::StringValue(text)) = value
                && !TEXT_IDS.contains(&key)
                && !text.is_empty()
                && text.parse::<f64>().is_ok()
            {
                wrong.push(format!("{place}: {key} = {text:?}, a number as a string"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "numbers not exported as integers:\n{}",
        wrong.join("\n")
    );
    // What the run must have exported, so the check above had something to check.
    for key in [
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "server.port",
        "agcore.compaction.tokens_before",
        "agcore.compaction.window",
    ] {
        assert!(checked.contains_key(key), "no {key} exported: {checked:?}");
    }
    let ports: Vec<String> = whole
        .iter()
        .filter(|s| s.name == "tools/call lookup" || s.name == "chat m")
        .map(|s| attributes(s)["server.port"].clone())
        .collect();
    assert!(ports.contains(&mcp_port.to_string()), "{ports:?}");
    assert!(ports.contains(&model_port.to_string()), "{ports:?}");
}
