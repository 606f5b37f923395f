//! Logs on stderr, and — when `OTEL_EXPORTER_OTLP_ENDPOINT` (or
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) is set — the library's GenAI spans exported over OTLP
//! (`http/protobuf`; `OTEL_SERVICE_NAME` names the service, default `agcore`).
//!
//! Export never slows or fails a run: spans go to a bounded queue that a background thread
//! sends in batches; when the collector is slow or away the queue fills and further spans are
//! dropped, and the number dropped is logged at exit. The queue is flushed when the process
//! exits (after Ctrl-C too: the run stops and `main` returns), for at most [`FLUSH_LIMIT`].

use std::time::Duration;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{BatchConfigBuilder, BatchSpanProcessor, SdkTracerProvider};
use tracing_subscriber::filter::{LevelFilter, Targets, filter_fn};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{EnvFilter, Layer};

/// Spans waiting for export; beyond this they are dropped (and counted).
const QUEUE: usize = 4096;

/// The longest one export may take, and the longest the flush at exit may take.
pub const FLUSH_LIMIT: Duration = Duration::from_secs(3);

/// Flushes the exported spans when dropped (at the end of `main`).
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
}

impl Drop for Telemetry {
    fn drop(&mut self) {
        if let Some(provider) = self.provider.take()
            && let Err(error) = provider.shutdown_with_timeout(FLUSH_LIMIT)
        {
            tracing::warn!("could not flush the trace export: {error}");
        }
    }
}

/// Install the subscriber: escaped logs on stderr at `verbose` (or `AGCORE_LOG`), and the
/// OTLP export when configured. Must be called before the tokio runtime starts (the
/// exporter's HTTP client is a blocking one, on the export thread) and after the secrets were
/// taken (the export thread is the process's second thread).
pub fn init(verbose: u8, writer: fn() -> crate::EscapedStderr) -> Telemetry {
    let default = match verbose {
        0 => "warn",
        1 => "info",
        _ => "debug",
    };
    let filter = EnvFilter::try_from_env("AGCORE_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    // Log lines quote servers (an MCP server's stderr goes to the log): written escaped, and
    // so without colours — a colour code and a hostile one look the same to the writer.
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .with_ansi(false)
        .with_filter(filter)
        .with_filter(filter_fn(loggable));
    let provider = exporter();
    let spans = provider.as_ref().map(|provider| {
        tracing_opentelemetry::layer()
            .with_tracer(provider.tracer("agcore"))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            // The library's spans only, whatever the log level.
            .with_filter(Targets::new().with_target("agcore", LevelFilter::INFO))
    });
    let exporting = spans.is_some();
    let installed = tracing_subscriber::registry()
        .with(logs)
        .with(spans)
        .try_init()
        .is_ok();
    if exporting && installed {
        // The library sends the current span's context to MCP servers (and to the model server
        // when `[model] propagate_trace_context` is on): only when spans are exported, so a
        // trace id never leaves the process without a trace behind it.
        agcore::vocab::trace_context::set_traceparent_provider(traceparent);
    }
    Telemetry { provider }
}

/// Targets whose debug and trace events carry OAuth secrets verbatim: rmcp 3.11 logs the
/// authorization code (`start exchange code for token: "…"`) and the token response there.
const OAUTH_SECRET_TARGETS: [&str; 1] = ["rmcp::transport::auth"];

/// Whether a log event may be written: never a debug or trace event of
/// [`OAUTH_SECRET_TARGETS`], whatever `-vv` or `AGCORE_LOG` ask for (agcore's own OAuth code
/// logs what it does without secrets, under `agcore::mcp`).
fn loggable(metadata: &tracing::Metadata<'_>) -> bool {
    *metadata.level() <= tracing::Level::INFO
        || !OAUTH_SECRET_TARGETS
            .iter()
            .any(|target| metadata.target().starts_with(target))
}

/// The W3C `traceparent` of the current `tracing` span, through its OpenTelemetry context.
fn traceparent() -> Option<String> {
    use opentelemetry::propagation::TextMapPropagator;
    use tracing_opentelemetry::OpenTelemetrySpanExt;
    let context = tracing::Span::current().context();
    let mut carrier = std::collections::HashMap::new();
    opentelemetry_sdk::propagation::TraceContextPropagator::new()
        .inject_context(&context, &mut carrier);
    carrier.remove("traceparent")
}

/// The OTLP pipeline, when an endpoint is configured.
fn exporter() -> Option<SdkTracerProvider> {
    let configured = |name: &str| std::env::var(name).is_ok_and(|value| !value.is_empty());
    if !configured("OTEL_EXPORTER_OTLP_ENDPOINT")
        && !configured("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    {
        return None;
    }
    let protocol = std::env::var("OTEL_EXPORTER_OTLP_PROTOCOL").unwrap_or_default();
    if !protocol.is_empty() && protocol != "http/protobuf" {
        eprintln!(
            "warning: OTEL_EXPORTER_OTLP_PROTOCOL={} is not supported (only http/protobuf); no traces are exported",
            agcore::display::escape_for_terminal(&protocol)
        );
        return None;
    }
    let exporter = match opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(Protocol::HttpBinary)
        .with_timeout(FLUSH_LIMIT)
        .build()
    {
        Ok(exporter) => exporter,
        Err(error) => {
            eprintln!("warning: no traces are exported: {error}");
            return None;
        }
    };
    let processor = BatchSpanProcessor::builder(exporter)
        .with_batch_config(
            BatchConfigBuilder::default()
                .with_max_queue_size(QUEUE)
                .build(),
        )
        .build();
    let service = std::env::var("OTEL_SERVICE_NAME")
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "agcore".to_owned());
    Some(
        SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_resource(Resource::builder().with_service_name(service).build())
            .build(),
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::sync::{Arc, Mutex};

    use super::*;

    /// Collects what the log layer writes.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn rmcp_oauth_debug_lines_never_reach_the_log_even_at_trace() {
        let captured = Captured::default();
        let writer = captured.clone();
        let logs = tracing_subscriber::fmt::layer()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .with_filter(EnvFilter::new("trace"))
            .with_filter(filter_fn(loggable));
        let subscriber = tracing_subscriber::registry().with(logs);
        tracing::subscriber::with_default(subscriber, || {
            // What rmcp 3.11 logs while exchanging the code (src/transport/auth.rs).
            tracing::debug!(target: "rmcp::transport::auth", "start exchange code for token: {:?}", "c0de-SECRET");
            tracing::trace!(target: "rmcp::transport::auth::inner", "token c0de-SECRET");
            tracing::warn!(target: "rmcp::transport::auth", "authorization server issuer changed");
            tracing::debug!(target: "agcore::mcp", "authorized");
            tracing::debug!(target: "rmcp::service", "service debug");
        });
        let text = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
        assert!(!text.contains("c0de-SECRET"), "{text}");
        assert!(text.contains("issuer changed"), "{text}");
        assert!(text.contains("authorized"), "{text}");
        assert!(text.contains("service debug"), "{text}");
    }
}
