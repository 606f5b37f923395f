//! Continuations: what a tool records while it runs so that the same call can be continued —
//! in another process, after a crash or a suspension — instead of started again. An MCP call
//! that became a task records the task id; the run journals it
//! ([`crate::run::JournalEntry::CallContinues`]) before the tool goes on, and a resumed run
//! hands it back to the call ([`resumed`]).
//!
//! The registry runs each call of a run inside [`scope`] (a task-local, as for
//! [`crate::tools::recheck`]); outside a run nothing is recorded and nothing is resumed.

use std::future::Future;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};

/// A continuation and where its acknowledgement goes.
type Record = (Value, oneshot::Sender<Result<(), String>>);

#[derive(Clone)]
struct CallContinuation {
    /// What an earlier attempt of this call recorded, if any.
    resume: Option<Value>,
    sink: mpsc::Sender<Record>,
    /// The call is given up, not continued: the tool only ends what its earlier attempt left
    /// running ([`abandon`]).
    abandon: bool,
}

tokio::task_local! {
    static CALL: CallContinuation;
}

/// Run `call` (one call's execution) with `resume` at hand for [`resumed`]; each value the
/// call [`record`]s is passed to `keep` (which journals it) before the call goes on.
pub(crate) async fn scope<F, K, R>(resume: Option<Value>, keep: K, call: F) -> F::Output
where
    F: Future,
    K: Fn(Value) -> R,
    R: Future<Output = Result<(), String>>,
{
    let (sink, mut records) = mpsc::channel::<Record>(1);
    let call = CALL.scope(
        CallContinuation {
            resume,
            sink,
            abandon: false,
        },
        call,
    );
    let mut call = std::pin::pin!(call);
    loop {
        tokio::select! {
            biased;
            Some((value, ack)) = records.recv() => {
                let _ = ack.send(keep(value).await);
            }
            output = &mut call => return output,
        }
    }
}

/// Run `call` (one call's execution) to give up the earlier attempt that recorded `resume`:
/// a tool that left something running (an MCP task) ends it and returns without doing the
/// call's work; other tools are not run this way. Nothing is recorded.
pub(crate) async fn abandon<F: Future>(resume: Value, call: F) -> F::Output {
    // Nothing is kept: a closed sink makes `record` a no-op.
    let (sink, _) = mpsc::channel::<Record>(1);
    CALL.scope(
        CallContinuation {
            resume: Some(resume),
            sink,
            abandon: true,
        },
        call,
    )
    .await
}

/// Whether the running call is given up rather than continued ([`abandon`]).
pub(crate) fn abandoning() -> bool {
    CALL.try_with(|call| call.abandon).unwrap_or(false)
}

/// What an earlier attempt of the running call recorded (a resumed run), if anything.
pub(crate) fn resumed() -> Option<Value> {
    CALL.try_with(|call| call.resume.clone()).ok().flatten()
}

/// Record `value` as the running call's continuation; returns once it is kept (journaled).
/// Outside a run: nothing to keep, `Ok`.
///
/// # Errors
/// Why it could not be kept (the journal failed).
pub(crate) async fn record(value: Value) -> Result<(), String> {
    let Ok(sink) = CALL.try_with(|call| call.sink.clone()) else {
        return Ok(());
    };
    let (ack, kept) = oneshot::channel();
    if sink.send((value, ack)).await.is_err() {
        return Ok(());
    }
    kept.await.unwrap_or(Ok(()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[tokio::test]
    async fn a_record_is_kept_before_the_call_goes_on() {
        let kept = Mutex::new(Vec::new());
        let output = scope(
            Some(Value::from("before")),
            |value| {
                kept.lock().unwrap().push(value);
                async { Ok(()) }
            },
            async {
                let resumed = resumed();
                record(Value::from(1)).await.unwrap();
                // Already kept when `record` returns.
                (resumed, kept.lock().unwrap().len())
            },
        )
        .await;
        assert_eq!(output, (Some(Value::from("before")), 1));
        assert_eq!(*kept.lock().unwrap(), vec![Value::from(1)]);
    }

    #[tokio::test]
    async fn outside_a_run_nothing_is_kept_or_resumed() {
        assert_eq!(resumed(), None);
        assert_eq!(record(Value::from(1)).await, Ok(()));
    }
}
