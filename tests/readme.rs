//! The README's CLI examples are real: every ```text block line starting with
//! `$ kcap-mcp-registry` is run (with `sh`, the binary first on `PATH`, stderr merged into
//! stdout) and must print exactly the lines that follow it in the block.
#![cfg(feature = "cli")]

use std::path::Path;

/// (command, expected output) for each example.
fn examples(readme: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut in_text = false;
    let mut current: Option<(String, String)> = None;
    let mut lines = readme.lines().peekable();
    while let Some(line) = lines.next() {
        if !in_text {
            in_text = line == "```text";
            continue;
        }
        if line == "```" || line.starts_with("$ ") {
            out.extend(current.take());
        }
        if line == "```" {
            in_text = false;
        } else if let Some(cmd) = line.strip_prefix("$ ") {
            let mut cmd = cmd.to_string();
            while cmd.ends_with('\\') {
                cmd.pop();
                cmd.push_str(lines.next().expect("a continued command").trim_start());
            }
            current = Some((cmd, String::new()));
        } else if let Some((_, expected)) = &mut current {
            expected.push_str(line);
            expected.push('\n');
        }
    }
    out.into_iter()
        .filter(|(cmd, _)| cmd.starts_with("kcap-mcp-registry "))
        .collect()
}

#[test]
fn readme_cli_examples_print_what_the_readme_shows() {
    let readme = std::fs::read_to_string("README.md").unwrap();
    let examples = examples(&readme);
    assert!(examples.len() >= 8, "{examples:?}");
    let bin_dir = Path::new(env!("CARGO_BIN_EXE_kcap-mcp-registry"))
        .parent()
        .unwrap();
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    for (cmd, expected) in examples {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg(format!("{cmd} 2>&1"))
            .env("PATH", &path)
            .env_remove("NO_COLOR")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let got = String::from_utf8(out.stdout).unwrap();
        assert_eq!(got, expected, "README example `{cmd}`");
    }
}
