//! `agcore chat` with server-everything (installed by `.ci/install-mcp-servers.sh`; without it
//! the tests skip with a notice, and fail on CI):
//! `/resources` lists and reads, `/prompt NAME KEY=VALUE` renders a server prompt and sends it
//! as the next message, and the model is offered the read-only resource tools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::time::Duration;

use expectrl::{ControlCode, Session};
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

const TIMEOUT: Duration = Duration::from_secs(30);

fn everything_config(dir: &Path) -> Option<String> {
    everything_config_with(dir, serde_json::json!({}))
}

fn everything_config_with(dir: &Path, extra: serde_json::Value) -> Option<String> {
    let script =
        support::mcp::npm_script("@modelcontextprotocol/server-everything", "dist/index.js")?;
    let file = dir.join("mcp.json");
    let mut entry = serde_json::json!({"command": "node", "args": [script, "stdio"]});
    entry
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let config = serde_json::json!({"mcpServers": {"everything": entry}});
    std::fs::write(&file, config.to_string()).unwrap();
    Some(file.to_string_lossy().into_owned())
}

fn expect(session: &mut Session, text: &str) {
    if let Err(error) = session.expect(text) {
        panic!("expected {text:?} on the terminal: {error}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_lists_and_reads_resources_and_sends_a_rendered_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let Some(config) = everything_config(dir.path()) else {
        return;
    };
    let server = fake_openai(vec![Reply::text("Sunny in Paris.")]).await;
    let mut command = agcore(dir.path());
    command.env("TERM", "xterm");
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--mcp-config", &config, "--yes"]);
    tokio::task::block_in_place(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(TIMEOUT));
        expect(&mut session, "agcore chat · model fake-model");
        expect(&mut session, "you> ");

        session.send_line("/resources").unwrap();
        expect(&mut session, "everything: ");
        expect(&mut session, "demo://resource/static/document/");
        expect(&mut session, "template(s)");
        expect(&mut session, "you> ");

        session
            .send_line("/resources demo://resource/dynamic/text/2")
            .unwrap();
        expect(&mut session, "you> ");

        session.send_line("/prompt args-prompt city=Paris").unwrap();
        expect(
            &mut session,
            "prompt args-prompt from everything (1 message(s)):",
        );
        expect(&mut session, "Sunny in Paris.");
        expect(&mut session, "you> ");

        session.send_line("/prompt nosuch").unwrap();
        expect(&mut session, "no MCP server offers a prompt 'nosuch'");
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.expect(expectrl::Eof).ok();
    });
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 1, "only /prompt reached the model");
    let messages = bodies[0]["messages"].as_array().unwrap();
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(last["content"], "What's weather in Paris?");
    let tools: Vec<&str> = bodies[0]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(tools.contains(&"everything__list_resources"), "{tools:?}");
    assert!(tools.contains(&"everything__read_resource"), "{tools:?}");
}

/// A chat whose model calls server-everything's `trigger-sampling-request`; the terminal
/// answers the sampling question with `answer`. Returns the model requests.
async fn sampling_chat(answer: &str, extra: serde_json::Value) -> Option<Vec<serde_json::Value>> {
    let dir = tempfile::tempdir().unwrap();
    let config = everything_config_with(dir.path(), extra)?;
    let server = fake_openai(vec![
        Reply::tool(
            "call_s",
            "trigger-sampling-request",
            r#"{"prompt":"name a colour","maxTokens":100}"#,
        ),
        Reply::text("teal"),
        Reply::text("The server got: teal."),
    ])
    .await;
    let mut command = agcore(dir.path());
    command.env("TERM", "xterm");
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--mcp-config", &config, "--yes"]);
    let answer = answer.to_owned();
    tokio::task::block_in_place(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(TIMEOUT));
        expect(&mut session, "you> ");
        session.send_line("sample something").unwrap();
        expect(
            &mut session,
            "? MCP server 'everything' asks to use the model (at most 60 tokens):",
        );
        expect(&mut session, "system: You are a helpful test server.");
        expect(&mut session, "name a colour");
        expect(&mut session, "[y] send to the model  [n] refuse: ");
        session.send_line(&answer).unwrap();
        expect(&mut session, "you> ");
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.expect(expectrl::Eof).ok();
    });
    Some(request_bodies(&server).await)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_approved_sampling_request_is_answered_by_the_chats_model_within_the_budget() {
    let Some(bodies) = sampling_chat(
        "y",
        serde_json::json!({"allowSampling": true, "samplingTokenBudget": 60,
            "toolPermissions": {"trigger-sampling-request": ["read"]}}),
    )
    .await
    else {
        return;
    };
    assert_eq!(bodies.len(), 3, "{bodies:#?}");
    // The sampling request: the server's system prompt and text, no tools, max_tokens cut to
    // the budget (the server asked for 100).
    let sampling = &bodies[1];
    assert_eq!(sampling["messages"][0]["role"], "system");
    assert_eq!(
        sampling["messages"][0]["content"],
        "You are a helpful test server."
    );
    assert!(
        sampling["messages"][1]["content"]
            .as_str()
            .unwrap()
            .contains("name a colour")
    );
    assert_eq!(sampling["max_tokens"], 60);
    assert!(sampling.get("tools").is_none());
    // The tool result the model reads carries the sampled answer.
    let tool = bodies[2]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(tool["content"].as_str().unwrap().contains("teal"), "{tool}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_sampling_request_never_reaches_the_model() {
    let Some(bodies) = sampling_chat(
        "n",
        serde_json::json!({"allowSampling": true, "samplingTokenBudget": 60,
            "toolPermissions": {"trigger-sampling-request": ["read"]}}),
    )
    .await
    else {
        return;
    };
    assert_eq!(bodies.len(), 2, "no sampling request: {bodies:#?}");
    let tool = bodies[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        tool["content"]
            .as_str()
            .unwrap()
            .contains("the user refused the sampling request"),
        "{tool}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_not_allowed_to_sample_is_not_offered_sampling() {
    let dir = tempfile::tempdir().unwrap();
    let Some(config) = everything_config(dir.path()) else {
        return;
    };
    // server-everything registers trigger-sampling-request only for clients that offer
    // sampling: without `allowSampling` the tool is not there.
    let mut command = agcore(dir.path());
    command.args(["tools", "--mcp-config", &config]);
    let out = command.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("get-tiny-image"), "{stdout}");
    assert!(!stdout.contains("trigger-sampling-request"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_past_the_spent_budget_is_refused_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    // The fake model reports 15 tokens per answer: one sampling request spends the budget.
    let Some(config) = everything_config_with(
        dir.path(),
        serde_json::json!({"allowSampling": true, "samplingTokenBudget": 15,
            "toolPermissions": {"trigger-sampling-request": ["read"]}}),
    ) else {
        return;
    };
    let call = r#"{"prompt":"name a colour","maxTokens":100}"#;
    let server = fake_openai(vec![
        Reply::tool("call_1", "trigger-sampling-request", call),
        Reply::text("teal"),
        Reply::tool("call_2", "trigger-sampling-request", call),
        Reply::text("The second one was refused."),
    ])
    .await;
    let mut command = agcore(dir.path());
    command.env("TERM", "xterm");
    command.args([
        "chat",
        "--base-url",
        &base_url(&server),
        "--model",
        "fake-model",
    ]);
    command.args(["--mcp-config", &config, "--yes"]);
    let transcript = tokio::task::block_in_place(move || {
        let mut session = Session::spawn(command).unwrap();
        session.set_expect_timeout(Some(TIMEOUT));
        expect(&mut session, "you> ");
        session.send_line("sample twice").unwrap();
        expect(
            &mut session,
            "? MCP server 'everything' asks to use the model (at most 15 tokens):",
        );
        expect(&mut session, "[y] send to the model  [n] refuse: ");
        session.send_line("y").unwrap();
        expect(
            &mut session,
            "sampling: sent the model's answer (15 tokens; 0 of 15 left)",
        );
        // The second request is refused at once: the next thing shown is the chat's answer.
        let rest = session.expect("you> ").unwrap();
        session.send(ControlCode::EndOfTransmission).unwrap();
        session.expect(expectrl::Eof).ok();
        String::from_utf8_lossy(rest.before()).into_owned()
    });
    assert!(
        transcript.contains("The second one was refused.") && !transcript.contains("asks to use"),
        "{transcript}"
    );
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies.len(), 4, "one sampling request only: {bodies:#?}");
    let last_tool = bodies[3]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|m| m["role"] == "tool")
        .unwrap();
    assert!(
        last_tool["content"]
            .as_str()
            .unwrap()
            .contains("the sampling budget of 15 tokens for this server is spent"),
        "{last_tool}"
    );
}
