//! Input that streams, on the run's side: as the model streams a call's arguments, parse the
//! partial JSON (with `jiter`'s partial mode) and report the call — its best title so far and
//! its partial input ([`StreamEvent::ToolCallUpdate`]) — and feed a tool that watches its input
//! ([`crate::tools::BaseTool::watch_input`]).
//!
//! Bounded: nothing is buffered or parsed for a call nobody listens to (the registry did not ask
//! for updates and the tool does not watch); otherwise a call's text is parsed again only once
//! it grew by [`MIN_STEP`] bytes and by a quarter since the last parse (so the work over a
//! stream is linear in its length however finely it is cut), or [`MAX_QUIET`] after the last
//! parse when something new arrived. The watcher of a call gets its final input only from
//! the registry, after the gates ([`crate::tools::streaming`]); it is stopped when the reply is
//! discarded, and at the latest [`WATCHER_GRACE`] after its batch ended.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::run::event::StreamEvent;
use crate::tools::base::BaseTool;
use crate::tools::context::{ToolContext, ToolEvents};
use crate::tools::event::ToolCallUpdate;
use crate::tools::registry::ToolRegistry;
use crate::tools::streaming::{ApprovalFeed, InputFeed};

/// The fewest new bytes that make a call's text worth parsing again.
pub(crate) const MIN_STEP: usize = 64;

/// The longest a call's new bytes wait for a parse.
pub(crate) const MAX_QUIET: Duration = Duration::from_millis(50);

/// How long a watcher may go on after its call's batch ended.
pub(crate) const WATCHER_GRACE: Duration = Duration::from_millis(200);

/// The most bytes of one call's arguments buffered for parsing (a model's reply is bounded
/// too; past this the call is no longer reported early).
const MAX_BUFFERED: usize = 4 * 1024 * 1024;

/// The calls of the model's reply being streamed, and the watchers of their input.
#[derive(Default)]
pub(crate) struct InputStreams {
    /// By the call's position in the reply.
    calls: HashMap<u32, StreamedCall>,
    /// The approval end of each watched call whose arguments are complete, by call id: handed
    /// to the registry with the call's context.
    feeds: HashMap<String, ApprovalFeed>,
    /// The watchers' tasks, aborted when the batch ends or the reply is discarded.
    watchers: Vec<tokio::task::JoinHandle<()>>,
}

struct StreamedCall {
    id: Option<String>,
    name: Option<String>,
    /// Whether anyone listens (decided once the name is known).
    listened: Option<Listen>,
    text: String,
    parsed_len: usize,
    last_parse: Option<Instant>,
}

struct Listen {
    tool: Option<Arc<dyn BaseTool>>,
    updates: bool,
    feed: Option<InputFeed>,
}

impl Drop for InputStreams {
    fn drop(&mut self) {
        self.abort_watchers();
    }
}

impl InputStreams {
    /// Take in one event of the model's stream; the update to report for it, if any.
    pub(crate) fn on_event(
        &mut self,
        event: &StreamEvent,
        registry: Option<&ToolRegistry>,
        events: &ToolEvents,
    ) -> Option<StreamEvent> {
        match event {
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                let registry = registry?;
                let call = self.calls.entry(*index).or_insert_with(|| StreamedCall {
                    id: None,
                    name: None,
                    listened: None,
                    text: String::new(),
                    parsed_len: 0,
                    last_parse: None,
                });
                if call.id.is_none() {
                    call.id.clone_from(id);
                }
                if call.name.is_none() {
                    call.name.clone_from(name);
                }
                let (Some(call_id), Some(tool_name)) = (call.id.clone(), call.name.clone()) else {
                    call.text.push_str(arguments);
                    return None;
                };
                if call.listened.is_none() {
                    let listen = listen(registry, &call_id, &tool_name, events, &mut self.watchers);
                    call.listened = Some(listen);
                }
                let listen = call.listened.as_ref()?;
                if !listen.updates && listen.feed.is_none() {
                    return None;
                }
                if call.text.len() + arguments.len() > MAX_BUFFERED {
                    return None;
                }
                call.text.push_str(arguments);
                let grown = call.text.len() - call.parsed_len;
                let due = grown >= MIN_STEP.max(call.parsed_len / 4)
                    || call.last_parse.is_none_or(|at| at.elapsed() >= MAX_QUIET);
                if grown == 0 || !due {
                    return None;
                }
                call.parsed_len = call.text.len();
                call.last_parse = Some(Instant::now());
                let value = parse_partial(&call.text)?;
                if let Some(feed) = &listen.feed {
                    feed.partial(value.clone());
                }
                if !listen.updates {
                    return None;
                }
                let title = match &listen.tool {
                    Some(tool) => tool.title(&value),
                    None => tool_name,
                };
                Some(StreamEvent::ToolCallUpdate {
                    id: call_id,
                    update: ToolCallUpdate::streamed_input(title, value),
                })
            }
            StreamEvent::ToolCallReady { id, .. } => {
                let index = self
                    .calls
                    .iter()
                    .find(|(_, call)| call.id.as_deref() == Some(id))
                    .map(|(index, _)| *index);
                if let Some(call) = index.and_then(|index| self.calls.remove(&index))
                    && let Some(feed) = call.listened.and_then(|listen| listen.feed)
                {
                    self.feeds.insert(id.clone(), feed.finish_partials());
                }
                None
            }
            StreamEvent::Retry { .. } => {
                // The reply so far is void: so is what its calls' watchers saw.
                self.reset();
                None
            }
            _ => None,
        }
    }

    /// The approval end of call `id`'s watcher, if it has one.
    pub(crate) fn take_feed(&mut self, id: &str) -> Option<ApprovalFeed> {
        self.feeds.remove(id)
    }

    /// The batch ended: a watcher not given its approved input by now learns it never will
    /// (`None`), and gets [`WATCHER_GRACE`] to finish before it is stopped.
    pub(crate) async fn finish(&mut self) {
        self.calls.clear();
        self.feeds.clear();
        if self.watchers.is_empty() {
            return;
        }
        let deadline = tokio::time::Instant::now() + WATCHER_GRACE;
        for watcher in self.watchers.drain(..) {
            let abort = watcher.abort_handle();
            if tokio::time::timeout_at(deadline, watcher).await.is_err() {
                abort.abort();
            }
        }
    }

    /// Forget every call and stop every watcher at once (the reply was discarded, or a new one
    /// begins).
    pub(crate) fn reset(&mut self) {
        self.calls.clear();
        self.feeds.clear();
        self.abort_watchers();
    }

    fn abort_watchers(&mut self) {
        for watcher in self.watchers.drain(..) {
            watcher.abort();
        }
    }
}

/// Who listens to call `call_id` of `tool_name`: the registry's updates, the tool's watcher
/// (started here, on its own task, inside the call's context).
fn listen(
    registry: &ToolRegistry,
    call_id: &str,
    tool_name: &str,
    events: &ToolEvents,
    watchers: &mut Vec<tokio::task::JoinHandle<()>>,
) -> Listen {
    let tool = registry.get(tool_name);
    let feed = match &tool {
        Some(tool) if tool.supports_input_streaming() => {
            let (feed, input) = InputFeed::new(call_id);
            let watcher = Arc::clone(tool);
            // No idempotency key yet (keys are given when the tool turn opens): a watcher
            // prepares and reports, it calls no service.
            let context = ToolContext::new(call_id, "").with_events(events.for_call());
            watchers.push(tokio::spawn(context.scope(async move {
                watcher.watch_input(input).await;
            })));
            Some(feed)
        }
        _ => None,
    };
    Listen {
        tool,
        updates: registry.input_updates(),
        feed,
    }
}

/// The value of a partial JSON text, as far as it goes (an unfinished string with its text so
/// far); `None` when even that does not parse.
pub(crate) fn parse_partial(text: &str) -> Option<Value> {
    let value = jiter::JsonValue::parse_with_config(
        text.as_bytes(),
        false,
        jiter::PartialMode::TrailingStrings,
    )
    .ok()?;
    Some(to_serde(value))
}

fn to_serde(value: jiter::JsonValue<'_>) -> Value {
    use jiter::JsonValue;
    #[allow(unreachable_patterns)]
    match value {
        JsonValue::Null => Value::Null,
        JsonValue::Bool(b) => Value::Bool(b),
        JsonValue::Int(i) => Value::from(i),
        JsonValue::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        JsonValue::Str(s) => Value::String(s.into_owned()),
        JsonValue::Array(items) => Value::Array(
            Arc::unwrap_or_clone(items)
                .into_iter()
                .map(to_serde)
                .collect(),
        ),
        JsonValue::Object(fields) => Value::Object(
            Arc::unwrap_or_clone(fields)
                .into_iter()
                .map(|(key, value)| (key.into_owned(), to_serde(value)))
                .collect::<Map<String, Value>>(),
        ),
        // A big integer (only with jiter's bigint feature, which agcore leaves off).
        _ => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partial_object_keeps_its_unfinished_string() {
        let value = parse_partial(r#"{"path": "src/ma"#);
        assert_eq!(value, Some(serde_json::json!({"path": "src/ma"})));
        assert_eq!(
            parse_partial(r#"{"a": [1, 2"#),
            Some(serde_json::json!({"a": [1, 2]}))
        );
    }
}
