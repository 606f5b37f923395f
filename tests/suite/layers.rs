//! Layers point one way: `vocab` < `llm` (providers), `tools` < `context`, `prompt` < `run` <
//! `session`. Checked on the source: a `use` of a higher layer in a lower one fails here.
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// Every `.rs` file under `dir`, with its text.
fn sources(dir: &Path) -> Vec<(String, String)> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).unwrap();
                files.push((path.display().to_string(), text));
            }
        }
    }
    files
}

/// The lines of `files` (comments left out) that name one of `forbidden`.
fn violations(files: &[(String, String)], forbidden: &[&str]) -> Vec<String> {
    let mut found = Vec::new();
    for (path, text) in files {
        // The design's names under `agcore::llm` are re-exported from the run by the module
        // file itself (`src/llm.rs`): a façade, not an import the provider code uses.
        let facade = path.ends_with("src/llm.rs");
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            // A layer's unit tests may drive it from above.
            if code.starts_with("#[cfg(test)]") {
                break;
            }
            if code.starts_with("//") || (facade && code.starts_with("pub use crate::")) {
                continue;
            }
            if forbidden.iter().any(|module| code.contains(module)) {
                found.push(format!("{path}:{}: {code}", number + 1));
            }
        }
    }
    found
}

fn layer(name: &str) -> Vec<(String, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = sources(&root.join(name));
    let file = root.join(format!("{name}.rs"));
    files.push((
        file.display().to_string(),
        std::fs::read_to_string(&file).unwrap(),
    ));
    files
}

/// What each layer may not import: the layers above it. The order is
/// `vocab` < `llm` (providers), `tools` < `context`, `prompt` < `run` < `session` (< the CLI).
const LAYERS: &[(&str, &[&str])] = &[
    (
        "vocab",
        &[
            "crate::llm",
            "crate::tools",
            "crate::context",
            "crate::prompt",
            "crate::run",
            "crate::session",
        ],
    ),
    (
        "llm",
        &[
            "crate::tools",
            "crate::context",
            "crate::prompt",
            "crate::run",
            "crate::session",
        ],
    ),
    (
        "tools",
        &[
            "crate::llm",
            "crate::context",
            "crate::prompt",
            "crate::run",
            "crate::session",
        ],
    ),
    (
        "context",
        &["crate::prompt", "crate::run", "crate::session"],
    ),
    (
        "prompt",
        &["crate::context", "crate::run", "crate::session"],
    ),
    ("run", &["crate::session"]),
];

fn check(name: &str) {
    let (_, above) = LAYERS.iter().find(|(layer, _)| *layer == name).unwrap();
    let found = violations(&layer(name), above);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_vocabulary_imports_no_other_layer() {
    check("vocab");
}

#[test]
fn providers_never_import_tools_or_the_run() {
    check("llm");
}

#[test]
fn tools_never_import_providers_or_the_run() {
    check("tools");
}

#[test]
fn the_context_engine_never_imports_the_run() {
    check("context");
}

#[test]
fn prompts_never_import_the_run() {
    check("prompt");
}

#[test]
fn the_run_never_imports_sessions() {
    check("run");
}

#[test]
fn the_checker_sees_an_upward_import() {
    let files = [(
        "src/llm/x.rs".to_owned(),
        "use crate::run::Conversation;\n#[cfg(test)]\nmod tests { use crate::run::X; }".to_owned(),
    )];
    assert_eq!(
        violations(&files, &["crate::run"]),
        ["src/llm/x.rs:1: use crate::run::Conversation;"]
    );
}
