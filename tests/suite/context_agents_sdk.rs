//! History repair on a history in another library's shape: an OpenAI Agents SDK session dump
//! (Responses-style items, as `SQLiteSession.get_items()` returns them) converted by
//! `agcore::context::from_agents_sdk_items`, with the faults such dumps have — an output whose
//! call was trimmed away (a session `limit`), a call whose output was never saved (the SDK's
//! "No tool output found"), and a call id used twice — repaired before the first request and
//! sent to a fake server on 127.0.0.1 that checks every request is wire-valid. And a session whose
//! turns came from the Responses API (reasoning items with `encrypted_content`) continued on
//! agcore's Responses backend against a fake that checks the stateless API's rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use agcore::context::repair::NOT_RUN_ANSWER;
use agcore::context::{RepairKind, check_wire, from_agents_sdk_items, repair};
use agcore::llm::{
    CycleConfig, LlmCycle, OpenAiClient, OpenAiConfig, OpenaiChatMessage, StreamEvent,
};
use futures::StreamExt;
use support::context::{Shape, WindowedServer, registry};

const SYSTEM: &str = "You are a log analyst. Read what you are asked to read, then answer.";

/// A dump as the SDK stores it: ids, statuses, output_text parts, a reasoning item.
fn dump() -> Vec<serde_json::Value> {
    serde_json::from_str(
        r#"[
        {"type": "function_call_output", "call_id": "call_trimmed", "output": "its call was trimmed"},
        {"role": "user", "content": "TASK: read chunks 0 to 0 first."},
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Read chunk 0."}]},
        {"type": "function_call", "id": "fc_1", "call_id": "call_lost", "name": "read_chunk",
         "arguments": "{\"n\": 0}", "status": "completed"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Go on with 1 and 2."}]},
        {"type": "function_call", "id": "fc_2", "call_id": "call_dup", "name": "read_chunk",
         "arguments": "{\"n\": 1}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_dup", "output": "chunk 1 of the log:\nline 0"},
        {"type": "function_call", "id": "fc_3", "call_id": "call_dup", "name": "read_chunk",
         "arguments": "{\"n\": 2}", "status": "completed"},
        {"type": "function_call_output", "call_id": "call_dup",
         "output": [{"type": "input_text", "text": "chunk 2 of the log:\nline 0"}]},
        {"type": "message", "role": "assistant", "id": "msg_9", "status": "completed",
         "content": [{"type": "output_text", "text": "Read 1 and 2.", "annotations": []}]}
    ]"#,
    )
    .unwrap()
}

#[test]
fn the_converted_dump_is_repaired_case_by_case() {
    let converted = from_agents_sdk_items(&dump());
    assert!(converted.skipped.is_empty(), "{:?}", converted.skipped);
    let messages = converted.messages;
    assert!(
        check_wire(&messages).is_err(),
        "the dump as converted is broken"
    );
    let (repaired, repairs) = repair(messages);
    check_wire(&repaired).unwrap();
    let kinds: Vec<RepairKind> = repairs.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == RepairKind::OrphanToolResult)
            .count(),
        1,
        "{repairs:?}"
    );
    assert!(kinds.contains(&RepairKind::UnansweredCall), "{repairs:?}");
    assert!(kinds.contains(&RepairKind::DuplicateCallId), "{repairs:?}");
    // The orphan output is gone.
    assert!(!repaired.iter().any(|m| matches!(m, OpenaiChatMessage::Tool { tool_call_id, .. } if tool_call_id == "call_trimmed")));
    // The lost call is answered "not run", as an error, right after its call.
    let lost = repaired
        .iter()
        .position(|m| m.tool_calls().iter().any(|c| c.id == "call_lost"))
        .unwrap();
    match &repaired[lost + 1] {
        message @ OpenaiChatMessage::Tool { tool_call_id, .. } => {
            assert_eq!(tool_call_id, "call_lost");
            assert!(
                message.text().unwrap().ends_with(NOT_RUN_ANSWER),
                "{message:?}"
            );
            assert!(message.is_tool_error());
        }
        other => panic!("{other:?}"),
    }
    // The reasoning summary went with the call it preceded.
    assert!(
        matches!(&repaired[lost], OpenaiChatMessage::Assistant { reasoning_content: Some(r), .. } if r == "Read chunk 0.")
    );
    // The reused id: each call keeps its own output, the second under a new id.
    let pairs: Vec<(String, String, String)> = repaired
        .windows(2)
        .filter_map(|w| {
            let call = w[0].tool_calls().first()?;
            match &w[1] {
                OpenaiChatMessage::Tool { tool_call_id, .. } => Some((
                    call.id.clone(),
                    tool_call_id.clone(),
                    w[1].text().unwrap_or_default(),
                )),
                _ => None,
            }
        })
        .filter(|(_, _, text)| text.starts_with("chunk "))
        .collect();
    assert_eq!(pairs.len(), 2, "{pairs:?}");
    assert_eq!(pairs[0].0, "call_dup");
    assert!(pairs[0].2.starts_with("chunk 1"));
    assert_ne!(pairs[1].0, "call_dup");
    assert_eq!(pairs[1].0, pairs[1].1, "renamed in the call and its result");
    assert!(pairs[1].2.starts_with("chunk 2"));
    // Repair is idempotent.
    let (again, more) = repair(repaired.clone());
    assert_eq!(again, repaired);
    assert!(more.is_empty());
}

#[tokio::test]
async fn a_converted_dump_runs_against_a_server_that_checks_every_request() {
    let server = WindowedServer::start(8_192, Shape::OpenAi, SYSTEM).await;
    let mut history = vec![OpenaiChatMessage::system(SYSTEM)];
    history.extend(from_agents_sdk_items(&dump()).messages);
    let client = OpenAiClient::new(OpenAiConfig::new(server.base_url())).unwrap();
    let mut cycle = LlmCycle::from_history(client, CycleConfig::new("local-model"), history);
    let registry = registry();
    let mut stream = cycle
        .run_stream(
            Some("TASK: read chunks 3 to 3 now.".to_owned()),
            Some(&registry),
        )
        .await
        .unwrap();
    let mut repairs = Vec::new();
    let mut text = String::new();
    while let Some(event) = stream.next().await {
        match event {
            StreamEvent::HistoryRepaired { kind, .. } => repairs.push(kind),
            StreamEvent::AssistantTextDelta { text: piece } => text.push_str(&piece),
            StreamEvent::Error { message, .. } => panic!("{message}"),
            _ => {}
        }
    }
    drop(stream);
    assert_eq!(text, "DONE 3-3");
    for kind in [
        RepairKind::OrphanToolResult,
        RepairKind::UnansweredCall,
        RepairKind::DuplicateCallId,
    ] {
        assert!(repairs.contains(&kind), "{kind:?} in {repairs:?}");
    }
    // Every request the server got passed its checks (WindowedServer panics on drop otherwise).
    assert!(server.received().iter().all(|r| !r.rejected));
    check_wire(cycle.messages()).unwrap();
}

/// The weather tool of the Responses fixtures.
struct Weather;

#[agcore::tools::prelude::async_trait]
impl agcore::tools::prelude::BaseTool for Weather {
    fn name(&self) -> &str {
        "get_weather"
    }
    fn description(&self) -> &str {
        "Current weather of a city"
    }
    fn parameters(&self) -> serde_json::Value {
        serde_json::json!({"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]})
    }
    async fn execute(
        &self,
        args: serde_json::Value,
    ) -> Result<serde_json::Value, agcore::tools::prelude::ToolError> {
        Ok(serde_json::json!({"city": args["city"], "temperature": 22}))
    }
}

/// An Agents SDK session of a Responses model (`store: false`, so its reasoning items carry
/// `encrypted_content`) continues on agcore's Responses backend: each imported reasoning item
/// goes back byte for byte right before the call or message it preceded, and the fake, which
/// answers 400 like the API for a reasoning item out of place or not its own, accepts it.
#[tokio::test]
async fn a_responses_session_continues_natively_with_its_encrypted_reasoning() {
    use agcore::llm::{OpenAiResponsesClient, OpenAiResponsesConfig};
    use support::responses_fake::{Answer, ResponsesFake, fixture};
    let fake = ResponsesFake::start(|_, n| match n {
        0 => Answer::Reply {
            stream: "stream_reasoning_parallel_calls.sse",
            whole: "response_reasoning_calls.json",
        },
        _ => Answer::Reply {
            stream: "stream_reasoning_text.sse",
            whole: "response_reasoning_text.json",
        },
    })
    .await;
    let client = || {
        OpenAiResponsesClient::new(
            OpenAiResponsesConfig::new(fake.base_url()).with_api_key("sk-test"),
        )
        .unwrap()
    };
    let mut tools = agcore::tools::ToolRegistry::new();
    tools.register(std::sync::Arc::new(Weather)).unwrap();
    // The session as the SDK ran it (the server issues its items) ...
    let prompt = "Weather in Zürich and Tokyo?";
    let mut sdk_run = LlmCycle::new(client(), CycleConfig::new("gpt-5"));
    sdk_run
        .submit_with_tools(prompt.to_owned(), &tools)
        .await
        .unwrap();
    // ... and as it stored them: the prompt, each reply's output items, the outputs.
    let output = |name: &str| -> Vec<serde_json::Value> {
        let reply: serde_json::Value = serde_json::from_str(&fixture(name)).unwrap();
        reply["output"].as_array().unwrap().clone()
    };
    let calls = output("response_reasoning_calls.json");
    let answer = output("response_reasoning_text.json");
    let mut items = vec![serde_json::json!({"role": "user", "content": prompt})];
    items.extend(calls.iter().cloned());
    for call in calls.iter().filter(|item| item["type"] == "function_call") {
        items.push(serde_json::json!({
            "type": "function_call_output",
            "call_id": call["call_id"],
            "output": "{\"city\": \"somewhere\", \"temperature\": 22}"
        }));
    }
    items.extend(answer.iter().cloned());
    let converted = from_agents_sdk_items(&items);
    assert!(converted.skipped.is_empty(), "{:?}", converted.skipped);
    let (history, repairs) = repair(converted.messages);
    assert!(repairs.is_empty(), "{repairs:?}");

    let mut imported = LlmCycle::from_history(client(), CycleConfig::new("gpt-5"), history);
    let reply = imported
        .submit_with_tools("And tomorrow?".to_owned(), &tools)
        .await
        .unwrap();
    assert!(!reply.text().is_empty());
    assert_eq!(fake.rejected(), Vec::<String>::new());
    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    let input = requests[2]["input"].as_array().unwrap();
    let kinds: Vec<&str> = input
        .iter()
        .map(|i| i["type"].as_str().unwrap_or("message"))
        .collect();
    // Each reasoning item right before what followed it in its reply, as it was.
    let first = kinds.iter().position(|k| *k == "reasoning").unwrap();
    assert_eq!(input[first], calls[0]);
    assert_eq!(kinds[first + 1], "function_call");
    assert_eq!(input[first + 1]["call_id"], calls[1]["call_id"]);
    let second = kinds.iter().rposition(|k| *k == "reasoning").unwrap();
    assert_eq!(input[second], answer[0]);
    assert_eq!(input[second + 1]["role"], "assistant");
    assert_eq!(kinds.iter().filter(|k| **k == "reasoning").count(), 2);
}
