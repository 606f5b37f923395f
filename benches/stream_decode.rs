//! Stream decoding + assembly throughput: a synthetic recorded tool-call stream (OpenAI chunk
//! shapes, arguments split in small pieces) decoded from memory and fed into `StreamAssembler`.
//!
//! Run: `cargo bench --bench stream_decode`. Reports MB/s (criterion throughput) for 1k, 10k and
//! 100k chunks (~318 bytes each, read in 4 KiB pieces); ns per chunk is the time divided by the
//! chunk count. Measured 2026-11-30 on the 2-vCPU dev box, pinned with `taskset -c 1` (other
//! builds running): 1k 1.18 ms, 10k 11.2-11.6 ms, 100k 113-120 ms, i.e. ~1.15 µs/chunk and
//! 255-272 MiB/s at every length (linear).
//!
//! The `responses` group decodes the same four calls as an OpenAI Responses stream (`event:` +
//! `data:` per event, argument deltas keyed by `item_id`/`output_index`). Measured 2026-12-02 in
//! one run on the 2-vCPU dev box, unpinned under load ~10: `stream_decode` 79-82 MiB/s,
//! `responses` 105-133 MiB/s (185 ms for 100k events, ~1.9 µs/event).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use agcore::llm::openai::decode_stream;
use agcore::llm::openai_responses;
use agcore::llm::{ChatResponse, StreamAssembler};
use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use futures::StreamExt;
use serde_json::json;

/// Calls in the stream; the chunks are spread over them.
const CALLS: usize = 4;
/// The size of one network read.
const READ_SIZE: usize = 4096;

/// An OpenAI-shaped tool-call stream of `chunks` chunks (role/header chunks, argument pieces,
/// the finish chunk and the usage chunk), with `[DONE]`.
fn recorded_stream(chunks: usize) -> String {
    let id = "chatcmpl-AZ3n0fT7pQ2rS4uV6wX8yZ0aBcDeF";
    let envelope = |delta: serde_json::Value, finish: serde_json::Value| {
        json!({
            "id": id, "object": "chat.completion.chunk", "created": 1732963200,
            "model": "gpt-4o-2024-08-06", "system_fingerprint": "fp_0ba0d124f1",
            "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish}],
            "usage": null
        })
    };
    let mut out = String::new();
    let mut push = |value: serde_json::Value| {
        out.push_str("data: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
    };
    // Source code being written by a `write_file` call: escapes (\n, \") in realistic density.
    let pieces = [
        "fn ",
        "main",
        "() {",
        "\n    ",
        "let ",
        "name",
        " = ",
        "\"wor",
        "ld\"",
        ";\n",
        "    println!",
        "(\"hello",
        " {}\"",
        ", name",
        ");\n",
        "}\n",
    ];
    let per_call = (chunks.saturating_sub(2 + CALLS)).div_ceil(CALLS);
    let mut emitted = 0;
    for call in 0..CALLS {
        push(envelope(
            json!({"role": "assistant", "content": null, "tool_calls": [{"index": call, "id": format!("call_{call:024}"), "type": "function", "function": {"name": "write_file", "arguments": ""}}]}),
            json!(null),
        ));
        emitted += 1;
        let mut arguments = vec![format!(
            "{{\"path\": \"src/file{call}.rs\", \"content\": \""
        )];
        while arguments.len() + 1 < per_call {
            let piece = pieces[arguments.len() % pieces.len()];
            // The piece as it appears inside the JSON string: escaped, without the quotes.
            let escaped = serde_json::to_string(piece).unwrap();
            arguments.push(escaped[1..escaped.len() - 1].to_owned());
        }
        arguments.push("\"}".to_owned());
        for piece in arguments {
            if emitted + 2 >= chunks {
                break;
            }
            push(envelope(
                json!({"tool_calls": [{"index": call, "function": {"arguments": piece}}]}),
                json!(null),
            ));
            emitted += 1;
        }
    }
    push(envelope(json!({}), json!("tool_calls")));
    push(
        json!({"id": id, "object": "chat.completion.chunk", "created": 1732963200, "model": "gpt-4o-2024-08-06",
        "choices": [], "usage": {"prompt_tokens": 1200, "completion_tokens": chunks, "total_tokens": 1200 + chunks}}),
    );
    out.push_str("data: [DONE]\n\n");
    out
}

/// The same tool calls as an OpenAI Responses stream of `events` events: `response.created`,
/// per call `output_item.added`, argument deltas, `function_call_arguments.done` and
/// `output_item.done`, then `response.completed` with usage (each with its `event:` line).
fn recorded_responses_stream(events: usize) -> String {
    let response = |status: &str, usage: serde_json::Value| {
        json!({"id": "resp_0a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f6071", "object": "response",
            "created_at": 1764633000, "status": status, "model": "gpt-5-2025-08-07", "output": [],
            "parallel_tool_calls": true, "tool_choice": "auto", "tools": [], "store": false, "usage": usage})
    };
    let mut out = String::new();
    let mut sequence = 0;
    let mut push = |mut value: serde_json::Value| {
        value["sequence_number"] = json!(sequence);
        sequence += 1;
        out.push_str("event: ");
        out.push_str(value["type"].as_str().unwrap());
        out.push_str("\ndata: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
    };
    push(json!({"type": "response.created", "response": response("in_progress", json!(null))}));
    let per_call = (events.saturating_sub(2 + 4 * CALLS)).div_ceil(CALLS);
    let mut emitted = 1;
    for call in 0..CALLS {
        let item_id = format!("fc_0a1b2c3d4e5f6071f{call}8293a4b5c6d7e8f90a1b2c3d4e5f6071");
        let item = |arguments: &str, status: &str| {
            json!({"id": item_id, "type": "function_call", "status": status, "arguments": arguments,
                "call_id": format!("call_{call:024}"), "name": "write_file"})
        };
        push(
            json!({"type": "response.output_item.added", "output_index": call, "item": item("", "in_progress")}),
        );
        let mut arguments = format!("{{\"path\": \"src/file{call}.rs\", \"content\": \"");
        push(
            json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": call, "delta": arguments, "obfuscation": "Qm3x"}),
        );
        emitted += 2;
        for n in 0..per_call {
            if emitted + 4 >= events {
                break;
            }
            let piece = [
                "fn ", "main", "() {", "\n    ", "println!", "(\"hello", " {}\"", ", name", ");\n",
                "}\n",
            ][n % 10];
            let escaped = serde_json::to_string(piece).unwrap();
            let piece = &escaped[1..escaped.len() - 1];
            arguments.push_str(piece);
            push(
                json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": call, "delta": piece, "obfuscation": "Qm3x"}),
            );
            emitted += 1;
        }
        arguments.push_str("\"}");
        push(
            json!({"type": "response.function_call_arguments.delta", "item_id": item_id, "output_index": call, "delta": "\"}", "obfuscation": "Qm3x"}),
        );
        push(
            json!({"type": "response.function_call_arguments.done", "item_id": item_id, "output_index": call, "arguments": arguments}),
        );
        push(
            json!({"type": "response.output_item.done", "output_index": call, "item": item(&arguments, "completed")}),
        );
        emitted += 3;
    }
    push(
        json!({"type": "response.completed", "response": response("completed", json!({
        "input_tokens": 1200, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
        "output_tokens": events, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 1200 + events}))}),
    );
    out
}

fn reads(body: &Bytes) -> Vec<Result<Bytes, std::io::Error>> {
    (0..body.len())
        .step_by(READ_SIZE)
        .map(|start| Ok(body.slice(start..(start + READ_SIZE).min(body.len()))))
        .collect()
}

async fn decode_and_assemble(reads: Vec<Result<Bytes, std::io::Error>>) -> ChatResponse {
    let mut deltas = decode_stream(futures::stream::iter(reads), Some(Duration::from_secs(300)));
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta.unwrap(), &mut events);
        events.clear();
    }
    assembler.finish(&mut events).unwrap()
}

async fn decode_and_assemble_responses(reads: Vec<Result<Bytes, std::io::Error>>) -> ChatResponse {
    let mut deltas = openai_responses::decode_stream(
        futures::stream::iter(reads),
        Some(Duration::from_secs(300)),
    );
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta.unwrap(), &mut events);
        events.clear();
    }
    assembler.finish(&mut events).unwrap()
}

/// The Responses decoder on the same calls, for the same event counts.
fn bench_responses(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("responses");
    for events in [1_000usize, 10_000, 100_000] {
        let body = Bytes::from(recorded_responses_stream(events));
        let event_count = body.windows(6).filter(|w| w == b"data: ").count();
        let check = runtime.block_on(decode_and_assemble_responses(reads(&body)));
        assert_eq!(check.tool_calls().len(), CALLS);
        for call in check.tool_calls() {
            serde_json::from_str::<serde_json::Value>(&call.function.arguments).unwrap();
        }
        eprintln!(
            "responses stream of {event_count} events, {} bytes",
            body.len()
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(events), &body, |b, body| {
            b.to_async(&runtime)
                .iter(|| async { black_box(decode_and_assemble_responses(reads(body)).await) });
        });
    }
    group.finish();
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("stream_decode");
    for chunks in [1_000usize, 10_000, 100_000] {
        let body = Bytes::from(recorded_stream(chunks));
        let chunk_count = body.windows(6).filter(|w| w == b"data: ").count();
        let check = runtime.block_on(decode_and_assemble(reads(&body)));
        assert_eq!(check.tool_calls().len(), CALLS);
        eprintln!(
            "stream of {chunk_count} chunks, {} bytes, {} argument bytes",
            body.len(),
            check
                .tool_calls()
                .iter()
                .map(|call| call.function.arguments.len())
                .sum::<usize>()
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(chunks), &body, |b, body| {
            b.to_async(&runtime)
                .iter(|| async { black_box(decode_and_assemble(reads(body)).await) });
        });
    }
    group.finish();
}

/// A Gemini `streamGenerateContent?alt=sse` reply of `chunks` events, the same work as
/// [`recorded_stream`]: the same source text, streamed as text parts (Gemini streams text in
/// pieces; its calls arrive whole), then the `CALLS` `write_file` calls, each whole in one
/// event with a signature on the first, the finish and usage in the last. Measured 2026-12-02
/// on the 2-vCPU dev box under a load of 10-13 (other builds; noisy), side by side with
/// `stream_decode`: 1k 82.8 MiB/s (chat completions 101), 10k 78.1 (88.3), 100k 59.8 (96.9) —
/// 1.1-1.2x slower, 1.6x at 100k, where each call's arguments (3.5 MB) are built as a JSON
/// value and written out again.
fn gemini_stream(chunks: usize) -> String {
    let envelope = |parts: serde_json::Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"parts": parts, "role": "model"}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({
            "candidates": [candidate],
            "usageMetadata": {"promptTokenCount": 1200, "totalTokenCount": 1200,
                "promptTokensDetails": [{"modality": "TEXT", "tokenCount": 1200}]},
            "modelVersion": "gemini-2.5-flash", "responseId": "2H8taeKXH9PHvdIPmPGQ8Qk"
        })
    };
    let pieces = [
        "fn main() {\n",
        "    let name = \"world\";\n",
        "    println!(\"hello {}\", name);\n",
        "}\n",
    ];
    let mut out = String::new();
    let mut push = |value: serde_json::Value| {
        out.push_str("data: ");
        out.push_str(&value.to_string());
        out.push_str("\r\n\r\n");
    };
    let text_chunks = chunks.saturating_sub(CALLS) / 2;
    let mut code = String::new();
    for i in 0..text_chunks {
        let piece: String = (0..4).map(|j| pieces[(i + j) % pieces.len()]).collect();
        code.push_str(&piece);
        push(envelope(json!([{"text": piece}]), None));
    }
    for call in 0..CALLS {
        let mut part = json!({"functionCall": {"name": "write_file", "args": {"path": format!("src/file{call}.rs"), "content": code}}});
        if call == 0 {
            part["thoughtSignature"] = json!(
                "CiQB0e2Kb3xK9/Qz8nM6rZ1b2VhT3x+K9wLp4sDq0YmE7vJ2aN5cR8uF1oG6iB3tH0kW9zX4yS7eP2lA5dC8fV1gU6jI3hO0nM9qK4rL7bT2sE5wY8xZ1c="
            );
        }
        let finish = (call + 1 == CALLS).then_some("STOP");
        push(envelope(json!([part]), finish));
    }
    out
}

async fn gemini_decode_and_assemble(reads: Vec<Result<Bytes, std::io::Error>>) -> ChatResponse {
    let mut deltas = agcore::llm::gemini::decode_stream(
        futures::stream::iter(reads),
        Some(Duration::from_secs(300)),
    );
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta.unwrap(), &mut events);
        events.clear();
    }
    assembler.finish(&mut events).unwrap()
}

fn bench_gemini(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("gemini");
    for chunks in [1_000usize, 10_000, 100_000] {
        let body = Bytes::from(gemini_stream(chunks));
        let check = runtime.block_on(gemini_decode_and_assemble(reads(&body)));
        assert_eq!(check.tool_calls().len(), CALLS);
        assert_eq!(check.message.artifacts().len(), 1);
        eprintln!(
            "gemini stream of {} events, {} bytes",
            body.windows(6).filter(|w| w == b"data: ").count(),
            body.len()
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(chunks), &body, |b, body| {
            b.to_async(&runtime)
                .iter(|| async { black_box(gemini_decode_and_assemble(reads(body)).await) });
        });
    }
    group.finish();
}

/// Decode-side work common to the groups: every delta into a `StreamAssembler`.
async fn assemble(mut deltas: agcore::llm::ModelStream) -> ChatResponse {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta.unwrap(), &mut events);
        events.clear();
    }
    assembler.finish(&mut events).unwrap()
}

/// The same tool calls as [`recorded_stream`] in Anthropic Messages events: `message_start`, per
/// call a `tool_use` block whose `input_json_delta` pieces (the first empty) carry the same
/// argument pieces, `message_delta`, `message_stop`; `events` events in all.
fn anthropic_stream(events: usize) -> String {
    let mut out = String::new();
    let mut push = |value: serde_json::Value| {
        out.push_str("event: ");
        out.push_str(value["type"].as_str().unwrap());
        out.push_str("\ndata: ");
        out.push_str(&value.to_string());
        out.push_str("\n\n");
    };
    push(
        json!({"type": "message_start", "message": {"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "content": [], "model": "claude-sonnet-4-5-20250929", "stop_reason": null, "stop_sequence": null, "usage": {"input_tokens": 1200, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0, "output_tokens": 1, "service_tier": "standard"}}}),
    );
    let pieces = [
        "fn ",
        "main",
        "() {",
        "\n    ",
        "let ",
        "name",
        " = ",
        "\"wor",
        "ld\"",
        ";\n",
        "    println!",
        "(\"hello",
        " {}\"",
        ", name",
        ");\n",
        "}\n",
    ];
    let per_call = events.saturating_sub(3 + 3 * CALLS).div_ceil(CALLS);
    for call in 0..CALLS {
        push(
            json!({"type": "content_block_start", "index": call, "content_block": {"type": "tool_use", "id": format!("toolu_{call:024}"), "name": "write_file", "input": {}}}),
        );
        let mut arguments = vec![
            String::new(),
            format!("{{\"path\": \"src/file{call}.rs\", \"content\": \""),
        ];
        while arguments.len() + 1 < per_call {
            let piece = pieces[arguments.len() % pieces.len()];
            let escaped = serde_json::to_string(piece).unwrap();
            arguments.push(escaped[1..escaped.len() - 1].to_owned());
        }
        arguments.push("\"}".to_owned());
        for piece in arguments {
            push(
                json!({"type": "content_block_delta", "index": call, "delta": {"type": "input_json_delta", "partial_json": piece}}),
            );
        }
        push(json!({"type": "content_block_stop", "index": call}));
    }
    push(
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": events}}),
    );
    push(json!({"type": "message_stop"}));
    out
}

/// The `anthropic` group: [`anthropic_stream`] through `agcore::llm::anthropic::decode_stream`,
/// assembled the same way, for the same event counts. Measured 2026-12-02 on the 2-vCPU dev box
/// with other builds running (`--warm-up-time 1 --measurement-time 3`), side by side with the
/// chat-completions group in one run: chat completions 173 MiB/s at 1k/10k/100k chunks
/// (1.75 µs/chunk, ~318 bytes each); Anthropic 153 / 134 / 145 MiB/s (0.84-0.96 µs/event,
/// ~135 bytes each) — 0.77-0.88x the chat-completions bytes per second, within the 1.5x bound,
/// and about half the time per delta.
fn bench_anthropic(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let mut group = c.benchmark_group("anthropic");
    for events in [1_000usize, 10_000, 100_000] {
        let body = Bytes::from(anthropic_stream(events));
        let decode = |body: &Bytes| {
            assemble(agcore::llm::anthropic::decode_stream(
                futures::stream::iter(reads(body)),
                Some(Duration::from_secs(300)),
            ))
        };
        let check = runtime.block_on(decode(&body));
        assert_eq!(check.tool_calls().len(), CALLS);
        eprintln!(
            "anthropic stream of {} events, {} bytes, {} argument bytes",
            body.windows(6).filter(|w| w == b"data: ").count(),
            body.len(),
            check
                .tool_calls()
                .iter()
                .map(|call| call.function.arguments.len())
                .sum::<usize>()
        );
        group.throughput(Throughput::Bytes(body.len() as u64));
        group.bench_with_input(BenchmarkId::from_parameter(events), &body, |b, body| {
            b.to_async(&runtime)
                .iter(|| async { black_box(decode(body).await) });
        });
    }
    group.finish();
}

criterion_group!(
    benches,
    bench,
    bench_responses,
    bench_gemini,
    bench_anthropic
);
criterion_main!(benches);
