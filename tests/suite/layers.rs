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
    ("registry", &["registry", "report", "allowlist"]),
    ("clients", &["clients"]),
    ("executor", &["launch"]),
    ("operations", &["cli"]),
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
            let dir = src.join(module);
            let path = if dir.is_dir() {
                dir
            } else {
                src.join(format!("{module}.rs"))
            };
            if !path.exists() {
                continue;
            }
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
         // crate::cli::export in a comment is no import\n\
         use crate::{model, cli::export::Node};\n\
         fn f() { crate::launch::launch(); }\n",
    )
    .unwrap();
    std::fs::write(src.join("text.rs"), "use crate::schema::Rule;\n").unwrap();
    let found = upward_imports(src);
    assert_eq!(
        found,
        [
            "src/text.rs:1: `crate::schema`: the foundations layer imports the rules layer above it",
            "src/clients/claude/registration.rs:3: `crate::cli`: the clients layer imports the operations layer above it",
            "src/clients/claude/registration.rs:4: `crate::launch`: the clients layer imports the executor layer above it",
        ]
    );
}
