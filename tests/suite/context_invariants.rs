//! Property tests of the compaction tiers (issue 12): on any history, at any commit point, with
//! any number of turns kept whole, stubbing, summarising and dropping keep the history
//! wire-valid, never separate a call from its result, keep the system prompt, the newest user
//! message, the newest turns and everything not yet committed; repair makes any history
//! wire-valid. With continuation artifacts on the assistant messages (reasoning state), every
//! tier and repair keeps such a message whole — text, calls, arguments and artifacts exactly as
//! they were — or drops it with its results; only tool results are stubbed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agcore::context::compact::{
    dropped_marker, is_marker, replace_runs, select, stub_tool_outputs, summary_message,
};
use agcore::context::units::Compactable;
use agcore::context::{check_wire, repair};
use agcore::llm::{OpenaiChatMessage, ToolCall};
use agcore::vocab::{Artifact, ArtifactPlace, ArtifactProvider};
use proptest::prelude::*;
use serde_json::json;

/// A turn: a user message, tool groups (each: output sizes of its calls), an optional answer.
#[derive(Debug, Clone)]
struct Turn {
    groups: Vec<Vec<usize>>,
    answer: bool,
}

fn turn() -> impl Strategy<Value = Turn> {
    (
        prop::collection::vec(prop::collection::vec(0usize..3_000, 1..3), 0..4),
        any::<bool>(),
    )
        .prop_map(|(groups, answer)| Turn { groups, answer })
}

fn history(turns: &[Turn]) -> Vec<OpenaiChatMessage> {
    let mut messages = vec![OpenaiChatMessage::system("system")];
    let mut id = 0;
    for (t, turn) in turns.iter().enumerate() {
        messages.push(OpenaiChatMessage::user_text(format!("user {t}")));
        for group in &turn.groups {
            let calls: Vec<ToolCall> = group
                .iter()
                .map(|_| {
                    id += 1;
                    ToolCall::new(format!("call_{id}"), "read", format!(r#"{{"n":{id}}}"#))
                })
                .collect();
            messages.push(OpenaiChatMessage::assistant_tool_calls(None, calls.clone()));
            for (call, size) in calls.iter().zip(group) {
                messages.push(OpenaiChatMessage::tool_result(&call.id, "o".repeat(*size)));
            }
        }
        if turn.answer || turn.groups.is_empty() {
            messages.push(OpenaiChatMessage::assistant_text(format!("answer {t}")));
        }
    }
    messages
}

fn newest_user(messages: &[OpenaiChatMessage]) -> Option<String> {
    messages
        .iter()
        .rev()
        .find(|m| matches!(m, OpenaiChatMessage::User { .. }) && !is_marker(m))
        .and_then(OpenaiChatMessage::text)
}

/// Where the kept tail starts: the `keep`-th assistant message from the end, or `committed`.
fn protected_tail(messages: &[OpenaiChatMessage], committed: usize, keep: usize) -> usize {
    let kept_from = if keep == 0 {
        messages.len()
    } else {
        messages
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, m)| matches!(m, OpenaiChatMessage::Assistant { .. }))
            .nth(keep - 1)
            .map_or(0, |(i, _)| i)
    };
    kept_from.min(committed)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tiers_keep_the_invariants(
        turns in prop::collection::vec(turn(), 1..8),
        commit_back in 0usize..4,
        keep in 0usize..4,
        stub_need in 0usize..20_000,
        drop_need in 0usize..20_000,
        summarise in any::<bool>(),
    ) {
        let original = history(&turns);
        let committed_at = original.len().saturating_sub(commit_back).max(1);
        let mut messages = original.clone();
        let mut committed = committed_at;

        let compactable = Compactable::of(&messages, committed, keep);
        stub_tool_outputs(&mut messages, &compactable, stub_need);
        check_wire(&messages).unwrap();
        prop_assert_eq!(messages.len(), original.len());

        let compactable = Compactable::of(&messages, committed, keep);
        let selected = select(&messages, &compactable, drop_need, summarise);
        if summarise {
            replace_runs(&mut messages, &mut committed, &selected, |removed| summary_message(removed.len(), "summary"));
        } else {
            replace_runs(&mut messages, &mut committed, &selected, dropped_marker);
        }
        check_wire(&messages).unwrap();
        // The system prompt, the newest user message.
        prop_assert_eq!(&messages[0], &original[0]);
        prop_assert_eq!(newest_user(&messages), newest_user(&original));
        // The newest turns and everything uncommitted, as they were.
        let tail = protected_tail(&original, committed_at, keep);
        let kept = original.len() - tail;
        prop_assert_eq!(&messages[messages.len() - kept..], &original[tail..]);
        // `committed` still counts the same uncommitted tail.
        prop_assert_eq!(messages.len() - committed, original.len() - committed_at);
        // Every call left has its own result, with the same id as before.
        for message in &messages {
            for call in message.tool_calls() {
                prop_assert!(original.iter().any(|m| m.tool_calls().contains(call)));
            }
        }
    }

    #[test]
    fn repair_makes_any_history_wire_valid(
        turns in prop::collection::vec(turn(), 1..6),
        removals in prop::collection::vec(0usize..64, 0..6),
        duplicate in any::<bool>(),
    ) {
        let mut messages = history(&turns);
        for removal in removals {
            if messages.len() > 1 {
                let at = 1 + removal % (messages.len() - 1);
                messages.remove(at);
            }
        }
        if duplicate {
            // Reuse the first call id in a later turn.
            messages.push(OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("call_1", "read", "{}")]));
            messages.push(OpenaiChatMessage::tool_result("call_1", "again"));
        }
        let (repaired, _) = repair(messages.clone());
        check_wire(&repaired).unwrap();
        let (again, repairs) = repair(repaired.clone());
        prop_assert!(repairs.is_empty());
        prop_assert_eq!(again, repaired);
    }
}

/// The artifacts a reasoning model's reply carries: a thinking block before the text, a
/// signature on each call, an encrypted reasoning item at the end — one provider per reply,
/// chosen by `seed`, with long opaque data.
fn artifacts_for(message: &OpenaiChatMessage, seed: usize) -> Vec<Artifact> {
    let calls = message.tool_calls().len();
    let blob = format!("{seed:04}").repeat(64);
    match seed % 3 {
        0 => vec![Artifact::new(
            ArtifactProvider::Anthropic,
            "claude-sonnet-4-5",
            ArtifactPlace::Before(0),
            json!({"type": "thinking", "thinking": "plan", "signature": blob}),
        )],
        1 => (0..calls.max(1))
            .map(|i| {
                Artifact::new(
                    ArtifactProvider::Gemini,
                    "gemini-3-pro-preview",
                    ArtifactPlace::On(if calls == 0 { 0 } else { i as u32 + 1 }),
                    json!({"thoughtSignature": format!("{blob}{i}")}),
                )
            })
            .collect(),
        _ => vec![Artifact::new(
            ArtifactProvider::OpenaiResponses,
            "gpt-5",
            ArtifactPlace::Before(calls as u32 + 1),
            json!({"type": "reasoning", "id": format!("rs_{seed}"), "summary": [], "encrypted_content": blob}),
        )],
    }
}

/// `history(turns)` with artifacts on every assistant message `signed` selects.
fn history_with_artifacts(turns: &[Turn], signed: &[bool]) -> Vec<OpenaiChatMessage> {
    let mut seed = 0;
    history(turns)
        .into_iter()
        .map(|message| {
            if !matches!(message, OpenaiChatMessage::Assistant { .. }) {
                return message;
            }
            seed += 1;
            if signed
                .get(seed % signed.len().max(1))
                .copied()
                .unwrap_or(true)
            {
                let artifacts = artifacts_for(&message, seed);
                message.with_artifacts(artifacts)
            } else {
                message
            }
        })
        .collect()
}

/// Every assistant message of `after` with artifacts is one of `before`'s, unchanged, and each
/// of its calls is answered (by the wire check).
fn kept_whole(
    before: &[OpenaiChatMessage],
    after: &[OpenaiChatMessage],
) -> Result<(), TestCaseError> {
    check_wire(after).map_err(|e| TestCaseError::fail(e.to_string()))?;
    for message in after.iter().filter(|m| !m.artifacts().is_empty()) {
        prop_assert!(
            before.contains(message),
            "an assistant message with artifacts was edited: {message:?}"
        );
    }
    // And none lost its artifacts while keeping its calls.
    for message in after.iter().filter(|m| !m.tool_calls().is_empty()) {
        let original = before
            .iter()
            .find(|m| m.tool_calls() == message.tool_calls())
            .expect("every call left is one of the input's");
        prop_assert_eq!(original.artifacts(), message.artifacts());
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn tiers_keep_messages_with_artifacts_whole_or_drop_them_with_their_results(
        turns in prop::collection::vec(turn(), 1..8),
        signed in prop::collection::vec(any::<bool>(), 1..5),
        commit_back in 0usize..4,
        keep in 0usize..4,
        stub_need in 0usize..20_000,
        drop_need in 0usize..20_000,
        summarise in any::<bool>(),
    ) {
        let original = history_with_artifacts(&turns, &signed);
        let committed_at = original.len().saturating_sub(commit_back).max(1);
        let mut messages = original.clone();
        let mut committed = committed_at;

        let compactable = Compactable::of(&messages, committed, keep);
        stub_tool_outputs(&mut messages, &compactable, stub_need);
        kept_whole(&original, &messages)?;
        // Stubbing touched tool results only.
        for (before, after) in original.iter().zip(&messages) {
            if !matches!(after, OpenaiChatMessage::Tool { .. }) {
                prop_assert_eq!(before, after);
            }
        }

        let compactable = Compactable::of(&messages, committed, keep);
        let selected = select(&messages, &compactable, drop_need, summarise);
        if summarise {
            replace_runs(&mut messages, &mut committed, &selected, |removed| summary_message(removed.len(), "summary"));
        } else {
            replace_runs(&mut messages, &mut committed, &selected, dropped_marker);
        }
        kept_whole(&original, &messages)?;
    }

    #[test]
    fn repair_keeps_messages_with_artifacts_whole_unless_it_renames_a_call(
        turns in prop::collection::vec(turn(), 1..6),
        signed in prop::collection::vec(any::<bool>(), 1..5),
        removals in prop::collection::vec(0usize..64, 0..6),
        duplicate in any::<bool>(),
    ) {
        let mut messages = history_with_artifacts(&turns, &signed);
        let original = messages.clone();
        for removal in removals {
            if messages.len() > 1 {
                let at = 1 + removal % (messages.len() - 1);
                messages.remove(at);
            }
        }
        if duplicate {
            let reused = OpenaiChatMessage::assistant_tool_calls(None, vec![ToolCall::new("call_1", "read", "{}")]);
            let artifacts = artifacts_for(&reused, 7);
            messages.push(reused.with_artifacts(artifacts));
            messages.push(OpenaiChatMessage::tool_result("call_1", "again"));
        }
        let (repaired, _) = repair(messages.clone());
        check_wire(&repaired).unwrap();
        for message in repaired.iter().filter(|m| matches!(m, OpenaiChatMessage::Assistant { .. })) {
            if messages.contains(message) {
                continue;
            }
            // Changed: only by a renamed call id, and then without its (now foreign) artifacts.
            prop_assert!(message.artifacts().is_empty(), "{message:?}");
            prop_assert!(message.tool_calls().iter().any(|c| !original.iter().chain(&messages).any(|m| m.tool_calls().iter().any(|o| o.id == c.id))));
        }
    }
}
