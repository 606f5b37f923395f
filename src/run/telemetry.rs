//! `tracing` spans on the OpenTelemetry GenAI conventions: `invoke_agent` for a run, `chat
//! {model}` for each model request, `execute_tool {name}` for each tool call. A subscriber of
//! the caller's sees them; `tracing-opentelemetry` turns them into OpenTelemetry spans (the
//! `otel.name` field is the span's name, `otel.kind` its kind, `otel.status_code` its status).
//!
//! Message and argument content is recorded only when
//! `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (read once per process).

use std::sync::OnceLock;

use tracing::Span;
use tracing::field::Empty;

use crate::llm::model::ChatModel;
use crate::run::error::LlmError;
use crate::run::hooks::Compaction;
use crate::vocab::trace_context::otel_int;
use crate::vocab::{ChatResponse, FinishReason, OpenaiChatMessage, ToolAnswer, ToolCall, Usage};

/// The variable that opts in to message and argument content in spans.
pub const CAPTURE_CONTENT_VARIABLE: &str = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT";

/// Whether spans carry content.
fn capture_content() -> bool {
    static CAPTURE: OnceLock<bool> = OnceLock::new();
    *CAPTURE.get_or_init(|| {
        std::env::var(CAPTURE_CONTENT_VARIABLE)
            .is_ok_and(|value| value.eq_ignore_ascii_case("true"))
    })
}

/// The span of a run.
pub(crate) fn agent_span(
    parent: Option<&Span>,
    provider: &str,
    model: &str,
    agent: Option<&str>,
) -> Span {
    // A sub-agent's run sits under its parent's `execute_tool` span.
    let span = match parent {
        Some(parent) => tracing::info_span!(
            parent: parent,
            "invoke_agent",
            otel.name = Empty,
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = provider,
            gen_ai.request.model = model,
            gen_ai.agent.name = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            error.type = Empty,
        ),
        None => tracing::info_span!(
            "invoke_agent",
            otel.name = Empty,
            otel.kind = "internal",
            otel.status_code = Empty,
            gen_ai.operation.name = "invoke_agent",
            gen_ai.provider.name = provider,
            gen_ai.request.model = model,
            gen_ai.agent.name = Empty,
            gen_ai.usage.input_tokens = Empty,
            gen_ai.usage.output_tokens = Empty,
            gen_ai.usage.cache_read.input_tokens = Empty,
            gen_ai.usage.cache_creation.input_tokens = Empty,
            error.type = Empty,
        ),
    };
    match agent {
        Some(agent) => {
            span.record(
                "otel.name",
                format_args!("invoke_agent {agent}").to_string(),
            );
            span.record("gen_ai.agent.name", agent);
        }
        None => {
            span.record("otel.name", "invoke_agent");
        }
    }
    span
}

/// The host and port of the model's server (`server.address`, `server.port`), from its base
/// URL; parsed once per run.
pub(crate) struct Server {
    address: String,
    port: Option<u16>,
}

/// The server of `model`, when it is reached over HTTP.
pub(crate) fn server_of(model: &dyn ChatModel) -> Option<Server> {
    let url = reqwest::Url::parse(model.base_url()?).ok()?;
    Some(Server {
        address: url.host_str()?.to_owned(),
        port: url.port_or_known_default(),
    })
}

/// The span of one model request, a child of the run's.
pub(crate) fn chat_span(
    parent: &Span,
    provider: &str,
    model: &str,
    server: Option<&Server>,
    messages: &[OpenaiChatMessage],
) -> Span {
    let span = tracing::info_span!(
        parent: parent,
        "chat",
        otel.name = format_args!("chat {model}").to_string(),
        otel.kind = "client",
        otel.status_code = Empty,
        gen_ai.operation.name = "chat",
        gen_ai.provider.name = provider,
        gen_ai.request.model = model,
        gen_ai.response.model = Empty,
        gen_ai.response.id = Empty,
        gen_ai.response.finish_reasons = Empty,
        gen_ai.usage.input_tokens = Empty,
        gen_ai.usage.output_tokens = Empty,
        gen_ai.usage.cache_read.input_tokens = Empty,
        gen_ai.usage.cache_creation.input_tokens = Empty,
        gen_ai.input.messages = Empty,
        gen_ai.output.messages = Empty,
        server.address = server.map(|server| server.address.as_str()),
        server.port = server.and_then(|server| server.port).map(i64::from),
        error.type = Empty,
        agcore.model_switch = Empty,
    );
    if capture_content() && !span.is_disabled() {
        span.record(
            "gen_ai.input.messages",
            serde_json::to_string(messages).unwrap_or_default(),
        );
    }
    span
}

/// Record a model request's outcome on its span.
pub(crate) fn record_reply(span: &Span, reply: Result<&ChatResponse, &LlmError>) {
    if span.is_disabled() {
        return;
    }
    match reply {
        Ok(reply) => {
            if let Some(model) = &reply.model {
                span.record("gen_ai.response.model", model.as_str());
            }
            if let Some(id) = &reply.id {
                span.record("gen_ai.response.id", id.as_str());
            }
            let reason = reply.stop_reason.as_ref().map_or("stop", finish_name);
            // A string array on the wire; `tracing` has no arrays, so its JSON text.
            span.record(
                "gen_ai.response.finish_reasons",
                format_args!("[\"{reason}\"]").to_string(),
            );
            record_usage(span, reply.usage);
            if capture_content() {
                span.record(
                    "gen_ai.output.messages",
                    serde_json::to_string(&[&reply.message]).unwrap_or_default(),
                );
            }
        }
        Err(error) => record_error(span, error),
    }
}

/// Record usage (a reply's, or the run's sum) by token kind: input (cache reads and writes
/// included), output (reasoning included), and the cache reads and writes when reported.
pub(crate) fn record_usage(span: &Span, usage: Option<Usage>) {
    if let Some(usage) = usage {
        span.record("gen_ai.usage.input_tokens", otel_int(usage.prompt_tokens));
        span.record(
            "gen_ai.usage.output_tokens",
            otel_int(usage.completion_tokens),
        );
        if let Some(cached) = usage.cached_tokens {
            span.record("gen_ai.usage.cache_read.input_tokens", otel_int(cached));
        }
        if let Some(written) = usage.cache_write_tokens {
            span.record(
                "gen_ai.usage.cache_creation.input_tokens",
                otel_int(written),
            );
        }
    }
}

/// Mark a span failed with the error's kind.
pub(crate) fn record_error(span: &Span, error: &LlmError) {
    span.record("error.type", error.kind().to_string());
    span.record("otel.status_code", "ERROR");
}

/// The span of one tool call, a child of the run's.
pub(crate) fn tool_span(parent: &Span, call: &ToolCall) -> Span {
    let name = &call.function.name;
    let span = tracing::info_span!(
        parent: parent,
        "execute_tool",
        otel.name = format_args!("execute_tool {name}").to_string(),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name.as_str(),
        gen_ai.tool.call.id = call.id.as_str(),
        gen_ai.tool.type = "function",
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
        error.type = Empty,
    );
    if capture_content() && !span.is_disabled() {
        span.record(
            "gen_ai.tool.call.arguments",
            call.function.arguments.as_str(),
        );
    }
    span
}

/// The span of a hosted tool's call (the provider ran it, within the `chat` request):
/// `execute_tool {name}` of type `extension`, made and closed when its result arrives, failed
/// when the provider reports a failure.
pub(crate) fn hosted_tool_span(parent: &Span, id: &str, name: &str, is_error: bool) {
    let span = tracing::info_span!(
        parent: parent,
        "execute_tool",
        otel.name = format_args!("execute_tool {name}").to_string(),
        otel.kind = "internal",
        otel.status_code = Empty,
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = name,
        gen_ai.tool.call.id = id,
        gen_ai.tool.type = "extension",
        error.type = Empty,
    );
    if is_error {
        span.record("error.type", "tool_error");
        span.record("otel.status_code", "ERROR");
    }
}

/// Record a tool call's answer on its span (a failed call: `error.type` = `tool_error`).
pub(crate) fn record_answer(span: &Span, answer: &ToolAnswer) {
    if span.is_disabled() {
        return;
    }
    if answer.is_error {
        span.record("error.type", "tool_error");
        span.record("otel.status_code", "ERROR");
    }
    if capture_content() {
        span.record("gen_ai.tool.call.result", answer.content.as_str());
    }
}

fn finish_name(reason: &FinishReason) -> &str {
    match reason {
        FinishReason::Stop => "stop",
        FinishReason::Length => "length",
        FinishReason::ToolCalls => "tool_calls",
        FinishReason::ContentFilter => "content_filter",
        FinishReason::Other(other) => other.as_str(),
    }
}

/// A compaction as an event of the run's span (`agcore.compaction`: its tier, 1–3, and the
/// estimated prompt tokens before and after).
pub(crate) fn compaction_event(parent: &Span, compaction: &Compaction) {
    tracing::event!(
        target: "agcore::context",
        parent: parent,
        tracing::Level::INFO,
        agcore.compaction.tier = i64::from(compaction.tier.number()),
        agcore.compaction.tokens_before = otel_int(compaction.tokens_before),
        agcore.compaction.tokens_after = otel_int(compaction.tokens_after),
        agcore.compaction.messages = otel_int(compaction.messages),
        agcore.compaction.window = otel_int(compaction.window),
        "compaction"
    );
}
