//! `[[tools.rules]]` in agcore.toml (issue 14, item 4): `agcore tools` explains each rule
//! under its tool, a rule naming an unknown argument is a problem (exit 1), and
//! a deny rule's text reaches the model in `agcore run`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support;

use assert_cmd::Command;
use serde_json::Value;
use support::{Reply, agcore, base_url, fake_openai};

const RULES: &str = r#"
[[tools.rules]]
tool = "read_file"
argument = "path"
contains = "secret"
action = "deny"
"#;

#[test]
fn agcore_tools_explains_the_rules_and_an_unknown_argument_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("rules.toml");
    std::fs::write(&config, RULES).unwrap();
    let mut command = agcore(dir.path());
    command
        .args(["tools", "--tools", "builtin", "--config"])
        .arg(&config);
    let out = Command::from_std(command).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("\n    rule 1: read_file.path contains \"secret\" → deny\n"),
        "{stdout}"
    );

    std::fs::write(&config, RULES.replace("\"path\"", "\"file\"")).unwrap();
    let mut command = agcore(dir.path());
    command
        .args(["tools", "--tools", "builtin", "--config"])
        .arg(&config);
    let out = Command::from_std(command).output().unwrap();
    assert!(!out.status.success(), "{out:?}");
    // Listed with the other problems of the configuration.
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("problems:\n  argument rule 1 names argument 'file' of tool 'read_file'"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deny_rule_reaches_the_model_in_a_run() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("secret.txt"), "hunter2").unwrap();
    let config = dir.path().join("rules.toml");
    std::fs::write(&config, RULES).unwrap();
    let server = fake_openai(vec![
        Reply::tool("call_1", "read_file", r#"{"path":"secret.txt"}"#),
        Reply::text("I may not read it."),
    ])
    .await;
    let file = dir.path().join("transcript.json");
    let mut command = agcore(dir.path());
    command.args(["run", "--base-url", &base_url(&server), "--model", "m"]);
    command
        .args(["--tools", "builtin", "--config"])
        .arg(&config);
    command
        .arg("--transcript")
        .arg(&file)
        .arg("read the secret");
    let out = Command::from_std(command).output().unwrap();
    assert!(out.status.success(), "{out:?}");
    let transcript: Vec<Value> =
        serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    let answer = transcript.iter().find(|m| m["role"] == "tool").unwrap()["content"]
        .as_str()
        .unwrap();
    assert!(
        answer.starts_with("Error: tool 'read_file' was denied by a rule on its arguments: rule 1: read_file.path contains \"secret\" → deny.")
            && !answer.contains("hunter2"),
        "{answer}"
    );
}
