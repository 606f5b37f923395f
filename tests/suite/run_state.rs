//! The run-state format: a state written by version 1 (a fixture) loads as this version and
//! continues; a state with continuation artifacts round-trips byte-exact; a future version is a
//! clear error.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use agcore::llm::{CycleConfig, OpenaiChatMessage, ToolCall};
use agcore::run::{Effect, Input, Phase, RUN_STATE_VERSION, RunRules, RunState, step};
use agcore::vocab::{
    Artifact, ArtifactPlace, ArtifactProvider, ChatResponse, FinishReason, ToolAnswer,
};

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

/// A version-1 fixture is read as this version: the same state, written back with the new
/// version number.
fn loads_as_this_version(fixture: &str, expected: &RunState) -> RunState {
    let saved = std::fs::read_to_string(fixture).unwrap();
    assert!(saved.contains("\"version\": 1,\n"), "a version-1 fixture");
    let loaded: RunState = serde_json::from_str(&saved).unwrap();
    assert_eq!(
        &loaded, expected,
        "the version-1 fixture no longer reads as the same state"
    );
    assert_eq!(loaded.version, RUN_STATE_VERSION);
    let written = serde_json::to_value(&loaded).unwrap();
    assert_eq!(written["version"], RUN_STATE_VERSION);
    loaded
}

#[test]
fn a_state_written_by_version_1_loads_and_continues() {
    // The fixture is frozen: written by version 1, it stays as that version wrote it.
    let loaded = loads_as_this_version(FIXTURE, &mid_turn());
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
            "run state version {} is not supported: this library reads versions 1 to {RUN_STATE_VERSION}",
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
fn a_suspended_state_written_by_version_1_loads_and_continues_with_a_decision() {
    let loaded = loads_as_this_version(SUSPENDED_FIXTURE, &suspended());
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

const ARTIFACTS_FIXTURE: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/fixtures/run_state_v2_artifacts.json"
);

/// The suspended turn of a reasoning model: its reply carries an Anthropic thinking block, a
/// Responses reasoning item and a chat-completions `extra_content` on a call — non-ASCII text,
/// characters JSON escapes, a long opaque blob.
fn suspended_with_artifacts() -> RunState {
    let mut state = suspended();
    let Phase::AwaitingApproval { turn, .. } = &mut state.phase else {
        panic!("suspended")
    };
    let [thinking, reasoning, extra] =
        vendor_artifacts().map(|text| serde_json::from_str(&text).unwrap());
    let assistant = turn.assistant.take().expect("the reply is in the turn");
    turn.assistant = Some(assistant.with_artifacts(vec![
        Artifact::new(
            ArtifactProvider::Anthropic,
            "claude-sonnet-4-5",
            ArtifactPlace::Before(0),
            thinking,
        ),
        Artifact::new(
            ArtifactProvider::OpenaiResponses,
            "gpt-5",
            ArtifactPlace::Before(2),
            reasoning,
        ),
        Artifact::new(
            ArtifactProvider::OpenaiChat,
            "gemini-3-pro-preview",
            ArtifactPlace::On(1),
            extra,
        ),
    ]));
    state
}

/// The artifacts' JSON as the vendors sent it.
fn vendor_artifacts() -> [String; 3] {
    [
        r#"{"type":"thinking","thinking":"Paris first — then \"make\".\n","signature":"EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDdEKx"}"#.to_owned(),
        format!(
            r#"{{"type":"reasoning","id":"rs_68af","summary":[],"encrypted_content":"{}"}}"#,
            "gAAAAABo".repeat(512)
        ),
        r#"{"extra_content":{"google":{"thought_signature":"CiQB0e2Kb3/+sig=="}}}"#.to_owned(),
    ]
}

#[test]
fn a_state_with_artifacts_round_trips_byte_exact() {
    let state = suspended_with_artifacts();
    if std::env::var_os("AGCORE_WRITE_FIXTURES").is_some() {
        let written = serde_json::to_string_pretty(&state).unwrap();
        std::fs::write(ARTIFACTS_FIXTURE, format!("{written}\n")).unwrap();
    }
    let saved = std::fs::read_to_string(ARTIFACTS_FIXTURE).unwrap();
    let loaded: RunState = serde_json::from_str(&saved).unwrap();
    assert_eq!(loaded, state, "the fixture holds this state");
    // Written again, the loaded state is the fixture byte for byte: the same fields, in the
    // same order, with the same escapes. (The keys inside an artifact keep the order they were
    // read in when serde_json's `preserve_order` is on — a workspace with the ACP SDK — and are
    // sorted otherwise; the fixture's are sorted, so both builds write its bytes.)
    let written = serde_json::to_string_pretty(&loaded).unwrap();
    assert_eq!(
        saved,
        format!("{written}\n"),
        "this version writes the fixture's bytes"
    );
    // Each artifact's JSON comes back as the vendor sent it: every value byte for byte (keys
    // in serde_json's order, which no API gives meaning to).
    let Phase::AwaitingApproval { turn, .. } = &loaded.phase else {
        panic!("suspended")
    };
    let kept: Vec<&serde_json::Value> = turn
        .assistant
        .as_ref()
        .unwrap()
        .artifacts()
        .iter()
        .map(|a| &a.data)
        .collect();
    for (kept, sent) in kept.iter().zip(vendor_artifacts()) {
        assert_eq!(
            **kept,
            serde_json::from_str::<serde_json::Value>(&sent).unwrap()
        );
    }
    assert_eq!(kept[0]["thinking"], "Paris first — then \"make\".\n");
    assert_eq!(kept[0]["signature"], "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxDdEKx");
    assert_eq!(
        kept[1]["encrypted_content"].as_str().map(str::len),
        Some(8 * 512)
    );
    assert_eq!(
        kept[2]["extra_content"]["google"]["thought_signature"],
        "CiQB0e2Kb3/+sig=="
    );
    // Through the journal's form too (a state without its history, as a JSON value).
    let value = serde_json::to_value(loaded.without_messages()).unwrap();
    let again: RunState = serde_json::from_str(&value.to_string()).unwrap();
    assert_eq!(again.pending_approvals(), loaded.pending_approvals());
    assert_eq!(again.phase, loaded.phase);
    // A version-1 reader refuses it by its version rather than drop the artifacts unseen.
    assert!(saved.contains(&format!("\"version\": {RUN_STATE_VERSION},\n")));
    assert_eq!(RUN_STATE_VERSION, 2);
}
