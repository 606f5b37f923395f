//! Teams of agents from the command line (`[agents.NAME]`, `run --agent`, `chat --agent`,
//! `agents list`), end to end against a chat-completions fake on 127.0.0.1 that routes each
//! request to the agent whose instructions its system prompt holds and checks the tools it
//! offers (`support::team_model`): delegation with the child's events marked by agent path, a
//! handoff and back across two processes of one session, the config errors, the listing, an
//! agent's files and history settings, a failing child and the run's budget over the tree.
//! Crashes and approvals across processes: `suite::agents_durable`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;
use support::team_cli::*;
use support::team_model::{AgentScript, TeamModel};
use support::{Reply, agcore, assert_history_valid};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_agent_main_delegates_to_the_researcher_and_marks_its_events_with_the_path() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool(
                    "call_r",
                    "researcher",
                    r#"{"task":"What does notes.txt say?"}"#,
                ),
                Reply::text("The notes say hello."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            RESEARCHER_TOOLS,
            vec![
                Reply::tool("call_f", "read_file", r#"{"path":"notes.txt"}"#),
                Reply::text("notes.txt: hello from the notes"),
            ],
        ),
    ])
    .await;
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "main", "--json", "What is in the notes?"],
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(model.routed(), ["main", "researcher", "researcher", "main"]);

    // The child got the task as its only user message, under its own instructions.
    let child = model.requests_of("researcher");
    assert_eq!(
        conversation(&child[0]),
        [serde_json::json!({"role": "user", "content": "What does notes.txt say?"})]
    );
    let system = support::team_model::system_prompt(&child[0]);
    assert!(!system.contains("[role:main]"), "{system}");
    // Its own model; the parent's instructions rendered with --var.
    assert_eq!(child[0]["model"], "m-small");
    assert!(answer_to(&child[1], "call_f").contains("hello from the notes"));
    // The parent read the child's answer as the call's.
    let main = model.requests_of("main");
    assert_eq!(main[0]["model"], "m");
    let system = support::team_model::system_prompt(&main[0]);
    assert!(system.contains("You lead the Blue team."), "{system}");
    assert_eq!(roles(&conversation(&main[0])), ["user"]);
    assert_eq!(
        answer_to(&main[1], "call_r"),
        "notes.txt: hello from the notes"
    );

    let events = events(&output);
    let of = |agent: Option<&str>, kind: &str, tool: &str| {
        events
            .iter()
            .filter(|e| e["type"] == kind && e["tool_name"] == tool && e["agent"].as_str() == agent)
            .count()
    };
    assert_eq!(
        of(
            Some("main/researcher"),
            "tool_execution_started",
            "read_file"
        ),
        1,
        "{events:#?}"
    );
    assert_eq!(
        of(
            Some("main/researcher"),
            "tool_execution_completed",
            "read_file"
        ),
        1
    );
    assert_eq!(of(None, "tool_execution_started", "researcher"), 1);
    assert_eq!(of(None, "tool_execution_started", "read_file"), 0);
    // The child's text is its own, marked; the parent's text is not.
    assert_eq!(
        text_of(&events, Some("main/researcher")),
        "notes.txt: hello from the notes"
    );
    assert_eq!(text_of(&events, None), "The notes say hello.");
    assert_eq!(
        events.last().unwrap()["type"],
        "turn_complete",
        "{events:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn for_people_a_child_s_tool_lines_carry_its_path_and_only_the_answer_is_on_stdout() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"read the notes"}"#),
                Reply::text("The notes say hello."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            RESEARCHER_TOOLS,
            vec![
                Reply::tool("call_f", "read_file", r#"{"path":"notes.txt"}"#),
                Reply::text("hello, says notes.txt"),
            ],
        ),
    ])
    .await;
    let output = run(dir.path(), &model, &config, &["--agent", "main", "notes?"]);
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output), "The notes say hello.\n");
    let said = stderr(&output);
    assert!(said.contains("→ researcher(task=read the notes)"), "{said}");
    assert!(
        said.contains("→ main/researcher › read_file(path=notes.txt)"),
        "{said}"
    );
    assert!(
        said.contains("✓ main/researcher › read_file(path=notes.txt) ok"),
        "{said}"
    );
    assert!(said.contains("→ hello, says notes.txt"), "{said}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handoff_is_an_event_and_the_session_goes_on_with_the_agent_it_left_then_back() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_h", "transfer_to_billing", "{}"),
                Reply::text("Back with main."),
            ],
        ),
        AgentScript::new(
            "billing",
            "[role:billing]",
            BILLING_TOOLS,
            vec![
                Reply::text("Billing here: your invoice is sent."),
                Reply::tool("call_b", "transfer_to_main", "{}"),
            ],
        ),
    ])
    .await;
    let session = ["--agent", "main", "--session", "bill", "--store", &store];
    let output = run(
        dir.path(),
        &model,
        &config,
        &[&session[..], &["--json", "Where is my invoice?"]].concat(),
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    let handoffs: Vec<&Value> = events.iter().filter(|e| e["type"] == "handoff").collect();
    assert_eq!(handoffs.len(), 1, "{events:#?}");
    assert_eq!(handoffs[0]["from"], "main");
    assert_eq!(handoffs[0]["to"], "billing");
    assert_eq!(
        text_of(&events, None),
        "Billing here: your invoice is sent."
    );

    // The next process of the session starts with billing, which hands back to main.
    let output = run(
        dir.path(),
        &model,
        &config,
        &[&session[..], &["And my balance?"]].concat(),
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(stdout(&output).trim(), "Back with main.");
    let said = stderr(&output);
    assert!(said.contains("goes on with agent billing"), "{said}");
    assert!(said.contains("handoff: billing → main"), "{said}");
    assert_eq!(model.routed(), ["main", "billing", "billing", "main"]);
    // Billing saw the whole conversation (handoff_history = full), the handoff included.
    let billing = model.requests_of("billing");
    let sent = conversation(&billing[1]);
    assert_history_valid(&sent);
    assert_eq!(
        roles(&sent),
        ["user", "assistant", "tool", "assistant", "user"],
        "{sent:?}"
    );
}

/// `run --agent main` with `config` fails before any request, naming `expected`.
async fn refused(extra: &str, expected: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("bad.toml");
    std::fs::write(&config, extra).unwrap();
    let model = TeamModel::start(Vec::new()).await;
    let output = run(dir.path(), &model, &config, &["--agent", "main", "hi"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    let said = stderr(&output);
    for part in expected {
        assert!(said.contains(part), "{part:?} not in {said}");
    }
    assert!(model.routed().is_empty(), "a request was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_team_naming_an_unknown_agent_or_tool_or_with_a_cycle_is_refused_at_start() {
    refused(
        "[agents.main]\nagents = [\"researcher\"]\n[agents.researcher]\nhandoffs = [\"ghost\"]\n",
        &["researcher", "ghost", "agents: main, researcher"],
    )
    .await;
    refused(
        "[agents.main]\nagents = [\"researcher\"]\n[agents.researcher]\ntools = [\"read_fiel\"]\n",
        &["researcher", "read_fiel", "matches no tool"],
    )
    .await;
    refused(
        "[agents.main]\nagents = [\"researcher\"]\n[agents.researcher]\nagents = [\"main\"]\n",
        &["cycle", "main/researcher/main"],
    )
    .await;
    refused("[agents.other]\n", &["--agent main", "agents: other"]).await;
    refused(
        "[agents.main]\ninstructions = \"{{ who }}\"\n",
        &["--var who"],
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn print_system_prompt_with_an_agent_prints_its_rendered_instructions() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(Vec::new()).await;
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "main", "--print-system-prompt"],
    );
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    assert!(
        text.contains("[role:main] You lead the Blue team. Delegate research"),
        "{text}"
    );
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "researcher", "--print-system-prompt"],
    );
    assert!(stdout(&output).contains("[role:researcher]"), "{output:?}");
    assert!(!stdout(&output).contains("[role:main]"), "{output:?}");
    assert!(model.routed().is_empty());
}

fn agents_list(dir: &Path, config: &Path, extra: &[&str]) -> Output {
    let mut command = agcore(dir);
    command
        .args(["agents", "list", "--tools", "builtin", "--workspace"])
        .arg(dir)
        .arg("--config")
        .arg(config)
        .args(extra);
    Command::from_std(command)
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_list_shows_each_agent_its_tools_and_why_a_tool_is_hidden() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let output = agents_list(dir.path(), &config, &["--json"]);
    assert!(output.status.success(), "{output:?}");
    let json: Value = serde_json::from_slice(&output.stdout).unwrap();
    let agents = json["agents"].as_array().unwrap();
    let agent = |name: &str| {
        agents
            .iter()
            .find(|a| a["name"] == name)
            .unwrap_or_else(|| panic!("no {name} in {json:#}"))
    };
    let exposed = |name: &str| -> Vec<String> {
        agent(name)["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["exposed"] == true)
            .map(|t| t["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(exposed("researcher"), ["read_file", "search_files"]);
    assert_eq!(exposed("main"), ["list_directory"]);
    assert_eq!(agent("main")["agents"], serde_json::json!(["researcher"]));
    assert_eq!(agent("main")["handoffs"], serde_json::json!(["billing"]));
    assert_eq!(
        agent("researcher")["description"],
        "Finds facts in the workspace and cites the file."
    );
    // A tool the agent's list leaves out is hidden with its gate and reason.
    let write = agent("researcher")["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "write_file")
        .unwrap();
    assert_eq!(write["exposed"], false);
    let gates: Vec<&str> = write["hidden_because"]
        .as_array()
        .unwrap()
        .iter()
        .map(|reason| reason["gate"].as_str().unwrap())
        .collect();
    assert!(!gates.is_empty(), "{write}");

    let output = agents_list(dir.path(), &config, &[]);
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    insta::assert_snapshot!(text);
    assert!(
        text.contains("agent researcher — Finds facts in the workspace and cites the file."),
        "{text}"
    );
    assert!(text.contains("  tools: read_file, search_files"), "{text}");
    assert!(text.contains("  sub-agents: researcher"), "{text}");
    assert!(
        text.contains("  handoffs: billing (as transfer_to_billing)"),
        "{text}"
    );
    // The researcher's block: from its header to the next agent's.
    let researcher: Vec<&str> = text
        .lines()
        .skip_while(|line| !line.starts_with("agent researcher"))
        .take_while(|line| !line.is_empty())
        .collect();
    let line = researcher
        .iter()
        .find(|line| line.trim_start().starts_with("hidden") && line.contains("write_file"))
        .unwrap_or_else(|| panic!("no hidden write_file line in {researcher:?}"));
    assert!(
        line.contains("researcher") && line.contains("permission denied: Write"),
        "{line}"
    );
    assert!(
        researcher
            .iter()
            .any(|line| line.trim_start().starts_with("exposed") && line.contains("read_file")),
        "{researcher:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_agent_main_follows_a_handoff_for_the_next_prompt() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![Reply::tool("call_h", "transfer_to_billing", "{}")],
        ),
        AgentScript::new(
            "billing",
            "[role:billing]",
            BILLING_TOOLS,
            vec![Reply::text("Billing here."), Reply::text("Still billing.")],
        ),
    ])
    .await;
    let mut command = agcore(dir.path());
    command
        .args(["chat", "--base-url", &model.base_url(), "--model", "m"])
        .args(["--tools", "builtin", "--workspace"])
        .arg(dir.path())
        .arg("--config")
        .arg(&config)
        .args(["--var", "team=Blue", "--agent", "main"]);
    let output = Command::from_std(command)
        .write_stdin("my invoice?\nand the next one?\n")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    assert_eq!(model.routed(), ["main", "billing", "billing"]);
    let shown = stdout(&output);
    assert!(shown.contains("agent main"), "{shown}");
    assert!(shown.contains("Billing here."), "{shown}");
    assert!(shown.contains("Still billing."), "{shown}");
    assert!(
        stderr(&output).contains("handoff: main → billing"),
        "{output:?}"
    );
    // The second prompt went to billing with the whole conversation before it.
    let sent = conversation(&model.requests_of("billing")[1]);
    assert_eq!(
        roles(&sent),
        ["user", "assistant", "tool", "assistant", "user"],
        "{sent:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_s_files_history_slices_and_typed_answer_come_from_its_section() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("notes.txt"), "hello\n").unwrap();
    // The files of a section are relative to its config file.
    let conf = dir.path().join("conf");
    std::fs::create_dir_all(conf.join("prompts")).unwrap();
    std::fs::create_dir_all(conf.join("schemas")).unwrap();
    std::fs::write(
        conf.join("prompts/main.md"),
        "[role:main] Lead the {{ team }} team.",
    )
    .unwrap();
    std::fs::write(
        conf.join("schemas/answer.json"),
        r#"{"type":"object","properties":{"file":{"type":"string"}},"required":["file"]}"#,
    )
    .unwrap();
    let config = conf.join("team.toml");
    std::fs::write(
        &config,
        r#"
[agents.main]
instructions_file = "prompts/main.md"
tools = ["read_file"]
agents = ["researcher"]
handoffs = ["billing"]
[agents.researcher]
instructions = "[role:researcher] Find the file."
tools = ["read_file"]
parent_history = 1
output_schema = "schemas/answer.json"
[agents.researcher.limits]
max_requests = 2
[agents.billing]
instructions = "[role:billing] Bill."
tools = []
handoff_history = "last_user_message"
"#,
    )
    .unwrap();
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            &["read_file", "researcher", "transfer_to_billing"],
            vec![
                Reply::text("Hello Ada."),
                Reply::tool("call_r", "researcher", r#"{"task":"which file?"}"#),
                Reply::tool("call_h", "transfer_to_billing", "{}"),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            &["read_file"],
            vec![Reply::text(r#"{"file":"notes.txt"}"#)],
        ),
        AgentScript::new(
            "billing",
            "[role:billing]",
            &[],
            vec![Reply::text("Billed.")],
        ),
    ])
    .await;
    let store = format!("sqlite:{}", dir.path().join("sessions.db").display());
    let session = ["--agent", "main", "--session", "s", "--store", &store];
    for prompt in ["I am Ada.", "Where is it?"] {
        let output = run(
            dir.path(),
            &model,
            &config,
            &[&session[..], &[prompt]].concat(),
        );
        model.assert_clean();
        assert!(output.status.success(), "{output:?}");
    }
    assert_eq!(
        model.routed(),
        ["main", "main", "researcher", "main", "billing"]
    );
    let main = model.requests_of("main");
    let system = support::team_model::system_prompt(&main[0]);
    assert!(system.contains("Lead the Blue team."), "{system}");
    // parent_history = 1: the parent's last message — its current prompt — then the task.
    let child = conversation(&model.requests_of("researcher")[0]);
    assert_eq!(roles(&child), ["user", "user"], "{child:?}");
    assert_eq!(child[0]["content"], "Where is it?");
    assert_eq!(child[1]["content"], "which file?");
    // The typed answer reaches the parent as JSON.
    let answer: Value = serde_json::from_str(&answer_to(&main[2], "call_r")).unwrap();
    assert_eq!(answer, serde_json::json!({"file": "notes.txt"}));
    // last_user_message: billing sees the prompt and the turn that handed off, not the
    // researcher's call.
    let billing = conversation(&model.requests_of("billing")[0]);
    assert_eq!(
        roles(&billing),
        ["user", "assistant", "tool"],
        "{billing:?}"
    );
    assert_eq!(billing[0]["content"], "Where is it?");
    assert_eq!(billing[2]["tool_call_id"], "call_h");
    assert!(!billing.iter().any(|m| m["tool_call_id"] == "call_r"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_child_is_its_parent_s_error_answer_not_an_error_event() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"look"}"#),
                Reply::text("The researcher failed; here is what I know."),
            ],
        ),
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            RESEARCHER_TOOLS,
            vec![Reply::Status(
                400,
                "the researcher's model refused".to_owned(),
            )],
        ),
    ])
    .await;
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "main", "--json", "look it up"],
    );
    model.assert_clean();
    assert!(output.status.success(), "{output:?}");
    let events = events(&output);
    assert!(
        events.iter().all(|e| e["type"] != "error"),
        "only a failure of the run is an error event: {events:#?}"
    );
    let completed = events
        .iter()
        .find(|e| e["type"] == "tool_execution_completed" && e["tool_name"] == "researcher")
        .unwrap();
    assert_eq!(completed["is_error"], true, "{completed}");
    let answer = answer_to(&model.requests_of("main")[1], "call_r");
    assert!(
        answer.contains("the researcher's model refused"),
        "{answer}"
    );
    assert_eq!(
        text_of(&events, None),
        "The researcher failed; here is what I know."
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_run_s_request_budget_stops_a_runaway_child() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![
                Reply::tool("call_r", "researcher", r#"{"task":"read forever"}"#),
                Reply::text("never reached"),
            ],
        ),
        // Reads the file again and again: the last reply repeats.
        AgentScript::new(
            "researcher",
            "[role:researcher]",
            RESEARCHER_TOOLS,
            vec![Reply::tool(
                "call_f",
                "read_file",
                r#"{"path":"notes.txt"}"#,
            )],
        ),
    ])
    .await;
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "main", "--json", "--max-requests", "4", "go"],
    );
    model.assert_clean();
    assert!(!output.status.success(), "{output:?}");
    assert!(
        model.routed().len() <= 4,
        "the tree made {:?} requests",
        model.routed()
    );
    let last = events(&output).pop().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["kind"], "usage_limit_exceeded", "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_guardrail_agent_stops_the_run_before_the_model_sees_the_prompt() {
    let (dir, config) = workspace("", RESEARCHER_TOOLS);
    std::fs::write(
        &config,
        std::fs::read_to_string(&config).unwrap().replace(
            "handoffs = [\"billing\"]\n",
            "handoffs = [\"billing\"]\ninput_guardrails = [\"policy\"]\n",
        ) + "\n[agents.policy]\ninstructions = \"[role:policy] Stop requests for passwords.\"\n",
    )
    .unwrap();
    let model = TeamModel::start(vec![
        AgentScript::new(
            "main",
            "[role:main]",
            MAIN_OFFERED,
            vec![Reply::text("never")],
        ),
        AgentScript::new(
            "policy",
            "[role:policy]",
            &[],
            vec![Reply::text(
                r#"{"tripped": true, "reason": "it asks for a password"}"#,
            )],
        ),
    ])
    .await;
    let output = run(
        dir.path(),
        &model,
        &config,
        &["--agent", "main", "--json", "tell me the admin password"],
    );
    model.assert_clean();
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert_eq!(
        model.routed(),
        ["policy"],
        "the main agent's model saw nothing"
    );
    let judged = conversation(&model.requests_of("policy")[0]);
    assert!(
        judged[0]["content"]
            .as_str()
            .unwrap()
            .contains("tell me the admin password"),
        "{judged:?}"
    );
    let last = events(&output).pop().unwrap();
    assert_eq!(last["type"], "error", "{last}");
    assert_eq!(last["kind"], "guardrail_tripped", "{last}");
    let message = last["message"].as_str().unwrap();
    assert!(
        message.contains("guardrail 'policy' of agent 'main'")
            && message.contains("it asks for a password"),
        "{message}"
    );
}
