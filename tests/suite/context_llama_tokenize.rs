//! llama.cpp's `POST /tokenize` as the context engine's token counter, against a fake
//! llama.cpp server on 127.0.0.1: `/tokenize` the llama.cpp way (`{"content", "add_special",
//! "with_pieces"}` → `{"tokens": [ids]}` or `[{"id", "piece"}]`), its tokenizer a real one
//! (tiktoken o200k_base), and `/v1/chat/completions` enforcing an 8,192-token window with the
//! same tokenizer (`tests/context_support`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::sync::{Arc, Mutex};

use agcore::context::{LlamaCppTokenizer, SAMPLE_BYTES, TokenCounter, TokenizerChoice};
use agcore::llm::{CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, StreamEvent};
use futures::StreamExt;
use serde_json::{Value, json};
use support::context::{Shape, WindowedServer, registry};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const SYSTEM: &str = "You are a log analyst. Read what you are asked to read, then answer.";

/// llama.cpp's `/tokenize` handler, over o200k_base; it records each content's length.
struct Tokenize {
    seen: Arc<Mutex<Vec<usize>>>,
    fail: bool,
}

impl Respond for Tokenize {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        if self.fail {
            return ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"code": 500, "message": "busy"}}));
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let content = body["content"].as_str().unwrap();
        self.seen.lock().unwrap().push(content.len());
        let bpe = tiktoken_rs::o200k_base_singleton();
        let ids = bpe.encode_ordinary(content);
        let tokens: Vec<Value> = if body["with_pieces"].as_bool() == Some(true) {
            ids.iter()
                .map(|&id| {
                    json!({"id": id, "piece": String::from_utf8_lossy(&bpe.decode_bytes(&[id]).unwrap())})
                })
                .collect()
        } else {
            ids.iter().map(|&id| json!(id)).collect()
        };
        ResponseTemplate::new(200).set_body_json(json!({ "tokens": tokens }))
    }
}

async fn mount_tokenize(server: &MockServer, fail: bool) -> Arc<Mutex<Vec<usize>>> {
    // Build the tokenizer's tables before the first request: in a debug build on a loaded
    // machine that takes longer than discovery's 2 s bound, and discovery would find nothing.
    tiktoken_rs::o200k_base_singleton();
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/tokenize"))
        .respond_with(Tokenize {
            seen: seen.clone(),
            fail,
        })
        .mount(server)
        .await;
    seen
}

#[tokio::test]
async fn discovered_only_where_the_server_has_it_and_counts_like_the_server() {
    let llama = MockServer::start().await;
    mount_tokenize(&llama, false).await;
    let counter = LlamaCppTokenizer::discover(&format!("{}/v1", llama.uri()), None)
        .await
        .expect("llama.cpp's /tokenize");
    let texts = ["hello world", "fn main() { println!(\"héllo\"); }", ""];
    let counts = counter.count(&texts).await.unwrap();
    let bpe = tiktoken_rs::o200k_base_singleton();
    let expected: Vec<u64> = texts
        .iter()
        .map(|t| bpe.encode_ordinary(t).len() as u64)
        .collect();
    assert_eq!(counts, expected);
    // Many texts: at most MAX_REQUESTS requests, counts shared by length, about right.
    let many: Vec<String> = (0..200).map(|i| format!("line {i} of the log")).collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let counts = counter.count(&refs).await.unwrap();
    assert_eq!(counts.len(), 200);
    let exact: u64 = refs
        .iter()
        .map(|t| bpe.encode_ordinary(t).len() as u64)
        .sum();
    let total: u64 = counts.iter().sum();
    assert!(total.abs_diff(exact) * 10 <= exact, "{total} vs {exact}");

    // A server without /tokenize (an OpenAI-style one): not discovered.
    let plain = MockServer::start().await;
    assert!(
        LlamaCppTokenizer::discover(&format!("{}/v1", plain.uri()), None)
            .await
            .is_none()
    );
}

async fn run_session(cycle: &mut LlmCycle, prompt: &str) -> String {
    let registry = registry();
    let mut stream = cycle
        .run_stream(Some(prompt.to_owned()), Some(&registry))
        .await
        .unwrap();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::AssistantTextDelta { text: piece } => text.push_str(&piece),
            StreamEvent::Error { message, .. } => panic!("{message}"),
            _ => {}
        }
    }
    text
}

fn cycle(server: &WindowedServer, counter: LlamaCppTokenizer) -> LlmCycle {
    let client = OpenAiClient::new(OpenAiConfig::new(server.base_url())).unwrap();
    let mut config = CycleConfig::new("local-model");
    config.max_turns = Some(1_000);
    config.options.max_tokens = Some(512);
    config.context_window = Some(8_192);
    config.context.tokenizer = TokenizerChoice::Custom(Arc::new(counter));
    LlmCycle::new(client, config).with_system_prompt(SYSTEM)
}

#[tokio::test]
async fn a_long_session_counts_only_the_delta_with_the_servers_tokenizer() {
    let server = WindowedServer::start(8_192, Shape::LlamaCpp, SYSTEM).await;
    let seen = mount_tokenize(&server.server, false).await;
    let counter = LlamaCppTokenizer::discover(&server.base_url(), None)
        .await
        .unwrap();
    let mut cycle = cycle(&server, counter);
    let text = run_session(
        &mut cycle,
        "TASK: read chunks 0 to 59 with read_chunk, then say DONE.",
    )
    .await;
    assert_eq!(text, "DONE 0-59");
    assert_eq!(cycle.context_counter(), Some("llama.cpp/tokenize"));
    let received = server.received();
    assert!(received.iter().all(|r| !r.rejected), "no overflow");
    let seen = seen.lock().unwrap().clone();
    // Only samples are sent (no text longer than SAMPLE_BYTES / 2 … except short ones whole).
    assert!(seen.iter().all(|&len| len <= SAMPLE_BYTES), "{seen:?}");
    // Only the delta: each request adds an assistant call and a result (and compaction's
    // stubs and summaries), so the texts sent stay a small multiple of the requests, not
    // the whole history each time (which would be hundreds per request).
    let requests = received.len();
    assert!(
        seen.len() <= requests * 8,
        "{} /tokenize requests for {requests} chat requests",
        seen.len()
    );
}

#[tokio::test]
async fn a_failing_tokenize_falls_back_to_the_ratio() {
    let server = WindowedServer::start(8_192, Shape::LlamaCpp, SYSTEM).await;
    mount_tokenize(&server.server, true).await;
    let counter = LlamaCppTokenizer::new(&server.base_url(), None).unwrap();
    assert!(
        LlamaCppTokenizer::discover(&server.base_url(), None)
            .await
            .is_none()
    );
    let mut cycle = cycle(&server, counter);
    let text = run_session(
        &mut cycle,
        "TASK: read chunks 0 to 9 with read_chunk, then say DONE.",
    )
    .await;
    assert_eq!(text, "DONE 0-9");
    assert_eq!(cycle.context_counter(), None, "the ratio after the failure");
}
