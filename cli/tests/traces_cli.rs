//! OTLP export of the GenAI spans (issue 14, item 1): `agcore run` with
//! `OTEL_EXPORTER_OTLP_ENDPOINT` set sends its spans over http/protobuf to a receiver on
//! 127.0.0.1 that decodes them with the official `opentelemetry-proto` definitions. A
//! two-turn tool run (one tool failing) gives the span tree `invoke_agent` → `chat m` ×2 and
//! `execute_tool {name}` ×2, with the conventions' attributes; content only when opted in; an
//! unreachable collector does not fail the run.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

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
