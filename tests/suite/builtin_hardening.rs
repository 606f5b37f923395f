//! Hardening of the built-in tools against a hostile model or workspace (issue 10, items 7, 11,
//! 12, 13, 14): agcore's own config is not writable, hard links do not reach outside, writes
//! are atomic and serialised, commands leave no descendants behind, work and output are
//! bounded and agree with the tool loop's cut.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use agcore::llm::testing::{ScriptedModel, ScriptedReply};
use agcore::llm::{CycleConfig, LlmCycle, OpenaiChatMessage, ToolCall};
use agcore::run::config::DEFAULT_TOOL_OUTPUT_LIMIT;
use agcore::tools::builtin::{
    BuiltinOptions, RunCommand, SearchFiles, Workspace, builtin_tools_with,
};
use agcore::tools::{Tool, ToolError, ToolRegistry};
use serde_json::{Value, json};

struct Fixture {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    workspace: Workspace,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let workspace = Workspace::new(root.path()).unwrap();
        Fixture {
            root,
            outside,
            workspace,
        }
    }

    fn path(&self, relative: &str) -> std::path::PathBuf {
        self.root.path().join(relative)
    }

    fn write(&self, relative: &str, content: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn registry_with(&self, options: &BuiltinOptions) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry
            .register_all(builtin_tools_with(&self.workspace, options))
            .unwrap();
        registry
    }

    fn registry(&self) -> ToolRegistry {
        self.registry_with(&BuiltinOptions::default())
    }
}

async fn call(registry: &ToolRegistry, name: &str, args: Value) -> Result<Value, ToolError> {
    let invocation = tokio::time::timeout(Duration::from_secs(60), registry.invoke(name, args))
        .await
        .expect("the tool call hung");
    invocation?.output
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// ---------------------------------------------------------------- item 7: agcore's own config

/// Every spelling of agcore's config and trust files a write tool must refuse: (what, path).
fn protected_paths(fixture: &Fixture) -> Vec<(&'static str, String)> {
    std::fs::create_dir_all(fixture.path(".agcore")).unwrap();
    fixture.write("notes.txt", "notes\n");
    fixture.write("agcore.toml", "[builtin]\nenabled = true\n");
    symlink("agcore.toml", fixture.path("innocent")).unwrap();
    symlink(".agcore", fixture.path("cfgdir")).unwrap();
    std::fs::create_dir_all(fixture.path("sub")).unwrap();
    let root = fixture.workspace.root().display().to_string();
    vec![
        ("the workspace config", "agcore.toml".to_owned()),
        ("another case", "AGCORE.TOML".to_owned()),
        ("a nested config", "sub/Agcore.toml".to_owned()),
        ("`..` onto it", "sub/../agcore.toml".to_owned()),
        ("`.` before it", "./agcore.toml".to_owned()),
        ("an absolute path", format!("{root}/agcore.toml")),
        ("a symlink to it", "innocent".to_owned()),
        ("a trust record", ".agcore/trust.toml".to_owned()),
        (
            "a new file under .agcore",
            ".AgCore/new/deep.toml".to_owned(),
        ),
        ("a symlinked .agcore", "cfgdir/trust.toml".to_owned()),
    ]
}

#[tokio::test]
async fn write_tools_refuse_agcore_config_and_trust_files() {
    let fixture = Fixture::new();
    let paths = protected_paths(&fixture);
    let registry = fixture.registry();
    for (what, path) in paths {
        for (tool, args) in [
            ("write_file", json!({"path": path, "content": "[[mcp]]\n"})),
            (
                "edit_file",
                json!({"path": path, "old_string": "enabled", "new_string": "x"}),
            ),
        ] {
            let result = call(&registry, tool, args).await;
            match result {
                Err(ToolError::PermissionDenied(name, detail)) => {
                    assert_eq!(name, tool);
                    assert!(
                        detail.contains("agcore's own configuration"),
                        "{tool}, {what}: {detail}"
                    );
                }
                other => {
                    panic!("{tool}, {what} ({path}): expected PermissionDenied, got {other:?}")
                }
            }
        }
    }
    assert_eq!(
        std::fs::read_to_string(fixture.path("agcore.toml")).unwrap(),
        "[builtin]\nenabled = true\n"
    );
    assert!(names_in(&fixture.path(".agcore")).is_empty());
    // Reading it is fine.
    let read = call(&registry, "read_file", json!({"path": "agcore.toml"})).await;
    assert!(read.is_ok(), "{read:?}");
}

#[tokio::test]
async fn a_symlink_named_agcore_toml_does_not_make_its_target_writable_through_it() {
    let fixture = Fixture::new();
    fixture.write("notes.txt", "notes\n");
    symlink("notes.txt", fixture.path("agcore.toml")).unwrap();
    let registry = fixture.registry();
    let result = call(
        &registry,
        "write_file",
        json!({"path": "agcore.toml", "content": "[[mcp]]\n"}),
    )
    .await;
    assert!(
        matches!(&result, Err(ToolError::PermissionDenied(_, why)) if why.contains("agcore's own configuration")),
        "{result:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.path("notes.txt")).unwrap(),
        "notes\n"
    );
}

#[tokio::test]
async fn a_hard_link_to_agcore_toml_is_not_a_way_around() {
    let fixture = Fixture::new();
    fixture.write("agcore.toml", "[builtin]\n");
    std::fs::hard_link(fixture.path("agcore.toml"), fixture.path("other.txt")).unwrap();
    let registry = fixture.registry();
    let result = call(
        &registry,
        "write_file",
        json!({"path": "other.txt", "content": "[[mcp]]\n"}),
    )
    .await;
    assert!(
        matches!(&result, Err(ToolError::PermissionDenied(_, why)) if why.contains("hard links")),
        "{result:?}"
    );
    assert_eq!(
        std::fs::read_to_string(fixture.path("agcore.toml")).unwrap(),
        "[builtin]\n"
    );
}

#[tokio::test]
async fn writing_agcore_config_can_be_allowed_explicitly() {
    let fixture = Fixture::new();
    let registry =
        fixture.registry_with(&BuiltinOptions::default().allow_writing_agcore_config(true));
    call(
        &registry,
        "write_file",
        json!({"path": "agcore.toml", "content": "[model]\n"}),
    )
    .await
    .unwrap();
    call(
        &registry,
        "write_file",
        json!({"path": ".agcore/notes.toml", "content": "x\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        std::fs::read_to_string(fixture.path("agcore.toml")).unwrap(),
        "[model]\n"
    );
}

// ---------------------------------------------------------------- item 14: hard links, atomic writes

#[tokio::test]
async fn a_hard_link_to_an_outside_file_is_never_written() {
    let fixture = Fixture::new();
    let secret = fixture.outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    std::fs::hard_link(&secret, fixture.path("link.txt")).unwrap();
    let registry = fixture.registry();
    for (tool, args) in [
        (
            "write_file",
            json!({"path": "link.txt", "content": "pwned\n"}),
        ),
        (
            "edit_file",
            json!({"path": "link.txt", "old_string": "TOP", "new_string": "pwned"}),
        ),
    ] {
        let result = call(&registry, tool, args).await;
        assert!(
            matches!(&result, Err(ToolError::PermissionDenied(name, why)) if name == tool && why.contains("hard links")),
            "{tool}: {result:?}"
        );
    }
    assert_eq!(std::fs::read_to_string(&secret).unwrap(), "TOP SECRET\n");
    assert_eq!(
        std::fs::read_to_string(fixture.path("link.txt")).unwrap(),
        "TOP SECRET\n"
    );
}

#[tokio::test]
async fn hard_linked_reads_are_allowed_by_default_and_refused_when_configured() {
    let fixture = Fixture::new();
    let secret = fixture.outside.path().join("secret.txt");
    std::fs::write(&secret, "TOP SECRET\n").unwrap();
    std::fs::hard_link(&secret, fixture.path("link.txt")).unwrap();

    let default = fixture.registry();
    let read = call(&default, "read_file", json!({"path": "link.txt"}))
        .await
        .unwrap();
    assert_eq!(read["content"], "TOP SECRET\n");

    let strict = fixture.registry_with(&BuiltinOptions::default().refuse_hard_linked_reads(true));
    let read = call(&strict, "read_file", json!({"path": "link.txt"})).await;
    assert!(
        matches!(&read, Err(ToolError::PermissionDenied(_, why)) if why.contains("hard links")),
        "{read:?}"
    );
    let search = call(&strict, "search_files", json!({"pattern": "SECRET"}))
        .await
        .unwrap();
    assert_eq!(search["total_matches"], 0, "{search}");
}

#[tokio::test]
async fn parallel_edits_of_one_file_lose_no_update() {
    for round in 0..5 {
        let fixture = Fixture::new();
        fixture.write("log.txt", "MARKER\n");
        let registry = fixture.registry();
        let calls: Vec<(String, Value)> = (0..20)
            .map(|i| {
                (
                    "edit_file".to_owned(),
                    json!({
                        "path": "log.txt",
                        "old_string": "MARKER",
                        "new_string": format!("line {i}\nMARKER"),
                    }),
                )
            })
            .collect();
        let results = tokio::time::timeout(Duration::from_secs(60), registry.invoke_all(calls))
            .await
            .unwrap();
        let text = std::fs::read_to_string(fixture.path("log.txt")).unwrap();
        for (i, result) in results.iter().enumerate() {
            let applied = text.contains(&format!("line {i}\n"));
            assert!(
                result.output.is_ok() == applied,
                "round {round}: edit {i} reported {:?} but applied={applied}:\n{text}",
                result.output
            );
            assert!(applied, "round {round}: edit {i} was lost:\n{text}");
        }
        assert_eq!(names_in(fixture.root.path()), ["log.txt"], "round {round}");
    }
}

#[tokio::test]
async fn writes_replace_the_file_atomically_keep_its_mode_and_leave_no_temp_file() {
    let fixture = Fixture::new();
    fixture.write("script.sh", "echo old\n");
    let path = fixture.path("script.sh");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o751)).unwrap();
    // A reader that opened the file before the write keeps seeing the old content: the new one
    // went to a new file renamed over it, not into the old file truncated in place.
    let before = std::fs::File::open(&path).unwrap();
    let registry = fixture.registry();
    call(
        &registry,
        "write_file",
        json!({"path": "script.sh", "content": "echo new\n"}),
    )
    .await
    .unwrap();
    assert_eq!(std::io::read_to_string(&before).unwrap(), "echo old\n");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "echo new\n");
    call(
        &registry,
        "edit_file",
        json!({"path": "script.sh", "old_string": "new", "new_string": "newer"}),
    )
    .await
    .unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "echo newer\n");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode, 0o751);
    call(
        &registry,
        "write_file",
        json!({"path": "new/file.txt", "content": "x"}),
    )
    .await
    .unwrap();
    assert_eq!(names_in(fixture.root.path()), ["new", "script.sh"]);
    assert_eq!(names_in(&fixture.path("new")), ["file.txt"]);
}

// ---------------------------------------------------------------- item 11: no survivors

/// Whether `pid` is gone (or a zombie awaiting its reaper) within a few seconds.
fn wait_until_dead(pid: u32) -> bool {
    for _ in 0..60 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat)
                if stat
                    .rsplit(')')
                    .next()
                    .and_then(|rest| rest.split_whitespace().next())
                    == Some("Z") =>
            {
                return true;
            }
            Ok(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    false
}

/// Wait for the pid files the escapees write, then check they are all dead and that none of
/// them reached its `touch` (each sleeps 3 s first).
async fn assert_escapees_dead(fixture: &Fixture, names: &[&str]) {
    for name in names {
        let pid_file = fixture.path(&format!("{name}.pid"));
        let mut pid = None;
        for _ in 0..40 {
            if let Some(found) = std::fs::read_to_string(&pid_file)
                .ok()
                .and_then(|text| text.trim().parse::<u32>().ok())
            {
                pid = Some(found);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let pid = pid.unwrap_or_else(|| panic!("{name} never wrote its pid"));
        assert!(wait_until_dead(pid), "{name} (pid {pid}) survived");
    }
    tokio::time::sleep(Duration::from_millis(3500)).await;
    for name in names {
        assert!(
            !fixture.path(&format!("{name}.marker")).exists(),
            "{name} lived on and touched its marker"
        );
    }
}

/// A shell snippet for an escapee named `name`: writes its pid, sleeps 3 s, touches a marker.
fn escapee(fixture: &Fixture, name: &str) -> String {
    let dir = fixture.workspace.root().display();
    format!("sh -c 'echo $$ > {dir}/{name}.pid; sleep 3; touch {dir}/{name}.marker'")
}

#[tokio::test]
async fn descendants_that_setsid_or_double_fork_die_with_the_command() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let command = format!(
        "setsid {a} >/dev/null 2>&1 & \
         ( {b} >/dev/null 2>&1 & ) ; \
         ( setsid {c} >/dev/null 2>&1 & ) ; \
         env -i PATH=\"$PATH\" setsid {d} & \
         sleep 0.5; echo done",
        a = escapee(&fixture, "setsid"),
        b = escapee(&fixture, "double_fork"),
        c = escapee(&fixture, "setsid_double_fork"),
        d = escapee(&fixture, "env_cleared"),
    );
    let output = call(
        &registry,
        "run_command",
        json!({"command": command, "timeout_secs": 30}),
    )
    .await
    .unwrap();
    assert_eq!(output["stdout"], "done\n", "{output}");
    assert_escapees_dead(
        &fixture,
        &["setsid", "double_fork", "setsid_double_fork", "env_cleared"],
    )
    .await;
}

#[tokio::test]
async fn descendants_that_setsid_die_when_the_command_times_out() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let command = format!(
        "setsid {a} >/dev/null 2>&1 & ( setsid {b} >/dev/null 2>&1 & ) ; sleep 30",
        a = escapee(&fixture, "setsid"),
        b = escapee(&fixture, "setsid_double_fork"),
    );
    let output = call(
        &registry,
        "run_command",
        json!({"command": command, "timeout_secs": 1}),
    )
    .await
    .unwrap();
    assert_eq!(output["timed_out"], true, "{output}");
    assert_escapees_dead(&fixture, &["setsid", "setsid_double_fork"]).await;
}

// ---------------------------------------------------------------- item 12: bounded work

#[tokio::test]
async fn read_file_on_a_huge_sparse_file_is_bounded() {
    let fixture = Fixture::new();
    // Text past the binary probe, then 20 GiB of NULs (a hole: costs no disk).
    let lines: String = (1..=2000).map(|i| format!("line {i}\n")).collect();
    fixture.write("huge.log", &lines);
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(fixture.path("huge.log"))
        .unwrap();
    file.set_len(20 * 1024 * 1024 * 1024).unwrap();
    let registry = fixture.registry();
    let started = std::time::Instant::now();
    let output = tokio::time::timeout(
        Duration::from_secs(10),
        call(
            &registry,
            "read_file",
            json!({"path": "huge.log", "limit": 10}),
        ),
    )
    .await
    .expect("read_file took more than 10 s on a sparse file")
    .unwrap();
    assert_eq!(output["lines"], 10);
    assert_eq!(output["truncated"], true);
    let text = registry.get("read_file").unwrap().model_content(&output);
    assert!(text.contains("offset=11"), "{text}");
    // Past the text, the file is one 20 GiB line of NULs: skipping it is refused, not attempted.
    let past = tokio::time::timeout(
        Duration::from_secs(10),
        call(
            &registry,
            "read_file",
            json!({"path": "huge.log", "offset": 2002}),
        ),
    )
    .await
    .expect("read_file took more than 10 s to skip into a sparse file");
    assert!(past.is_err(), "{past:?}");
    eprintln!("sparse read_file: {:?}", started.elapsed());
}

#[tokio::test]
async fn run_command_caps_how_many_commands_run_at_once() {
    let fixture = Fixture::new();
    std::fs::create_dir(fixture.path("slots")).unwrap();
    let registry = fixture.registry();
    // Each command takes a slot, records how many are taken, holds it a while, frees it.
    let command = "touch slots/$$; ls slots | wc -l >> counts; sleep 0.3; rm slots/$$";
    let calls: Vec<(String, Value)> = (0..40)
        .map(|_| ("run_command".to_owned(), json!({ "command": command })))
        .collect();
    let results = tokio::time::timeout(Duration::from_secs(60), registry.invoke_all(calls))
        .await
        .unwrap();
    // Every command ran to its end (none killed by another command's cleanup).
    assert!(
        results
            .iter()
            .all(|r| r.output.as_ref().is_ok_and(|o| o["exit_code"] == 0)),
        "{results:?}"
    );
    let counts = std::fs::read_to_string(fixture.path("counts")).unwrap();
    let max = counts
        .lines()
        .map(|n| n.trim().parse::<usize>().unwrap())
        .max()
        .unwrap();
    assert_eq!(counts.lines().count(), 40);
    assert!(
        max <= RunCommand::DEFAULT_MAX_CONCURRENT,
        "{max} commands ran at once"
    );
}

#[tokio::test]
async fn search_files_stops_at_its_time_limit_with_what_it_found() {
    let fixture = Fixture::new();
    for i in 0..20 {
        fixture.write(&format!("f{i}.txt"), "needle\n");
    }
    let mut registry = ToolRegistry::new();
    registry
        .register(
            SearchFiles::new(fixture.workspace.clone())
                .with_time_limit(Duration::ZERO)
                .erase(),
        )
        .unwrap();
    let output = call(&registry, "search_files", json!({"pattern": "needle"}))
        .await
        .unwrap();
    assert_eq!(output["stopped_early"], true, "{output}");
    let text = registry.get("search_files").unwrap().model_content(&output);
    assert!(text.contains("time limit"), "{text}");
    // Without a limit hit, the field is not even there.
    let full = call(
        &fixture.registry(),
        "search_files",
        json!({"pattern": "needle"}),
    )
    .await
    .unwrap();
    assert_eq!(full["total_matches"], 20);
    assert!(full.get("stopped_early").is_none(), "{full}");
}

#[test]
fn builtin_tools_set_their_own_timeouts() {
    let fixture = Fixture::new();
    for tool in builtin_tools_with(&fixture.workspace, &BuiltinOptions::default()) {
        if tool.name() == "fetch_url" {
            // Its timeout belongs to the fetch_url work (issue 10, item 2).
            continue;
        }
        let Some(limit) = tool.timeout() else {
            panic!("{} has no timeout of its own", tool.name());
        };
        if tool.name() == "run_command" {
            // Never cut a command the tool itself would still let run.
            assert!(limit > Duration::from_secs(600), "{limit:?}");
        }
    }
    let short = RunCommand::new(fixture.workspace.clone())
        .with_default_timeout(Duration::from_secs(5))
        .erase();
    assert!(short.timeout().unwrap() > Duration::from_secs(600));
}

// ---------------------------------------------------------------- item 13: caps agree with the loop

/// The line numbers of read_file's model text (`   12→text`).
fn numbered_lines(text: &str) -> Vec<usize> {
    text.lines()
        .filter_map(|line| line.split_once('→'))
        .filter_map(|(number, _)| number.trim().parse().ok())
        .collect()
}

#[tokio::test]
async fn paging_a_long_file_through_the_tool_loop_sees_every_line_exactly_once() {
    let fixture = Fixture::new();
    let text: String = (1..=5000)
        .map(|i| format!("{i:05} {}\n", "lorem ipsum dolor sit amet ".repeat(3)))
        .collect();
    fixture.write("long.txt", &text);
    let registry = fixture.registry();
    // The model reads on wherever the last answer tells it to, until it is not told to.
    let model = ScriptedModel::from_fn(|request| {
        let last = request.messages.last().and_then(|message| match message {
            OpenaiChatMessage::Tool { .. } => message.text(),
            _ => None,
        });
        let offset = match last {
            None => Some(1),
            Some(answer) => answer
                .rsplit_once("offset=")
                .map(|(_, rest)| {
                    rest.chars()
                        .take_while(char::is_ascii_digit)
                        .collect::<String>()
                })
                .and_then(|digits| digits.parse::<usize>().ok()),
        };
        match offset {
            Some(offset) => ScriptedReply::tool_calls(vec![ToolCall::new(
                format!("call_{offset}"),
                "read_file",
                json!({"path": "long.txt", "offset": offset}).to_string(),
            )]),
            None => ScriptedReply::text("read it all"),
        }
    });
    let mut config = CycleConfig::new("scripted");
    config.max_turns = Some(500);
    // The whole history is inspected afterwards: the context engine must not compact it.
    config.context = agcore::llm::ContextConfig::off();
    let mut cycle = LlmCycle::new(model, config);
    let response = tokio::time::timeout(
        Duration::from_secs(120),
        cycle.submit_with_tools("read long.txt".to_owned(), &registry),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(response.message.text().as_deref(), Some("read it all"));
    let mut seen: BTreeMap<usize, usize> = BTreeMap::new();
    for message in cycle.messages() {
        if let OpenaiChatMessage::Tool { .. } = message {
            let answer = message.text().unwrap();
            assert!(
                answer.len() <= DEFAULT_TOOL_OUTPUT_LIMIT,
                "an answer of {} bytes",
                answer.len()
            );
            assert!(
                !answer.contains("were removed here"),
                "the loop cut an answer"
            );
            for line in numbered_lines(&answer) {
                *seen.entry(line).or_default() += 1;
            }
        }
    }
    let missing: Vec<usize> = (1..=5000).filter(|n| !seen.contains_key(n)).collect();
    assert!(
        missing.is_empty(),
        "never seen: {} lines, first {:?}",
        missing.len(),
        missing.first()
    );
    assert!(
        seen.values().all(|&count| count == 1),
        "seen twice: {:?}",
        seen.iter()
            .filter(|(_, c)| **c > 1)
            .take(5)
            .collect::<Vec<_>>()
    );
    assert_eq!(seen.len(), 5000);
}

#[tokio::test]
async fn every_builtin_output_fits_the_loop_limit() {
    let fixture = Fixture::new();
    let long_name = "n".repeat(200);
    for i in 0..1000 {
        fixture.write(&format!("dir/{long_name}{i:04}"), "");
    }
    let deep = format!("{}/{}", "d".repeat(200), "e".repeat(200));
    for i in 0..50 {
        fixture.write(
            &format!("{deep}/file{i}.txt"),
            &format!("{}\n", "needle ".repeat(40)).repeat(30),
        );
    }
    let registry = fixture.registry_with(&BuiltinOptions::default());
    let shell = fixture.registry_with(&BuiltinOptions::default());
    for (name, args, registry) in [
        ("list_directory", json!({"path": "dir"}), &registry),
        (
            "search_files",
            json!({"pattern": "needle", "max_results": 1000}),
            &registry,
        ),
        (
            "run_command",
            json!({"command": "seq 1 100000; seq 1 100000 >&2"}),
            &shell,
        ),
    ] {
        let output = call(registry, name, args).await.unwrap();
        let text = registry.get(name).unwrap().model_content(&output);
        assert!(
            text.len() <= DEFAULT_TOOL_OUTPUT_LIMIT,
            "{name}: {} bytes for the model",
            text.len()
        );
        assert!(
            text.contains("cut"),
            "{name} should say it was cut: {}",
            &text[text.len() - 200..]
        );
    }
}

#[test]
fn tool_caps_are_derived_from_the_loop_limit() {
    use agcore::tools::builtin::limits::MODEL_OUTPUT_BUDGET;
    const { assert!(MODEL_OUTPUT_BUDGET < DEFAULT_TOOL_OUTPUT_LIMIT) };
    let _ = Arc::new(());
}

/// `BuiltinOptions::resolve_writable` (for tools that write by other means, e.g. an editor's
/// buffers over ACP) decides as the write tools do: agcore's config under any name and paths
/// out of the workspace are refused, a protected file too, unless config writes are allowed.
#[test]
fn resolve_writable_confines_as_the_write_tools_do() {
    let fixture = Fixture::new();
    fixture.write("agcore.toml", "[builtin]\nenabled = true\n");
    fixture.write("instructions.md", "be nice\n");
    symlink("agcore.toml", fixture.path("innocent")).unwrap();
    let options = BuiltinOptions::default().protecting_files([fixture.path("instructions.md")]);
    let refused = |path: &str| {
        options
            .resolve_writable(&fixture.workspace, "write_file", path)
            .unwrap_err()
    };
    for path in [
        "agcore.toml",
        "innocent",
        "sub/../agcore.toml",
        "instructions.md",
    ] {
        assert!(
            matches!(refused(path), ToolError::PermissionDenied(..)),
            "{path} was not refused"
        );
    }
    assert!(refused("../escape.txt").to_string().contains("outside"));
    let allowed = options
        .resolve_writable(&fixture.workspace, "write_file", "src/new.rs")
        .unwrap();
    assert!(allowed.starts_with(std::fs::canonicalize(fixture.root.path()).unwrap()));
    let permissive = BuiltinOptions::default().allow_writing_agcore_config(true);
    assert!(
        permissive
            .resolve_writable(&fixture.workspace, "write_file", "agcore.toml")
            .is_ok()
    );
}
