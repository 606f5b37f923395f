//! `agcore sandbox -- CMD` (issue 34): the command runs under the chosen policy, its exit
//! status is the command's, and `full` (chosen knowingly) is the only way out; `agcore tools`
//! says which sandbox `run_command` gets, restricted mode included.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use crate::support::agcore;

#[test]
fn the_exit_status_is_the_command_s() {
    let dir = tempfile::tempdir().unwrap();
    let output = agcore(dir.path())
        .args(["sandbox", "--", "sh", "-c", "echo inside > ok.txt; exit 7"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(7), "{output:?}");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("ok.txt")).unwrap(),
        "inside\n"
    );
}

#[test]
fn only_full_writes_outside_the_workspace() {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let target = outside.path().join("f.txt");
    let write = format!("echo x > {}", target.display());
    for policy in ["workspace-write", "read-only"] {
        let output = agcore(dir.path())
            .args(["sandbox", "--policy", policy, "--", "sh", "-c", &write])
            .output()
            .unwrap();
        assert_ne!(output.status.code(), Some(0), "{policy}: {output:?}");
        assert!(!target.exists(), "{policy} wrote outside");
    }
    let output = agcore(dir.path())
        .args(["sandbox", "--policy", "full", "--", "sh", "-c", &write])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    assert!(target.exists());
}

#[test]
fn agcore_tools_names_the_sandbox_and_restricted_mode_tightens_it() {
    let dir = tempfile::tempdir().unwrap();
    let line = |extra: &[&str]| {
        let output = agcore(dir.path())
            .args(["tools", "--tools", "builtin"])
            .args(extra)
            .output()
            .unwrap();
        let stdout = String::from_utf8(output.stdout).unwrap();
        stdout
            .lines()
            .find(|line| line.starts_with("sandbox:"))
            .unwrap_or_else(|| panic!("no sandbox line in {stdout}"))
            .to_owned()
    };
    assert!(
        line(&[]).contains("run_command workspace-write, network off"),
        "{}",
        line(&[])
    );
    let restricted = line(&["--restricted"]);
    assert!(
        restricted.contains("read-only, network off (restricted mode)"),
        "{restricted}"
    );
    assert!(
        restricted.contains("hooks: read-only, network off (restricted mode)"),
        "{restricted}"
    );
    let full = line(&["--sandbox", "full"]);
    assert!(full.contains("full (no sandbox)"), "{full}");
}
