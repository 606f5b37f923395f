//! Session-store figures (issue 11): commit-per-step latency, 8 concurrent workers over 100
//! sessions, and loading a 1,000-step session — for SQLite and, given a URL, PostgreSQL.
//!
//! ```text
//! scripts/with-postgres.sh cargo run --example session_bench -- [--commits 2000]
//! cargo run --example session_bench -- --postgres postgres://user@127.0.0.1:5432/db
//! ```
//!
//! Without `--postgres` it uses `AGCORE_TEST_POSTGRES_URL` when set, else SQLite only. Each
//! PostgreSQL run works in a fresh database it creates (`agcore_bench_<pid>`). A commit is one
//! `append` of one ~1 KB step; latencies are wall-clock per call. The concurrent run checks
//! every history afterwards: dense sequence numbers, each turn's steps contiguous.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use agcore::session::{LockMode, PostgresStore, SessionStore, SqliteStore, Step};
use serde_json::json;

fn payload(i: u64) -> serde_json::Value {
    json!({
        "role": "assistant",
        "content": format!("step {i}: {}", "lorem ipsum dolor sit amet ".repeat(36)),
        "tool_calls": [{"id": format!("call_{i}"), "name": "read_file", "arguments": {"path": "src/lib.rs"}}],
    })
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

fn ms(d: Duration) -> String {
    format!("{:.3} ms", d.as_secs_f64() * 1e3)
}

/// Process CPU time (all threads): what a commit costs the client, whatever thread runs it.
fn cpu_now() -> Duration {
    Duration::from(nix::time::clock_gettime(nix::time::ClockId::CLOCK_PROCESS_CPUTIME_ID).unwrap())
}

/// Median and p99 wall time per commit, and the mean process CPU per commit.
async fn commit_latency(store: &dyn SessionStore, n: u64) -> (Duration, Duration, Duration) {
    let mut lat = Vec::with_capacity(n as usize);
    let cpu = cpu_now();
    for seq in 0..n {
        let step = [Step::new(seq, "message", payload(seq))];
        let t = Instant::now();
        store.append("latency", seq, &step).await.unwrap();
        lat.push(t.elapsed());
    }
    let cpu = (cpu_now() - cpu) / u32::try_from(n).unwrap();
    lat.sort();
    (pct(&lat, 0.5), pct(&lat, 0.99), cpu)
}

/// [`commit_latency`] with every commit fenced by the session's lease (`append_fenced`).
async fn fenced_commit_latency(store: &dyn SessionStore, n: u64) -> (Duration, Duration) {
    let lease = store.lock("fenced", LockMode::FailFast).await.unwrap();
    let fence = lease.fence().expect("a store with lease epochs");
    let mut lat = Vec::with_capacity(n as usize);
    for seq in 0..n {
        let step = [Step::new(seq, "message", payload(seq))];
        let t = Instant::now();
        store.append_fenced(&fence, seq, &step).await.unwrap();
        lat.push(t.elapsed());
    }
    lat.sort();
    (pct(&lat, 0.5), pct(&lat, 0.99))
}

async fn load_1000(store: &dyn SessionStore) -> Duration {
    let steps: Vec<Step> = (0..1000)
        .map(|i| Step::new(i, "message", payload(i)))
        .collect();
    for chunk in steps.chunks(100) {
        store.append("big", chunk[0].seq, chunk).await.unwrap();
    }
    let mut lat = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let s = store.load("big").await.unwrap().unwrap();
        lat.push(t.elapsed());
        assert_eq!(s.steps.len(), 1000);
    }
    lat.sort();
    pct(&lat, 0.5)
}

/// 8 workers, each visiting all 100 sessions once: lock (wait), load, commit a 3-step turn one
/// step per commit, release. Returns (turns/s, turn p99) after checking every history.
async fn concurrent(store: Arc<dyn SessionStore>) -> (f64, Duration, Duration) {
    const WORKERS: usize = 8;
    const SESSIONS: usize = 100;
    const TURN: u64 = 3;
    let start = Instant::now();
    let tasks: Vec<_> = (0..WORKERS)
        .map(|w| {
            let store = Arc::clone(&store);
            tokio::spawn(async move {
                let mut lat = Vec::new();
                for j in 0..SESSIONS {
                    let name = format!("c-{:03}", (j + w * 2) % SESSIONS);
                    let t = Instant::now();
                    let lease = store
                        .lock(
                            &name,
                            LockMode::Wait {
                                timeout: Duration::from_secs(60),
                            },
                        )
                        .await
                        .unwrap();
                    let next = store.load(&name).await.unwrap().map_or(0, |s| s.next_seq());
                    for i in 0..TURN {
                        let step = Step::new(next + i, "turn", json!({"worker": w, "i": i}));
                        store.append(&name, next + i, &[step]).await.unwrap();
                    }
                    drop(lease);
                    lat.push(t.elapsed());
                }
                lat
            })
        })
        .collect();
    let mut lat = Vec::new();
    for t in tasks {
        lat.extend(t.await.unwrap());
    }
    let elapsed = start.elapsed();
    // Check: no lost step, no interleaving.
    for k in 0..SESSIONS {
        let s = store.load(&format!("c-{k:03}")).await.unwrap().unwrap();
        assert_eq!(
            s.steps.len() as u64,
            WORKERS as u64 * TURN,
            "lost steps in {}",
            s.name
        );
        for chunk in s.steps.chunks(TURN as usize) {
            let w = &chunk[0].payload["worker"];
            for (i, step) in chunk.iter().enumerate() {
                assert_eq!(
                    step.payload,
                    json!({"worker": w, "i": i}),
                    "interleaved in {}",
                    s.name
                );
            }
        }
    }
    lat.sort();
    (
        lat.len() as f64 / elapsed.as_secs_f64(),
        pct(&lat, 0.5),
        pct(&lat, 0.99),
    )
}

/// Resuming a 1,000-message conversation the CLI's way: `SessionJournal::open` (load, replay
/// the steps, keep the stored history as JSON for the next sync), for a session of 250 turns
/// (user, assistant with a call, tool, assistant: 4 messages, one `messages` step each).
async fn resume_1000(store: Arc<dyn SessionStore>) -> Duration {
    use agcore::llm::{OpenaiChatMessage, ToolCall};
    use agcore::session::SessionJournal;
    let (journal, _) = SessionJournal::open(store.clone(), "resume").await.unwrap();
    let mut history = Vec::new();
    for turn in 0..250 {
        history.push(OpenaiChatMessage::user_text(format!("question {turn}")));
        history.push(OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new(
                format!("call_{turn}"),
                "read_file",
                r#"{"path":"src/lib.rs"}"#,
            )],
        ));
        history.push(OpenaiChatMessage::tool_result(
            format!("call_{turn}"),
            "lorem ipsum dolor sit amet ".repeat(36),
        ));
        history.push(OpenaiChatMessage::assistant_text(format!("answer {turn}")));
        journal.sync_history(&history).await.unwrap();
    }
    let mut lat = Vec::new();
    for _ in 0..21 {
        let t = Instant::now();
        let (_, restored) = SessionJournal::open(store.clone(), "resume").await.unwrap();
        lat.push(t.elapsed());
        assert_eq!(restored.history.len(), 1000);
    }
    lat.sort();
    pct(&lat, 0.5)
}

async fn run(label: &str, store: Arc<dyn SessionStore>, commits: u64) {
    let (median, p99, cpu) = commit_latency(store.as_ref(), commits).await;
    println!(
        "{label:<10} commit/step  ({commits} commits): median {}  p99 {}  client CPU {}",
        ms(median),
        ms(p99),
        ms(cpu)
    );
    let (median, p99) = fenced_commit_latency(store.as_ref(), commits).await;
    println!(
        "{label:<10} fenced commit/step ({commits} commits): median {}  p99 {}",
        ms(median),
        ms(p99)
    );
    let load = load_1000(store.as_ref()).await;
    println!(
        "{label:<10} load of a 1,000-step session (~1 KB/step): median {}",
        ms(load)
    );
    let resume = resume_1000(Arc::clone(&store)).await;
    println!(
        "{label:<10} resume of a 1,000-message session (SessionJournal::open, 250 steps): median {}",
        ms(resume)
    );
    let (tps, t50, t99) = concurrent(Arc::clone(&store)).await;
    println!(
        "{label:<10} 8 workers x 100 sessions (800 turns of lock+load+3 commits): {tps:.0} turns/s, turn median {} p99 {}; checked: no lost or interleaved step",
        ms(t50),
        ms(t99)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let commits: u64 = arg("--commits")
        .map_or(2000, |v| v.parse().unwrap())
        .min(100_000);
    let pg = arg("--postgres").or_else(|| std::env::var("AGCORE_TEST_POSTGRES_URL").ok());

    let dir = tempfile::tempdir().unwrap();
    let sqlite = SqliteStore::open(dir.path().join("sessions.db"))
        .await
        .unwrap();
    run("sqlite", Arc::new(sqlite), commits).await;

    if let Some(url) = pg {
        let db = format!("agcore_bench_{}", std::process::id());
        let (admin, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
            .await
            .unwrap();
        tokio::spawn(conn);
        admin
            .batch_execute(&format!("CREATE DATABASE {db}"))
            .await
            .unwrap();
        let base = url.rsplit_once('/').map_or(url.as_str(), |(b, _)| b);
        let store = PostgresStore::connect(&format!("{base}/{db}"))
            .await
            .unwrap();
        run("postgres", Arc::new(store), commits).await;
        admin
            .batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)"))
            .await
            .unwrap();
    } else {
        println!("postgres   skipped: pass --postgres URL or set AGCORE_TEST_POSTGRES_URL");
    }
}
