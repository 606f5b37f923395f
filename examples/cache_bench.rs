//! Anthropic prompt caching, measured: a 50-turn tool session through `AnthropicClient` and the
//! tool loop against a local fake Messages server (127.0.0.1) that bills by Anthropic's cache
//! rules — input cost with the breakpoint planner on and off.
//!
//! The fake's rules: a request's prefix is its tools, then its system blocks, then its message
//! blocks, in order (a block's `cache_control` is not part of it). Each marked block ends a
//! prefix; a prefix is read from the cache when an earlier request wrote that very prefix
//! (identical bytes up to the marker), the longest such one counting; the marked prefixes past
//! it that are at least 1024 tokens long are written (the tokens from the read point to the
//! furthest one). Tokens are estimated as bytes / 4. Base input costs 1, a read 0.1 and a write
//! 1.25 per token; output is not counted (the same both ways).
//!
//! The session: a system prompt and 6 tool definitions (about 2 900 tokens together), then 49
//! turns that each call `read_file` (a thinking block and the call; 3–5 KB of file text back),
//! then a final answer.
//!
//! Then the same session in a 24 000-token window, where the context engine compacts (tier 1
//! stubs old tool outputs; summaries are off): each compaction rewrites the history, so the
//! next request reads only the tools and system from the cache and writes its messages again.
//!
//! ```text
//! cargo run --release --example cache_bench
//! ```
//!
//! Measured 2026-12-02 (token counts, so the same on any machine):
//!
//! ```text
//! 50-turn tool session, 50 requests, 1342210 input tokens in all (bytes/4)
//!                    base input   cache read  cache write     input cost
//! without caching       1342210            0            0        1342210
//! with caching                0      1289538        52672         194794
//! caching costs 14.5% of the uncached input (6.9x cheaper)
//! in a 24000-token window: 9 compactions; 9 requests found the message prefix rewritten and
//! wrote 86765 tokens again; input 600714 tokens, cost 209453 cached vs 600714 uncached (34.9%)
//! ```
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agcore::llm::anthropic::{AnthropicClient, AnthropicConfig};
use agcore::llm::{CycleConfig, LlmCycle, RetryPolicy, StreamEvent};
use agcore::tools::prelude::*;
use futures::StreamExt;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const TURNS: usize = 50;
const MIN_CACHEABLE_TOKENS: u64 = 1024;

/// What the fake billed, summed over the session.
#[derive(Debug, Default, Clone, Copy)]
struct Bill {
    requests: u64,
    /// Input tokens at the base price (after the last cache hit or write).
    input: u64,
    /// Tokens read from the cache.
    read: u64,
    /// Tokens written to the cache.
    written: u64,
    /// Requests whose message prefix no longer matched the previous request's (the history
    /// was rewritten, e.g. compacted): only the tools and system could be read.
    broken: u64,
    /// Tokens written by those requests.
    rewritten: u64,
}

impl Bill {
    fn total_input(&self) -> u64 {
        self.input + self.read + self.written
    }

    /// Input cost in base-token units.
    fn cost(&self) -> f64 {
        self.input as f64 + 0.1 * self.read as f64 + 1.25 * self.written as f64
    }
}

#[derive(Default)]
struct Cache {
    /// Prefix digests written so far.
    written: HashSet<Vec<u8>>,
    /// The previous request's longest marked prefix.
    previous_end: Option<Vec<u8>>,
    bill: Bill,
    turn: usize,
}

struct Biller {
    cache: Arc<Mutex<Cache>>,
}

fn tokens(bytes: usize) -> u64 {
    (bytes as u64).div_ceil(4)
}

impl Respond for Biller {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        // The prefix, block by block: (digest of the prefix up to here, tokens so far, marked).
        let mut blocks: Vec<&Value> = Vec::new();
        blocks.extend(body["tools"].as_array().into_iter().flatten());
        blocks.extend(body["system"].as_array().into_iter().flatten());
        for message in body["messages"].as_array().unwrap() {
            blocks.extend(message["content"].as_array().unwrap());
        }
        let mut digest = Sha256::new();
        let mut total = 0;
        let mut prefixes = Vec::new();
        for block in blocks {
            let mut unmarked = block.clone();
            let marked = unmarked
                .as_object_mut()
                .and_then(|fields| fields.remove("cache_control"))
                .is_some();
            let text = unmarked.to_string();
            digest.update(text.as_bytes());
            total += tokens(text.len());
            if marked {
                prefixes.push((digest.clone().finalize().to_vec(), total));
            }
        }
        let mut cache = self.cache.lock().unwrap();
        let read = prefixes
            .iter()
            .filter(|(hash, size)| *size >= MIN_CACHEABLE_TOKENS && cache.written.contains(hash))
            .map(|(_, size)| *size)
            .max()
            .unwrap_or(0);
        let mut written_to = read;
        for (hash, size) in &prefixes {
            if *size > read && *size >= MIN_CACHEABLE_TOKENS && cache.written.insert(hash.clone()) {
                written_to = written_to.max(*size);
            }
        }
        let written = written_to - read;
        // The previous request's end is marked again now; if it is not among this request's
        // prefixes, the history before it changed.
        let broken = cache
            .previous_end
            .as_ref()
            .is_some_and(|end| !prefixes.iter().any(|(hash, _)| hash == end));
        if broken {
            cache.bill.broken += 1;
            cache.bill.rewritten += written;
        }
        cache.previous_end = prefixes.last().map(|(hash, _)| hash.clone());
        let input = total - read - written;
        cache.bill.requests += 1;
        cache.bill.input += input;
        cache.bill.read += read;
        cache.bill.written += written;
        cache.turn += 1;
        let turn = cache.turn;
        let usage = json!({"input_tokens": input, "cache_creation_input_tokens": written, "cache_read_input_tokens": read, "output_tokens": 40});
        let mut content = vec![
            json!({"type": "thinking", "thinking": format!("Turn {turn}: the next file to read."), "signature": format!("EqQBCkgI{turn:08}signature")}),
        ];
        let stop = if turn < TURNS {
            content.push(json!({"type": "tool_use", "id": format!("toolu_{turn:08}"), "name": "read_file", "input": {"path": format!("src/module_{turn}.rs")}}));
            "tool_use"
        } else {
            content.push(json!({"type": "text", "text": "All files read."}));
            "end_turn"
        };
        ResponseTemplate::new(200)
            .insert_header("content-type", "application/json")
            .set_body_json(json!({"id": format!("msg_{turn}"), "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": content, "stop_reason": stop, "stop_sequence": null, "usage": usage}))
    }
}

struct ReadFile;

#[async_trait]
impl BaseTool for ReadFile {
    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Read a text file of the workspace and return its contents with line numbers. Use it before editing a file."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"path": {"type": "string", "description": "The path relative to the workspace root."}}, "required": ["path"]})
    }
    async fn execute(&self, args: Value) -> Result<Value, ToolError> {
        let path = args["path"].as_str().unwrap_or_default();
        let lines = 60 + path.len() % 5 * 10;
        let text: String = (1..=lines)
            .map(|n| format!("{n:>4}  let value_{n} = compute(\"{path}\", {n});\n"))
            .collect();
        Ok(json!(text))
    }
}

/// Tools the session offers (only `read_file` is called): realistic schemas, ~1 900 tokens.
struct Described(usize);

#[async_trait]
impl BaseTool for Described {
    fn name(&self) -> &str {
        [
            "write_file",
            "search",
            "run_command",
            "list_dir",
            "apply_patch",
        ][self.0]
    }
    fn description(&self) -> &str {
        "A tool of the coding agent. It works inside the workspace only; paths are relative to the workspace root; the output is cut to 16 KiB with a note saying how much was left out. Prefer it over the shell when both could do the job, because its output is structured and its effects are checked against the permission rules of the session before they happen."
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {
            "path": {"type": "string", "description": "The path of the file or directory, relative to the workspace root; never absolute, never outside the workspace."},
            "content": {"type": "string", "description": "The full new content of the file, or the patch in unified diff format for apply_patch."},
            "pattern": {"type": "string", "description": "A regular expression (Rust regex syntax) matched against each line."},
            "timeout_ms": {"type": "integer", "minimum": 1, "maximum": 600000, "description": "How long the command may run before it is stopped."}
        }, "required": ["path"]})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("ok"))
    }
}

/// The session against a fresh fake; `window`: the context window the engine compacts for.
async fn session(cache: bool, window: Option<u32>) -> (Bill, agcore::llm::Usage, usize) {
    let server = MockServer::start().await;
    let state = Arc::new(Mutex::new(Cache::default()));
    Mock::given(method("POST"))
        .and(path("/v1/messages"))
        .respond_with(Biller {
            cache: state.clone(),
        })
        .mount(&server)
        .await;
    let client = AnthropicClient::new(
        AnthropicConfig::new(format!("{}/v1", server.uri()))
            .with_api_key("bench")
            .with_cache(cache),
    )
    .unwrap();
    let mut config = CycleConfig::new("claude-sonnet-4-5");
    config.max_turns = Some(TURNS as u32 + 5);
    config.retry = RetryPolicy::none();
    config.request_timeout = Some(Duration::from_secs(30));
    if let Some(window) = window {
        config.context_window = Some(window);
        // Tier 1 (old tool outputs stubbed) and tier 3 only: a summary would be a request
        // of another shape, which this fake does not answer.
        config.context.summarise = false;
    }
    let system = "You are a careful coding agent working in a Rust repository. Read before you write; keep changes small; explain what you changed and why. ".repeat(24);
    let mut cycle = LlmCycle::new(client, config).with_system_prompt(system);
    let mut registry = ToolRegistry::new().with_default_timeout(Duration::from_secs(5));
    registry.register(Arc::new(ReadFile)).unwrap();
    for index in 0..5 {
        registry.register(Arc::new(Described(index))).unwrap();
    }
    let events: Vec<StreamEvent> = cycle
        .submit_stream_with_tools("Read every module of src/ one by one.".into(), &registry)
        .await
        .unwrap()
        .collect()
        .await;
    assert!(
        !matches!(events.last(), Some(StreamEvent::Error { .. })),
        "{:?}",
        events.last()
    );
    assert_eq!(
        cycle.messages().last().and_then(|m| m.text()).as_deref(),
        Some("All files read.")
    );
    let compactions = events
        .iter()
        .filter(|e| matches!(e, StreamEvent::ContextCompacted { .. }))
        .count();
    let bill = state.lock().unwrap().bill;
    (bill, cycle.usage().tokens, compactions)
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let (cached, usage, none) = session(true, None).await;
    let (plain, _, _) = session(false, None).await;
    assert_eq!(none, 0, "no compaction in a 200k window");
    assert_eq!(
        cached.broken, 0,
        "an append-only history keeps every prefix"
    );
    assert_eq!(
        cached.total_input(),
        plain.total_input(),
        "the same prompts both ways"
    );
    assert_eq!(
        usage.prompt_tokens,
        cached.total_input(),
        "usage: input = base + reads + writes"
    );
    assert_eq!(usage.cached_tokens, Some(cached.read));
    assert_eq!(usage.cache_write_tokens, Some(cached.written));
    println!(
        "{TURNS}-turn tool session, {} requests, {} input tokens in all (bytes/4)",
        cached.requests,
        cached.total_input()
    );
    println!(
        "{:<16} {:>12} {:>12} {:>12} {:>14}",
        "", "base input", "cache read", "cache write", "input cost"
    );
    for (name, bill) in [("without caching", plain), ("with caching", cached)] {
        println!(
            "{name:<16} {:>12} {:>12} {:>12} {:>14.0}",
            bill.input,
            bill.read,
            bill.written,
            bill.cost()
        );
    }
    println!(
        "caching costs {:.1}% of the uncached input ({:.1}x cheaper)",
        100.0 * cached.cost() / plain.cost(),
        plain.cost() / cached.cost()
    );
    // The same session in a window small enough that the context engine compacts it.
    let window = 24_000;
    let (compacted, _, compactions) = session(true, Some(window)).await;
    let (compacted_plain, _, _) = session(false, Some(window)).await;
    println!(
        "in a {window}-token window: {compactions} compactions; {} requests found the message prefix rewritten and wrote {} tokens again; input {} tokens, cost {:.0} cached vs {:.0} uncached ({:.1}%)",
        compacted.broken,
        compacted.rewritten,
        compacted.total_input(),
        compacted.cost(),
        compacted_plain.cost(),
        100.0 * compacted.cost() / compacted_plain.cost()
    );
}
