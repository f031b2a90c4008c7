//! The layers read one way. No two source files import each other, directly or through others, and neither do two
//! folders (a folder's files naming another's, and back): in the protocol crate (`crates/protocol/src`), the core
//! (`crates/core/src`) and the binding (`src`), a file's `crate::…` paths name only files, and folders, that do not
//! lead back to it. Read from the sources as text: a path's module is its longest prefix that is a file of the crate,
//! and its folder that module's first part (a file at the top is a folder of its own; lib.rs, which names them all,
//! is none).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Each module of the crate under `root` (`lock::lease`, and `` for lib.rs) with the modules its text names.
fn imports(root: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut sources = BTreeMap::new();
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let relative = path.strip_prefix(root).unwrap().with_extension("");
                let parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
                let module = match parts.last().map(String::as_str) {
                    Some("mod") => parts[..parts.len() - 1].join("::"),
                    Some("lib") if parts.len() == 1 => String::new(),
                    _ => parts.join("::"),
                };
                sources.insert(module, std::fs::read_to_string(&path).unwrap());
            }
        }
    }
    let mut graph = BTreeMap::new();
    for (module, text) in &sources {
        let mut named = BTreeSet::new();
        for (at, _) in text.match_indices("crate::") {
            let path: String = text[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
            let found = (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| sources.contains_key(m));
            if let Some(target) = found.filter(|m| m != module) {
                named.insert(target);
            }
        }
        graph.insert(module.clone(), named);
    }
    graph
}

/// A cycle in `graph` as its modules in order, if there is one.
fn cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        module: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|m| m == module) {
            return Some(path[at..].to_vec());
        }
        if done.contains(module) {
            return None;
        }
        path.push(module.to_owned());
        for next in &graph[module] {
            if let Some(found) = visit(next, graph, path, done) {
                return Some(found);
            }
        }
        path.pop();
        done.insert(module.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    graph.keys().find_map(|m| visit(m, graph, &mut Vec::new(), &mut done))
}

/// The graph of `modules` by folder: each module's first part, with the first parts of the modules it names.
fn folders(modules: &BTreeMap<String, BTreeSet<String>>) -> BTreeMap<String, BTreeSet<String>> {
    let folder = |module: &str| module.split("::").next().unwrap_or_default().to_owned();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, named) in modules.iter().filter(|(module, _)| !module.is_empty()) {
        let from = folder(module);
        let to: Vec<String> = named.iter().map(|m| folder(m)).filter(|to| *to != from && !to.is_empty()).collect();
        graph.entry(from).or_default().extend(to);
    }
    for to in graph.values().flatten().cloned().collect::<Vec<_>>() {
        graph.entry(to).or_default();
    }
    graph
}

/// The crates' source folders.
fn roots() -> [std::path::PathBuf; 3] {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    [manifest.join("../protocol/src"), manifest.join("src"), manifest.join("../../src")]
}

#[test]
fn no_source_file_imports_itself_through_others() {
    for root in roots() {
        let graph = imports(&root);
        assert!(graph.len() > 5, "{} holds the crate's files", root.display());
        assert_eq!(cycle(&graph), None, "a cycle of imports in {}", root.display());
    }
}

#[test]
fn no_folder_imports_itself_through_others() {
    for root in roots() {
        let graph = folders(&imports(&root));
        assert_eq!(cycle(&graph), None, "a cycle of folders in {}: {graph:?}", root.display());
    }
}

#[test]
fn a_cycle_of_folders_is_found() {
    let module = |name: &str, named: &[&str]| (name.to_owned(), named.iter().map(|n| n.to_string()).collect());
    let modules = BTreeMap::from([
        module("lock::lease", &["redlock::quorum"]),
        module("redlock::quorum", &["redlock::cleanup"]),
        module("redlock::cleanup", &["lock::job"]),
        module("lock::job", &[]),
    ]);
    assert_eq!(cycle(&modules), None, "no cycle of files");
    assert!(cycle(&folders(&modules)).is_some(), "lock -> redlock -> lock");
}
