//! The fake server's replies in the native APIs' wire formats (Responses, Anthropic Messages,
//! Gemini), with the same content as the chat-completions replies: one `noop` call per turn,
//! then "All done.".

use serde_json::{Value, json};

/// The tool results in a request, found the way each API carries them.
fn results(items: Option<&Vec<Value>>, found: impl Fn(&Value) -> usize) -> usize {
    items.map_or(0, |items| items.iter().map(found).sum())
}

fn sse(events: &[(&str, Value)]) -> String {
    let mut out = String::new();
    for (name, data) in events {
        if !name.is_empty() {
            out.push_str("event: ");
            out.push_str(name);
            out.push('\n');
        }
        out.push_str("data: ");
        out.push_str(&data.to_string());
        out.push_str("\n\n");
    }
    out
}

/// The OpenAI Responses API.
pub fn responses(request: &Value, turns: usize, seq: usize) -> (&'static str, String) {
    let turn = results(request["input"].as_array(), |item| {
        usize::from(item["type"] == "function_call_output")
    });
    let usage = json!({"input_tokens": 100 + 20 * turn, "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110 + 20 * turn});
    let id = format!("resp_{seq}");
    let item = if turn < turns {
        json!({"type": "function_call", "id": format!("fc_{seq}"), "call_id": format!("call_{turn:04}_{seq}"),
            "name": "noop", "arguments": "{}", "status": "completed"})
    } else {
        json!({"type": "message", "id": format!("msg_{seq}"), "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "All done.", "annotations": []}]})
    };
    let response = |status: &str, output: Value, usage: Value| {
        json!({"id": id, "object": "response", "created_at": 1_732_963_500, "status": status,
            "model": "fake-model", "output": output, "usage": usage, "error": null,
            "incomplete_details": null, "parallel_tool_calls": true, "tool_choice": "auto", "tools": []})
    };
    if request["stream"] != json!(true) {
        return (
            "application/json",
            response("completed", json!([item]), usage).to_string(),
        );
    }
    let mut events = vec![(
        "response.created",
        json!({"type": "response.created", "sequence_number": 0, "response": response("in_progress", json!([]), Value::Null)}),
    )];
    if turn < turns {
        let mut added = item.clone();
        added["arguments"] = json!("");
        added["status"] = json!("in_progress");
        events.push(("response.output_item.added", json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": added})));
        events.push(("response.function_call_arguments.delta", json!({"type": "response.function_call_arguments.delta", "sequence_number": 2, "item_id": item["id"], "output_index": 0, "delta": "{}"})));
        events.push(("response.function_call_arguments.done", json!({"type": "response.function_call_arguments.done", "sequence_number": 3, "item_id": item["id"], "output_index": 0, "arguments": "{}"})));
    } else {
        let mut added = item.clone();
        added["content"] = json!([]);
        added["status"] = json!("in_progress");
        events.push(("response.output_item.added", json!({"type": "response.output_item.added", "sequence_number": 1, "output_index": 0, "item": added})));
        for (n, text) in ["All", " done."].into_iter().enumerate() {
            events.push(("response.output_text.delta", json!({"type": "response.output_text.delta", "sequence_number": 2 + n, "item_id": item["id"], "output_index": 0, "content_index": 0, "delta": text, "logprobs": []})));
        }
    }
    events.push(("response.output_item.done", json!({"type": "response.output_item.done", "sequence_number": 5, "output_index": 0, "item": item})));
    events.push((
        "response.completed",
        json!({"type": "response.completed", "sequence_number": 6, "response": response("completed", json!([item]), usage)}),
    ));
    ("text/event-stream", sse(&events))
}

/// The Anthropic Messages API.
pub fn anthropic(request: &Value, turns: usize, seq: usize) -> (&'static str, String) {
    let turn = results(request["messages"].as_array(), |message| {
        message["content"].as_array().map_or(0, |blocks| {
            blocks.iter().filter(|b| b["type"] == "tool_result").count()
        })
    });
    let call = json!({"type": "tool_use", "id": format!("toolu_{turn:04}_{seq}"), "name": "noop", "input": {}});
    let (content, stop) = if turn < turns {
        (json!([call]), "tool_use")
    } else {
        (json!([{"type": "text", "text": "All done."}]), "end_turn")
    };
    let message = |content: Value, stop: Value, output: usize| {
        json!({"id": format!("msg_{seq}"), "type": "message", "role": "assistant", "model": "fake-model",
            "content": content, "stop_reason": stop, "stop_sequence": null,
            "usage": {"input_tokens": 100 + 20 * turn, "cache_creation_input_tokens": 0,
                "cache_read_input_tokens": 0, "output_tokens": output}})
    };
    if request["stream"] != json!(true) {
        return (
            "application/json",
            message(content, json!(stop), 10).to_string(),
        );
    }
    let mut events = vec![(
        "message_start",
        json!({"type": "message_start", "message": message(json!([]), Value::Null, 1)}),
    )];
    if turn < turns {
        events.push((
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": call}),
        ));
        events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": ""}})));
    } else {
        events.push(("content_block_start", json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}})));
        for text in ["All", " done."] {
            events.push(("content_block_delta", json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": text}})));
        }
    }
    events.push((
        "content_block_stop",
        json!({"type": "content_block_stop", "index": 0}),
    ));
    events.push(("message_delta", json!({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": null}, "usage": {"output_tokens": 10}})));
    events.push(("message_stop", json!({"type": "message_stop"})));
    ("text/event-stream", sse(&events))
}

/// The Gemini API.
pub fn gemini(path: &str, request: &Value, turns: usize, seq: usize) -> (&'static str, String) {
    let turn = results(request["contents"].as_array(), |content| {
        content["parts"].as_array().map_or(0, |parts| {
            parts
                .iter()
                .filter(|p| p.get("functionResponse").is_some())
                .count()
        })
    });
    let chunk = |parts: Value, finish: Option<&str>| {
        let mut candidate = json!({"content": {"role": "model", "parts": parts}, "index": 0});
        if let Some(finish) = finish {
            candidate["finishReason"] = json!(finish);
        }
        json!({"candidates": [candidate], "usageMetadata": {"promptTokenCount": 100 + 20 * turn,
            "candidatesTokenCount": 10, "totalTokenCount": 110 + 20 * turn},
            "modelVersion": "fake-model", "responseId": format!("r{seq}")})
    };
    let call = json!([{"functionCall": {"name": "noop", "args": {}}}]);
    if !path.contains(":streamGenerateContent") {
        let parts = if turn < turns {
            call
        } else {
            json!([{"text": "All done."}])
        };
        return ("application/json", chunk(parts, Some("STOP")).to_string());
    }
    let events: Vec<(&str, Value)> = if turn < turns {
        vec![("", chunk(call, Some("STOP")))]
    } else {
        vec![
            ("", chunk(json!([{"text": "All"}]), None)),
            ("", chunk(json!([{"text": " done."}]), Some("STOP"))),
        ]
    };
    ("text/event-stream", sse(&events))
}
