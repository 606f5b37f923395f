//! Large tool outputs kept whole outside the context (issue 12, item 4): an output over its
//! tool's limit reaches the model as head + tail + a marker, and the model reads the rest with
//! `read_output` from exactly where the marker says, page by page, seeing every line once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;

use agcore::context::ReadOutput;
use agcore::llm::testing::{ScriptedModel, ScriptedReply};
use agcore::llm::{CycleConfig, LlmCycle, OpenaiChatMessage, ToolCall};
use agcore::tools::prelude::*;

struct Big;

const LINES: usize = 3_000;

#[async_trait]
impl BaseTool for Big {
    fn name(&self) -> &str {
        "big"
    }
    fn description(&self) -> &str {
        "A long listing"
    }
    fn parameters(&self) -> Value {
        json!({"type": "object"})
    }
    async fn execute(&self, _args: Value) -> Result<Value, ToolError> {
        Ok(json!(
            (1..=LINES)
                .map(|i| format!("entry {i:05} {}\n", "z".repeat(i % 50)))
                .collect::<String>()
        ))
    }
}

/// `"offset": N` in the newest tool message's text (the marker's, or a page's `next:`).
fn next_offset(text: &str) -> Option<usize> {
    let line = text.lines().find(|l| l.contains("read_output with {"))?;
    if line.contains("this is the end") {
        return None;
    }
    line.rsplit("\"offset\": ")
        .next()?
        .split('}')
        .next()?
        .parse()
        .ok()
}

fn entries(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|l| l.strip_prefix("entry "))
        .filter_map(|l| l.get(..5)?.parse().ok())
        .collect()
}

#[tokio::test]
async fn a_large_output_is_read_whole_through_read_output() {
    let dir = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Big)).unwrap();
    registry
        .register(Arc::new(ReadOutput::new(dir.path())))
        .unwrap();
    // The model calls `big`, then reads on from wherever the last tool message says, until
    // the cut part is read (the tail it already has).
    let model = ScriptedModel::from_fn(|request| {
        let last = request.messages.last().and_then(|m| match m {
            OpenaiChatMessage::Tool { .. } => m.text(),
            _ => None,
        });
        let id = request.messages.iter().find_map(|m| {
            let text = m.text()?;
            let at = text.find("kept as out_")? + "kept as ".len();
            Some(text[at..].split(':').next()?.to_owned())
        });
        match (last, id) {
            (None, _) => ScriptedReply::tool_calls(vec![ToolCall::new("call_big", "big", "{}")]),
            (Some(text), Some(id)) => {
                let done = page_end(&text).is_some_and(|end| end >= tail_start(&request.messages));
                match next_offset(&text) {
                    Some(offset) if !done => ScriptedReply::tool_calls(vec![ToolCall::new(
                        format!("call_{offset}"),
                        "read_output",
                        json!({"id": id, "offset": offset}).to_string(),
                    )]),
                    _ => ScriptedReply::text("read it all"),
                }
            }
            (Some(_), None) => ScriptedReply::text("no marker"),
        }
    });
    let mut config = CycleConfig::new("scripted");
    config.max_turns = Some(100);
    // Room for every page: this test is about paging, not compaction.
    config.context_window = Some(1_000_000);
    config.context.spill_dir = Some(dir.path().to_owned());
    config.context.tool_output_limits = BTreeMap::from([("big".to_owned(), 8_000)]);
    let mut cycle = LlmCycle::new(model, config);
    let reply = cycle
        .submit_with_tools("list".to_owned(), &registry)
        .await
        .unwrap();
    let first: Vec<String> = cycle
        .messages()
        .iter()
        .filter_map(OpenaiChatMessage::text)
        .map(|t| t.chars().take(300).collect())
        .collect();
    assert_eq!(reply.text(), "read it all", "{first:?}");
    let tools: Vec<String> = cycle
        .messages()
        .iter()
        .filter(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        .filter_map(OpenaiChatMessage::text)
        .collect();
    // The first answer is cut to the tool's limit, with the marker.
    assert!(
        tools[0].len() < 8_000 && tools[0].contains("[... agcore cut "),
        "{}",
        &tools[0][..200]
    );
    // Head, pages, tail: every entry exactly once, in order.
    let marker_at = tools[0].find("[... agcore cut ").unwrap();
    let tail_at = tools[0][marker_at..].find('\n').unwrap() + marker_at + 1;
    let mut seen = entries(&tools[0][..marker_at]);
    for page in &tools[1..] {
        seen.extend(entries(page));
    }
    seen.extend(entries(&tools[0][tail_at..]));
    assert_eq!(seen, (1..=LINES).collect::<Vec<_>>());
    assert!(tools.len() > 3, "several pages: {}", tools.len());
}

/// The tail start the marker names (`bytes A-B of N`): B.
fn tail_start(messages: &[OpenaiChatMessage]) -> usize {
    messages
        .iter()
        .filter_map(OpenaiChatMessage::text)
        .find_map(|t| {
            let at = t.find("[... agcore cut ")?;
            let rest = &t[at..];
            let bytes = rest.split("(bytes ").nth(1)?;
            bytes.split('-').nth(1)?.split(' ').next()?.parse().ok()
        })
        .unwrap_or(usize::MAX)
}

/// B of a page's `[bytes A-B of N ...]` header.
fn page_end(text: &str) -> Option<usize> {
    let header = text.strip_prefix("[bytes ")?;
    header.split('-').nth(1)?.split(' ').next()?.parse().ok()
}
