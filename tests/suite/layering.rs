//! The layering of the crate, the tool system and the CLI, read from the sources: imports
//! (`crate::` paths between files) go one way. The crate's modules follow the layer table of
//! `src/lib.rs` (each imports only the ones above it) and no import circle crosses folders;
//! the tools core (vocabulary → policies → registry) and the MCP client (parts → façade) have
//! no import circle, the core names no MCP type, and no circle in the CLI is larger than two
//! files.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use regex::Regex;

/// Every `.rs` file under `root`, by module path (`tools::mcp::client`; `lib`/`main` → ""),
/// with its `//` comments removed.
fn modules(root: &Path) -> BTreeMap<String, String> {
    let comment = Regex::new(r"//[^\n]*").unwrap();
    let mut files = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            // `src/bin/` holds binaries, not modules of the crate.
            if path.is_dir() && !(dir == root && path.ends_with("bin")) {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap().with_extension("");
                let parts: Vec<String> = relative
                    .components()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned())
                    .collect();
                let mut module = parts.join("::");
                if module == "lib" || module == "main" {
                    module.clear();
                }
                let text = std::fs::read_to_string(&path).unwrap();
                files.insert(module, comment.replace_all(&text, "").into_owned());
            }
        }
    }
    files
}

/// The file `path` (a `crate::` path) lives in: its longest prefix that is a module file.
fn resolve<'a>(files: &'a BTreeMap<String, String>, path: &str) -> Option<&'a str> {
    let mut parts: Vec<&str> = path.split("::").collect();
    while !parts.is_empty() {
        if let Some((module, _)) = files.get_key_value(&parts.join("::")) {
            return Some(module);
        }
        parts.pop();
    }
    None
}

/// Which files each file imports through `crate::` paths (also `crate::a::{b, c}` groups).
fn imports(files: &BTreeMap<String, String>) -> BTreeMap<&str, BTreeSet<&str>> {
    let path = Regex::new(r"crate::((?:[a-z_0-9]+::)*[a-z_0-9]+)(?:::\{([^;]*?)\})?").unwrap();
    let mut edges = BTreeMap::new();
    for (module, text) in files {
        let targets: &mut BTreeSet<&str> = edges.entry(module.as_str()).or_default();
        for found in path.captures_iter(text) {
            let base = &found[1];
            let mut paths = vec![base.to_owned()];
            if let Some(group) = found.get(2) {
                for item in group.as_str().split(',') {
                    let item = item.trim().split(' ').next().unwrap_or_default();
                    if item.starts_with(|c: char| c.is_ascii_lowercase() || c == '_') {
                        let first = item.split("::").next().unwrap_or_default();
                        paths.push(format!("{base}::{first}"));
                    }
                }
            }
            for target in paths {
                if let Some(file) = resolve(files, &target)
                    && file != module
                {
                    targets.insert(file);
                }
            }
        }
    }
    edges
}

/// The import circles (strongly connected components of more than one file), Tarjan's way.
fn circles<'a>(edges: &BTreeMap<&'a str, BTreeSet<&'a str>>) -> Vec<Vec<&'a str>> {
    struct Walk<'a, 'e> {
        edges: &'e BTreeMap<&'a str, BTreeSet<&'a str>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<&'a str>>,
    }
    impl<'a> Walk<'a, '_> {
        fn visit(&mut self, v: &'a str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for &w in self.edges.get(v).into_iter().flatten() {
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let low = self.low[v].min(self.low[w]);
                    self.low.insert(v, low);
                } else if self.on_stack.contains(w) {
                    let low = self.low[v].min(self.index[w]);
                    self.low.insert(v, low);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w);
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort_unstable();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for &v in edges.keys() {
        if !walk.index.contains_key(v) {
            walk.visit(v);
        }
    }
    walk.found
}

fn root(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

#[test]
fn the_tools_core_names_no_mcp_type() {
    let files = modules(&root("src"));
    let naming: Vec<&str> = files
        .iter()
        .filter(|(module, _)| {
            let core = module.starts_with("tools::")
                && !module.starts_with("tools::mcp")
                && !module.starts_with("tools::builtin");
            (core && module.matches("::").count() == 1) || module.starts_with("tools::exposure::")
        })
        .filter(|(_, text)| text.contains("mcp::"))
        .map(|(module, _)| module.as_str())
        .collect();
    assert!(naming.is_empty(), "name an MCP type: {naming:?}");
}

#[test]
fn the_tools_core_and_the_mcp_client_have_no_import_circle() {
    let files = modules(&root("src"));
    let edges = imports(&files);
    let in_tools: Vec<Vec<&str>> = circles(&edges)
        .into_iter()
        .filter(|circle| circle.iter().any(|module| module.starts_with("tools")))
        .collect();
    assert!(in_tools.is_empty(), "import circles: {in_tools:?}");
}

#[test]
fn no_import_circle_of_the_cli_is_larger_than_two_files() {
    let files = modules(&root("cli/src"));
    let edges = imports(&files);
    let large: Vec<Vec<&str>> = circles(&edges)
        .into_iter()
        .filter(|circle| circle.len() > 2)
        .collect();
    assert!(large.is_empty(), "import circles: {large:?}");
}

/// The crate's files without their unit tests (a test may reach anywhere).
fn library(root: &Path) -> BTreeMap<String, String> {
    modules(root)
        .into_iter()
        .filter(|(module, _)| !module.ends_with("tests"))
        .map(|(module, text)| match text.find("#[cfg(test)]\nmod ") {
            Some(at) => (module, text[..at].to_owned()),
            None => (module, text),
        })
        .collect()
}

/// The layers as the table of `src/lib.rs` lists them, top first.
fn layer_table() -> Vec<String> {
    let row = Regex::new(r"(?m)^//! \| \[`([a-z_]+)`\] \|").unwrap();
    let lib = std::fs::read_to_string(root("src/lib.rs")).unwrap();
    row.captures_iter(&lib)
        .map(|found| found[1].to_owned())
        .collect()
}

/// `llm.rs` re-exports the design's names (`agcore::llm::{LlmCycle, StreamEvent, ...}`) from
/// the layers below it: a façade, not a use.
const FACADE: &str = "llm";

/// Imports against the table still to be removed (issue 31, item 2: teams above the run, the
/// run naming no team type). The list may only shrink: a new one fails the table test, and
/// one that is gone must leave the list.
const KNOWN_BREACHES: &[(&str, &str)] = &[
    ("run::driver", "team"),
    ("run::handle::finish", "team"),
    ("run::handle::seat", "team"),
    ("run::handle::seat", "team::tools"),
    ("run::handle::start", "team"),
    ("run::handle::team_calls", "team"),
    ("run::handle::team_calls", "team::child"),
    ("run::handle::team_calls", "team::tools"),
    ("run::handle::tools", "team"),
    ("run::handle::tools", "team::child"),
    ("run::request", "team"),
];

fn layer_of(module: &str) -> &str {
    module.split("::").next().unwrap_or_default()
}

/// The imports (file → file) from a layer to one at or below it in the table.
fn breaches<'a>(
    edges: &BTreeMap<&'a str, BTreeSet<&'a str>>,
    table: &[String],
) -> BTreeSet<(&'a str, &'a str)> {
    let rank = |module: &str| table.iter().position(|layer| layer == layer_of(module));
    let mut found = BTreeSet::new();
    for (&from, targets) in edges {
        if from.is_empty() || from == FACADE {
            continue;
        }
        for &to in targets {
            let (Some(above), Some(below)) = (rank(from), rank(to)) else {
                assert!(
                    to.is_empty(),
                    "a layer missing from the table: {from} -> {to}"
                );
                continue;
            };
            if layer_of(from) != layer_of(to) && below >= above {
                found.insert((from, to));
            }
        }
    }
    found
}

/// The folder a file is in; a folder's face (`run.rs` beside `run/`) is in its folder.
fn folder_of<'a>(files: &BTreeMap<String, String>, module: &'a str) -> &'a str {
    let prefix = format!("{module}::");
    if files.keys().any(|other| other.starts_with(&prefix)) {
        return module;
    }
    module.rsplit_once("::").map_or("", |(folder, _)| folder)
}

/// The import circles whose files are in more than one folder, not counting the façade's
/// re-exports and the known breaches.
fn circles_across_folders(files: &BTreeMap<String, String>) -> Vec<Vec<String>> {
    let mut edges = imports(files);
    edges.remove(FACADE);
    for (from, to) in KNOWN_BREACHES {
        if let Some(targets) = edges.get_mut(from) {
            targets.remove(to);
        }
    }
    circles(&edges)
        .into_iter()
        .filter(|circle| {
            let folders: BTreeSet<&str> = circle.iter().map(|m| folder_of(files, m)).collect();
            folders.len() > 1
        })
        .map(|circle| circle.into_iter().map(str::to_owned).collect())
        .collect()
}

#[test]
fn the_crate_follows_the_layer_table_of_lib_rs() {
    let table = layer_table();
    assert_eq!(
        table,
        [
            "vocab",
            "display",
            "owner_only",
            "llm",
            "tools",
            "prompt",
            "context",
            "run",
            "team",
            "session"
        ],
        "the table of src/lib.rs"
    );
    let files = library(&root("src"));
    let layers: BTreeSet<&str> = files
        .keys()
        .map(|m| layer_of(m))
        .filter(|l| !l.is_empty())
        .collect();
    let listed: BTreeSet<&str> = table.iter().map(String::as_str).collect();
    assert_eq!(layers, listed, "every module has a row, every row a module");
    let found = breaches(&imports(&files), &table);
    let known: BTreeSet<(&str, &str)> = KNOWN_BREACHES.iter().copied().collect();
    assert_eq!(
        found, known,
        "imports against the table (left: found, right: known)"
    );
}

#[test]
fn no_import_circle_crosses_folders() {
    let files = library(&root("src"));
    let across = circles_across_folders(&files);
    assert!(
        across.is_empty(),
        "import circles across folders: {across:?}"
    );
}

#[test]
fn a_planted_run_to_team_import_is_caught() {
    // The checks above are shown to fail: a new import of the run's pure step machine from the
    // team breaks the table, and one from the vocabulary back to it makes a circle across
    // folders.
    let table = layer_table();
    let mut files = library(&root("src"));
    files
        .get_mut("run::step")
        .unwrap()
        .push_str("\nuse crate::team::Team;\n");
    let found = breaches(&imports(&files), &table);
    assert!(found.contains(&("run::step", "team")), "{found:?}");
    files
        .get_mut("vocab")
        .unwrap()
        .push_str("\nuse crate::run::step::step;\n");
    let across = circles_across_folders(&files);
    assert!(
        across
            .iter()
            .any(|circle| circle.contains(&"vocab".to_owned())
                && circle.contains(&"run::step".to_owned())),
        "{across:?}"
    );
}
