//! A streamed reply that breaks after it began — before any tool ran — is discarded and the
//! request sent again within the retry budget, announced by one `retry` event per retry: a
//! connection dropped mid-stream, and llama.cpp's 500 "does not match the expected peg-native
//! format" `error` event. A failure that is not retryable, or an exhausted budget, ends the
//! stream with exactly one error event, the last. Local servers on 127.0.0.1 stream each reply
//! in small random pieces (across lines and UTF-8 characters).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::{
    CycleConfig, ErrorKind, LlmCycle, OpenAiClient, OpenAiConfig, RetryPolicy, StreamEvent,
};
use agcore::tools::prelude::*;
use futures::StreamExt;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// One scripted reply: the SSE body, then the end of the body (`complete`) or a dropped
/// connection.
#[derive(Clone)]
struct Reply {
    body: String,
    complete: bool,
    /// When not complete: keep the connection open, silent, instead of dropping it.
    stall: bool,
}

fn chunk(delta: Value, finish: Option<&str>) -> String {
    let chunk = json!({
        "id": "chatcmpl-retry",
        "object": "chat.completion.chunk",
        "created": 1_764_583_200,
        "model": "m",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
    });
    format!("data: {chunk}\n\n")
}

/// A whole streamed text reply.
fn text_reply(text: &str) -> Reply {
    Reply {
        body: format!(
            "{}{}{}data: [DONE]\n\n",
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": text}), None),
            chunk(json!({}), Some("stop"))
        ),
        complete: true,
        stall: false,
    }
}

/// The start of a text reply, then the connection drops.
fn dropped_after(text: &str) -> Reply {
    Reply {
        body: format!(
            "{}{}",
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": text}), None)
        ),
        complete: false,
        stall: false,
    }
}

/// The start of a text reply, then `event` (an error), and the body ends.
fn failed_after(text: &str, event: &str) -> Reply {
    Reply {
        body: format!(
            "{}{}{event}",
            chunk(json!({"role": "assistant", "content": ""}), None),
            chunk(json!({"content": text}), None)
        ),
        complete: true,
        stall: false,
    }
}

fn fixture(name: &str) -> String {
    let path = format!(
        "{}/tests/fixtures/openai/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{path}: {error}"))
}

/// A server answering request `n` with `replies[n]` (the last one again after the end), each
/// body in random pieces of 1–7 bytes; it records each request's JSON body.
struct Server {
    base_url: String,
    received: Arc<Mutex<Vec<Value>>>,
}

impl Server {
    async fn start(replies: Vec<Reply>) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let received = Arc::new(Mutex::new(Vec::new()));
        let count = Arc::new(AtomicUsize::new(0));
        let seen = received.clone();
        tokio::spawn(async move {
            loop {
                let (mut socket, _) = listener.accept().await.unwrap();
                let n = count.fetch_add(1, Ordering::SeqCst);
                let reply = replies[n.min(replies.len() - 1)].clone();
                let seen = seen.clone();
                tokio::spawn(async move {
                    let body = read_request(&mut socket).await;
                    seen.lock()
                        .unwrap()
                        .push(serde_json::from_slice(&body).unwrap());
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                                transfer-encoding: chunked\r\nconnection: close\r\n\r\n";
                    socket.write_all(head.as_bytes()).await.unwrap();
                    let seed = fastrand::u64(..);
                    let mut rng = fastrand::Rng::with_seed(seed);
                    let mut rest = reply.body.as_bytes();
                    while !rest.is_empty() {
                        let size = rng.usize(1..=7).min(rest.len());
                        let (piece, tail) = rest.split_at(size);
                        rest = tail;
                        socket
                            .write_all(format!("{size:x}\r\n").as_bytes())
                            .await
                            .unwrap();
                        socket.write_all(piece).await.unwrap();
                        socket.write_all(b"\r\n").await.unwrap();
                        socket.flush().await.unwrap();
                    }
                    if reply.complete {
                        socket.write_all(b"0\r\n\r\n").await.unwrap();
                        socket.flush().await.unwrap();
                    } else if reply.stall {
                        tokio::time::sleep(Duration::from_secs(60)).await;
                    }
                    // Dropping the socket ends the body (or cuts it, when incomplete).
                });
            }
        });
        Server {
            base_url: format!("http://{address}/v1"),
            received,
        }
    }

    fn cycle(&self, max_retries: u32) -> LlmCycle {
        let client = OpenAiClient::new(
            OpenAiConfig::new(self.base_url.clone())
                .with_stream_idle_timeout(Duration::from_millis(300)),
        )
        .unwrap();
        let mut config = CycleConfig::new("m");
        config.retry = RetryPolicy {
            max_retries,
            initial_backoff: Duration::from_millis(5),
            max_backoff: Duration::from_millis(20),
        };
        config.request_timeout = Some(Duration::from_secs(20));
        LlmCycle::new(client, config)
    }

    fn requests(&self) -> Vec<Value> {
        self.received.lock().unwrap().clone()
    }
}

/// The request's JSON body (headers read up to the blank line, then Content-Length bytes).
async fn read_request(socket: &mut tokio::net::TcpStream) -> Vec<u8> {
    let mut request = Vec::new();
    let mut buffer = [0u8; 4096];
    loop {
        let read = socket.read(&mut buffer).await.unwrap();
        assert!(
            read > 0,
            "the client closed before its request was complete"
        );
        request.extend_from_slice(&buffer[..read]);
        let text = String::from_utf8_lossy(&request).to_lowercase();
        if let Some(end) = text.find("\r\n\r\n") {
            let length: usize = text
                .lines()
                .find_map(|line| line.strip_prefix("content-length:"))
                .map(|value| value.trim().parse().unwrap())
                .unwrap_or(0);
            if request.len() >= end + 4 + length {
                return request[end + 4..end + 4 + length].to_vec();
            }
        }
    }
}

/// The text deltas of `events`, joined.
fn text_of(events: &[StreamEvent]) -> String {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::AssistantTextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

/// `events` split at each `retry` event: what each attempt showed, and the retries.
fn attempts(events: &[StreamEvent]) -> (Vec<&[StreamEvent]>, Vec<&StreamEvent>) {
    let retries = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::Retry { .. }))
        .collect();
    let shown = events
        .split(|event| matches!(event, StreamEvent::Retry { .. }))
        .collect();
    (shown, retries)
}

fn last_answer(cycle: &LlmCycle) -> Value {
    serde_json::to_value(cycle.messages().last().unwrap()).unwrap()
}

#[tokio::test]
async fn a_connection_dropped_mid_stream_is_retried_after_a_retry_event() {
    let server = Server::start(vec![
        dropped_after("Once upon a tíme ✓"),
        text_reply("Érase una vez ✓"),
    ])
    .await;
    let mut cycle = server.cycle(3);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    let (shown, retries) = attempts(&events);
    assert_eq!(text_of(shown[0]), "Once upon a tíme ✓", "{events:#?}");
    match retries.as_slice() {
        [
            StreamEvent::Retry {
                attempt: 2,
                max_attempts: 4,
                kind: ErrorKind::Stream,
                error,
                delay_ms,
            },
        ] => {
            assert!(error.contains("mid-stream"), "{error}");
            assert!(*delay_ms <= 20, "{delay_ms}");
        }
        other => panic!("expected one retry event, got {other:#?}"),
    }
    assert_eq!(text_of(shown[1]), "Érase una vez ✓");
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, StreamEvent::Error { .. }))
    );
    // The partial reply is gone: the history holds the new attempt's answer only.
    assert_eq!(cycle.messages().len(), 2);
    assert_eq!(last_answer(&cycle)["content"], "Érase una vez ✓");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0], requests[1], "the same request is sent again");
    assert_eq!(cycle.last_run_usage().requests, 2);
}

#[tokio::test]
async fn llama_cpp_s_peg_format_500_mid_stream_is_retried() {
    for error_event in [
        fixture("llamacpp_peg_format_error.sse"),
        fixture("llamacpp_peg_format_error_data.sse"),
    ] {
        let server = Server::start(vec![
            failed_after("{\"na", &error_event),
            text_reply("second answer"),
        ])
        .await;
        let mut cycle = server.cycle(2);
        let events: Vec<StreamEvent> = cycle
            .submit_stream("hi".into())
            .await
            .unwrap()
            .collect()
            .await;
        let (shown, retries) = attempts(&events);
        assert_eq!(text_of(shown[0]), "{\"na");
        assert!(
            matches!(
                retries.as_slice(),
                [StreamEvent::Retry { attempt: 2, max_attempts: 3, kind: ErrorKind::Server, error, .. }]
                    if error.contains("peg-native format")
            ),
            "{events:#?}"
        );
        assert_eq!(text_of(shown[1]), "second answer");
        assert_eq!(last_answer(&cycle)["content"], "second answer");
        assert_eq!(server.requests().len(), 2);
    }
}

#[tokio::test]
async fn an_exhausted_budget_ends_with_one_error_event_and_no_more_retries() {
    let server = Server::start(vec![dropped_after("Once")]).await;
    let mut cycle = server.cycle(2);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    let (shown, retries) = attempts(&events);
    assert_eq!(retries.len(), 2, "{events:#?}");
    assert_eq!(shown.len(), 3);
    let errors: Vec<&StreamEvent> = events
        .iter()
        .filter(|event| matches!(event, StreamEvent::Error { .. }))
        .collect();
    assert_eq!(errors.len(), 1, "{events:#?}");
    assert!(
        matches!(
            events.last(),
            Some(StreamEvent::Error {
                kind: ErrorKind::Stream,
                ..
            })
        ),
        "{events:#?}"
    );
    assert_eq!(server.requests().len(), 3);
    // Nothing of the broken replies is kept.
    assert!(
        !serde_json::to_string(cycle.messages())
            .unwrap()
            .contains("Once"),
        "{:?}",
        cycle.messages()
    );
}

#[tokio::test]
async fn a_client_error_mid_stream_is_not_retried() {
    let server = Server::start(vec![
        failed_after(
            "Once",
            "data: {\"error\":{\"code\":400,\"message\":\"invalid grammar\",\"type\":\"invalid_request_error\"}}\n\n",
        ),
        text_reply("never"),
    ])
    .await;
    let mut cycle = server.cycle(3);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    assert!(
        !events
            .iter()
            .any(|event| matches!(event, StreamEvent::Retry { .. })),
        "{events:#?}"
    );
    assert!(
        matches!(
            events.last(),
            Some(StreamEvent::Error {
                kind: ErrorKind::BadRequest,
                ..
            })
        ),
        "{events:#?}"
    );
    assert_eq!(server.requests().len(), 1);
}

struct Weather(Arc<AtomicUsize>);

#[async_trait]
impl BaseTool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(json!({"city": args["city"], "temperature": 22}))
    }
}

#[tokio::test]
async fn a_tool_call_cut_by_a_dropped_connection_never_runs_and_the_retried_one_runs_once() {
    let call = |arguments: &str, id: &str| {
        chunk(
            json!({"tool_calls": [{"index": 0, "id": id, "type": "function",
                "function": {"name": "get_weather", "arguments": arguments}}]}),
            None,
        )
    };
    let cut = Reply {
        body: call("{\"city\": \"Pa", "call_cut"),
        complete: false,
        stall: false,
    };
    let whole = Reply {
        body: format!(
            "{}{}data: [DONE]\n\n",
            call("{\"city\": \"Zürich\"}", "call_whole"),
            chunk(json!({}), Some("tool_calls"))
        ),
        complete: true,
        stall: false,
    };
    let server = Server::start(vec![cut, whole, text_reply("22 degrees")]).await;
    let runs = Arc::new(AtomicUsize::new(0));
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(Weather(runs.clone()))).unwrap();
    let mut cycle = server.cycle(3);
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("Weather in Zürich?".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    assert_eq!(
        events
            .iter()
            .filter(|event| matches!(event, StreamEvent::Retry { .. }))
            .count(),
        1,
        "{events:#?}"
    );
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    // The model sees the retried call and its answer, nothing of the cut one.
    let sent = requests[2]["messages"].to_string();
    assert!(!sent.contains("call_cut"), "{sent}");
    assert_eq!(
        requests[2]["messages"][1]["tool_calls"][0]["id"],
        "call_whole"
    );
    assert_eq!(requests[2]["messages"][2]["tool_call_id"], "call_whole");
    assert_eq!(last_answer(&cycle)["content"], "22 degrees");
}

#[tokio::test]
async fn a_stream_that_goes_idle_after_it_began_is_retried() {
    let stalled = Reply {
        stall: true,
        ..dropped_after("Once")
    };
    let server = Server::start(vec![stalled, text_reply("second answer")]).await;
    let mut cycle = server.cycle(2);
    let events: Vec<StreamEvent> = cycle
        .submit_stream("hi".into())
        .await
        .unwrap()
        .collect()
        .await;
    let (_, retries) = attempts(&events);
    assert!(
        matches!(
            retries.as_slice(),
            [StreamEvent::Retry {
                kind: ErrorKind::Timeout,
                ..
            }]
        ),
        "{events:#?}"
    );
    assert_eq!(last_answer(&cycle)["content"], "second answer");
    assert_eq!(server.requests().len(), 2);
}
