//! Hostile file and directory names (a newline followed by a forged `error[fake]:` line, a
//! carriage return, a terminal escape, a bidirectional override) given to every command in
//! every output format: the output holds no raw control or bidirectional character and no
//! forged line, because every path is shown through one escaping `Display` adapter
//! (`diagnostic::ShownPath`).
#![cfg(feature = "cli")]

use crate::common;

use std::path::{Path, PathBuf};

use common::{Run, bin, finish};

/// A name that forges a report line if printed raw.
const HOSTILE: &str = "x\nerror[fake]: forged\r\u{1b}[31m\u{202e}";

/// Fails when `text` (from `what`) holds a raw control character other than the newlines
/// between lines, a bidirectional override, or a line that starts with the forged error.
fn assert_clean(what: &str, text: &str) {
    for c in text.chars() {
        let bad = (c.is_control() && c != '\n') || c == '\u{202e}';
        assert!(!bad, "{what}: raw {c:?} in output:\n{text}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("error[fake]")),
        "{what}: a forged line in output:\n{text}"
    );
}

fn run_in(dir: &Path, args: &[&Path]) -> Run {
    finish(bin().current_dir(dir).args(args))
}

/// `dir/name` holding a copy of the bundled registry.
fn registry_copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir(&to).unwrap();
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("registry")).unwrap()
    {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
    }
    to
}

#[test]
fn no_command_prints_a_hostile_path_raw_in_any_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A valid registry, an invalid one (a misnamed file with a hostile name), a missing one.
    let valid = registry_copy(dir, &format!("valid{HOSTILE}"));
    let invalid = registry_copy(dir, &format!("invalid{HOSTILE}"));
    std::fs::write(
        invalid.join(format!("kcap-x{HOSTILE}.toml")),
        "id = \"kcap-x\"\n",
    )
    .unwrap();
    let missing = dir.join(format!("missing{HOSTILE}"));
    // Registration files: one that matches, one that drifts, one that is not one.
    let exported = bin()
        .args(["export", "claude-mcp-json"])
        .output()
        .unwrap()
        .stdout;
    let matching = dir.join(format!("match{HOSTILE}.json"));
    std::fs::write(&matching, &exported).unwrap();
    let drifting = dir.join(format!("drift{HOSTILE}.json"));
    std::fs::write(&drifting, r#"{"mcpServers":{}}"#).unwrap();
    let garbage = dir.join(format!("garbage{HOSTILE}.json"));
    std::fs::write(&garbage, "[").unwrap();
    let bad_json = dir.join(format!("bad{HOSTILE}.json"));
    std::fs::write(&bad_json, "{").unwrap();

    let p = Path::new;
    let mut cases: Vec<Vec<&Path>> = Vec::new();
    for format in ["human", "json", "github"] {
        for registry in [&valid, &invalid, &missing] {
            cases.push(vec![p("check"), registry, p("--format"), p(format)]);
        }
        for against in [&matching, &drifting, &garbage, &missing] {
            cases.push(vec![
                p("check"),
                &valid,
                p("--against"),
                against,
                p("--format"),
                p(format),
            ]);
        }
    }
    for registry in [&valid, &invalid, &missing] {
        cases.push(vec![p("list"), p("--registry"), registry]);
        cases.push(vec![
            p("list"),
            p("--registry"),
            registry,
            p("--format"),
            p("json"),
        ]);
        cases.push(vec![
            p("resolve"),
            p("--allowlist"),
            p("kcap-review"),
            p("--registry"),
            registry,
        ]);
        cases.push(vec![
            p("render"),
            p("claude"),
            p("--launch-dir"),
            p("/run/kcap/l1"),
            p("--agent-id"),
            p("a1"),
            p("--registry"),
            registry,
        ]);
        cases.push(vec![p("export"), p("denylist"), p("--registry"), registry]);
        cases.push(vec![
            p("export"),
            p("claude-mcp-json"),
            p("--registry"),
            registry,
        ]);
        cases.push(vec![
            p("export"),
            p("codex-toml"),
            p("--registry"),
            registry,
        ]);
        cases.push(vec![p("diff"), p("--registry"), registry]);
        cases.push(vec![p("diff"), registry, &valid, p("--format"), p("json")]);
        cases.push(vec![p("diff"), &valid, registry]);
    }
    for launch in [&missing, &bad_json] {
        cases.push(vec![
            p("render"),
            p("claude"),
            p("--launch-dir"),
            p("/run/kcap/l1"),
            p("--launch-json"),
            launch,
        ]);
    }
    let mut codes = [0; 3];
    for args in &cases {
        let r = run_in(dir, args);
        codes[usize::try_from(r.code).unwrap()] += 1;
        let what = format!("{args:?} (exit {})", r.code);
        assert_clean(&what, &r.stdout);
        assert_clean(&what, &r.stderr);
    }
    // Successes, findings and input errors alike: (exit 0, exit 1, exit 2).
    assert_eq!(codes, [16, 19, 18], "exit codes");
    assert_eq!(cases.len(), 53);
}

#[test]
fn check_without_a_registry_anywhere_up_says_where_it_looked() {
    let tmp = tempfile::tempdir().unwrap();
    let deep = tmp.path().join(format!("a{HOSTILE}")).join("b");
    std::fs::create_dir_all(&deep).unwrap();
    let r = run_in(&deep, &[Path::new("check")]);
    let shown = kcap_mcp_registry::diagnostic::ShownPath(&deep.canonicalize().unwrap()).to_string();
    assert_eq!(
        r,
        Run {
            code: 2,
            stdout: String::new(),
            stderr: format!(
                "error: no `registry` directory in {shown} or any parent directory; give the registry directory: `kcap-mcp-registry check DIR`\n"
            ),
        }
    );
    assert_clean("check", &r.stderr);
}
