//! `agcore chat` with server-everything (skipped without `AGCORE_TEST_NODE_MODULES`):
//! `/resources` lists and reads, `/prompt NAME KEY=VALUE` renders a server prompt and sends it
//! as the next message, and the model is offered the read-only resource tools.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::time::Duration;

use expectrl::{ControlCode, Session};
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

const TIMEOUT: Duration = Duration::from_secs(30);

fn everything_config(dir: &Path) -> Option<String> {
    let modules = std::env::var_os("AGCORE_TEST_NODE_MODULES")?;
    let script = Path::new(&modules).join("@modelcontextprotocol/server-everything/dist/index.js");
    if !script.exists() {
        return None;
    }
    let file = dir.join("mcp.json");
    let config = serde_json::json!({"mcpServers": {"everything": {
        "command": "node", "args": [script, "stdio"]}}});
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
        eprintln!("SKIPPED: server-everything is not installed (AGCORE_TEST_NODE_MODULES)");
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
