//! The built-in tools through `ToolRegistry::invoke`: happy paths, every path-escape attempt,
//! output caps, command timeouts, .gitignore, and the default permission outcomes.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
#![cfg(unix)]

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::Arc;

use agcore::tools::builtin::{
    BUILTIN_TOOL_NAMES, BuiltinOptions, FetchUrl, LoopbackOnly, OutputLimits, ReadFile, RunCommand,
    SearchFiles, Workspace, builtin_tools, builtin_tools_with,
};
use agcore::tools::{
    BaseTool, PermissionChecker, PermissionConfig, Tool, ToolError, ToolKind, ToolRegistry,
    ToolSource,
};
use serde_json::{Value, json};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

/// A workspace with a sibling directory outside it, and symlinks leading out:
/// `dirlink -> OUTSIDE`, `filelink -> OUTSIDE/secret.txt`, `dangling -> OUTSIDE/new.txt`.
struct Fixture {
    root: tempfile::TempDir,
    outside: tempfile::TempDir,
    workspace: Workspace,
}

impl Fixture {
    fn new() -> Self {
        let root = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret.txt"), "TOP SECRET\n").unwrap();
        symlink(outside.path(), root.path().join("dirlink")).unwrap();
        symlink(
            outside.path().join("secret.txt"),
            root.path().join("filelink"),
        )
        .unwrap();
        symlink(outside.path().join("new.txt"), root.path().join("dangling")).unwrap();
        let workspace = Workspace::new(root.path()).unwrap();
        Fixture {
            root,
            outside,
            workspace,
        }
    }

    fn write(&self, relative: &str, content: &str) {
        let path = self.root.path().join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, content).unwrap();
    }

    fn read(&self, relative: &str) -> String {
        std::fs::read_to_string(self.root.path().join(relative)).unwrap()
    }

    /// All built-ins, no permission checker; `fetch_url` may reach the local wiremock servers.
    fn registry(&self) -> ToolRegistry {
        let mut registry = ToolRegistry::new();
        registry.register_all(self.local_tools()).unwrap();
        registry
    }

    /// All built-ins with `fetch_url` allowed on private networks (the test servers are on
    /// 127.0.0.1, which the default refuses).
    fn local_tools(&self) -> Vec<Arc<dyn BaseTool>> {
        builtin_tools_with(
            &self.workspace,
            &BuiltinOptions::default().allow_private_network(true),
        )
    }

    /// Every way out of the workspace, named: (kind of escape, path).
    fn escapes(&self) -> Vec<(&'static str, String)> {
        let outside = self.outside.path().display();
        vec![
            ("`..` traversal", "../escape.txt".to_owned()),
            ("deep `..` traversal", "sub/../../escape.txt".to_owned()),
            ("absolute path outside", format!("{outside}/secret.txt")),
            (
                "symlinked directory component",
                "dirlink/secret.txt".to_owned(),
            ),
            ("symlink as the final component", "filelink".to_owned()),
            ("dangling symlink to outside", "dangling".to_owned()),
            (
                "new file under a symlinked parent",
                "dirlink/fresh/new.txt".to_owned(),
            ),
        ]
    }

    /// The outside directory still holds only the secret, unchanged.
    fn assert_outside_untouched(&self) {
        let mut names: Vec<String> = std::fs::read_dir(self.outside.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["secret.txt"]);
        assert_eq!(
            std::fs::read_to_string(self.outside.path().join("secret.txt")).unwrap(),
            "TOP SECRET\n"
        );
        assert!(
            !self
                .root
                .path()
                .parent()
                .unwrap()
                .join("escape.txt")
                .exists()
        );
    }
}

/// Invoke and flatten: `Err` for failures before or during execution.
async fn call(registry: &ToolRegistry, name: &str, args: Value) -> Result<Value, ToolError> {
    registry.invoke(name, args).await?.output
}

/// What the model reads of a successful call.
async fn model_text(registry: &ToolRegistry, name: &str, args: Value) -> String {
    let output = call(registry, name, args).await.unwrap();
    registry.get(name).unwrap().model_content(&output)
}

fn assert_escape_refused(tool: &str, kind: &str, result: Result<Value, ToolError>) {
    match result {
        Err(ToolError::PermissionDenied(name, detail)) => {
            assert_eq!(name, tool, "{kind}");
            assert!(
                detail.contains("outside the workspace root"),
                "{tool}, {kind}: {detail}"
            );
        }
        other => panic!("{tool}, {kind}: expected PermissionDenied, got {other:?}"),
    }
}

// ---------------------------------------------------------------- metadata

#[test]
fn builtin_tools_declare_names_kinds_permissions_and_source() {
    let fixture = Fixture::new();
    let tools = builtin_tools(&fixture.workspace);
    let names: Vec<&str> = tools.iter().map(|tool| tool.name()).collect();
    assert_eq!(names, BUILTIN_TOOL_NAMES);
    let kinds: Vec<ToolKind> = tools.iter().map(|tool| tool.kind()).collect();
    assert_eq!(
        kinds,
        [
            ToolKind::Read,
            ToolKind::Read,
            ToolKind::Search,
            ToolKind::Edit,
            ToolKind::Edit,
            ToolKind::Execute,
            ToolKind::Fetch
        ]
    );
    for tool in &tools {
        assert_eq!(tool.source(), ToolSource::Builtin, "{}", tool.name());
        assert!(!tool.description().is_empty(), "{}", tool.name());
        assert_eq!(
            tool.required_permissions(),
            tool.kind().default_permissions()
        );
    }
}

#[test]
fn tool_definitions_snapshot() {
    let fixture = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry
        .register_all(builtin_tools(&fixture.workspace))
        .unwrap();
    // Keys sorted: the snapshot must not depend on serde_json's `preserve_order` feature (on in
    // a workspace with the ACP SDK), which keeps schemars' field order instead.
    insta::with_settings!({ sort_maps => true }, {
        insta::assert_json_snapshot!("builtin_tool_definitions", registry.definitions());
    });
}

#[test]
fn titles_describe_the_call_even_for_partial_input() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let title = |name: &str, input: Value| registry.get(name).unwrap().title(&input);
    assert_eq!(
        title("read_file", json!({"path": "src/main.rs"})),
        "Read src/main.rs"
    );
    assert_eq!(
        title(
            "read_file",
            json!({"path": "a.rs", "offset": 10, "limit": 5})
        ),
        "Read a.rs (lines 10-14)"
    );
    assert_eq!(title("read_file", json!({"path": 3})), "Read file");
    assert_eq!(title("list_directory", json!({})), "List .");
    assert_eq!(
        title(
            "search_files",
            json!({"pattern": "fn main", "glob": "*.rs"})
        ),
        "Search /fn main/ (*.rs)"
    );
    assert_eq!(title("write_file", json!({"path": "x.txt"})), "Write x.txt");
    assert_eq!(title("edit_file", json!({"path": "x.txt"})), "Edit x.txt");
    assert_eq!(
        title("run_command", json!({"command": "cargo test"})),
        "Run: cargo test"
    );
    assert_eq!(
        title("fetch_url", json!({"url": "http://127.0.0.1/"})),
        "Fetch http://127.0.0.1/"
    );
}

// ---------------------------------------------------------------- read_file

#[tokio::test]
async fn read_file_returns_structured_output_and_numbered_lines_for_the_model() {
    let fixture = Fixture::new();
    fixture.write("src/main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let registry = fixture.registry();
    let output = call(&registry, "read_file", json!({"path": "src/main.rs"}))
        .await
        .unwrap();
    assert_eq!(
        output,
        json!({
            "path": "src/main.rs",
            "content": "fn main() {\n    println!(\"hi\");\n}\n",
            "start_line": 1,
            "lines": 3,
            "total_lines": 3,
            "truncated": false
        })
    );
    let text = registry.get("read_file").unwrap().model_content(&output);
    assert_eq!(
        text,
        "     1→fn main() {\n     2→    println!(\"hi\");\n     3→}\n"
    );
}

#[tokio::test]
async fn read_file_pages_with_offset_and_limit_and_says_where_to_read_on() {
    let fixture = Fixture::new();
    let lines: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    fixture.write("ten.txt", &lines);
    let registry = fixture.registry();
    let args = json!({"path": "ten.txt", "offset": 3, "limit": 2});
    let output = call(&registry, "read_file", args.clone()).await.unwrap();
    assert_eq!(output["content"], "line 3\nline 4\n");
    assert_eq!(output["start_line"], 3);
    assert_eq!(output["truncated"], true);
    let text = model_text(&registry, "read_file", args).await;
    assert_eq!(
        text,
        "     3→line 3\n     4→line 4\n[... 6 more lines cut; read on with offset=5 ...]\n"
    );
    let past_end = call(
        &registry,
        "read_file",
        json!({"path": "ten.txt", "offset": 11}),
    )
    .await;
    assert!(
        matches!(&past_end, Err(ToolError::InvalidArguments(_, why)) if why.contains("10 lines")),
        "{past_end:?}"
    );
}

#[tokio::test]
async fn read_file_caps_lines_and_bytes_with_a_marker() {
    let fixture = Fixture::new();
    let lines: String = (1..=100).map(|i| format!("line {i}\n")).collect();
    fixture.write("long.txt", &lines);
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ReadFile::new(fixture.workspace.clone())
                .with_limits(OutputLimits::new(5, 1000))
                .erase(),
        )
        .unwrap();
    let text = model_text(&registry, "read_file", json!({"path": "long.txt"})).await;
    assert!(text.starts_with("     1→line 1\n"), "{text}");
    assert!(
        text.ends_with("     5→line 5\n[... 95 more lines cut; read on with offset=6 ...]\n"),
        "{text}"
    );
    // A limit above the cap is clamped to it.
    let output = call(
        &registry,
        "read_file",
        json!({"path": "long.txt", "limit": 50}),
    )
    .await
    .unwrap();
    assert_eq!(output["lines"], 5);

    let mut by_bytes = ToolRegistry::new();
    by_bytes
        .register(
            ReadFile::new(fixture.workspace.clone())
                .with_limits(OutputLimits::new(1000, 20))
                .erase(),
        )
        .unwrap();
    let output = call(&by_bytes, "read_file", json!({"path": "long.txt"}))
        .await
        .unwrap();
    // The byte cap counts what the model reads: `     1→line 1\n` is 16 bytes.
    assert_eq!(output["content"], "line 1\n");
    assert_eq!(output["truncated"], true);
}

#[tokio::test]
async fn read_file_refuses_binary_files_and_directories() {
    let fixture = Fixture::new();
    std::fs::write(fixture.root.path().join("blob.bin"), [0u8, 1, 2, 3]).unwrap();
    std::fs::create_dir(fixture.root.path().join("dir")).unwrap();
    let registry = fixture.registry();
    let binary = call(&registry, "read_file", json!({"path": "blob.bin"})).await;
    assert!(
        matches!(&binary, Err(ToolError::ExecutionFailed(_, why)) if why.contains("binary")),
        "{binary:?}"
    );
    let dir = call(&registry, "read_file", json!({"path": "dir"})).await;
    assert!(
        matches!(&dir, Err(ToolError::ExecutionFailed(_, why)) if why.contains("list_directory")),
        "{dir:?}"
    );
    let missing = call(&registry, "read_file", json!({"path": "nope.txt"})).await;
    assert!(
        matches!(&missing, Err(ToolError::ExecutionFailed(_, why)) if why.contains("nope.txt")),
        "{missing:?}"
    );
}

#[tokio::test]
async fn read_file_cuts_a_line_longer_than_the_byte_cap() {
    let fixture = Fixture::new();
    fixture.write("minified.js", &format!("{}\nsecond\n", "x".repeat(100_000)));
    let mut registry = ToolRegistry::new();
    registry
        .register(
            ReadFile::new(fixture.workspace.clone())
                .with_limits(OutputLimits::new(100, 50))
                .erase(),
        )
        .unwrap();
    let output = call(&registry, "read_file", json!({"path": "minified.js"}))
        .await
        .unwrap();
    // 50 bytes for the model: the 9-byte line-number prefix, then 41 bytes of the line.
    assert_eq!(output["content"], "x".repeat(41));
    assert_eq!(output["total_lines"], 2);
    assert_eq!(output["truncated"], true);
    let text = registry.get("read_file").unwrap().model_content(&output);
    assert!(
        text.ends_with("[... 1 more line cut; read on with offset=2 ...]\n"),
        "{text}"
    );
}

#[tokio::test]
async fn read_file_refuses_fifos_instead_of_blocking() {
    let fixture = Fixture::new();
    let status = std::process::Command::new("mkfifo")
        .arg(fixture.root.path().join("pipe"))
        .status()
        .unwrap();
    assert!(status.success());
    let registry = fixture.registry();
    for (name, args) in [
        ("read_file", json!({"path": "pipe"})),
        (
            "edit_file",
            json!({"path": "pipe", "old_string": "a", "new_string": "b"}),
        ),
        ("write_file", json!({"path": "pipe", "content": "x"})),
    ] {
        let result = call(&registry, name, args).await;
        assert!(
            matches!(&result, Err(ToolError::ExecutionFailed(_, why)) if why.contains("not a regular file")),
            "{name}: {result:?}"
        );
    }
}

// ---------------------------------------------------------------- list_directory

#[tokio::test]
async fn list_directory_lists_entries_directories_first_without_following_symlinks() {
    let fixture = Fixture::new();
    fixture.write("src/lib.rs", "");
    fixture.write("b.txt", "12345");
    let registry = fixture.registry();
    let output = call(&registry, "list_directory", json!({})).await.unwrap();
    assert_eq!(output["path"], ".");
    let text = registry
        .get("list_directory")
        .unwrap()
        .model_content(&output);
    assert_eq!(
        text,
        "src/\nb.txt  (5 bytes)\ndangling@\ndirlink@\nfilelink@\n"
    );
    let sub = model_text(&registry, "list_directory", json!({"path": "src"})).await;
    assert_eq!(sub, "lib.rs  (0 bytes)\n");
}

// ---------------------------------------------------------------- search_files

#[tokio::test]
async fn search_files_finds_matches_with_paths_and_line_numbers() {
    let fixture = Fixture::new();
    fixture.write("src/main.rs", "fn main() {}\n// TODO: more\n");
    fixture.write("src/lib.rs", "pub fn lib() {}\n");
    fixture.write("README.md", "todo list\n");
    let registry = fixture.registry();
    let text = model_text(&registry, "search_files", json!({"pattern": "fn \\w+"})).await;
    assert_eq!(
        text,
        "src/lib.rs:1: pub fn lib() {}\nsrc/main.rs:1: fn main() {}\n"
    );
    let insensitive = model_text(
        &registry,
        "search_files",
        json!({"pattern": "todo", "case_insensitive": true}),
    )
    .await;
    assert_eq!(
        insensitive,
        "README.md:1: todo list\nsrc/main.rs:2: // TODO: more\n"
    );
    let globbed = model_text(
        &registry,
        "search_files",
        json!({"pattern": "todo", "case_insensitive": true, "glob": "*.rs"}),
    )
    .await;
    assert_eq!(globbed, "src/main.rs:2: // TODO: more\n");
    let in_path = model_text(
        &registry,
        "search_files",
        json!({"pattern": "fn", "path": "src", "glob": "m*.rs"}),
    )
    .await;
    assert_eq!(in_path, "src/main.rs:1: fn main() {}\n");
}

#[tokio::test]
async fn search_files_respects_gitignore_and_skips_binary_files_and_symlinks() {
    let fixture = Fixture::new();
    fixture.write(".gitignore", "target/\n*.log\n");
    fixture.write("target/debug/out.rs", "needle\n");
    fixture.write("build.log", "needle\n");
    fixture.write("src/kept.rs", "needle\n");
    std::fs::write(fixture.root.path().join("blob.bin"), b"needle\0\x01").unwrap();
    let registry = fixture.registry();
    let output = call(&registry, "search_files", json!({"pattern": "needle"}))
        .await
        .unwrap();
    let paths: Vec<&str> = output["matches"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap())
        .collect();
    assert_eq!(paths, ["src/kept.rs"]);
    // The symlinks out of the workspace are not followed.
    let secret = call(&registry, "search_files", json!({"pattern": "TOP SECRET"}))
        .await
        .unwrap();
    assert_eq!(secret["total_matches"], 0);
}

#[tokio::test]
async fn search_files_caps_results_with_a_marker() {
    let fixture = Fixture::new();
    let lines: String = (1..=50).map(|i| format!("hit {i}\n")).collect();
    fixture.write("many.txt", &lines);
    let mut registry = ToolRegistry::new();
    registry
        .register(
            SearchFiles::new(fixture.workspace.clone())
                .with_max_results(3)
                .erase(),
        )
        .unwrap();
    let output = call(&registry, "search_files", json!({"pattern": "hit"}))
        .await
        .unwrap();
    assert_eq!(output["matches"].as_array().unwrap().len(), 3);
    assert_eq!(output["total_matches"], 50);
    let text = registry.get("search_files").unwrap().model_content(&output);
    assert!(
        text.ends_with(
            "many.txt:3: hit 3\n[... 47 more matches cut; narrow the pattern, path or glob ...]\n"
        ),
        "{text}"
    );
    let asked = call(
        &registry,
        "search_files",
        json!({"pattern": "hit", "max_results": 2}),
    )
    .await
    .unwrap();
    assert_eq!(asked["matches"].as_array().unwrap().len(), 2);
}

#[tokio::test]
async fn search_files_rejects_invalid_patterns_and_globs() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let regex = call(&registry, "search_files", json!({"pattern": "(unclosed"})).await;
    assert!(
        matches!(&regex, Err(ToolError::InvalidArguments(_, why)) if why.contains("regex")),
        "{regex:?}"
    );
    let glob = call(
        &registry,
        "search_files",
        json!({"pattern": "x", "glob": "a[b"}),
    )
    .await;
    assert!(
        matches!(&glob, Err(ToolError::InvalidArguments(_, why)) if why.contains("glob")),
        "{glob:?}"
    );
}

// ---------------------------------------------------------------- write_file / edit_file

#[tokio::test]
async fn write_file_creates_parent_directories_and_overwrites() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let created = call(
        &registry,
        "write_file",
        json!({"path": "new/deep/file.txt", "content": "hello\n"}),
    )
    .await
    .unwrap();
    assert_eq!(
        created,
        json!({"path": "new/deep/file.txt", "bytes": 6, "created": true})
    );
    assert_eq!(fixture.read("new/deep/file.txt"), "hello\n");
    let replaced = call(
        &registry,
        "write_file",
        json!({"path": "new/deep/file.txt", "content": "bye\n"}),
    )
    .await
    .unwrap();
    assert_eq!(replaced["created"], false);
    assert_eq!(fixture.read("new/deep/file.txt"), "bye\n");
    let text = registry.get("write_file").unwrap().model_content(&replaced);
    assert_eq!(text, "Overwrote new/deep/file.txt (4 bytes).");
}

#[tokio::test]
async fn edit_file_replaces_exactly_one_match() {
    let fixture = Fixture::new();
    fixture.write("f.txt", "alpha\nbeta\ngamma\n");
    let registry = fixture.registry();
    let output = call(
        &registry,
        "edit_file",
        json!({"path": "f.txt", "old_string": "beta", "new_string": "BETA"}),
    )
    .await
    .unwrap();
    assert_eq!(output, json!({"path": "f.txt", "replacements": 1}));
    assert_eq!(fixture.read("f.txt"), "alpha\nBETA\ngamma\n");
}

#[tokio::test]
async fn edit_file_refuses_zero_matches_and_leaves_the_file() {
    let fixture = Fixture::new();
    fixture.write("f.txt", "alpha\n");
    let registry = fixture.registry();
    let result = call(
        &registry,
        "edit_file",
        json!({"path": "f.txt", "old_string": "omega", "new_string": "x"}),
    )
    .await;
    assert!(
        matches!(&result, Err(ToolError::ExecutionFailed(_, why)) if why.contains("not found") && why.contains("0 matches")),
        "{result:?}"
    );
    assert_eq!(fixture.read("f.txt"), "alpha\n");
}

#[tokio::test]
async fn edit_file_refuses_many_matches_with_the_count_unless_replace_all() {
    let fixture = Fixture::new();
    fixture.write("f.txt", "x = 1\nx = 1\nx = 1\n");
    let registry = fixture.registry();
    let args = json!({"path": "f.txt", "old_string": "x = 1", "new_string": "x = 2"});
    let result = call(&registry, "edit_file", args.clone()).await;
    assert!(
        matches!(&result, Err(ToolError::ExecutionFailed(_, why)) if why.contains("occurs 3 times") && why.contains("replace_all")),
        "{result:?}"
    );
    assert_eq!(fixture.read("f.txt"), "x = 1\nx = 1\nx = 1\n");
    let mut all = args;
    all["replace_all"] = json!(true);
    let output = call(&registry, "edit_file", all).await.unwrap();
    assert_eq!(output["replacements"], 3);
    assert_eq!(fixture.read("f.txt"), "x = 2\nx = 2\nx = 2\n");
}

// ---------------------------------------------------------------- path escapes, every tool

#[tokio::test]
async fn read_file_refuses_every_escape() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    for (kind, path) in fixture.escapes() {
        let result = call(&registry, "read_file", json!({"path": path})).await;
        assert_escape_refused("read_file", kind, result);
    }
    fixture.assert_outside_untouched();
}

#[tokio::test]
async fn list_directory_refuses_every_escape() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let outside = fixture.outside.path().display().to_string();
    let mut escapes = fixture.escapes();
    escapes.extend([
        ("`..` to the parent directory", "..".to_owned()),
        ("symlinked directory", "dirlink".to_owned()),
        ("absolute directory outside", outside),
    ]);
    for (kind, path) in escapes {
        let result = call(&registry, "list_directory", json!({"path": path})).await;
        assert_escape_refused("list_directory", kind, result);
    }
    fixture.assert_outside_untouched();
}

#[tokio::test]
async fn search_files_refuses_every_escape() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let mut escapes = fixture.escapes();
    escapes.extend([
        ("`..` to the parent directory", "..".to_owned()),
        ("symlinked directory", "dirlink".to_owned()),
    ]);
    for (kind, path) in escapes {
        let result = call(
            &registry,
            "search_files",
            json!({"pattern": "SECRET", "path": path}),
        )
        .await;
        assert_escape_refused("search_files", kind, result);
    }
    fixture.assert_outside_untouched();
}

#[tokio::test]
async fn write_file_refuses_every_escape_and_writes_nothing_outside() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    for (kind, path) in fixture.escapes() {
        let result = call(
            &registry,
            "write_file",
            json!({"path": path, "content": "pwned\n"}),
        )
        .await;
        assert_escape_refused("write_file", kind, result);
    }
    fixture.assert_outside_untouched();
}

#[tokio::test]
async fn edit_file_refuses_every_escape_and_changes_nothing_outside() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    for (kind, path) in fixture.escapes() {
        let result = call(
            &registry,
            "edit_file",
            json!({"path": path, "old_string": "TOP SECRET", "new_string": "pwned"}),
        )
        .await;
        assert_escape_refused("edit_file", kind, result);
    }
    fixture.assert_outside_untouched();
}

#[tokio::test]
async fn symlinks_that_stay_inside_the_workspace_are_followed() {
    let fixture = Fixture::new();
    fixture.write("real/data.txt", "inside\n");
    symlink("real", fixture.root.path().join("alias")).unwrap();
    let registry = fixture.registry();
    let output = call(&registry, "read_file", json!({"path": "alias/data.txt"}))
        .await
        .unwrap();
    assert_eq!(output["path"], "real/data.txt");
    let absolute = fixture.workspace.root().join("real/data.txt");
    let output = call(&registry, "read_file", json!({"path": absolute}))
        .await
        .unwrap();
    assert_eq!(output["content"], "inside\n");
}

// ---------------------------------------------------------------- run_command

#[tokio::test]
async fn run_command_captures_stdout_stderr_and_exit_code_in_the_root() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let output = call(
        &registry,
        "run_command",
        json!({"command": "pwd; echo oops >&2; exit 3"}),
    )
    .await
    .unwrap();
    let root = fixture.workspace.root().display().to_string();
    assert_eq!(output["exit_code"], 3);
    assert_eq!(output["timed_out"], false);
    assert_eq!(output["stdout"], format!("{root}\n"));
    assert_eq!(output["stderr"], "oops\n");
    let text = registry.get("run_command").unwrap().model_content(&output);
    assert_eq!(
        text,
        format!("Exit code: 3\n--- stdout ---\n{root}\n--- stderr ---\noops\n")
    );
    let ok = call(&registry, "run_command", json!({"command": "true"}))
        .await
        .unwrap();
    assert_eq!(ok["exit_code"], 0);
    let text = registry.get("run_command").unwrap().model_content(&ok);
    assert_eq!(text, "Exit code: 0\n(no output)\n");
}

#[tokio::test]
async fn run_command_times_out_and_kills_the_whole_process_group() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    // A grandchild records its pid, then everything sleeps far past the timeout.
    let output = call(
        &registry,
        "run_command",
        json!({
            "command": "echo started; sh -c 'echo $$ > grandchild.pid; exec sleep 300' & sleep 300",
            "timeout_secs": 1
        }),
    )
    .await
    .unwrap();
    assert_eq!(output["timed_out"], true);
    assert_eq!(output["exit_code"], Value::Null);
    assert_eq!(output["signal"], 9);
    assert_eq!(output["stdout"], "started\n");
    let text = registry.get("run_command").unwrap().model_content(&output);
    assert!(text.starts_with("Timed out;"), "{text}");
    let pid: u32 = fixture.read("grandchild.pid").trim().parse().unwrap();
    assert!(
        wait_until_dead(pid),
        "grandchild {pid} survived the timeout"
    );
}

#[tokio::test]
async fn a_cancelled_run_command_kills_its_process_group() {
    let fixture = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry
        .register(RunCommand::new(fixture.workspace.clone()).erase())
        .unwrap();
    // The call is dropped while the command still runs (run_command's own timeout outlasts
    // any command it runs, so a registry default does not cut it: the caller cancels here).
    let result = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        call(
            &registry,
            "run_command",
            json!({"command": "echo $$ > shell.pid; sleep 300"}),
        ),
    )
    .await;
    assert!(result.is_err(), "{result:?}");
    let pid: u32 = fixture.read("shell.pid").trim().parse().unwrap();
    assert!(
        wait_until_dead(pid),
        "shell {pid} survived the cancellation"
    );
}

#[tokio::test]
async fn run_command_can_withhold_environment_variables() {
    let fixture = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry
        .register(
            RunCommand::new(fixture.workspace.clone())
                .without_env("HOME")
                .erase(),
        )
        .unwrap();
    let output = call(
        &registry,
        "run_command",
        json!({"command": "echo ${HOME-withheld}"}),
    )
    .await
    .unwrap();
    assert_eq!(output["stdout"], "withheld\n");
}

#[tokio::test]
async fn run_command_does_not_wait_for_background_processes() {
    let fixture = Fixture::new();
    let registry = fixture.registry();
    // Without the group kill, the background sleep would hold stdout open past the timeout.
    let output = call(
        &registry,
        "run_command",
        json!({"command": "sleep 300 & echo done", "timeout_secs": 60}),
    )
    .await
    .unwrap();
    assert_eq!(output["timed_out"], false);
    assert_eq!(output["exit_code"], 0);
    assert_eq!(output["stdout"], "done\n");
}

#[tokio::test]
async fn run_command_output_is_cut_in_the_middle_with_a_marker() {
    let fixture = Fixture::new();
    let mut registry = ToolRegistry::new();
    registry
        .register(
            RunCommand::new(fixture.workspace.clone())
                .with_limits(OutputLimits::new(10, 64 * 1024))
                .erase(),
        )
        .unwrap();
    let output = call(&registry, "run_command", json!({"command": "seq 1 1000"}))
        .await
        .unwrap();
    assert_eq!(output["truncated"], true);
    let stdout = output["stdout"].as_str().unwrap();
    assert!(
        stdout.starts_with("1\n2\n3\n4\n5\n[... 990 lines ("),
        "{stdout}"
    );
    assert!(
        stdout.ends_with("bytes) cut ...]\n996\n997\n998\n999\n1000\n"),
        "{stdout}"
    );

    let mut by_bytes = ToolRegistry::new();
    by_bytes
        .register(
            RunCommand::new(fixture.workspace.clone())
                .with_limits(OutputLimits::new(10_000, 100))
                .erase(),
        )
        .unwrap();
    let output = call(&by_bytes, "run_command", json!({"command": "seq 1 100000"}))
        .await
        .unwrap();
    let stdout = output["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("1\n2\n"), "{stdout}");
    assert!(stdout.ends_with("99999\n100000\n"), "{stdout}");
    assert!(stdout.contains(" bytes) cut ...]"), "{stdout}");
    assert!(stdout.len() < 200, "{stdout}");
}

/// Whether `pid` is gone (or a zombie awaiting its reaper) within a few seconds.
fn wait_until_dead(pid: u32) -> bool {
    for _ in 0..100 {
        match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
            Err(_) => return true,
            Ok(stat) if stat.split_whitespace().nth(2) == Some("Z") => return true,
            Ok(_) => std::thread::sleep(std::time::Duration::from_millis(50)),
        }
    }
    false
}

// ---------------------------------------------------------------- fetch_url

async fn server_with(route: &str, response: ResponseTemplate) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path(route))
        .respond_with(response)
        .mount(&server)
        .await;
    server
}

#[tokio::test]
async fn fetch_url_converts_html_to_text() {
    let server = server_with(
        "/page",
        ResponseTemplate::new(200).set_body_raw(
            "<html><head><title>T</title></head><body><h1>Hello</h1><p>A <b>bold</b> claim.</p><script>var x;</script></body></html>",
            "text/html; charset=utf-8",
        ),
    )
    .await;
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let url = format!("{}/page", server.uri());
    let output = call(&registry, "fetch_url", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(output["status"], 200);
    assert_eq!(output["url"], url);
    let content = output["content"].as_str().unwrap();
    assert!(content.contains("Hello"), "{content}");
    assert!(content.contains("claim."), "{content}");
    assert!(
        !content.contains("<h1>") && !content.contains("<p>"),
        "{content}"
    );
}

#[tokio::test]
async fn fetch_url_returns_json_and_plain_text_as_they_are() {
    let server = MockServer::start().await;
    Mock::given(path("/data.json"))
        .respond_with(ResponseTemplate::new(200).set_body_json(json!({"a": [1, 2]})))
        .mount(&server)
        .await;
    Mock::given(path("/notes"))
        .respond_with(ResponseTemplate::new(200).set_body_raw("plain <b>text</b>\n", "text/plain"))
        .mount(&server)
        .await;
    let fixture = Fixture::new();
    let registry = fixture.registry();
    let json_out = model_text(
        &registry,
        "fetch_url",
        json!({"url": format!("{}/data.json", server.uri())}),
    )
    .await;
    assert_eq!(
        serde_json::from_str::<Value>(&json_out).unwrap(),
        json!({"a": [1, 2]})
    );
    let text = model_text(
        &registry,
        "fetch_url",
        json!({"url": format!("{}/notes", server.uri())}),
    )
    .await;
    assert_eq!(text, "plain <b>text</b>\n");
}

#[tokio::test]
async fn fetch_url_refuses_binary_bad_schemes_and_http_errors() {
    let server = MockServer::start().await;
    Mock::given(path("/image.png"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(vec![0x89, b'P', b'N', b'G', 0], "image/png"),
        )
        .mount(&server)
        .await;
    Mock::given(path("/untyped"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(vec![0u8, 159, 146, 150]))
        .mount(&server)
        .await;
    let fixture = Fixture::new();
    let registry = fixture.registry();
    for route in ["/image.png", "/untyped"] {
        let result = call(
            &registry,
            "fetch_url",
            json!({"url": format!("{}{route}", server.uri())}),
        )
        .await;
        assert!(
            matches!(&result, Err(ToolError::ExecutionFailed(_, why)) if why.contains("binary")),
            "{route}: {result:?}"
        );
    }
    let missing = call(
        &registry,
        "fetch_url",
        json!({"url": format!("{}/missing", server.uri())}),
    )
    .await;
    assert!(
        matches!(&missing, Err(ToolError::ExecutionFailed(_, why)) if why.contains("404")),
        "{missing:?}"
    );
    let file = call(&registry, "fetch_url", json!({"url": "file:///etc/passwd"})).await;
    assert!(
        matches!(&file, Err(ToolError::InvalidArguments(_, why)) if why.contains("http")),
        "{file:?}"
    );
}

#[tokio::test]
async fn fetch_url_caps_download_and_text_with_markers() {
    let body: String = (1..=1000).map(|i| format!("row {i}\n")).collect();
    let server = server_with(
        "/big.txt",
        ResponseTemplate::new(200).set_body_raw(body.clone(), "text/plain"),
    )
    .await;
    let url = format!("{}/big.txt", server.uri());
    let mut registry = ToolRegistry::new();
    registry
        .register(
            FetchUrl::new()
                .allow_private_network(true)
                .with_limits(OutputLimits::new(3, 100_000))
                .erase(),
        )
        .unwrap();
    let output = call(&registry, "fetch_url", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(output["truncated"], true);
    let content = output["content"].as_str().unwrap();
    let expected_cut = body.len() - "row 1\nrow 2\nrow 3\n".len();
    assert_eq!(
        content,
        format!("row 1\nrow 2\nrow 3\n[... 997 more lines ({expected_cut} bytes) cut ...]")
    );

    let mut small = ToolRegistry::new();
    small
        .register(
            FetchUrl::new()
                .allow_private_network(true)
                .with_max_download(12)
                .erase(),
        )
        .unwrap();
    let output = call(&small, "fetch_url", json!({"url": url}))
        .await
        .unwrap();
    let content = output["content"].as_str().unwrap();
    assert!(content.starts_with("row 1\nrow 2\n"), "{content}");
    assert!(
        content.ends_with(&format!(
            "[... download stopped after 12 bytes of {}; the rest was cut ...]",
            body.len()
        )),
        "{content}"
    );
}

#[tokio::test]
async fn fetch_url_refuses_private_addresses_by_default() {
    let server = server_with(
        "/admin",
        ResponseTemplate::new(200).set_body_raw("secret", "text/plain"),
    )
    .await;
    let port = server.address().port();
    let fixture = Fixture::new();
    // The default set, exactly as a library user gets it — but `fetch_url` can only ever
    // connect to loopback: were its guard wrong, the dial check (after the guard) stops the
    // connection and records it, so this test fails without a packet leaving the machine.
    let dials = LoopbackOnly::new();
    let mut registry = ToolRegistry::new();
    registry
        .register_all(
            builtin_tools(&fixture.workspace)
                .into_iter()
                .filter(|tool| tool.name() != "fetch_url")
                .collect(),
        )
        .unwrap();
    registry
        .register(FetchUrl::new().with_dial_check(dials.clone()).erase())
        .unwrap();
    let cases = [
        (
            format!("http://127.0.0.1:{port}/admin"),
            "'127.0.0.1' is a loopback address",
        ),
        (
            format!("http://localhost:{port}/admin"),
            "'localhost' is a loopback address",
        ),
        (
            format!("http://[::1]:{port}/admin"),
            "'[::1]' is a loopback address",
        ),
        (
            "http://[fd00::1]/".to_owned(),
            "'[fd00::1]' is a unique-local (ULA) address",
        ),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "'169.254.169.254' is a link-local address (e.g. cloud metadata)",
        ),
        (
            "http://10.0.0.1/".to_owned(),
            "'10.0.0.1' is a private (RFC 1918) address",
        ),
        (
            "http://0.0.0.0/".to_owned(),
            "'0.0.0.0' is the unspecified address",
        ),
        (
            "http://[::ffff:127.0.0.1]/".to_owned(),
            "is a loopback address",
        ),
    ];
    for (url, expected) in cases {
        let error = call(&registry, "fetch_url", json!({"url": url}))
            .await
            .unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(tool, why) if tool == "fetch_url" && why.contains(expected) && why.contains("allow_private_network")),
            "{url}: {error:?}"
        );
    }
    assert!(
        server.received_requests().await.unwrap().is_empty(),
        "no refused request reached the server"
    );
    assert_eq!(
        dials.refused(),
        Vec::new(),
        "fetch_url tried to connect beyond loopback"
    );
}

#[tokio::test]
async fn fetch_url_reaches_private_addresses_only_when_allowed() {
    let server = server_with(
        "/admin",
        ResponseTemplate::new(200).set_body_raw("local", "text/plain"),
    )
    .await;
    let url = format!("http://localhost:{}/admin", server.address().port());
    let mut allowed = ToolRegistry::new();
    allowed
        .register(FetchUrl::new().allow_private_network(true).erase())
        .unwrap();
    let output = call(&allowed, "fetch_url", json!({"url": url}))
        .await
        .unwrap();
    assert_eq!(output["content"], "local");
    assert!(
        FetchUrl::new()
            .allow_private_network(true)
            .allows_private_network()
    );
    assert!(!FetchUrl::new().allows_private_network());
}

// ---------------------------------------------------------------- permissions and restricted mode

#[tokio::test]
async fn default_permissions_allow_reading_and_fetching_and_refuse_shell_and_writes() {
    let server = server_with(
        "/ok",
        ResponseTemplate::new(200).set_body_raw("fine", "text/plain"),
    )
    .await;
    let fixture = Fixture::new();
    fixture.write("a.txt", "hello\n");
    let mut registry = ToolRegistry::new()
        .with_permission_checker(PermissionChecker::new(PermissionConfig::default()));
    registry.register_all(fixture.local_tools()).unwrap();

    for (name, args) in [
        ("read_file", json!({"path": "a.txt"})),
        ("list_directory", json!({})),
        ("search_files", json!({"pattern": "hello"})),
        ("fetch_url", json!({"url": format!("{}/ok", server.uri())})),
    ] {
        let result = call(&registry, name, args).await;
        assert!(result.is_ok(), "{name}: {result:?}");
    }

    let shell = registry
        .invoke("run_command", json!({"command": "touch ran.txt"}))
        .await
        .unwrap_err();
    assert!(
        matches!(&shell, ToolError::PermissionDenied(tool, why) if tool == "run_command" && why.contains("Shell (it is in the denied list)")),
        "{shell:?}"
    );
    assert!(!fixture.root.path().join("ran.txt").exists());

    for (name, args) in [
        ("write_file", json!({"path": "a.txt", "content": "changed"})),
        (
            "edit_file",
            json!({"path": "a.txt", "old_string": "hello", "new_string": "changed"}),
        ),
    ] {
        let error = registry.invoke(name, args).await.unwrap_err();
        assert!(
            matches!(&error, ToolError::PermissionDenied(tool, why) if tool == name && why.contains("Write (it is not in the allowed list)")),
            "{name}: {error:?}"
        );
    }
    assert_eq!(fixture.read("a.txt"), "hello\n");
}

#[tokio::test]
async fn allowing_write_lets_the_edit_tools_run() {
    let fixture = Fixture::new();
    let mut config = PermissionConfig::default();
    config.allowed.push(agcore::tools::Permission::Write);
    let mut registry = ToolRegistry::new().with_permission_checker(PermissionChecker::new(config));
    registry
        .register_all(builtin_tools(&fixture.workspace))
        .unwrap();
    call(
        &registry,
        "write_file",
        json!({"path": "a.txt", "content": "x"}),
    )
    .await
    .unwrap();
    assert_eq!(fixture.read("a.txt"), "x");
}

#[test]
fn restricted_mode_hides_run_command_and_fetch_url() {
    let fixture = Fixture::new();
    let visible: Vec<String> = builtin_tools(&fixture.workspace)
        .iter()
        .filter(|tool| tool.allow_in_restricted_mode())
        .map(|tool| tool.name().to_owned())
        .collect();
    assert_eq!(
        visible,
        [
            "read_file",
            "list_directory",
            "search_files",
            "write_file",
            "edit_file"
        ]
    );
}

#[test]
fn workspace_root_must_be_an_existing_directory() {
    let fixture = Fixture::new();
    assert!(Workspace::new(fixture.root.path().join("missing")).is_err());
    assert!(Workspace::new(fixture.outside.path().join("secret.txt")).is_err());
    // The root is canonicalised: a symlinked root resolves to its target.
    let via_link = Workspace::new(fixture.root.path().join("dirlink")).unwrap();
    assert_eq!(
        via_link.root(),
        std::fs::canonicalize(fixture.outside.path()).unwrap()
    );
    let _: &Path = via_link.root();
    let _: Arc<dyn BaseTool> = ReadFile::new(via_link).erase();
}
