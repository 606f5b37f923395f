//! Layers point one way: `vocab` ← `llm` (providers) and `tools`; `run` on top. Checked on the
//! source: a `use` of a higher layer in a lower one fails here.
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
        for (number, line) in text.lines().enumerate() {
            let code = line.trim_start();
            if code.starts_with("//") {
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

#[test]
fn providers_never_import_tools_or_the_run() {
    let found = violations(&layer("llm"), &["crate::tools", "crate::run"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn tools_never_import_providers_or_the_run() {
    let found = violations(&layer("tools"), &["crate::llm", "crate::run"]);
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn the_vocabulary_imports_no_other_layer() {
    let found = violations(
        &layer("vocab"),
        &["crate::llm", "crate::tools", "crate::run"],
    );
    assert!(found.is_empty(), "{found:#?}");
}
