//! The layering of the tool system and the CLI, read from the sources: imports (`crate::` paths
//! between files) go one way. The tools core (vocabulary → policies → registry) and the MCP
//! client (parts → façade) have no import circle, the core names no MCP type, and no circle in
//! the CLI is larger than two files.
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
            if path.is_dir() {
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
