//! Rules for the tests themselves, the shared test support they rely on, and the docs:
//! - executables are written only by `tests/common/stand_in.rs` (issue 18: any other way
//!   races with concurrent forks and fails with `ETXTBSY`);
//! - a `harness = false` test file has no `#[test]` (it would be compiled out, silently);
//! - the real-client harness reports a test whose client is missing as ignored, with the
//!   reason, and fails it under `KCAP_REQUIRE_PEERS=1`;
//! - every link of the README and `docs/` resolves (file and heading), every path of the
//!   layout table (`docs/layout.md`) exists and is listed once, and every doc with Rust
//!   examples runs them as doctests (`src/lib.rs`).

use crate::common;

use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::peers::{longest_first, outcome, peer_in, skip};
use common::stand_in::{sh_script, write_executable};
use libtest_mimic::Completion;

const ROOT: &str = env!("CARGO_MANIFEST_DIR");

/// Every `.rs` file under `dir`, recursively, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

#[test]
fn executables_are_written_only_by_the_stand_in_helper() {
    // Split so that this file does not match itself.
    let patterns = [
        concat!("set_", "permissions"),
        concat!("from_", "mode"),
        concat!("Permissions", "Ext"),
        concat!("OpenOptions", "Ext"),
        concat!("ch", "mod"),
    ];
    let helper = Path::new(ROOT).join("tests/common/stand_in.rs");
    let mut found = Vec::new();
    let files: Vec<PathBuf> = ["tests", "benches", "examples"]
        .iter()
        .flat_map(|dir| rust_files(&Path::new(ROOT).join(dir)))
        .collect();
    assert!(files.contains(&helper), "{files:?}");
    for file in files.iter().filter(|f| **f != helper) {
        let text = std::fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            for p in patterns.iter().filter(|p| line.contains(**p)) {
                found.push(format!(
                    "{}:{}: `{p}`",
                    file.strip_prefix(ROOT).unwrap().display(),
                    n + 1
                ));
            }
        }
    }
    assert!(
        found.is_empty(),
        "a test makes a file executable without tests/common/stand_in.rs, which races with \
         concurrent forks (ETXTBSY); use common::stand_in::write_executable instead:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_process_group_is_signalled_through_the_kill_program() {
    // On these machines procps' `kill` turns `-<pgid>` into `-1`: every process. Groups are
    // signalled with kill(2) (`common::peers::kill_group`, the executor's `signal_group`).
    let patterns = [
        concat!("Command::new(\"", "kill\")"),
        concat!("\"/bin/", "kill\""),
        concat!("\"/usr/bin/", "kill\""),
    ];
    let mut found = Vec::new();
    for dir in ["src", "tests", "benches", "examples"] {
        for file in rust_files(&Path::new(ROOT).join(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (n, line) in text.lines().enumerate() {
                if patterns.iter().any(|p| line.contains(p)) {
                    found.push(format!("{}:{}", file.display(), n + 1));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "a process group signalled through the kill program, which can signal every process \
         here; call `common::peers::kill_group` (kill(2), groups > 1 only):\n{}",
        found.join("\n")
    );
}

#[test]
fn harness_false_test_files_have_no_test_attribute() {
    // The real-client binary is the one `harness = false` target; every file under its
    // directory is compiled into it.
    let manifest: toml::Table =
        toml::from_str(&std::fs::read_to_string(Path::new(ROOT).join("Cargo.toml")).unwrap())
            .unwrap();
    let custom: Vec<&str> = manifest["test"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t.get("harness").and_then(|h| h.as_bool()) == Some(false))
        .map(|t| t["path"].as_str().unwrap())
        .collect();
    assert_eq!(custom, ["tests/clients/main.rs"]);
    let files = rust_files(&Path::new(ROOT).join("tests/clients"));
    assert!(
        files.iter().any(|f| f.ends_with("conformance/mod.rs")),
        "{files:?}"
    );
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let lines: Vec<usize> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| l.trim_start().starts_with(concat!("#[", "test]")))
            .map(|(n, _)| n + 1)
            .collect();
        assert!(
            lines.is_empty(),
            "{} runs on the real-client harness (harness = false), where `#[test]` functions \
             are compiled out and never run; at lines {lines:?}, drop `#[test]` and list the \
             function in the file's `real_client_tests![…]`",
            file.display()
        );
    }
}

// ------------------------------------------------------------------------------------------
// The stand-in helper
// ------------------------------------------------------------------------------------------

#[test]
fn a_stand_in_has_its_exact_bytes_and_mode_0755_and_replaces_the_old_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tool");
    let body = b"#!/bin/sh\nprintf '%s|' \"$@\" '$HOME' \"\\\\n\"\n# \xe9 \xff\n";
    write_executable(&path, body);
    assert_eq!(std::fs::read(&path).unwrap(), body);
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.mode() & 0o7777, 0o755);
    let out = Command::new(&path).args(["a b", "c"]).output().unwrap();
    assert_eq!(
        (out.status.code(), out.stdout.as_slice()),
        (Some(0), b"a b|c|$HOME|\\n|".as_slice())
    );

    let replaced = sh_script(dir.path(), "tool", "echo second");
    assert_eq!(replaced, path);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "#!/bin/sh\necho second\n"
    );
    assert_ne!(std::fs::metadata(&path).unwrap().ino(), meta.ino());
    let names: Vec<OsString> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["tool"], "no temporary file is left behind");
}

#[test]
fn stand_ins_written_and_run_while_other_threads_fork_never_hit_etxtbsy() {
    // 8 threads each write a fresh stand-in and run it at once, 25 times, while 4 threads
    // fork without pause: the race issue 18 measured at 12 in 200 runs of one test binary.
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    Command::new("/bin/true").status().unwrap();
                }
            });
        }
        let writers: Vec<_> = (0..8)
            .map(|t| {
                s.spawn(move || {
                    let dir = tempfile::tempdir().unwrap();
                    for i in 0..25 {
                        let bin = sh_script(dir.path(), &format!("s{i}"), &format!("echo {t}.{i}"));
                        let out = Command::new(&bin)
                            .output()
                            .unwrap_or_else(|e| panic!("run {t}.{i}: {e}"));
                        assert_eq!(out.stdout, format!("{t}.{i}\n").into_bytes());
                    }
                })
            })
            .collect();
        let results: Vec<_> = writers.into_iter().map(|w| w.join()).collect();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for r in results {
            r.unwrap();
        }
    });
}

// ------------------------------------------------------------------------------------------
// The real-client harness
// ------------------------------------------------------------------------------------------

/// An environment holding exactly `vars`.
fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + use<> {
    let vars: Vec<(String, OsString)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), OsString::from(v)))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

const REASON: &str = "KCAP_CODEX_BIN not set; `bash scripts/install-peers.sh` prints it; \
                      KCAP_REQUIRE_PEERS=1 fails instead";

#[test]
fn a_missing_client_skips_with_the_reason_unless_required() {
    assert_eq!(peer_in("KCAP_CODEX_BIN", env(&[])), Err(REASON.into()));
    assert_eq!(
        peer_in("KCAP_CODEX_BIN", env(&[("KCAP_CODEX_BIN", "")])),
        Err(REASON.into())
    );
    assert_eq!(
        peer_in(
            "KCAP_CODEX_BIN",
            env(&[("KCAP_REQUIRE_PEERS", "0"), ("KCAP_CLAUDE_BIN", "/bin/sh")])
        ),
        Err(REASON.into())
    );
    assert_eq!(
        peer_in("KCAP_CODEX_BIN", env(&[("KCAP_CODEX_BIN", "/bin/sh")])),
        Ok(Some(PathBuf::from("/bin/sh")))
    );
}

/// The panic message of `f`.
fn panic_of(f: impl FnOnce() + std::panic::UnwindSafe) -> String {
    let payload = std::panic::catch_unwind(f).unwrap_err();
    payload
        .downcast_ref::<String>()
        .cloned()
        .unwrap_or_else(|| payload.downcast_ref::<&str>().unwrap().to_string())
}

#[test]
fn a_required_or_wrong_client_fails_the_test() {
    assert_eq!(
        panic_of(|| {
            let _ = peer_in("KCAP_CODEX_BIN", env(&[("KCAP_REQUIRE_PEERS", "1")]));
        }),
        "KCAP_CODEX_BIN is not set but KCAP_REQUIRE_PEERS=1; run `bash \
         scripts/install-peers.sh` and export the paths it prints"
    );
    assert_eq!(
        panic_of(|| {
            let _ = peer_in(
                "KCAP_CLAUDE_BIN",
                env(&[("KCAP_CLAUDE_BIN", "/nonexistent/c")]),
            );
        }),
        "KCAP_CLAUDE_BIN=/nonexistent/c does not name a file; run `bash \
         scripts/install-peers.sh` and export the paths it prints"
    );
}

#[test]
fn the_harness_reports_a_test_that_skipped_as_ignored_with_its_reason() {
    let mut ran_to_the_end = false;
    let completion = outcome(|| {
        skip(REASON.into());
        ran_to_the_end = true;
    });
    assert!(ran_to_the_end);
    match completion {
        Completion::Ignored { reason } => assert_eq!(reason.as_deref(), Some(REASON)),
        Completion::Completed => panic!("reported as completed"),
    }
    // The mark belongs to that one test: the next one on this thread completes.
    assert!(matches!(outcome(|| ()), Completion::Completed));
    // A failure stays a failure.
    assert_eq!(panic_of(|| drop(outcome(|| panic!("boom")))), "boom");
}

#[test]
fn the_harness_starts_the_longest_tests_first_and_spreads_the_serial_ones() {
    let trials = ["a", "ci::1", "b", "c", "ci::2", "d", "e"]
        .map(|name| libtest_mimic::Trial::test(name, || Ok(())))
        .into();
    let durations = "# measured\n1.0\tb\t0.0\n9.0\tc\n5.0\tci::1\n7.0\tci::2\n3.0\td\n0.5\tb\n";
    let names: Vec<String> = longest_first(trials, durations, "ci::", 2)
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    // Longest first; `ci::` ones every 2 others; the unlisted `a` and `e` last, in order.
    assert_eq!(names, ["ci::2", "c", "d", "ci::1", "b", "a", "e"]);
    assert_eq!(
        panic_of(|| drop(longest_first(Vec::new(), "1.0 b", "ci::", 2))),
        "durations: `1.0 b` is not `<seconds>\\t<name>`, as KCAP_TEST_TIMES writes"
    );
}

#[test]
fn every_test_the_durations_list_names_is_a_real_client_test() {
    // A renamed test would silently lose its place; the list is refreshed from a whole run.
    let dir = Path::new(ROOT).join("tests/clients");
    let sources: String = rust_files(&dir)
        .iter()
        .map(|f| std::fs::read_to_string(f).unwrap())
        .collect();
    let durations = std::fs::read_to_string(dir.join("durations.tsv")).unwrap();
    let stale: Vec<&str> = durations
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split('\t').nth(1))
        .filter(|name| {
            let function = name.rsplit("::").next().unwrap();
            !sources.contains(&format!("fn {function}()"))
        })
        .collect();
    assert!(
        stale.is_empty(),
        "tests/clients/durations.tsv names tests that do not exist; refresh it from a whole \
         run with KCAP_TEST_TIMES (tests/common/README.md): {stale:?}"
    );
}

// ------------------------------------------------------------------------------------------
// The README and docs/: what they name exists
// ------------------------------------------------------------------------------------------

/// The README and every Markdown file under `docs/`, sorted.
fn doc_files() -> Vec<PathBuf> {
    let mut out = vec![Path::new(ROOT).join("README.md")];
    let mut todo = vec![Path::new(ROOT).join("docs")];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// `text` without its fenced code blocks (their lines become empty), so that headings and
/// links are only those Markdown renders.
fn prose(text: &str) -> String {
    let mut in_fence = false;
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
        } else if !in_fence {
            out.push_str(line);
        }
        out.push('\n');
    }
    out
}

/// The anchors GitHub gives the headings of `text`: lowercased, punctuation but `-` and `_`
/// dropped, spaces made `-`, and `-1`, `-2`, … on repeats.
fn anchors(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in prose(text).lines() {
        let Some(title) = line.strip_prefix('#') else {
            continue;
        };
        let title = title.trim_start_matches('#');
        if !title.starts_with(' ') {
            continue;
        }
        let slug: String = title
            .trim()
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        let repeats = out
            .iter()
            .filter(|a| *a == &slug || a.starts_with(&format!("{slug}-")))
            .count();
        out.push(if repeats == 0 {
            slug
        } else {
            format!("{slug}-{repeats}")
        });
    }
    out
}

#[test]
fn every_link_of_the_readme_and_docs_resolves_to_a_file_and_heading() {
    let mut broken = Vec::new();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let shown = file.strip_prefix(ROOT).unwrap().display().to_string();
        for (n, line) in prose(&text).lines().enumerate() {
            for target in line
                .split("](")
                .skip(1)
                .filter_map(|rest| rest.split_once(')'))
            {
                let target = target.0;
                if target.contains("://") || target.starts_with("mailto:") {
                    continue;
                }
                let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
                let linked = if path.is_empty() {
                    file.clone()
                } else {
                    file.parent().unwrap().join(path)
                };
                if !linked.exists() {
                    broken.push(format!("{shown}:{}: {target}: no such file", n + 1));
                } else if !anchor.is_empty() {
                    let headings = anchors(&std::fs::read_to_string(&linked).unwrap());
                    if !headings.iter().any(|h| h == anchor) {
                        broken.push(format!(
                            "{shown}:{}: {target}: no heading with that anchor (there: {headings:?})",
                            n + 1
                        ));
                    }
                }
            }
        }
    }
    assert!(
        broken.is_empty(),
        "links to nothing; fix the link or the heading:\n{}",
        broken.join("\n")
    );
}

/// Whether `name` matches `pattern`, where `*` and a `<placeholder>` match any characters.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    let mut parts: Vec<String> = vec![String::new()];
    let mut placeholder = false;
    for c in pattern.chars() {
        match c {
            '*' if !placeholder => parts.push(String::new()),
            '<' => {
                placeholder = true;
                parts.push(String::new());
            }
            '>' if placeholder => placeholder = false,
            _ if placeholder => {}
            _ => parts.last_mut().unwrap().push(c),
        }
    }
    let (first, rest) = parts.split_first().unwrap();
    let Some(mut left) = name.strip_prefix(first.as_str()) else {
        return false;
    };
    let Some((last, middle)) = rest.split_last() else {
        return left.is_empty();
    };
    for part in middle {
        match left.find(part.as_str()) {
            Some(i) => left = &left[i + part.len()..],
            None => return false,
        }
    }
    left.len() >= last.len() && left.ends_with(last.as_str())
}

/// The paths under `root` that `pattern` (components joined by `/`, each possibly holding
/// `*` or a `<placeholder>`) names.
fn expand(root: &Path, pattern: &str) -> Vec<PathBuf> {
    let mut found = vec![root.to_path_buf()];
    for component in pattern.trim_end_matches('/').split('/') {
        let wild = component.contains('*') || component.contains('<');
        found = found
            .iter()
            .flat_map(|dir| {
                if !wild {
                    let path = dir.join(component);
                    return if path.exists() { vec![path] } else { vec![] };
                }
                std::fs::read_dir(dir)
                    .into_iter()
                    .flatten()
                    .map(|e| e.unwrap().path())
                    .filter(|p| {
                        matches_pattern(component, &p.file_name().unwrap().to_string_lossy())
                    })
                    .collect()
            })
            .collect();
    }
    found
}

#[test]
fn the_layout_names_each_path_once_and_every_path_exists() {
    let layout = std::fs::read_to_string(Path::new(ROOT).join("docs/layout.md")).unwrap();
    let mut seen: Vec<String> = Vec::new();
    let mut problems = Vec::new();
    for row in layout.lines().filter(|l| l.starts_with("| `")) {
        let first_cell = row.split('|').nth(1).unwrap();
        for path in first_cell.split('`').skip(1).step_by(2) {
            if seen.iter().any(|p| p == path) {
                problems.push(format!("`{path}` is listed twice"));
            }
            seen.push(path.to_string());
            if expand(Path::new(ROOT), path).is_empty() {
                problems.push(format!("`{path}` does not exist"));
            }
        }
    }
    assert!(seen.len() > 50, "only {} paths read: {seen:?}", seen.len());
    assert!(
        problems.is_empty(),
        "docs/layout.md: fix the table (or the path):\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_pattern_matcher_of_the_layout_test() {
    assert!(matches_pattern("*.toml", "kcap-x.toml"));
    assert!(!matches_pattern("*.toml", "kcap-x.tml"));
    assert!(matches_pattern(
        "isolation_<client>.rs",
        "isolation_codex.rs"
    ));
    assert!(!matches_pattern(
        "isolation_<client>.rs",
        "conformance_codex.rs"
    ));
    assert!(matches_pattern("<rule>", "unknown-key"));
    assert!(matches_pattern("main.rs", "main.rs"));
    assert!(!matches_pattern("main.rs", "main.rs.orig"));
    assert!(!expand(Path::new(ROOT), "src/clients/<client>/loader.rs").is_empty());
    assert!(expand(Path::new(ROOT), "src/clients/<client>/nothing.rs").is_empty());
}

#[test]
fn every_doc_with_rust_examples_runs_them_as_doctests() {
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    for file in doc_files() {
        let text = std::fs::read_to_string(&file).unwrap();
        let relative = file.strip_prefix(ROOT).unwrap().display().to_string();
        if text.contains("```rust") {
            assert!(
                lib.contains(&format!("include_str!(\"../{relative}\")")),
                "{relative} has Rust examples that no doctest runs: add \
                 `#[doc = include_str!(\"../{relative}\")]` on a `#[cfg(doctest)]` item in src/lib.rs"
            );
        }
    }
}

#[test]
fn every_code_block_of_a_doctested_doc_names_its_language() {
    // rustdoc compiles an untagged block as Rust: a shell or TOML example would then fail
    // the doctests, or, worse, be marked `ignore` to get them green.
    let lib = std::fs::read_to_string(Path::new(ROOT).join("src/lib.rs")).unwrap();
    for file in doc_files() {
        let relative = file.strip_prefix(ROOT).unwrap().display().to_string();
        if !lib.contains(&format!("include_str!(\"../{relative}\")")) {
            continue;
        }
        let text = std::fs::read_to_string(&file).unwrap();
        let mut in_fence = false;
        for (n, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                assert!(
                    in_fence || !info.trim().is_empty(),
                    "{relative}:{}: a code block without a language is compiled as Rust: \
                     write ```sh, ```toml, ```text or ```rust",
                    n + 1
                );
                in_fence = !in_fence;
            }
        }
    }
}

#[test]
fn every_console_example_is_one_pasteable_command_line() {
    // trycmd would read `> ` as the command's continuation, but a reader who pastes it into
    // a shell gets a redirection to a file named `--agent-id` instead.
    for file in doc_files() {
        let relative = file.strip_prefix(ROOT).unwrap().display().to_string();
        let text = std::fs::read_to_string(&file).unwrap();
        let mut console = false;
        for (n, line) in text.lines().enumerate() {
            if let Some(info) = line.trim_start().strip_prefix("```") {
                console = !console && info.trim() == "console";
                continue;
            }
            assert!(
                !(console && line.starts_with("> ")),
                "{relative}:{}: a `> ` continuation line in a console example is pasted into \
                 the shell as a redirection: put the command on its `$ ` line",
                n + 1
            );
        }
    }
}
