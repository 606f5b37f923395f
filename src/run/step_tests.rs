//! Unit tests of the step function: each rule, on data, without a model or tools.

use super::*;
use crate::run::config::{RepeatedCallAction, RepeatedCallGuard};
use crate::run::state::{RUN_STATE_VERSION, RunRules};
use crate::tools::approval::ApprovalRequest;

fn rules() -> RunRules {
    RunRules {
        max_turns: 3,
        tool_output_limit: 1_000,
        repeated_call_guard: RepeatedCallGuard::default(),
        ..RunRules::of(&crate::run::CycleConfig::default())
    }
}

fn reply(message: OpenaiChatMessage, reason: FinishReason) -> ChatResponse {
    ChatResponse {
        message,
        stop_reason: Some(reason),
        usage: Some(Usage {
            prompt_tokens: 1,
            completion_tokens: 2,
            total_tokens: 3,
            ..Usage::default()
        }),
        model: None,
        id: None,
    }
}

fn calls_reply(calls: Vec<ToolCall>, reason: FinishReason) -> ChatResponse {
    reply(OpenaiChatMessage::assistant_tool_calls(None, calls), reason)
}

fn started(prompt: &str, tools: bool) -> RunState {
    let state = RunState::new(vec![OpenaiChatMessage::system("s")], rules(), tools);
    let (state, effect) = step(
        state,
        Input::Start {
            prompt: Some(prompt.into()),
        },
    );
    assert!(matches!(
        effect,
        Effect::RequestModel(ModelRequest {
            tool_choice_relaxed: false
        })
    ));
    state
}

fn batch(effect: Effect) -> ToolBatch {
    match effect {
        Effect::RunTools(batch) => batch,
        other => panic!("expected RunTools, got {other:?}"),
    }
}

#[test]
fn a_text_reply_finishes_and_commits_with_usage_summed() {
    let state = started("q", true);
    assert_eq!(
        state.committed, 1,
        "the prompt is pending until a turn completes"
    );
    let (state, effect) = step(
        state,
        Input::ModelReplied(Box::new(reply(
            OpenaiChatMessage::assistant_text("a"),
            FinishReason::Stop,
        ))),
    );
    let Effect::Done(done) = effect else {
        panic!("{effect:?}")
    };
    assert_eq!(done.text(), "a");
    assert_eq!(done.usage.map(|u| u.total_tokens), Some(3));
    assert_eq!(state.messages.len(), 3);
    assert_eq!(state.committed, 3);
    assert!(matches!(state.phase, Phase::Finished { .. }));
}

#[test]
fn a_tool_turn_runs_commits_and_relaxes_the_tool_choice() {
    let state = started("q", true);
    let (mut state, effect) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "g", "{}")],
            FinishReason::ToolCalls,
        ))),
    );
    let batch = batch(effect);
    assert!(batch.from_reply);
    assert_eq!(batch.run, [0, 1]);
    state.mark_started(0);
    state.record_answer(0, ToolAnswer::ok("x".repeat(5_000)));
    state.record_answer(1, ToolAnswer::error("boom"));
    let (state, effect) = step(state, Input::ToolsDone);
    assert!(matches!(
        effect,
        Effect::RequestModel(ModelRequest {
            tool_choice_relaxed: true
        })
    ));
    assert_eq!(state.turns, 2);
    assert_eq!(state.committed, state.messages.len());
    let roles: Vec<_> = state.messages.iter().map(|m| m.role()).collect();
    assert_eq!(roles, ["system", "user", "assistant", "tool", "tool"]);
    let cut = state.messages[3].text().unwrap_or_default();
    assert!(
        cut.contains("bytes cut here") && cut.len() < 1_200,
        "output cut for the model"
    );
    assert!(state.messages[4].is_tool_error());
    assert_eq!(state.messages[4].text().as_deref(), Some("Error: boom"));
}

#[test]
fn calls_under_length_fail_and_calls_under_stop_run() {
    let state = started("q", true);
    let (state, effect) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            vec![ToolCall::new("a", "f", "{")],
            FinishReason::Length,
        ))),
    );
    assert!(matches!(effect, Effect::Fail(LlmError::TruncatedToolCalls)));
    assert_eq!(state.messages.len(), 1, "the prompt is rolled back");
    let state = started("q", true);
    let (_, effect) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            vec![ToolCall::new("a", "f", "{}")],
            FinishReason::Stop,
        ))),
    );
    assert_eq!(batch(effect).run, [0]);
}

#[test]
fn calls_without_tools_are_returned_and_answered_as_not_run() {
    let state = started("q", false);
    let (state, effect) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            vec![ToolCall::new("a", "f", "{}")],
            FinishReason::ToolCalls,
        ))),
    );
    assert!(matches!(effect, Effect::Done(_)));
    assert!(state.messages[3].is_tool_error());
    assert!(
        state.messages[3]
            .text()
            .is_some_and(|t| t.starts_with("Error: this tool call was not run"))
    );
}

#[test]
fn the_turn_limit_fails_with_the_committed_history() {
    let mut rules = rules();
    rules.max_turns = 0;
    let state = RunState::new(vec![OpenaiChatMessage::system("s")], rules, true);
    let (state, effect) = step(
        state,
        Input::Start {
            prompt: Some("q".into()),
        },
    );
    let Effect::Fail(LlmError::MaxTurnsExceeded { turns: 0, history }) = effect else {
        panic!("{effect:?}")
    };
    assert_eq!(history.len(), 1);
    assert_eq!(state.messages, history);
}

#[test]
fn the_repeat_guard_counts_consecutive_turns_and_aborts_or_tells_the_model() {
    for action in [RepeatedCallAction::Abort, RepeatedCallAction::TellModel] {
        let mut state = started("q", true);
        state.rules.max_turns = 10;
        state.rules.repeated_call_guard = RepeatedCallGuard {
            limit: Some(2),
            action,
        };
        let call = |id: &str| ToolCall::new(id, "f", r#"{"x":1}"#);
        let (mut state, effect) = step(
            state,
            Input::ModelReplied(Box::new(calls_reply(
                vec![call("a"), call("b")],
                FinishReason::ToolCalls,
            ))),
        );
        assert_eq!(
            batch(effect).run,
            [0, 1],
            "two identical calls in one turn count once"
        );
        state.record_answer(0, ToolAnswer::ok("1"));
        state.record_answer(1, ToolAnswer::ok("1"));
        let (state, _) = step(state, Input::ToolsDone);
        let (state, effect) = step(
            state,
            Input::ModelReplied(Box::new(calls_reply(
                vec![call("c")],
                FinishReason::ToolCalls,
            ))),
        );
        match action {
            RepeatedCallAction::Abort => {
                assert!(matches!(
                    effect,
                    Effect::Fail(LlmError::RepeatedToolCall { times: 2, .. })
                ));
                assert_eq!(state.messages.len(), 5, "the first turn stays committed");
            }
            RepeatedCallAction::TellModel => {
                let batch = batch(effect);
                assert!(batch.run.is_empty());
                assert!(batch.answered[0].1.is_error);
                assert!(batch.answered[0].1.content.contains("2 turns in a row"));
            }
        }
    }
}

#[test]
fn cancelling_keeps_a_turn_whose_tool_started_and_answers_the_rest() {
    let state = started("q", true);
    let calls = vec![
        ToolCall::new("a", "f", "{}"),
        ToolCall::new("b", "f", "{\"n\":2}"),
        ToolCall::new("c", "f", "{\"n\":3}"),
    ];
    let (mut state, _) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            calls.clone(),
            FinishReason::ToolCalls,
        ))),
    );
    state.mark_started(0);
    state.record_answer(0, ToolAnswer::ok("done"));
    state.mark_started(1);
    let (state, effect) = step(state, Input::Cancel);
    assert!(matches!(effect, Effect::Fail(LlmError::Cancelled)));
    let texts: Vec<String> = state.messages[3..]
        .iter()
        .filter_map(|m| m.text())
        .collect();
    assert_eq!(texts[0], "done");
    assert!(texts[1].starts_with("Error: cancelled before the tool finished"));
    assert!(texts[2].starts_with("Error: cancelled before the tool started"));
    assert_eq!(state.committed, 6, "prompt and turn kept");

    // Nothing started: the turn and the prompt go.
    let state = started("q", true);
    let (state, _) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(calls, FinishReason::ToolCalls))),
    );
    let (state, _) = step(state, Input::Cancel);
    assert_eq!(state.messages.len(), 1);
}

#[test]
fn unanswered_calls_run_on_resume_and_are_answered_not_run_with_a_prompt() {
    let history = vec![
        OpenaiChatMessage::user_text("q"),
        OpenaiChatMessage::assistant_tool_calls(
            None,
            vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")],
        ),
        OpenaiChatMessage::tool_result("a", "ok"),
    ];
    let state = RunState::new(history.clone(), rules(), true);
    let (mut state, effect) = step(state, Input::Start { prompt: None });
    let batch = batch(effect);
    assert!(!batch.from_reply);
    assert_eq!(batch.calls.len(), 1);
    assert_eq!(batch.calls[0].id, "b");
    state.record_answer(0, ToolAnswer::ok("ok b"));
    let (state, effect) = step(state, Input::ToolsDone);
    assert!(matches!(
        effect,
        Effect::RequestModel(ModelRequest {
            tool_choice_relaxed: false
        })
    ));
    assert_eq!(state.messages.len(), 4);
    assert_eq!(state.committed, 4);

    let state = RunState::new(history, rules(), true);
    let (state, effect) = step(
        state,
        Input::Start {
            prompt: Some("next".into()),
        },
    );
    assert!(matches!(effect, Effect::RequestModel(_)));
    assert!(state.messages[3].is_tool_error());
    assert_eq!(state.messages[4].role(), "user");
    assert_eq!(state.committed, 3, "the answers and the prompt are pending");
}

#[test]
fn a_restored_turn_does_not_rerun_a_started_call() {
    let state = started("q", true);
    let calls = vec![
        ToolCall::new("a", "f", "{}"),
        ToolCall::new("b", "f", "{\"n\":1}"),
    ];
    let (mut state, _) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(calls, FinishReason::ToolCalls))),
    );
    state.mark_started(0);
    let saved = serde_json::to_value(&state).unwrap();
    let restored: RunState = serde_json::from_value(saved).unwrap();
    assert_eq!(restored, state);
    let (_, effect) = step(restored, Input::Start { prompt: None });
    let batch = batch(effect);
    assert_eq!(batch.run, [1]);
    assert!(
        batch.answered[0]
            .1
            .content
            .contains("whether it had any effect is unknown")
    );
}

#[test]
fn the_state_is_versioned_json_and_a_future_version_is_a_clear_error() {
    let state = started("q", true);
    let mut saved = serde_json::to_value(&state).unwrap();
    assert_eq!(saved["version"], RUN_STATE_VERSION);
    assert_eq!(saved["phase"]["phase"], "need_model");
    assert_eq!(saved["turns"], 1);
    saved["version"] = (RUN_STATE_VERSION + 1).into();
    let error = serde_json::from_value::<RunState>(saved)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "run state version {} is not supported",
            RUN_STATE_VERSION + 1
        )),
        "{error}"
    );
}

fn request_for(call: &ToolCall) -> ApprovalRequest {
    ApprovalRequest {
        tool: call.function.name.clone(),
        call_id: call.id.clone(),
        title: call.function.name.clone(),
        kind: crate::tools::ToolKind::Execute,
        arguments: serde_json::json!({}),
        permissions: vec![crate::tools::Permission::Shell],
        reason: "configured as ask".into(),
        digest: None,
    }
}

/// A two-call turn in which call `b` was deferred (call `a` ran and has its answer).
fn suspended_turn() -> RunState {
    let state = started("q", true);
    let calls = vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "g", "{}")];
    let (mut state, effect) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(
            calls.clone(),
            FinishReason::ToolCalls,
        ))),
    );
    assert_eq!(batch(effect).run, [0, 1]);
    state.mark_started(0);
    state.record_answer(0, ToolAnswer::ok("a ran"));
    let (state, effect) = step(state, Input::ToolsDeferred(vec![request_for(&calls[1])]));
    assert!(
        matches!(&effect, Effect::Suspend(requests) if requests.len() == 1 && requests[0].call_id == "b")
    );
    assert_eq!(state.pending_approvals().len(), 1);
    state
}

#[test]
fn a_deferred_call_suspends_the_turn_and_a_decision_runs_it() {
    let state = suspended_turn();
    // The state survives a round trip through JSON (another process).
    let state: RunState = serde_json::from_value(serde_json::to_value(&state).unwrap()).unwrap();
    let (state, effect) = step(state, Input::Decisions(vec![Decision::allow("b")]));
    let batch = batch(effect);
    assert_eq!(batch.run, [1]);
    assert_eq!(batch.approved, [1]);
    assert_eq!(batch.answered.len(), 1);
    assert_eq!(batch.answered[0].1.content, "a ran");
    drop(state);
}

#[test]
fn a_denial_answers_the_call_and_the_turn_goes_on() {
    let (mut state, effect) = step(
        suspended_turn(),
        Input::Decisions(vec![Decision::deny("b", Some("not today".into()))]),
    );
    let batch = batch(effect);
    assert!(batch.run.is_empty());
    assert!(
        batch.answered[1]
            .1
            .content
            .contains("was not approved: not today")
    );
    assert!(batch.answered[1].1.is_error);
    // Nothing to run: the turn is committed and the model asked again.
    state.phase = Phase::AwaitingTools {
        turn: match state.phase {
            Phase::AwaitingTools { turn } => turn,
            other => panic!("{other:?}"),
        },
    };
    let (state, effect) = step(state, Input::ToolsDone);
    assert!(matches!(effect, Effect::RequestModel(_)));
    assert_eq!(state.messages.len(), state.committed);
    assert!(matches!(
        state.messages.last(),
        Some(OpenaiChatMessage::Tool { .. })
    ));
}

#[test]
fn without_a_decision_the_call_stays_pending_and_resuming_asks_again() {
    let (state, effect) = step(suspended_turn(), Input::Decisions(vec![]));
    assert!(matches!(effect, Effect::Suspend(ref requests) if requests.len() == 1));
    let (state, effect) = step(state, Input::Start { prompt: None });
    assert!(matches!(effect, Effect::AskApproval(ref requests) if requests[0].call_id == "b"));
    let (_, effect) = step(
        state,
        Input::Decisions(vec![Decision {
            call_id: "b".into(),
            answer: ApprovalDecision::Defer,
            digest: None,
        }]),
    );
    assert!(matches!(effect, Effect::Suspend(_)));
}

#[test]
fn a_new_prompt_on_a_suspended_run_keeps_the_turn_and_answers_the_undecided_call() {
    let (state, effect) = step(
        suspended_turn(),
        Input::Start {
            prompt: Some("never mind".into()),
        },
    );
    assert!(matches!(effect, Effect::RequestModel(_)));
    let tools: Vec<&OpenaiChatMessage> = state
        .messages
        .iter()
        .filter(|m| matches!(m, OpenaiChatMessage::Tool { .. }))
        .collect();
    assert_eq!(tools.len(), 2);
    let OpenaiChatMessage::Tool { content, .. } = tools[1] else {
        unreachable!()
    };
    assert!(
        content.text().contains("never approved or denied"),
        "{content:?}"
    );
    assert!(matches!(
        state.messages.last(),
        Some(OpenaiChatMessage::User { .. })
    ));
}

#[test]
fn an_abort_keeps_a_turn_whose_tool_started() {
    let (state, effect) = step(
        suspended_turn(),
        Input::Abort(LlmError::Journal {
            message: "disk full".into(),
        }),
    );
    assert!(matches!(effect, Effect::Fail(LlmError::Journal { .. })));
    // `a` ran: its turn is kept, `b` answered as not started.
    assert_eq!(state.committed, state.messages.len());
    assert!(matches!(
        state.messages.last(),
        Some(OpenaiChatMessage::Tool { .. })
    ));
}

#[test]
fn an_idempotent_tool_runs_again_after_a_crash_another_is_answered_interrupted() {
    let state = started("q", true);
    let calls = vec![
        ToolCall::new("a", "read", "{}"),
        ToolCall::new("b", "write", "{}"),
    ];
    let (mut state, _) = step(
        state,
        Input::ModelReplied(Box::new(calls_reply(calls, FinishReason::ToolCalls))),
    );
    state.mark_started(0);
    state.mark_started(1);
    rerun_idempotent(&mut state, |tool| tool == "read");
    let (_, effect) = step(state, Input::Start { prompt: None });
    let batch = batch(effect);
    assert_eq!(batch.run, [0]);
    assert!(
        batch.answered[0]
            .1
            .content
            .starts_with("Error: interrupted")
    );
}

#[test]
fn repeats_are_counted_per_turn_on_canonical_arguments() {
    let mut streaks = Vec::new();
    let f = |id: &str, args: &str| ToolCall::new(id, "f", args);
    assert_eq!(
        observe_turn(
            &mut streaks,
            &[
                f("a", r#"{"x":1,"y":2}"#),
                f("b", r#"{ "y": 2, "x": 1 }"#),
                f("c", r#"{"x":1,"y":2}"#)
            ]
        ),
        [1, 1, 1]
    );
    assert_eq!(
        observe_turn(
            &mut streaks,
            &[
                ToolCall::new("d", "g", r#"{"x":1,"y":2}"#),
                f("e", r#"{ "x": 1, "y": 2 }"#)
            ]
        ),
        [1, 2]
    );
    assert_eq!(observe_turn(&mut streaks, &[f("g", "{}")]), [1]);
    assert_eq!(
        observe_turn(&mut streaks, &[f("h", r#"{"x":1,"y":2}"#)]),
        [1]
    );
}

#[test]
fn unanswered_calls_are_those_of_the_last_assistant_message_without_a_tool_message() {
    let calls = vec![ToolCall::new("a", "f", "{}"), ToolCall::new("b", "f", "{}")];
    let mut messages = vec![
        OpenaiChatMessage::user_text("q"),
        OpenaiChatMessage::assistant_tool_calls(None, calls.clone()),
    ];
    assert_eq!(unanswered_calls(&messages), calls);
    messages.push(OpenaiChatMessage::tool_result("a", "ok"));
    assert_eq!(unanswered_calls(&messages), calls[1..]);
    messages.push(OpenaiChatMessage::tool_result("b", "ok"));
    assert!(unanswered_calls(&messages).is_empty());
    messages.push(OpenaiChatMessage::assistant_text("done"));
    assert!(unanswered_calls(&messages).is_empty());
    assert!(unanswered_calls(&[]).is_empty());
}
