//! `agcore demo`: the whole pipeline offline — a scripted model drives a multi-turn
//! conversation through built-in tools, a real MCP server (agcore's demo server, started as a
//! child process), a permission denial it recovers from, and a final answer.

use std::process::ExitCode;

use agcore::llm::testing::{RecordedRequest, ScriptedModel, ScriptedReply};
use agcore::llm::{CycleConfig, LlmCycle, OpenaiChatMessage, StreamEvent, ToolCall};
use agcore::tools::builtin::{Workspace, builtin_tools};
use agcore::tools::mcp::{McpClient, McpTransport, register_mcp_tools};
use agcore::tools::{PermissionChecker, PermissionConfig, ToolRegistry};
use anyhow::Context;
use futures::StreamExt;

use crate::cli::DemoArgs;
use crate::render::HumanRenderer;

const PROMPT: &str = "When does Project Aurora ship, what will the weather be in Lisbon, \
                      and can you clear out the old build directory?";

/// Run `agcore demo`.
pub async fn demo(args: DemoArgs) -> anyhow::Result<ExitCode> {
    let workspace_dir = tempfile::tempdir().context("could not create a temporary workspace")?;
    std::fs::write(
        workspace_dir.path().join("NOTES.md"),
        "# Project Aurora\n\nStatus: on track.\nLaunch: 2026-12-15 in Lisbon.\nOwner: Ada\n",
    )?;
    std::fs::create_dir_all(workspace_dir.path().join("build"))?;
    std::fs::write(workspace_dir.path().join("build/old.o"), "stale")?;
    let workspace = Workspace::new(workspace_dir.path())?;

    // The default permissions: Read and Network allowed, Shell and Delete denied.
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(builtin_tools(&workspace))?;

    // A real MCP server: this binary, serving agcore's demo MCP server over stdio.
    let program = std::env::current_exe().context("cannot find the agcore binary")?;
    let mcp = McpClient::new(
        "demo",
        McpTransport::Stdio {
            command: program.to_string_lossy().into_owned(),
            args: vec!["mcp-demo-server".to_owned()],
        },
    )
    .with_timeout(30)
    .without_env("OPENAI_API_KEY");
    // Sandboxed by default; agcore is its own sandbox helper.
    let mut mcp = match crate::sandbox_cmd::helper() {
        Ok(helper) => mcp.with_sandbox_helper(helper),
        Err(_) => mcp,
    };
    mcp.connect()
        .await
        .context("could not start the demo MCP server")?;
    register_mcp_tools(&mut registry, [mcp])?;

    let model = scripted_model();
    let mut cycle = LlmCycle::new(model, CycleConfig::new("scripted-demo"))
        .with_system_prompt("You are a helpful project assistant. Use the tools.");

    if !args.json {
        println!("agcore demo — the whole pipeline, offline.");
        println!(
            "The MODEL IS SCRIPTED (no API key, no network); the tools, the MCP server and the"
        );
        println!(
            "permission checks are real. Workspace: {}",
            workspace_dir.path().display()
        );
        println!("Tools: {}", registry.list_tools().join(", "));
        println!();
        println!("you › {PROMPT}");
        println!();
    }
    let mut renderer = HumanRenderer::new();
    let mut failed = false;
    {
        let mut stream = cycle
            .submit_stream_with_tools(PROMPT.to_owned(), &registry)
            .await?;
        while let Some(event) = stream.next().await {
            if args.json {
                println!("{}", serde_json::to_string(&event)?);
            } else {
                renderer.event(&event);
            }
            failed |= matches!(event, StreamEvent::Error { .. });
        }
    }
    if !args.json {
        renderer.finish();
        println!();
        println!(
            "{} messages in the history ({} tool results). The build directory is still there: {}.",
            cycle.messages().len(),
            cycle
                .messages()
                .iter()
                .filter(|m| m.role() == "tool")
                .count(),
            workspace_dir.path().join("build/old.o").exists()
        );
        println!();
        println!(
            "Use a real model:  agcore chat --base-url http://127.0.0.1:8080/v1 --model <name> --tools builtin"
        );
        println!(
            "            or:  OPENAI_API_KEY=... agcore chat --model gpt-4o-mini --tools builtin"
        );
        println!(
            "Add MCP servers: agcore chat ... --mcp-config mcp.json   (see agcore.example.toml)"
        );
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// The model's side of the conversation. The first two replies are fixed; the final answer is
/// composed from the tool results the model received, as a real model would. The loop, the
/// tools, the MCP server and the permission checks around it are real.
fn scripted_model() -> ScriptedModel {
    ScriptedModel::from_fn(final_answer)
        .with_chunk_size(6)
        .with_chunk_delay(std::time::Duration::from_millis(8))
        .reply(
            ScriptedReply::tool_calls(vec![
                ToolCall::new("call_list", "list_directory", r#"{"path":"."}"#),
                ToolCall::new("call_notes", "read_file", r#"{"path":"NOTES.md"}"#),
            ])
            .with_text("Let me look at the project files first."),
        )
        .reply(
            ScriptedReply::tool_calls(vec![
                ToolCall::new("call_weather", "get_weather", r#"{"city":"Lisbon"}"#),
                ToolCall::new("call_clean", "run_command", r#"{"command":"rm -rf build"}"#),
            ])
            .with_text("The notes say Aurora launches on 2026-12-15 in Lisbon. Checking the weather there and cleaning up the build directory."),
        )
}

fn final_answer(request: &RecordedRequest) -> ScriptedReply {
    let result = |id: &str| {
        request.messages.iter().find_map(|message| match message {
            OpenaiChatMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } if tool_call_id == id => Some((content.text(), *is_error)),
            _ => None,
        })
    };
    let weather: serde_json::Value = result("call_weather")
        .and_then(|(text, _)| serde_json::from_str(&text).ok())
        .unwrap_or_default();
    let forecast = match (
        weather["conditions"].as_str(),
        weather["temperature_c"].as_f64(),
    ) {
        (Some(conditions), Some(celsius)) => format!("{conditions}, {celsius} °C"),
        _ => "unavailable".to_owned(),
    };
    let cleanup = match result("call_clean") {
        Some((text, true)) if text.contains("permission denied") => {
            "I could not clear `build/`: running shell commands is denied by the default permissions. \
             To let me, allow Shell in agcore.toml (`[tools.permissions]`, move \"shell\" from `denied` to `allowed`), \
             or run `rm -rf build` yourself."
                .to_owned()
        }
        Some((text, _)) => format!("Cleanup result: {text}"),
        None => "I did not get to the cleanup.".to_owned(),
    };
    ScriptedReply::text(format!(
        "Project Aurora ships on **2026-12-15** (NOTES.md, owner Ada), launching in Lisbon.\n\
         Lisbon weather from the demo MCP server: {forecast}.\n{cleanup}"
    ))
}
