//! W3C trace context for outgoing requests, without a dependency on OpenTelemetry: the
//! application that exports agcore's spans (the CLI does, with `tracing-opentelemetry`)
//! installs a provider of the current span's `traceparent` header value; agcore calls it when
//! it sends an MCP request (in `params._meta`, and as an HTTP header on streamable HTTP) and,
//! when [`OpenAiConfig::propagate_trace_context`](crate::llm::OpenAiConfig) is on, a model
//! request. Without a provider nothing is sent.
//!
//! ```
//! use agcore::vocab::trace_context;
//!
//! fn traceparent() -> Option<String> {
//!     // e.g. opentelemetry's TraceContextPropagator injecting the context of
//!     // `tracing::Span::current()` (tracing_opentelemetry::OpenTelemetrySpanExt::context).
//!     None
//! }
//! let _first = trace_context::set_traceparent_provider(traceparent);
//! assert_eq!(trace_context::current_traceparent(), None);
//! ```

use std::sync::OnceLock;

/// Returns the `traceparent` of the current `tracing` span (`00-{trace id}-{span id}-{flags}`),
/// or `None` when there is none to propagate.
pub type TraceparentProvider = fn() -> Option<String>;

static PROVIDER: OnceLock<TraceparentProvider> = OnceLock::new();

/// The header (and `_meta` key) the value goes in.
pub const TRACEPARENT: &str = "traceparent";

/// Install the process's provider. Only the first call counts (returns `false` after it).
pub fn set_traceparent_provider(provider: TraceparentProvider) -> bool {
    PROVIDER.set(provider).is_ok()
}

/// The current span's `traceparent`, when a provider is installed and it has one. A value
/// that is not a well-formed `traceparent` is dropped, so nothing else reaches a header.
pub fn current_traceparent() -> Option<String> {
    let provider = PROVIDER.get()?;
    provider().filter(|value| is_traceparent(value))
}

/// `00-` + 32 hex + `-` + 16 hex + `-` + 2 hex (lower case, version 00).
fn is_traceparent(value: &str) -> bool {
    let bytes = value.as_bytes();
    let hex = |range: std::ops::Range<usize>| {
        bytes.get(range).is_some_and(|part| {
            part.iter()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b))
        })
    };
    bytes.len() == 55
        && value.starts_with("00-")
        && hex(3..35)
        && bytes[35] == b'-'
        && hex(36..52)
        && bytes[52] == b'-'
        && hex(53..55)
}

/// A count or size as a span or event field that OpenTelemetry exports as an integer
/// (`intValue`): `tracing-opentelemetry` turns `i64` fields into integers but unsigned ones into
/// their text (its visitor has no `record_u64`), so numeric fields are recorded as `i64`
/// (saturating).
pub(crate) fn otel_int(value: impl TryInto<i64>) -> i64 {
    value.try_into().unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::is_traceparent;

    #[test]
    fn only_well_formed_values_pass() {
        assert!(is_traceparent(
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        ));
        for bad in [
            "",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01\r\nx: y",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7-01",
        ] {
            assert!(!is_traceparent(bad), "{bad:?}");
        }
    }
}
