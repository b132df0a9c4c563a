//! The library's layers run one way: a module imports only modules of its own layer or
//! below, so the client layer never reaches up into the operations behind the commands
//! (`docs/layout.md` names the layers). Imports are read from the source text: every
//! `crate::<module>` path outside a comment.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The library's top-level modules, bottom layer first. A module may import its own layer and
/// those before it. `diagnostic` is `schema::diagnostic`, re-exported at the crate root.
const LAYERS: &[(&str, &[&str])] = &[
    ("foundations", &["text", "decode", "model", "wire"]),
    ("rules", &["schema", "diagnostic"]),
    ("resolution", &["registry", "report", "allowlist"]),
    ("rooms", &["clients"]),
    ("executor", &["launch", "error"]),
    ("operations", &["ops"]),
];

fn layer_of(module: &str) -> Option<usize> {
    LAYERS.iter().position(|(_, ms)| ms.contains(&module))
}

fn rust_files(path: &Path) -> Vec<PathBuf> {
    if path.is_file() {
        return vec![path.to_owned()];
    }
    let mut out = Vec::new();
    for entry in std::fs::read_dir(path).unwrap() {
        let p = entry.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
    out.sort();
    out
}

/// The folder or file of top-level module `module` under `src`, if it exists.
fn module_path(src: &Path, module: &str) -> Option<PathBuf> {
    let dir = src.join(module);
    let path = if dir.is_dir() {
        dir
    } else {
        src.join(format!("{module}.rs"))
    };
    path.exists().then_some(path)
}

/// `(line number, module)` for each `crate::<module>` path in `text` outside a comment, and
/// each lower-case name of a `use crate::{…}` group.
fn references(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let code = match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        };
        let mut rest = code;
        while let Some(at) = rest.find("crate::") {
            rest = &rest[at + "crate::".len()..];
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    let name: String = item
                        .trim()
                        .chars()
                        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                        .collect();
                    if name.starts_with(|c: char| c.is_ascii_lowercase()) {
                        out.push((i + 1, name));
                    }
                }
                continue;
            }
            let name: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.push((i + 1, name));
            }
        }
    }
    out
}

/// Every import of a module from a higher layer, as `file:line: ...`.
fn upward_imports(src: &Path) -> Vec<String> {
    let mut found = Vec::new();
    for (_, modules) in LAYERS {
        for module in *modules {
            let Some(path) = module_path(src, module) else {
                continue;
            };
            let own = layer_of(module).unwrap();
            for file in rust_files(&path) {
                let text = std::fs::read_to_string(&file).unwrap();
                for (line, to) in references(&text) {
                    if let Some(layer) = layer_of(&to).filter(|&l| l > own) {
                        found.push(format!(
                            "src/{}:{line}: `crate::{to}`: the {} layer imports the {} layer above it",
                            file.strip_prefix(src).unwrap_or(&file).display(),
                            LAYERS[own].0,
                            LAYERS[layer].0,
                        ));
                    }
                }
            }
        }
    }
    found
}

#[test]
fn every_top_level_module_of_the_library_has_a_layer() {
    let src = Path::new(ROOT).join("src");
    let mut modules = BTreeSet::new();
    for entry in std::fs::read_dir(&src).unwrap() {
        let p = entry.unwrap().path();
        let name = p.file_stem().unwrap().to_string_lossy().into_owned();
        if ["lib", "main", "commands", "bin"].contains(&name.as_str()) {
            continue;
        }
        modules.insert(name);
    }
    let unplaced: Vec<&String> = modules.iter().filter(|m| layer_of(m).is_none()).collect();
    assert!(
        unplaced.is_empty(),
        "modules with no layer in tests/suite/layers.rs: {unplaced:?}"
    );
}

#[test]
fn the_library_layers_run_one_way() {
    let found = upward_imports(&Path::new(ROOT).join("src"));
    assert!(
        found.is_empty(),
        "imports up the layers:\n{}",
        found.join("\n")
    );
}

#[test]
fn an_import_up_the_layers_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path();
    std::fs::create_dir_all(src.join("clients/claude")).unwrap();
    std::fs::write(
        src.join("clients/claude/registration.rs"),
        "use crate::clients::plan::EnvVar;\n\
         // crate::ops::export in a comment is no import\n\
         use crate::{model, ops::export::Node};\n\
         fn f() { crate::launch::launch(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("text.rs"), "use crate::schema::Rule;\n").unwrap();
    let found = upward_imports(src);
    assert_eq!(
        found,
        [
            "src/text.rs:1: `crate::schema`: the foundations layer imports the rules layer above it",
            "src/clients/claude/registration.rs:3: `crate::ops`: the rooms layer imports the operations layer above it",
            "src/clients/claude/registration.rs:4: `crate::launch`: the rooms layer imports the executor layer above it",
        ]
    );
}

/// The commands each command file of the binary imports (`super::<command>` or
/// `crate::commands::<command>`), by command.
fn command_imports(dir: &Path) -> std::collections::BTreeMap<String, BTreeSet<String>> {
    let commands: BTreeSet<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "rs"))
        .map(|p| p.file_stem().unwrap().to_string_lossy().into_owned())
        .filter(|c| c != "mod")
        .collect();
    let mut graph = std::collections::BTreeMap::new();
    for command in &commands {
        let mut files = vec![dir.join(format!("{command}.rs"))];
        if dir.join(command).is_dir() {
            files.extend(rust_files(&dir.join(command)));
        }
        let mut to = BTreeSet::new();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            for other in &commands {
                let named = [
                    format!("super::{other}::"),
                    format!("crate::commands::{other}::"),
                ];
                if other != command && named.iter().any(|n| text.contains(n.as_str())) {
                    to.insert(other.clone());
                }
            }
        }
        graph.insert(command.clone(), to);
    }
    graph
}

/// A cycle of `graph`, as the commands on it, if there is one.
fn cycle(graph: &std::collections::BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &std::collections::BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|n| n == node) {
            return Some(path[at..].to_vec());
        }
        if !done.insert(node.to_owned()) {
            return None;
        }
        path.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            if let Some(c) = visit(next, graph, path, done) {
                return Some(c);
            }
        }
        path.pop();
        None
    }
    let mut done = BTreeSet::new();
    graph
        .keys()
        .find_map(|n| visit(n, graph, &mut Vec::new(), &mut done))
}

#[test]
fn no_two_command_files_import_each_other() {
    let graph = command_imports(&Path::new(ROOT).join("src/bin/kcap-mcp-registry/commands"));
    assert!(graph.len() >= 9, "{graph:?}");
    assert_eq!(cycle(&graph), None, "command files in a circle: {graph:?}");
}

#[test]
fn a_circle_of_command_files_is_found() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("doctor")).unwrap();
    for (file, text) in [
        ("mod.rs", "pub(crate) mod doctor;"),
        ("install.rs", "use super::check::CheckFormat;"),
        ("check.rs", "fn f() {}"),
        ("doctor.rs", "fn f() {}"),
        (
            "doctor/project.rs",
            "use crate::commands::install::print_outcome;",
        ),
    ] {
        std::fs::write(dir.path().join(file), text).unwrap();
    }
    let mut graph = command_imports(dir.path());
    assert_eq!(cycle(&graph), None, "{graph:?}");
    graph.get_mut("check").unwrap().insert("doctor".to_owned());
    assert_eq!(
        cycle(&graph),
        Some(vec!["check".into(), "doctor".into(), "install".into()])
    );
}

/// The drawing of the library's layers in `docs/layout.md`: each top-level module, grouped
/// by layer (bottom first), and an arrow for each module it imports, as Mermaid.
fn drawing(src: &Path) -> String {
    let mut out = String::from("```mermaid\nflowchart BT\n");
    let mut arrows = BTreeSet::new();
    for (layer, modules) in LAYERS {
        out.push_str(&format!("  subgraph {layer}\n"));
        for module in *modules {
            let Some(path) = module_path(src, module) else {
                continue;
            };
            out.push_str(&format!("    {module}\n"));
            for file in rust_files(&path) {
                let text = std::fs::read_to_string(&file).unwrap();
                for (_, to) in references(&text) {
                    let to = if to == "diagnostic" {
                        "schema".into()
                    } else {
                        to
                    };
                    if to != *module && layer_of(&to).is_some() {
                        arrows.insert(format!("  {module} --> {to}\n"));
                    }
                }
            }
        }
        out.push_str("  end\n");
    }
    out.extend(arrows);
    out.push_str("```\n");
    out
}

#[test]
fn the_drawing_of_the_layers_in_the_layout_is_the_code_s() {
    let path = Path::new(ROOT).join("docs/layout.md");
    let layout = std::fs::read_to_string(&path).unwrap();
    let want = drawing(&Path::new(ROOT).join("src"));
    let start = layout
        .find("```mermaid\n")
        .expect("docs/layout.md has a mermaid drawing");
    let end = start + layout[start..].find("```\n").unwrap() + 4;
    if layout[start..end] != want {
        if std::env::var_os("KCAP_BLESS").is_some() {
            let fixed = format!("{}{want}{}", &layout[..start], &layout[end..]);
            std::fs::write(&path, fixed).unwrap();
        } else {
            panic!(
                "docs/layout.md's drawing is not the code's; `KCAP_BLESS=1 cargo test --test \
                 suite layers::` writes it:\n{want}"
            );
        }
    }
}
