//! Each client's facts live once, in `docs/isolation/<client>.md`, and the docs stay in step
//! with the code where a test can see it (issue 36): every client of the list has its page,
//! its room's module docs link to it in a few lines, the versions a page says are pinned are
//! the ones the real-client tests run on (`ClientSpec::proof`, `scripts/install-peers.sh`,
//! the table of `docs/clients.md`), and every test a page cites as evidence exists.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::spec::Proof;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// The most lines a room's module docs (`//!` of `mod.rs`) may hold: what the room is, which
/// file holds what, and the link to its page. The facts go to the page.
const MAX_ROOM_DOC_LINES: usize = 16;

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The leading `//!` lines of `text`.
fn module_doc(text: &str) -> Vec<&str> {
    text.lines().take_while(|l| l.starts_with("//!")).collect()
}

/// The pages under `docs/isolation/`, by file stem.
fn pages() -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = std::fs::read_dir(Path::new(ROOT).join("docs/isolation"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| {
            let stem = p.file_stem().unwrap().to_string_lossy().into_owned();
            (stem, std::fs::read_to_string(&p).unwrap())
        })
        .collect();
    out.sort();
    out
}

fn pinned(client: Client) -> Vec<&'static str> {
    match client.spec().proof {
        Proof::RealClient { versions, .. } => versions.to_vec(),
        Proof::FactsOnly => Vec::new(),
        _ => unreachable!("a new kind of proof needs a rule here"),
    }
}

/// The `x.y.z` version numbers in `text`, in order.
fn versions_in(text: &str) -> Vec<String> {
    text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
        .map(|t| t.trim_matches('.'))
        .filter(|t| t.split('.').count() == 3 && t.split('.').all(|p| !p.is_empty()))
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_client_has_a_page_and_its_room_links_it_in_a_few_lines() {
    let mut problems = Vec::new();
    let names: BTreeSet<&str> = Client::ALL.iter().map(|c| c.name()).collect();
    for (stem, _) in pages() {
        if !names.contains(stem.as_str()) {
            problems.push(format!(
                "docs/isolation/{stem}.md: no client of `Client::ALL` is named {stem:?}"
            ));
        }
    }
    let rooms = Client::ALL
        .iter()
        .map(|c| (c.name(), vec![c.name()]))
        .chain([("gemini_family", vec!["gemini", "qwen"])]);
    for (room, linked) in rooms {
        let file = format!("src/clients/{room}/mod.rs");
        let text = read(&file);
        let doc = module_doc(&text);
        for name in linked {
            let page = format!("docs/isolation/{name}.md");
            if !Path::new(ROOT).join(&page).is_file() {
                problems.push(format!("{page}: missing; write the client's facts there"));
            }
            if !doc.iter().any(|l| l.contains(&page)) {
                problems.push(format!("{file}: its module docs do not name `{page}`"));
            }
        }
        if doc.len() > MAX_ROOM_DOC_LINES {
            problems.push(format!(
                "{file}: {} lines of module docs (at most {MAX_ROOM_DOC_LINES}): move the facts \
                 to docs/isolation/ and link them",
                doc.len()
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The pins of `scripts/install-peers.sh`: `(CLIENT, version)` of each `<CLIENT>_VERSION=` and
/// `<CLIENT>_NEXT_VERSION=` line.
fn install_pins() -> Vec<(String, String)> {
    read("scripts/install-peers.sh")
        .lines()
        .filter_map(|l| {
            let (key, value) = l.split_once('=')?;
            let client = key
                .strip_suffix("_NEXT_VERSION")
                .or_else(|| key.strip_suffix("_VERSION"))?;
            client
                .chars()
                .all(|c| c.is_ascii_uppercase())
                .then(|| (client.to_lowercase(), value.trim().to_owned()))
        })
        .collect()
}

#[test]
fn every_page_pins_the_versions_the_real_client_tests_run_on() {
    let pins = install_pins();
    assert!(
        pins.len() >= 6,
        "scripts/install-peers.sh: only {pins:?} read"
    );
    let clients_md = read("docs/clients.md");
    let mut problems = Vec::new();
    for client in Client::ALL {
        let name = client.name();
        let spec: BTreeSet<String> = pinned(client).iter().map(|v| (*v).to_owned()).collect();
        let installed: BTreeSet<String> = pins
            .iter()
            .filter(|(c, _)| c == name)
            .map(|(_, v)| v.clone())
            .collect();
        if installed != spec {
            problems.push(format!(
                "{name}: scripts/install-peers.sh pins {installed:?}, the room's SPEC proof \
                 {spec:?}: make them one"
            ));
        }
        let page = read(&format!("docs/isolation/{name}.md"));
        match page
            .lines()
            .find_map(|l| l.strip_prefix("Pinned versions: "))
        {
            None => problems.push(format!(
                "docs/isolation/{name}.md: no `Pinned versions: ` line (`none` for a facts-only \
                 client)"
            )),
            Some(line) => {
                let listed = line.split(" (").next().unwrap();
                let on_page: BTreeSet<String> = if listed == "none" {
                    BTreeSet::new()
                } else {
                    listed.split(", ").map(str::to_owned).collect()
                };
                if on_page != spec {
                    problems.push(format!(
                        "docs/isolation/{name}.md: pins {on_page:?}, the room's SPEC proof {spec:?}"
                    ));
                }
            }
        }
        let display = client.display_name();
        match clients_md
            .lines()
            .find(|l| l.starts_with(&format!("| {display} | ")))
        {
            None => problems.push(format!("docs/clients.md: no row for {display}")),
            Some(row) => {
                let measured = row.split('|').nth(3).unwrap_or("");
                let in_table: BTreeSet<String> = versions_in(measured).into_iter().collect();
                if in_table != spec {
                    problems.push(format!(
                        "docs/clients.md: {display} measured on {in_table:?}, the room's SPEC \
                         proof {spec:?}"
                    ));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out
}

/// The text of test module `path` (`a::b`): `tests/{clients,suite}/a/b.rs` or the files of
/// `tests/{clients,suite}/a/b/`; `None` when it names no test module.
fn test_module(path: &[&str]) -> Option<String> {
    let rel = path.join("/");
    for binary in ["tests/clients", "tests/suite"] {
        let file = Path::new(ROOT).join(format!("{binary}/{rel}.rs"));
        let dir = Path::new(ROOT).join(format!("{binary}/{rel}"));
        let mut text = std::fs::read_to_string(&file).unwrap_or_default();
        for f in rust_files(&dir) {
            text += &std::fs::read_to_string(f).unwrap();
        }
        if !text.is_empty() {
            return Some(text);
        }
    }
    None
}

/// Whether `text` defines a function `name` (or, for a name ending in `…`, one starting so).
fn defines(text: &str, name: &str) -> bool {
    match name.strip_suffix('…') {
        Some(prefix) => text.contains(&format!("fn {prefix}")),
        None => text.contains(&format!("fn {name}(")) || text.contains(&format!("fn {name}<")),
    }
}

/// A function name as a page cites it: lower-case snake case, possibly cut with `…`.
fn fn_like(token: &str) -> bool {
    let name = token.strip_suffix('…').unwrap_or(token);
    name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
}

/// The backticked spans of `line`.
fn code_spans(line: &str) -> impl Iterator<Item = &str> {
    line.split('`').skip(1).step_by(2)
}

/// What `page` cites as evidence that is not there: `tests/…` paths, `module::test` names of
/// a test module, the names in a table column headed `test`, and `<client>_…` names of three
/// words or more (the real-client tests' names).
fn missing_evidence(page: &str, all_tests: &str, all_src: &str) -> Vec<String> {
    let clients: Vec<&str> = Client::ALL.iter().map(|c| c.name()).collect();
    // Modules of `src/` whose names a test directory shares (`launch::…` is the executor).
    let src_modules = ["launch", "clients", "model", "ops"];
    let mut out = Vec::new();
    let mut test_column: Option<usize> = None;
    for line in page.lines() {
        // Tables: the column headed `test…`, until the table ends.
        if line.starts_with('|') {
            let cells: Vec<&str> = line.split('|').collect();
            if let Some(at) = cells.iter().position(|c| c.trim().starts_with("test")) {
                test_column = Some(at);
                continue;
            }
        } else {
            test_column = None;
        }
        for span in code_spans(line) {
            if let Some(path) = span.strip_prefix("tests/") {
                let path = path.trim_end_matches(['.', ',']);
                if (path.ends_with(".rs") || path.ends_with('/'))
                    && !path.contains(['<', '*'])
                    && !Path::new(ROOT).join("tests").join(path).exists()
                {
                    out.push(format!("`tests/{path}`: no such file"));
                }
                continue;
            }
            let parts: Vec<&str> = span.split("::").collect();
            if parts.len() >= 2
                && parts.iter().all(|p| fn_like(p))
                && !src_modules.contains(&parts[0])
                && !clients.contains(&parts[0])
            {
                let (name, module) = parts.split_last().unwrap();
                if let Some(text) = test_module(module) {
                    if !defines(&text, name) {
                        out.push(format!(
                            "`{span}`: test module `{}` has no `fn {name}`",
                            module.join("::")
                        ));
                    }
                }
                continue;
            }
            if cited_test(span, &clients) && !defines(all_tests, span) && !defines(all_src, span) {
                out.push(format!("`{span}`: no such function in tests/ (or src/)"));
            }
        }
        if let Some(at) = test_column {
            // The names lead the cell; what follows a `: ` says what they show.
            let cell = line.split('|').nth(at).unwrap_or("");
            let names = cell.split(": ").next().unwrap();
            for span in code_spans(names).filter(|s| !cited_test(s, &clients)) {
                if fn_like(span) && span.contains('_') && !defines(all_tests, span) {
                    out.push(format!("`{span}` (a test column): no such test in tests/"));
                }
            }
        }
    }
    out
}

/// Whether `span` reads as a real-client test's name anywhere on a page: `<client>_…` of
/// four words or more, or `class<n>_…`.
fn cited_test(span: &str, clients: &[&str]) -> bool {
    let words = span.trim_end_matches('…').split('_').count();
    fn_like(span)
        && (clients
            .iter()
            .any(|c| span.starts_with(&format!("{c}_")) && words >= 4)
            || span.starts_with("class"))
}

fn all_text(dir: &str) -> String {
    rust_files(&Path::new(ROOT).join(dir))
        .into_iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect()
}

#[test]
fn every_test_a_page_cites_as_evidence_exists() {
    let (tests, src) = (all_text("tests"), all_text("src"));
    let mut problems = Vec::new();
    for (stem, page) in pages() {
        for missing in missing_evidence(&page, &tests, &src) {
            problems.push(format!("docs/isolation/{stem}.md: {missing}"));
        }
    }
    for doc in ["docs/clients.md"] {
        for missing in missing_evidence(&read(doc), &tests, &src) {
            problems.push(format!("{doc}: {missing}"));
        }
    }
    assert!(
        problems.is_empty(),
        "evidence that is not there; fix the page or the test name:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_evidence_reader_sees_what_pages_cite() {
    let tests = "fn class1_a_b() {}\nfn copilot_runs_no_hook() {}";
    let cited = "| class | test |\n|---|---|\n| 1 | `class1_a_b`: shows `a_value` |\n| 2 | `gone_test_name` |\n\n\
                 (`copilot_runs_no_hook`, `copilot_runs_every_hook`) `tests/nothing.rs`";
    assert_eq!(
        missing_evidence(cited, tests, ""),
        [
            "`gone_test_name` (a test column): no such test in tests/",
            "`copilot_runs_every_hook`: no such function in tests/ (or src/)",
            "`tests/nothing.rs`: no such file",
        ]
    );
    assert_eq!(
        versions_in("| 2.1.197 and 2.1.332 |"),
        ["2.1.197", "2.1.332"]
    );
    assert!(defines("fn codex_next_a() {}", "codex_next_…"));
}
