//! A hostile chat server cannot drive `OpenAiClient` without bound (issue 10, item 8): each
//! server below is a raw TCP program on 127.0.0.1 that writes at most a bounded amount, and each
//! limit of the client ends the reply with its typed error, the history untouched.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use agcore::llm::types::RequestOptions;
use agcore::llm::{
    ChatModel, ChatRequest, CycleConfig, LlmCycle, LlmError, ModelStream, OpenAiClient,
    OpenAiConfig, OpenaiChatMessage, ReplyLimits, ResponseLimit, StreamAssembler, StreamEvent,
    TimeoutKind,
};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

const MIB: usize = 1024 * 1024;
/// What a hostile server writes at most (its loop bound).
const SERVER_CAP: usize = 128 * MIB;
/// What it may have written before the client hung up: the limit plus socket buffers.
const WRITTEN_BOUND: usize = 40 * MIB;
/// No test may hang.
const TEST_LIMIT: Duration = Duration::from_secs(60);

/// How the server frames its body.
#[derive(Clone, Copy)]
enum Framing {
    /// No length: the body ends when the connection closes.
    Close,
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A one-connection server: reads the request, writes `head` (status line and headers without
/// the framing header), then the pieces `next` returns (until `None`, a write failure or
/// [`SERVER_CAP`]), waiting `pause` between pieces. Returns how many body bytes it wrote.
fn serve(
    head: &'static str,
    framing: Framing,
    pause: Option<Duration>,
    mut next: impl FnMut(usize) -> Option<Vec<u8>> + Send + 'static,
) -> (String, JoinHandle<usize>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let address = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        let listener = TcpListener::from_std(listener).unwrap();
        let (mut socket, _) = listener.accept().await.unwrap();
        read_request(&mut socket).await;
        let framing_header = match framing {
            Framing::Close => "Connection: close\r\n",
            Framing::Chunked => "Transfer-Encoding: chunked\r\n",
        };
        let head = format!("{head}\r\n{framing_header}\r\n");
        if socket.write_all(head.as_bytes()).await.is_err() {
            return 0;
        }
        let mut written = 0;
        let mut piece_number = 0;
        while written < SERVER_CAP {
            let Some(piece) = next(piece_number) else {
                break;
            };
            piece_number += 1;
            let framed = match framing {
                Framing::Close => piece,
                Framing::Chunked => {
                    let mut framed = format!("{:x}\r\n", piece.len()).into_bytes();
                    framed.extend_from_slice(&piece);
                    framed.extend_from_slice(b"\r\n");
                    framed
                }
            };
            if socket.write_all(&framed).await.is_err() {
                break;
            }
            written += framed.len();
            if let Some(pause) = pause {
                tokio::time::sleep(pause).await;
            }
        }
        written
    });
    (format!("http://{address}/v1"), task)
}

/// Read one request (headers and a `Content-Length` body).
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut request = Vec::new();
    let mut buffer = [0u8; 8192];
    loop {
        let read = socket.read(&mut buffer).await.unwrap();
        assert!(read > 0, "the client closed before sending its request");
        request.extend_from_slice(&buffer[..read]);
        let Some(end) = request.windows(4).position(|window| window == b"\r\n\r\n") else {
            continue;
        };
        let headers = String::from_utf8_lossy(&request[..end]).to_ascii_lowercase();
        let length: usize = headers
            .lines()
            .find_map(|line| line.strip_prefix("content-length:"))
            .map(|value| value.trim().parse().unwrap())
            .unwrap_or(0);
        if request.len() >= end + 4 + length {
            return;
        }
    }
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream";

fn text_chunk(text: &str) -> Vec<u8> {
    let chunk = serde_json::json!({"choices":[{"index":0,"delta":{"content":text}}]});
    format!("data: {chunk}\n\n").into_bytes()
}

fn small_limits(base_url: &str) -> OpenAiConfig {
    OpenAiConfig::new(base_url)
        .with_max_event_bytes(MIB)
        .with_max_response_bytes(MIB)
        .with_stream_idle_timeout(Duration::from_secs(1))
        .with_response_deadline(Duration::from_secs(2))
}

/// Open a stream with `config` and read it to its first error.
async fn first_error(config: OpenAiConfig) -> LlmError {
    let client = OpenAiClient::new(config).unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: "m",
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let read = async {
        let mut stream: ModelStream = client.chat_stream(request).await?;
        while let Some(delta) = stream.next().await {
            delta?;
        }
        Err::<(), _>(LlmError::Other("the stream ended without an error".into()))
    };
    tokio::time::timeout(TEST_LIMIT, read)
        .await
        .expect("the client did not give up in time")
        .unwrap_err()
}

async fn written(server: JoinHandle<usize>) -> usize {
    tokio::time::timeout(TEST_LIMIT, server)
        .await
        .expect("the server did not stop")
        .unwrap()
}

fn assert_limit(error: &LlmError, expected: ResponseLimit) {
    match error {
        LlmError::ResponseLimitExceeded { limit } => assert_eq!(*limit, expected, "{error}"),
        other => panic!("expected {expected:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn an_sse_line_without_a_newline_hits_the_event_limit() {
    let (url, server) = serve(SSE_HEAD, Framing::Close, None, |n| {
        Some(if n == 0 {
            b"data: \"".to_vec()
        } else {
            vec![b'a'; 64 * 1024]
        })
    });
    let error = first_error(small_limits(&url).with_max_response_bytes(64 * MIB)).await;
    assert_limit(&error, ResponseLimit::EventBytes(MIB));
    assert!(error.to_string().contains("1048576"), "{error}");
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn many_data_lines_without_a_blank_line_hit_the_event_limit() {
    let (url, server) = serve(SSE_HEAD, Framing::Chunked, None, |_| {
        Some(b"data: x\n".repeat(4096))
    });
    let error = first_error(small_limits(&url).with_max_response_bytes(64 * MIB)).await;
    assert_limit(&error, ResponseLimit::EventBytes(MIB));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn endless_small_events_hit_the_body_limit() {
    let (url, server) = serve(SSE_HEAD, Framing::Chunked, None, |_| {
        Some(text_chunk(&"a".repeat(1000)))
    });
    let error = first_error(small_limits(&url).with_response_deadline(TEST_LIMIT)).await;
    assert_limit(&error, ResponseLimit::ResponseBytes(MIB));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn endless_text_deltas_hit_the_message_limit_and_leave_the_history_as_it_was() {
    let (url, server) = serve(SSE_HEAD, Framing::Chunked, None, |_| {
        Some(text_chunk(&"a".repeat(1000)))
    });
    let client = OpenAiClient::new(
        OpenAiConfig::new(url)
            .with_max_response_bytes(64 * MIB)
            .with_response_deadline(TEST_LIMIT),
    )
    .unwrap();
    let mut config = CycleConfig::new("m");
    config.reply_limits = ReplyLimits::default().with_max_message_bytes(MIB);
    let mut cycle = LlmCycle::new(client, config);
    let run = async {
        let mut events = cycle.submit_stream("hi".into()).await?;
        let mut text = 0;
        while let Some(event) = events.next().await {
            match event {
                StreamEvent::AssistantTextDelta { text: piece } => text += piece.len(),
                StreamEvent::Error { message, .. } => return Ok((text, message)),
                _ => {}
            }
        }
        Err(LlmError::Other("no error event".into()))
    };
    let (text, message) = tokio::time::timeout(TEST_LIMIT, run)
        .await
        .unwrap()
        .unwrap();
    assert!(text <= MIB, "{text} bytes of text passed the limit");
    assert!(message.contains("max_message_bytes"), "{message}");
    assert!(cycle.messages().is_empty(), "{:?}", cycle.messages());
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn a_huge_error_body_is_read_only_in_part() {
    let (url, server) = serve(
        "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain",
        Framing::Chunked,
        None,
        |_| Some(vec![b'e'; 64 * 1024]),
    );
    let error = first_error(OpenAiConfig::new(url)).await;
    assert!(
        matches!(&error, LlmError::Server { status: 500, message, .. } if message.starts_with("eee") && message.chars().count() <= 501),
        "{error:?}"
    );
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn a_huge_json_body_in_place_of_a_stream_hits_the_body_limit() {
    let (url, server) = serve(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json",
        Framing::Close,
        None,
        |n| {
            Some(if n == 0 {
                br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#.to_vec()
            } else {
                vec![b'a'; 64 * 1024]
            })
        },
    );
    let error = first_error(small_limits(&url)).await;
    assert_limit(&error, ResponseLimit::ResponseBytes(MIB));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn a_huge_json_body_of_a_plain_request_hits_the_body_limit() {
    let (url, server) = serve(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json",
        Framing::Chunked,
        None,
        |n| {
            Some(if n == 0 {
                br#"{"choices":[{"index":0,"message":{"role":"assistant","content":""#.to_vec()
            } else {
                vec![b'a'; 64 * 1024]
            })
        },
    );
    let client = OpenAiClient::new(small_limits(&url)).unwrap();
    let messages = [OpenaiChatMessage::user_text("hi")];
    let options = RequestOptions::default();
    let request = ChatRequest {
        model: "m",
        messages: &messages,
        tools: &[],
        options: &options,
    };
    let error = tokio::time::timeout(TEST_LIMIT, client.chat(request))
        .await
        .unwrap()
        .unwrap_err();
    assert_limit(&LlmError::from(error), ResponseLimit::ResponseBytes(MIB));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn keep_alive_comments_forever_hit_the_idle_timeout() {
    // Comments, empty events and chunks without content: bytes, but no progress of the reply.
    let (url, server) = serve(
        SSE_HEAD,
        Framing::Chunked,
        Some(Duration::from_millis(20)),
        |n| {
            (n < 2000).then(|| match n % 3 {
                0 => b": keep-alive\n\n".to_vec(),
                1 => b"data:\n\n".to_vec(),
                _ => b"data: {\"choices\":[{\"index\":0,\"delta\":{}}]}\n\n".to_vec(),
            })
        },
    );
    let started = std::time::Instant::now();
    let error = first_error(small_limits(&url).with_response_deadline(TEST_LIMIT)).await;
    assert!(
        matches!(
            error,
            LlmError::Timeout {
                what: TimeoutKind::StreamIdle,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[tokio::test]
async fn a_reply_that_never_ends_hits_the_response_deadline() {
    // Real progress every 50 ms, so the idle timeout never fires; the deadline does.
    let (url, server) = serve(
        SSE_HEAD,
        Framing::Chunked,
        Some(Duration::from_millis(50)),
        |n| (n < 2000).then(|| text_chunk("a")),
    );
    let started = std::time::Instant::now();
    let error = first_error(small_limits(&url)).await;
    assert_limit(&error, ResponseLimit::Deadline(Duration::from_secs(2)));
    assert!(started.elapsed() < Duration::from_secs(20));
    assert!(written(server).await < WRITTEN_BOUND);
}

#[test]
fn a_reply_with_too_many_tool_calls_is_an_error() {
    let mut assembler = StreamAssembler::with_limits(ReplyLimits::default().with_max_tool_calls(3));
    let mut events = Vec::new();
    let mut outcome = Ok(());
    for index in 0..5 {
        outcome = outcome.and_then(|()| {
            assembler.try_push(
                agcore::llm::ModelDelta::ToolCall {
                    index: Some(index),
                    id: Some(format!("c{index}")),
                    name: Some("f".into()),
                    arguments: Some("{}".into()),
                },
                &mut events,
            )
        });
    }
    let error = outcome.unwrap_err();
    assert_limit(&LlmError::from(error), ResponseLimit::ToolCalls(3));
}

// ---------------------------------------------------------------------------------------------
// Arbitrary chunk fields never panic (issue 10, item 10): run in debug, overflow checks on.

mod arbitrary_chunks {
    use super::*;
    use agcore::llm::openai::decode_stream;
    use agcore::llm::{ModelDelta, Usage};
    use proptest::prelude::*;
    use serde_json::{Value, json};

    fn index() -> impl Strategy<Value = Option<u32>> {
        prop_oneof![
            Just(None),
            Just(Some(u32::MAX)),
            Just(Some(u32::MAX - 1)),
            (0u32..4).prop_map(Some),
            any::<u32>().prop_map(Some),
        ]
    }

    fn text() -> impl Strategy<Value = Option<String>> {
        prop_oneof![
            Just(None),
            Just(Some(String::new())),
            ".{0,8}".prop_map(Some)
        ]
    }

    fn tokens() -> impl Strategy<Value = u64> {
        prop_oneof![Just(u64::MAX), Just(u64::MAX - 1), Just(0u64), any::<u64>()]
    }

    fn piece() -> impl Strategy<Value = Value> {
        (index(), text(), text(), text()).prop_map(|(index, id, name, arguments)| {
            let mut piece = json!({"function": {"name": name, "arguments": arguments}});
            if let Some(index) = index {
                piece["index"] = json!(index);
            }
            if let Some(id) = id {
                piece["id"] = json!(id);
            }
            piece
        })
    }

    fn chunk() -> impl Strategy<Value = Value> {
        (
            text(),
            text(),
            text(),
            prop::collection::vec(piece(), 0..4),
            prop_oneof![Just(None), Just(Some("stop")), Just(Some("tool_calls")), Just(Some(""))],
            prop::option::of((tokens(), tokens(), tokens(), tokens())),
        )
            .prop_map(|(id, content, reasoning, calls, finish, usage)| {
                let mut chunk = json!({
                    "id": id,
                    "choices": [{"index": 0, "delta": {"content": content, "reasoning_content": reasoning, "tool_calls": calls}, "finish_reason": finish}],
                });
                if let Some((prompt, completion, total, cached)) = usage {
                    chunk["usage"] = json!({"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total, "prompt_tokens_details": {"cached_tokens": cached}});
                }
                chunk
            })
    }

    fn delta() -> impl Strategy<Value = ModelDelta> {
        prop_oneof![
            (index(), text(), text(), text()).prop_map(|(index, id, name, arguments)| {
                ModelDelta::ToolCall {
                    index,
                    id,
                    name,
                    arguments,
                }
            }),
            ".{0,4}".prop_map(ModelDelta::Text),
            (tokens(), tokens(), tokens()).prop_map(|(p, c, t)| ModelDelta::Usage(Usage {
                prompt_tokens: p,
                completion_tokens: c,
                total_tokens: t,
                cached_tokens: Some(p),
                reasoning_tokens: Some(c),
                cache_write_tokens: None,
                web_search_requests: None,
            })),
        ]
    }

    /// Decode and assemble `chunks`; the usage it reported, if any.
    fn run(chunks: &[Value]) -> Option<Usage> {
        let body: String = chunks
            .iter()
            .map(|chunk| format!("data: {chunk}\n\n"))
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .unwrap();
        runtime.block_on(async {
            let bytes = futures::stream::iter([Ok::<_, std::io::Error>(bytes::Bytes::from(body))]);
            let mut deltas = decode_stream(bytes, None);
            let mut assembler = StreamAssembler::new();
            let mut events = Vec::new();
            while let Some(Ok(delta)) = deltas.next().await {
                let _ = assembler.try_push(delta, &mut events);
            }
            assembler
                .finish(&mut events)
                .ok()
                .and_then(|response| response.usage)
        })
    }

    proptest! {
        #[test]
        fn arbitrary_chunk_sequences_never_panic(turns in prop::collection::vec(prop::collection::vec(chunk(), 0..6), 1..4)) {
            let mut total = Usage::default();
            for chunks in &turns {
                if let Some(usage) = run(chunks) {
                    // Summed over turns, as the tool loop does.
                    total += usage;
                    total += usage;
                }
            }
        }

        #[test]
        fn arbitrary_deltas_never_panic(deltas in prop::collection::vec(delta(), 0..24)) {
            let mut assembler = StreamAssembler::with_limits(ReplyLimits::default().with_max_tool_calls(8));
            let mut events = Vec::new();
            let mut total = Usage::default();
            for delta in deltas {
                if let ModelDelta::Usage(usage) = &delta {
                    total += *usage;
                }
                assembler.push(delta, &mut events);
            }
            if let Ok(response) = assembler.finish(&mut events) {
                prop_assert!(response.tool_calls().len() <= 8);
            }
        }
    }
}
