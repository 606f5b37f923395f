//! Property tests of the compaction tiers (issue 12): on any history, at any commit point, with
//! any number of turns kept whole, stubbing, summarising and dropping keep the history
//! wire-valid, never separate a call from its result, keep the system prompt, the newest user
//! message, the newest turns and everything not yet committed; repair makes any history
//! wire-valid.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agcore::context::compact::{
    dropped_marker, is_marker, replace_runs, select, stub_tool_outputs, summary_message,
};
use agcore::context::units::Compactable;
use agcore::context::{check_wire, repair};
use agcore::llm::{OpenaiChatMessage, ToolCall};
use proptest::prelude::*;

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
