//! The floor: a minimal hand-written tool loop on reqwest + serde_json against the same fake
//! chat-completions server, no agcore — what the loop costs with nothing but HTTP and JSON.
//! The history is a `Vec<Value>` sent whole each turn; a reply's tool calls are answered with
//! the tool's output; streamed replies are read line by line and their call pieces joined.
//! No retries, limits, validation or events: everything agcore adds is left out.

use std::time::Duration;

use futures::StreamExt;
use serde_json::{Value, json};

use crate::cpu_now;

/// One whole tool-loop call (`turns` tool turns and the answer): CPU per turn, marked like
/// agcore's (turn k from the start of request k to the start of request k+1).
pub async fn one_call(
    http: &reqwest::Client,
    url: &str,
    turns: usize,
    streaming: bool,
    output: &str,
) -> Vec<Duration> {
    let begin = cpu_now();
    let tools = json!([{"type": "function", "function": {"name": "noop",
        "description": "Does nothing", "parameters": {"type": "object", "properties": {}}}}]);
    let mut messages = vec![
        json!({"role": "system", "content": "You are a benchmark."}),
        json!({"role": "user", "content": "Go"}),
    ];
    let mut marks = Vec::new();
    loop {
        marks.push(cpu_now());
        let mut body = json!({"model": "fake-model", "messages": &messages, "tools": &tools});
        if streaming {
            body["stream"] = json!(true);
            body["stream_options"] = json!({"include_usage": true});
        }
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .send()
            .await
            .unwrap();
        let message = if streaming {
            read_stream(response).await
        } else {
            let reply: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            reply["choices"][0]["message"].clone()
        };
        let calls = message["tool_calls"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        messages.push(message);
        if calls.is_empty() {
            break;
        }
        for call in calls {
            messages.push(json!({"role": "tool", "tool_call_id": call["id"], "content": output}));
        }
    }
    assert_eq!(messages.len(), 3 + 2 * turns);
    assert_eq!(marks.len(), turns + 1);
    marks[0] = begin;
    marks.push(cpu_now());
    marks.windows(2).map(|w| w[1] - w[0]).collect()
}

/// A streamed reply's assistant message: text and tool-call pieces joined by index.
async fn read_stream(response: reqwest::Response) -> Value {
    let mut text = String::new();
    let mut calls: Vec<Value> = Vec::new();
    let mut pending = Vec::new();
    let mut bytes = response.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        pending.extend_from_slice(&chunk.unwrap());
        while let Some(end) = pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            let Some(data) = line.strip_prefix(b"data: ") else {
                continue;
            };
            let data = data.trim_ascii_end();
            if data == b"[DONE]" {
                continue;
            }
            let chunk: Value = serde_json::from_slice(data).unwrap();
            let Some(delta) = chunk["choices"].get(0).map(|choice| &choice["delta"]) else {
                continue;
            };
            if let Some(piece) = delta["content"].as_str() {
                text.push_str(piece);
            }
            for piece in delta["tool_calls"].as_array().into_iter().flatten() {
                let index = piece["index"].as_u64().unwrap_or(0) as usize;
                if calls.len() <= index {
                    calls.resize(
                        index + 1,
                        json!({"type": "function",
                        "function": {"name": "", "arguments": ""}}),
                    );
                }
                let call = &mut calls[index];
                if let Some(id) = piece["id"].as_str() {
                    call["id"] = json!(id);
                }
                for field in ["name", "arguments"] {
                    if let Some(part) = piece["function"][field].as_str() {
                        let joined =
                            format!("{}{part}", call["function"][field].as_str().unwrap_or(""));
                        call["function"][field] = json!(joined);
                    }
                }
            }
        }
    }
    if calls.is_empty() {
        json!({"role": "assistant", "content": text})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": calls})
    }
}
