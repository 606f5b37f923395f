//! Tool-loop overhead per turn, excluding model and tool time: a model that answers instantly
//! (a tool call, then a text) and a no-op tool, at history lengths 10, 100 and 1,000.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::sync::Arc;

use agcore::llm::{
    ChatModel, ChatRequest, ChatResponse, CycleConfig, FinishReason, LlmCycle, ModelDelta,
    ModelStream, OpenaiChatMessage, ProviderError, ToolCall,
};
use agcore::tools::prelude::*;
use agcore::tools::{PermissionChecker, PermissionConfig};
use criterion::{BatchSize, BenchmarkId, Criterion, criterion_group, criterion_main};
use futures::StreamExt;

/// Calls `noop` when the last message is the user's, answers with text otherwise.
struct InstantModel;

fn reply_for(request: &ChatRequest<'_>) -> ChatResponse {
    let message = match request.messages.last() {
        Some(OpenaiChatMessage::User { .. }) => OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                format!("call_{}", request.messages.len()),
                "noop",
                r#"{"x":1}"#,
            )],
        ),
        _ => OpenaiChatMessage::assistant_text("done"),
    };
    let stop_reason = Some(if message.tool_calls().is_empty() {
        FinishReason::Stop
    } else {
        FinishReason::ToolCalls
    });
    ChatResponse {
        message,
        stop_reason,
        usage: None,
        model: None,
        id: None,
    }
}

#[async_trait]
impl ChatModel for InstantModel {
    async fn chat(&self, request: ChatRequest<'_>) -> Result<ChatResponse, ProviderError> {
        Ok(reply_for(&request))
    }

    async fn chat_stream(&self, request: ChatRequest<'_>) -> Result<ModelStream, ProviderError> {
        let response = reply_for(&request);
        let mut deltas = Vec::new();
        match response.message.tool_calls().first() {
            Some(call) => deltas.push(Ok(ModelDelta::ToolCall {
                index: Some(0),
                id: Some(call.id.clone()),
                name: Some(call.function.name.clone()),
                arguments: Some(call.function.arguments.clone()),
            })),
            None => deltas.push(Ok(ModelDelta::Text("done".into()))),
        }
        deltas.push(Ok(ModelDelta::Finish(
            response.stop_reason.unwrap_or(FinishReason::Stop),
        )));
        Ok(Box::pin(futures::stream::iter(deltas)))
    }
}

struct Noop;

#[async_trait]
impl BaseTool for Noop {
    fn name(&self) -> &str {
        "noop"
    }
    fn description(&self) -> &str {
        "Does nothing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object", "properties": {"x": {"type": "integer"}}})
    }
    fn required_permissions(&self) -> Vec<Permission> {
        vec![Permission::Read]
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!("ok"))
    }
}

fn history(length: usize) -> Vec<OpenaiChatMessage> {
    (0..length)
        .map(|i| match i % 4 {
            0 => OpenaiChatMessage::user_text(format!("question {i} with some words in it")),
            1 => OpenaiChatMessage::assistant_tool_calls(
                None,
                vec![ToolCall::new(format!("h{i}"), "noop", r#"{"x":1}"#)],
            ),
            2 => OpenaiChatMessage::tool_result(format!("h{}", i - 1), "ok"),
            _ => OpenaiChatMessage::assistant_text(format!("answer {i} with some words in it")),
        })
        .collect()
}

fn bench_loop(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register(Arc::new(Noop)).unwrap();
    let model: Arc<dyn ChatModel> = Arc::new(InstantModel);

    // One call = two turns (a tool turn and the final answer); criterion reports per call.
    let mut group = c.benchmark_group("tool_loop_call_of_two_turns");
    for length in [10usize, 100, 1_000] {
        let messages = history(length);
        for streaming in [false, true] {
            let id = BenchmarkId::new(if streaming { "streaming" } else { "blocking" }, length);
            group.bench_function(id, |b| {
                b.to_async(&runtime).iter_batched(
                    || {
                        // Spare capacity, as a live conversation's history has (no realloc in the timed part).
                        let mut history = Vec::with_capacity(messages.len() + 16);
                        history.extend(messages.iter().cloned());
                        LlmCycle::from_history(model.clone(), CycleConfig::new("bench"), history)
                    },
                    |mut cycle| {
                        let registry = &registry;
                        async move {
                            if streaming {
                                let mut stream = cycle
                                    .submit_stream_with_tools("go".into(), registry)
                                    .await
                                    .unwrap();
                                while stream.next().await.is_some() {}
                            } else {
                                cycle
                                    .submit_with_tools("go".into(), registry)
                                    .await
                                    .unwrap();
                            }
                            cycle
                        }
                    },
                    BatchSize::SmallInput,
                );
            });
        }
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3)).warm_up_time(std::time::Duration::from_secs(1));
    targets = bench_loop
}
criterion_main!(benches);
