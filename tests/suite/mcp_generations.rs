//! Both protocol generations against rmcp 3.11's own streamable HTTP server (the demo server
//! with `--http`): a 2026-07-28 server is spoken to statelessly (`server/discover`, no
//! `initialize`), a server capped at 2025-11-25 through the handshake — side by side in one
//! registry; the negotiated version and the `tools/list` cache hint are reported, and a
//! listing is reused exactly until its `ttlMs` runs out.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::support;

use agcore::tools::ToolRegistry;
use agcore::tools::mcp::{
    McpClient, McpNegotiation, McpServerStatus, McpTransport, register_mcp_tools,
};
use serde_json::json;
use support::mcp::demo_server;

/// A demo server serving HTTP on a free loopback port; killed on drop.
struct HttpDemo {
    child: Child,
    url: String,
}

impl HttpDemo {
    fn start(args: &[&str]) -> Self {
        let mut child = Command::new(demo_server())
            .args(["--http", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        // The server prints its address once it listens: no waiting on time.
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let url = line
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("the demo server said {line:?}"))
            .to_owned();
        HttpDemo { child, url }
    }

    fn client(&self, name: &str) -> McpClient {
        McpClient::new(name, McpTransport::http(&self.url)).with_timeout(20)
    }
}

impl Drop for HttpDemo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[tokio::test]
async fn a_stateless_and_a_session_server_side_by_side_in_one_registry() {
    let modern = HttpDemo::start(&["--ttl-ms", "3600000"]);
    let legacy = HttpDemo::start(&["--max-protocol", "2025-11-25"]);
    let mut new = modern.client("new");
    let mut old = legacy.client("old");
    new.connect().await.unwrap();
    old.connect().await.unwrap();

    let new_info = new.server_info().unwrap();
    assert_eq!(
        (new_info.protocol_version.as_str(), new_info.stateless),
        ("2026-07-28", true)
    );
    assert_eq!(new_info.name, "mcp-demo-server");
    let old_info = old.server_info().unwrap();
    assert_eq!(
        (old_info.protocol_version.as_str(), old_info.stateless),
        ("2025-11-25", false)
    );

    // What `agcore mcp list` shows: the version, and the cache hint of the stateless server.
    let (new, old) = (Ok(new), Ok(old));
    let statuses = [
        McpServerStatus::of("new", &new),
        McpServerStatus::of("old", &old),
    ];
    let (new, old) = (new.unwrap(), old.unwrap());
    let listed = serde_json::to_value(&statuses).unwrap();
    assert_eq!(listed[0]["info"]["protocol_version"], "2026-07-28");
    assert_eq!(
        listed[0]["tools_cache"],
        json!({"ttl_ms": 3_600_000, "shared": true})
    );
    assert_eq!(listed[1]["info"]["protocol_version"], "2025-11-25");
    assert!(listed[1].get("tools_cache").is_none(), "{listed}");

    let mut registry = ToolRegistry::new();
    let registered = register_mcp_tools(&mut registry, [new, old]).unwrap();
    let echoes: Vec<_> = registered
        .iter()
        .filter(|tool| tool.tool == "echo")
        .collect();
    assert_eq!(echoes.len(), 2, "{registered:?}");
    for echo in echoes {
        let tool = registry.get(&echo.name).unwrap();
        let answer = tool
            .execute(json!({"message": format!("hi {}", echo.server)}))
            .await
            .unwrap();
        assert_eq!(answer, json!(format!("Echo: hi {}", echo.server)));
    }
}

#[tokio::test]
async fn a_listing_is_reused_until_its_ttl_runs_out() {
    // Both servers add the tool `extra` on `change_tools` without a list-changed notification,
    // so only the cache hint decides when agcore asks again.
    let lasting = HttpDemo::start(&["--test-tools", "--ttl-ms", "3600000"]);
    let expired = HttpDemo::start(&["--test-tools", "--ttl-ms", "0"]);
    for (server, reused) in [(&lasting, true), (&expired, false)] {
        let mut client = server
            .client("demo")
            .with_negotiation(McpNegotiation::Stateless);
        client.connect().await.unwrap();
        let before = client.list_tools().await.unwrap();
        assert!(!before.iter().any(|tool| tool.name() == "extra"));
        client
            .call_tool("change_tools", json!({"quiet": true}))
            .await
            .unwrap();
        let after = client.list_tools().await.unwrap();
        let has_extra = after.iter().any(|tool| tool.name() == "extra");
        assert_eq!(has_extra, !reused, "ttl reuse={reused}: {after:?}");
        client.close().await.unwrap();
    }
}

#[tokio::test]
async fn stateless_only_refuses_a_server_of_the_previous_generation() {
    let legacy = HttpDemo::start(&["--max-protocol", "2025-11-25"]);
    let mut client = legacy
        .client("old")
        .with_negotiation(McpNegotiation::Stateless)
        .with_connect_timeout(Duration::from_secs(20));
    let error = client.connect().await.unwrap_err();
    assert!(error.to_string().contains("old"), "{error}");
    // The same server through the handshake works.
    let mut client = legacy
        .client("old")
        .with_negotiation(McpNegotiation::Initialize);
    client.connect().await.unwrap();
    assert_eq!(client.server_info().unwrap().protocol_version, "2025-11-25");
}

#[tokio::test]
async fn structured_content_of_any_type_is_checked_against_the_output_schema() {
    let modern = HttpDemo::start(&["--test-tools"]);
    let mut client = modern.client("demo");
    client.connect().await.unwrap();
    // `get_weather` declares an object outputSchema and answers a matching object.
    let weather = client
        .call_tool("get_weather", json!({"city": "Oslo"}))
        .await
        .unwrap();
    assert_eq!(weather["city"], "Oslo");
    // `numbers` declares an array of integers; `{"bad": true}` makes it answer a string in it.
    let good = client.call_tool("numbers", json!({})).await.unwrap();
    assert_eq!(good, json!([1, 2, 3]));
    let bad = client
        .call_tool("numbers", json!({"bad": true}))
        .await
        .unwrap_err();
    assert!(bad.to_string().contains("outputSchema"), "{bad}");
}
