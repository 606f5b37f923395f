//! A `tracing` layer that records spans (their `otel.name`, parent and fields) and events
//! (their message, fields and the span they belong to), for tests of the GenAI spans without
//! an exporter. Install it with [`scoped`] (never `tracing::subscriber::set_default` directly)
//! on a current-thread runtime.
//!
//! Why [`scoped`]: `tracing` caches per callsite whether any subscriber wants it. With exactly
//! one scoped subscriber alive and no global one, a callsite first reached on *another* thread
//! (a test without a subscriber, a runtime worker) is asked only of that thread's subscriber —
//! none — and cached as "never": the capturing test then misses the span. A global subscriber
//! that records nothing but answers "sometimes" keeps every callsite asking the current
//! thread's subscriber, so each span test sees its own spans whatever runs next to it.
#![allow(dead_code, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, Interest};
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::Registry;
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

/// A recorded span.
#[derive(Debug, Clone, Default)]
pub struct SpanRecord {
    /// `otel.name` (or the span's name).
    pub name: String,
    /// The parent's index in [`Recorded::spans`].
    pub parent: Option<usize>,
    pub fields: BTreeMap<String, String>,
}

/// A recorded event.
#[derive(Debug, Clone, Default)]
pub struct EventRecord {
    pub message: String,
    /// The index of the span it belongs to.
    pub span: Option<usize>,
    pub fields: BTreeMap<String, String>,
}

#[derive(Debug, Default)]
pub struct Recorded {
    pub spans: Vec<SpanRecord>,
    pub events: Vec<EventRecord>,
}

impl Recorded {
    /// The name of the span an event belongs to.
    pub fn span_name(&self, index: Option<usize>) -> Option<&str> {
        index.map(|i| self.spans[i].name.as_str())
    }

    /// The events with `message`.
    pub fn events(&self, message: &str) -> Vec<&EventRecord> {
        self.events
            .iter()
            .filter(|e| e.message == message)
            .collect()
    }
}

#[derive(Clone, Default)]
pub struct Recorder(pub Arc<Mutex<Recorded>>);

struct Index(usize);

#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Recorder {
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let span = ctx.span(id).unwrap();
        let parent = span
            .parent()
            .and_then(|p| p.extensions().get::<Index>().map(|i| i.0));
        let name = fields
            .0
            .get("otel.name")
            .cloned()
            .unwrap_or_else(|| attrs.metadata().name().to_owned());
        let mut recorded = self.0.lock().unwrap();
        recorded.spans.push(SpanRecord {
            name,
            parent,
            fields: fields.0,
        });
        span.extensions_mut()
            .insert(Index(recorded.spans.len() - 1));
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(span) = ctx.span(id)
            && let Some(index) = span.extensions().get::<Index>().map(|i| i.0)
        {
            self.0.lock().unwrap().spans[index].fields.extend(fields.0);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let span = ctx
            .event_span(event)
            .and_then(|s| s.extensions().get::<Index>().map(|i| i.0));
        let message = fields.0.remove("message").unwrap_or_default();
        self.0.lock().unwrap().events.push(EventRecord {
            message,
            span,
            fields: fields.0,
        });
    }
}

/// A subscriber with a [`Recorder`], and what it records.
pub fn recording() -> (impl Subscriber + Send + Sync, Arc<Mutex<Recorded>>) {
    let recorder = Recorder::default();
    let recorded = recorder.0.clone();
    (Registry::default().with(recorder), recorded)
}

/// Install `subscriber` for this thread until the guard drops, with the process-wide quiet
/// subscriber in place first (see the module docs).
pub fn scoped(subscriber: impl Subscriber + Send + Sync + 'static) -> DefaultGuard {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| {
        // Fails only when a global subscriber is already set, which then asks as well.
        let _ = tracing::subscriber::set_global_default(Quiet);
    });
    tracing::subscriber::set_default(subscriber)
}

/// Records nothing; answers "sometimes" for every callsite so none is cached as "never".
struct Quiet;

impl Subscriber for Quiet {
    fn register_callsite(&self, _: &'static Metadata<'static>) -> Interest {
        Interest::sometimes()
    }
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        false
    }
    fn new_span(&self, _: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}
