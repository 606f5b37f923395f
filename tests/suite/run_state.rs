//! The run-state format: a state written by this version (a fixture) loads and continues; a
//! future version is a clear error.
#![allow(clippy::unwrap_used, clippy::panic)]

use agcore::llm::{CycleConfig, OpenaiChatMessage, ToolCall};
use agcore::run::{Effect, Input, Phase, RUN_STATE_VERSION, RunRules, RunState, step};
use agcore::vocab::{ChatResponse, FinishReason, ToolAnswer};

const FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/run_state_v1.json"
);

/// A run in the middle of a tool turn: one call answered, one started and unfinished, one
/// not started.
fn mid_turn() -> RunState {
    let state = RunState::new(
        vec![OpenaiChatMessage::system("s")],
        RunRules::of(&CycleConfig::new("m")),
        true,
    );
    let (state, _) = step(
        state,
        Input::Start {
            prompt: Some("q".into()),
        },
    );
    let reply = ChatResponse {
        message: OpenaiChatMessage::assistant_tool_calls(
            Some("Checking.".into()),
            vec![
                ToolCall::new("call_a", "get_weather", r#"{"city":"Paris"}"#),
                ToolCall::new("call_b", "run_command", r#"{"command":"make"}"#),
                ToolCall::new("call_c", "read_file", r#"{"path":"x"}"#),
            ],
        ),
        stop_reason: Some(FinishReason::ToolCalls),
        usage: None,
        model: None,
        id: None,
    };
    let (mut state, _) = step(state, Input::ModelReplied(Box::new(reply)));
    state.mark_started(0);
    state.record_answer(0, ToolAnswer::ok("22 °C"));
    state.mark_started(1);
    state
}

#[test]
fn a_state_written_by_this_version_loads_and_continues() {
    let written = serde_json::to_string_pretty(&mid_turn()).unwrap();
    if std::env::var_os("AGCORE_WRITE_FIXTURES").is_some() {
        std::fs::write(FIXTURE, format!("{written}\n")).unwrap();
    }
    let saved = std::fs::read_to_string(FIXTURE).unwrap();
    let loaded: RunState = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        loaded,
        mid_turn(),
        "the fixture and this version's format differ"
    );
    assert_eq!(loaded.version, RUN_STATE_VERSION);
    assert!(matches!(loaded.phase, Phase::AwaitingTools { .. }));
    // Continuing: the started, unfinished call is not run again; the other one runs.
    let (_, effect) = step(loaded, Input::Start { prompt: None });
    let Effect::RunTools(batch) = effect else {
        panic!("{effect:?}")
    };
    assert_eq!(batch.run, [2]);
    assert_eq!(batch.answered.len(), 2);
    assert!(
        batch.answered[1]
            .1
            .content
            .contains("whether it had any effect is unknown")
    );
}

#[test]
fn a_future_version_is_a_clear_error() {
    let mut saved: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(FIXTURE).unwrap()).unwrap();
    saved["version"] = (RUN_STATE_VERSION + 1).into();
    let error = serde_json::from_value::<RunState>(saved)
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(&format!(
            "run state version {} is not supported: this library reads version {RUN_STATE_VERSION}",
            RUN_STATE_VERSION + 1
        )),
        "{error}"
    );
}

const SUSPENDED_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/run_state_v1_suspended.json"
);

/// The same turn, suspended: `call_b` waits for a decision.
fn suspended() -> RunState {
    let mut state = mid_turn();
    state.record_answer(1, ToolAnswer::ok("built"));
    let request = agcore::tools::ApprovalRequest {
        tool: "read_file".into(),
        call_id: "call_c".into(),
        title: "Read x".into(),
        kind: agcore::tools::ToolKind::Read,
        arguments: serde_json::json!({"path": "x"}),
        permissions: vec![agcore::tools::Permission::Read],
        reason: "tool 'read_file' needs Read, which is configured as ask".into(),
        digest: None,
    };
    let (state, effect) = step(state, Input::ToolsDeferred(vec![request]));
    assert!(matches!(effect, Effect::Suspend(_)));
    state
}

#[test]
fn a_suspended_state_written_by_this_version_loads_and_continues_with_a_decision() {
    let written = serde_json::to_string_pretty(&suspended()).unwrap();
    if std::env::var_os("AGCORE_WRITE_FIXTURES").is_some() {
        std::fs::write(SUSPENDED_FIXTURE, format!("{written}\n")).unwrap();
    }
    let saved = std::fs::read_to_string(SUSPENDED_FIXTURE).unwrap();
    let loaded: RunState = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        loaded,
        suspended(),
        "the fixture and this version's format differ"
    );
    assert_eq!(loaded.pending_approvals()[0].call_id, "call_c");
    let (_, effect) = step(
        loaded,
        Input::Decisions(vec![agcore::run::Decision::allow("call_c")]),
    );
    let Effect::RunTools(batch) = effect else {
        panic!("{effect:?}")
    };
    assert_eq!(batch.run, [2]);
    assert_eq!(batch.approved, [2]);
}
