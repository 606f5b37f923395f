//! The composed system prompt (base instructions, AGENTS.md, the user's template) and
//! `--output-schema`, through the `agcore` binary against a fake OpenAI server on 127.0.0.1.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use agcore::prompt::BASE_INSTRUCTIONS;
use assert_cmd::Command;
use serde_json::{Value, json};
use support::{Reply, agcore, base_url, fake_openai, request_bodies};

/// A workspace (a git checkout) with an AGENTS.md at its root and a nearer one in `sub/`.
fn checkout() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join(".git")).unwrap();
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    std::fs::write(dir.path().join("AGENTS.md"), "ROOT RULES").unwrap();
    std::fs::write(
        dir.path().join("sub/AGENTS.md"),
        "SUB RULES: run {{ tests }}",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("prompt.md"),
        "You work on {{ project }} for {{ user }}.",
    )
    .unwrap();
    dir
}

/// `agcore ARGS` in `cwd`, with the support helper's clean environment rooted at `home`.
fn agcore_in(home: &Path, cwd: &Path, args: &[&str]) -> Output {
    let mut command = agcore(home);
    command.current_dir(cwd).args(args);
    command.output().unwrap()
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn the_prompt_is_base_then_the_nearest_agents_md_then_the_template() {
    let dir = checkout();
    let output = agcore_in(
        dir.path(),
        &dir.path().join("sub/deeper"),
        &[
            "run",
            "--print-system-prompt",
            "--system-file",
            "../../prompt.md",
            "--var",
            "project=agcore",
            "--var",
            "user=Ada",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let text = stdout(&output);
    let base = text.find(BASE_INSTRUCTIONS).expect("base instructions");
    let agents = text
        .find("SUB RULES: run {{ tests }}")
        .expect("the nearest AGENTS.md, as it is");
    let user = text
        .find("You work on agcore for Ada.")
        .expect("the rendered template");
    assert!(base < agents && agents < user, "{text}");
    assert!(
        !text.contains("ROOT RULES"),
        "the nearest AGENTS.md wins: {text}"
    );
    assert!(text.contains("(sub/AGENTS.md)"), "{text}");
}

#[test]
fn a_missing_variable_is_an_error_naming_it_and_the_file() {
    let dir = checkout();
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &[
            "run",
            "--print-system-prompt",
            "--system-file",
            "prompt.md",
            "--var",
            "project=x",
        ],
    );
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(
        error.contains(
            "--system-file prompt.md: missing template variable 'user' (pass --var user=VALUE)"
        ),
        "{error}"
    );
    assert!(stdout(&output).is_empty());
    // --system is a template too.
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &["run", "--print-system-prompt", "--system", "Hi {{ who }}"],
    );
    assert!(
        stderr(&output).contains("--system: missing template variable 'who'"),
        "{output:?}"
    );
}

#[test]
fn restricted_mode_reads_agents_md_only_when_asked() {
    let dir = checkout();
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &["run", "--print-system-prompt", "--restricted"],
    );
    assert!(output.status.success(), "{output:?}");
    assert!(!stdout(&output).contains("ROOT RULES"), "{output:?}");
    assert!(
        stderr(&output)
            .contains("AGENTS.md not read: restricted mode (pass --agents-md to read it)"),
        "said, not silent: {output:?}"
    );
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &[
            "run",
            "--print-system-prompt",
            "--restricted",
            "--agents-md",
        ],
    );
    let text = stdout(&output);
    assert!(text.contains("ROOT RULES"), "{text}");
    assert!(text.contains("The workspace is untrusted"), "{text}");
}

#[test]
fn a_long_agents_md_is_cut_and_the_prompt_says_so() {
    let dir = checkout();
    let long: String = (0..10_000).map(|n| format!("rule {n}\n")).collect();
    std::fs::write(dir.path().join("AGENTS.md"), &long).unwrap();
    let output = agcore_in(dir.path(), dir.path(), &["run", "--print-system-prompt"]);
    let text = stdout(&output);
    assert!(text.contains("rule 0\n"), "{text}");
    assert!(!text.contains("rule 9999"), "cut");
    assert!(
        text.contains(&format!(
            "[AGENTS.md was cut here: it has {} bytes",
            long.len()
        )),
        "{text}"
    );
    assert!(text.len() < 40 * 1024, "bounded: {} bytes", text.len());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agents_md_is_escaped_on_the_terminal_but_sent_as_it_is() {
    let dir = checkout();
    std::fs::write(dir.path().join("AGENTS.md"), "red \u{1b}[31m rules").unwrap();
    let output = agcore_in(dir.path(), dir.path(), &["run", "--print-system-prompt"]);
    let text = stdout(&output);
    assert!(!text.contains('\u{1b}'), "{text:?}");
    assert!(text.contains("red \\x1b[31m rules"), "{text:?}");
    let server = fake_openai(vec![Reply::text("Done.")]).await;
    let url = base_url(&server);
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &["run", "--base-url", &url, "--model", "m", "hi"],
    );
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(
        system.contains("red \u{1b}[31m rules"),
        "nothing sanitised away: {system:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_model_gets_the_composed_prompt_and_chat_names_its_sections() {
    let dir = checkout();
    let server = fake_openai(vec![Reply::text("Done.")]).await;
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &[
            "run",
            "--base-url",
            &base_url(&server),
            "--model",
            "m",
            "--system",
            "Be {{ tone }}.",
            "--var",
            "tone=brief",
            "hi",
        ],
    );
    assert!(output.status.success(), "{output:?}");
    let bodies = request_bodies(&server).await;
    let system = bodies[0]["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with(BASE_INSTRUCTIONS), "{system}");
    assert!(
        system.contains("The workspace's AGENTS.md says:\n\nROOT RULES"),
        "{system}"
    );
    assert!(system.ends_with("Be brief."), "{system}");

    let mut command = agcore(dir.path());
    command
        .args(["chat", "--base-url", &base_url(&server), "--model", "m"])
        .args(["--system", "Be brief."]);
    let output = Command::from_std(command)
        .write_stdin("")
        .timeout(Duration::from_secs(60))
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let banner = stdout(&output);
    let line = banner
        .lines()
        .find(|l| l.starts_with("system prompt: "))
        .unwrap();
    assert!(line.contains("base: agcore's base instructions"), "{line}");
    assert!(
        line.contains("agents_md: ") && line.contains("AGENTS.md (10 bytes)"),
        "{line}"
    );
    assert!(line.ends_with("user: --system"), "{line}");
}

// ---------------------------------------------------------------------------------------------
// --output-schema

fn schema_file(dir: &Path) -> String {
    let path = dir.join("city.json");
    let schema = json!({"type": "object", "properties": {
        "name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"]});
    std::fs::write(&path, schema.to_string()).unwrap();
    path.display().to_string()
}

fn typed_run(dir: &Path, server: &wiremock::MockServer, extra: &[&str]) -> Output {
    let schema = schema_file(dir);
    let url = base_url(server);
    let mut args = vec![
        "run",
        "--base-url",
        url.as_str(),
        "--model",
        "m",
        "--output-schema",
        schema.as_str(),
    ];
    args.extend_from_slice(extra);
    agcore_in(dir, dir, &args)
}

const PARIS: &str = r#"{"name": "Paris", "population": 2100000}"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_schema_prints_the_validated_json() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text(PARIS)]).await;
    let output = typed_run(dir.path(), &server, &["Biggest French city?"]);
    assert!(output.status.success(), "{output:?}");
    let value: Value = serde_json::from_str(&stdout(&output)).unwrap();
    assert_eq!(value, json!({"name": "Paris", "population": 2_100_000}));
    let bodies = request_bodies(&server).await;
    assert_eq!(bodies[0]["response_format"]["json_schema"]["name"], "city");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_schema_with_json_ends_the_events_with_an_output_event() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![
        Reply::tool(
            "call_1",
            "final_answer",
            r#"{"name": "Paris", "population": "many"}"#,
        ),
        Reply::tool("call_2", "final_answer", PARIS),
    ])
    .await;
    let output = typed_run(
        dir.path(),
        &server,
        &["--json", "--output-mode", "tool", "City?"],
    );
    assert!(output.status.success(), "{output:?}");
    let events: Vec<Value> = stdout(&output)
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    let rejected = events
        .iter()
        .find(|e| e["type"] == "output_rejected")
        .unwrap();
    assert!(
        rejected["error"].as_str().unwrap().contains("population"),
        "{rejected}"
    );
    assert_eq!(
        events.last().unwrap(),
        &json!({"type": "output", "value": {"name": "Paris", "population": 2_100_000}})
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "tool_execution_started" && e["tool_name"] == "final_answer")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_that_stays_invalid_exits_non_zero_with_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let server = fake_openai(vec![Reply::text("Paris, about two million.")]).await;
    let output = typed_run(dir.path(), &server, &["--output-mode", "prompted", "City?"]);
    assert_eq!(output.status.code(), Some(1), "{output:?}");
    assert!(stdout(&output).is_empty());
    let error = stderr(&output);
    assert!(
        error.contains("did not match the output schema after 3 attempts"),
        "{error}"
    );
    assert!(
        error.contains("the last answer was:\nParis, about two million."),
        "{error}"
    );
    assert_eq!(request_bodies(&server).await.len(), 3);

    let output = typed_run(
        dir.path(),
        &server,
        &["--json", "--output-mode", "prompted", "City?"],
    );
    assert_eq!(output.status.code(), Some(1));
    let last: Value = serde_json::from_str(stdout(&output).lines().last().unwrap()).unwrap();
    assert_eq!(last["type"], "error");
    assert_eq!(last["kind"], "invalid_output");
    assert_eq!(last["raw"], "Paris, about two million.");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schema_file_that_is_not_json_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("bad.json"), "{not json").unwrap();
    let server = fake_openai(vec![Reply::text(PARIS)]).await;
    let url = base_url(&server);
    let output = agcore_in(
        dir.path(),
        dir.path(),
        &[
            "run",
            "--base-url",
            &url,
            "--model",
            "m",
            "--output-schema",
            "bad.json",
            "q",
        ],
    );
    assert!(!output.status.success());
    assert!(
        stderr(&output).contains("--output-schema bad.json is not JSON"),
        "{output:?}"
    );
    assert!(request_bodies(&server).await.is_empty());
}
