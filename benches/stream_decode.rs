//! Stream decoding + assembly throughput: a synthetic recorded tool-call stream (OpenAI chunk
//! shapes, arguments split in small pieces) decoded from memory and fed into `StreamAssembler`.
//!
//! Run: `cargo bench --bench stream_decode`. Reports MB/s (criterion throughput) for 1k, 10k and
//! 100k chunks (~318 bytes each, read in 4 KiB pieces); ns per chunk is the time divided by the
//! chunk count. Measured 2026-11-30 on the 2-vCPU dev box, pinned with `taskset -c 1` (other
//! builds running): 1k 1.18 ms, 10k 11.2-11.6 ms, 100k 113-120 ms, i.e. ~1.15 µs/chunk and
//! 255-272 MiB/s at every length (linear).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;
use std::time::Duration;

use agcore::llm::openai::decode_stream;
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

fn reads(body: &Bytes) -> Vec<Result<Bytes, std::io::Error>> {
    (0..body.len())
        .step_by(READ_SIZE)
        .map(|start| Ok(body.slice(start..(start + READ_SIZE).min(body.len()))))
        .collect()
}

async fn decode_and_assemble(reads: Vec<Result<Bytes, std::io::Error>>) -> ChatResponse {
    assemble(decode_stream(
        futures::stream::iter(reads),
        Some(Duration::from_secs(300)),
    ))
    .await
}

async fn assemble(mut deltas: agcore::llm::ModelStream) -> ChatResponse {
    let mut assembler = StreamAssembler::new();
    let mut events = Vec::new();
    while let Some(delta) = deltas.next().await {
        assembler.push(delta.unwrap(), &mut events);
        events.clear();
    }
    assembler.finish(&mut events).unwrap()
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
/// assembled the same way, for the same event counts.
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

criterion_group!(benches, bench, bench_anthropic);
criterion_main!(benches);
