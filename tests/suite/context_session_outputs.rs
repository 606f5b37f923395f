//! Large tool outputs of a run with a session go to the session store (SQLite and a real
//! PostgreSQL under `scripts/with-postgres.sh`), not to a spill file, and `read_output` pages
//! them from there — also from a store opened anew by address after the run (as a resumed
//! process does): head + pages + tail is the output, every byte once.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use agcore::context::spill::{KeptOutput, MAX_PAGE_BYTES};
use agcore::context::{OutputSource, ReadOutput};
use agcore::llm::testing::{ScriptedModel, ScriptedReply};
use agcore::llm::{CycleConfig, LlmCycle, OpenaiChatMessage, ToolCall};
use agcore::run::RunRequest;
use agcore::session::{
    LockMode, PostgresStore, SessionJournal, SessionOutputs, SessionStore, SqliteStore,
};
use agcore::tools::prelude::*;
use tokio::time::timeout;

const BOUND: Duration = Duration::from_secs(60);

struct Big;

fn big_output() -> String {
    (1..=3_000)
        .map(|i| format!("entry {i:05} {} ✓\n", "z".repeat(i % 50)))
        .collect()
}

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
        Ok(json!(big_output()))
    }
}

/// The numbers of a marker: the id, the offset to read from and where the tail starts.
fn marker(text: &str) -> (String, usize, usize) {
    let at = text.find("[... agcore cut ").expect("a cut marker");
    let line = &text[at..text[at..].find('\n').unwrap() + at];
    let id = line
        .split("kept as ")
        .nth(1)
        .unwrap()
        .split(':')
        .next()
        .unwrap()
        .to_owned();
    let offset: usize = line
        .split("\"offset\": ")
        .nth(1)
        .unwrap()
        .split('}')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let tail: usize = line
        .split(&format!("(bytes {offset}-"))
        .nth(1)
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    (id, offset, tail)
}

async fn body(store: Arc<dyn SessionStore>, url: String) {
    let spill = tempfile::tempdir().unwrap();
    {
        let _lease = store.lock("work/1", LockMode::FailFast).await.unwrap();
        let (journal, _) = SessionJournal::open(store.clone(), "work/1").await.unwrap();
        let mut registry = ToolRegistry::new();
        registry.register(Arc::new(Big)).unwrap();
        let model = ScriptedModel::from_fn(|request| {
            if request
                .messages
                .iter()
                .any(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
            {
                ScriptedReply::text("listed")
            } else {
                ScriptedReply::tool_calls(vec![ToolCall::new("call_big", "big", "{}")])
            }
        });
        let mut config = CycleConfig::new("scripted");
        config.context_window = Some(1_000_000);
        config.context.spill_dir = Some(spill.path().to_owned());
        config.context.tool_output_limits = BTreeMap::from([("big".to_owned(), 8_000)]);
        let mut cycle = LlmCycle::new(model, config);
        let outcome = cycle
            .run_with(
                RunRequest::prompt("list")
                    .with_tools(&registry)
                    .with_journal(&journal),
            )
            .await
            .unwrap();
        assert!(format!("{outcome:?}").contains("listed"), "{outcome:?}");
    }
    // Nothing went to the spill directory: the session has it.
    assert_eq!(std::fs::read_dir(spill.path()).unwrap().count(), 0);
    drop(store);

    // As a resumed process: the store opened anew by its address, the session replayed.
    let store = agcore::session::open(&url).await.unwrap();
    let _lease = store.lock("work/1", LockMode::FailFast).await.unwrap();
    let (journal, restored) = SessionJournal::open(store.clone(), "work/1").await.unwrap();
    let cut = restored
        .history
        .iter()
        .find(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        .and_then(OpenaiChatMessage::text)
        .unwrap();
    assert!(cut.len() < 8_000, "the model got the cut output");
    let (id, offset, tail) = marker(&cut);
    let kept = store.get_output("work/1", &id).await.unwrap().unwrap();
    let whole = big_output();
    assert_eq!(
        kept,
        KeptOutput {
            content: whole.clone(),
            tail_start: Some(tail)
        }
    );

    // Head + the pages `read_output` returns + tail: the output, every byte once.
    let reader = ReadOutput::from_source(Arc::new(journal.outputs()));
    let marker_at = cut.find("[... agcore cut ").unwrap();
    let tail_at = cut[marker_at..].find('\n').unwrap() + marker_at + 1;
    let mut seen = cut[..marker_at].to_owned();
    let mut at = offset;
    let mut pages = 0;
    while at < tail {
        let page = reader.read(&id, at).await.unwrap();
        assert_eq!(page.offset, at);
        assert!(page.text.len() <= MAX_PAGE_BYTES);
        assert!(
            page.end == tail || page.text.ends_with('\n'),
            "pages end at lines"
        );
        seen.push_str(&page.text);
        at = page.end;
        pages += 1;
    }
    assert_eq!(at, tail, "the last page ends where the tail starts");
    assert!(pages > 1);
    seen.push_str(&cut[tail_at..]);
    assert_eq!(seen, whole);
    // Through the tool as the model calls it: the same first page.
    let answer = reader
        .execute(json!({"id": id, "offset": offset}))
        .await
        .unwrap();
    let text = answer.as_str().unwrap();
    assert!(
        text.starts_with(&format!("[bytes {offset}-")),
        "{}",
        &text[..80]
    );
    // Another session does not see it; ids are checked; deleting the session deletes it.
    let other = SessionOutputs::new(store.clone(), "work/2");
    assert!(other.load(&id).await.unwrap().is_none());
    assert!(reader.read("../etc/passwd", 0).await.is_err());
    drop(_lease);
    assert!(store.delete("work/1").await.unwrap());
    assert!(store.get_output("work/1", &id).await.unwrap().is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_large_outputs_live_in_the_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sessions.db");
    let store: Arc<dyn SessionStore> = Arc::new(SqliteStore::open(&path).await.unwrap());
    timeout(BOUND, body(store, format!("sqlite:{}", path.display())))
        .await
        .expect("test timed out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_large_outputs_live_in_the_session() {
    let Some(url) = support::session::fresh_db("context_outputs").await else {
        return;
    };
    let store: Arc<dyn SessionStore> = Arc::new(PostgresStore::connect(&url).await.unwrap());
    timeout(BOUND, body(store, url))
        .await
        .expect("test timed out");
}

/// Without a session the spill file is kept, as before.
#[tokio::test]
async fn without_a_session_the_output_goes_to_a_spill_file() {
    let spill = tempfile::tempdir().unwrap();
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(Big)).unwrap();
    let model = ScriptedModel::from_fn(|request| {
        if request
            .messages
            .iter()
            .any(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        {
            ScriptedReply::text("listed")
        } else {
            ScriptedReply::tool_calls(vec![ToolCall::new("call_big", "big", "{}")])
        }
    });
    let mut config = CycleConfig::new("scripted");
    config.context_window = Some(1_000_000);
    config.context.spill_dir = Some(spill.path().to_owned());
    config.context.tool_output_limits = BTreeMap::from([("big".to_owned(), 8_000)]);
    let mut cycle = LlmCycle::new(model, config);
    cycle
        .submit_with_tools("list".to_owned(), &registry)
        .await
        .unwrap();
    let names: Vec<String> = std::fs::read_dir(spill.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
    let cut = cycle
        .messages()
        .iter()
        .find(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        .and_then(OpenaiChatMessage::text)
        .unwrap();
    let (id, offset, _) = marker(&cut);
    assert!(names.contains(&format!("{id}.txt")));
    let page = ReadOutput::new(spill.path())
        .read(&id, offset)
        .await
        .unwrap();
    assert_eq!(page.text, big_output()[offset..page.end]);
}
