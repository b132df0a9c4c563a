//! `doctor` end to end: a throwaway HOME holding several clients' files, every output
//! format, the exit codes, and `--fix`.
#![cfg(feature = "cli")]

use std::path::Path;

use assert_cmd::Command;

/// A HOME with kcap installed (through `install`, so with ledgers) for Claude Code, Codex,
/// Gemini and OpenCode, a `bin/kcap` on PATH, and no other client.
fn home() -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let bin = home.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    std::fs::write(bin.join("kcap"), "#!/bin/sh\n").unwrap();
    for client in ["claude", "codex", "gemini", "opencode"] {
        doctor_cmd(home.path())
            .args(["install", "--client", client])
            .assert()
            .success();
    }
    home
}

/// The binary with a clean environment: HOME and PATH in `home` only.
fn doctor_cmd(home: &Path) -> Command {
    let mut cmd = Command::cargo_bin("kcap-mcp-registry").unwrap();
    cmd.env_clear()
        .env("HOME", home)
        .env("PATH", home.join("bin"))
        .env("NO_COLOR", "1");
    cmd
}

fn edit(path: &Path, f: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

fn findings(stdout: &[u8]) -> Vec<(String, String)> {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["rule"].as_str().unwrap().to_string(),
                f["message"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// `file:line:column` of every finding, and where it ends.
fn positions(stdout: &[u8]) -> Vec<String> {
    let v: serde_json::Value = serde_json::from_slice(stdout).unwrap();
    v.as_array()
        .unwrap()
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{}-{}:{}",
                f["file"].as_str().unwrap(),
                f["line"],
                f["column"],
                f["end_line"],
                f["end_column"]
            )
        })
        .collect()
}

/// The 1-based line and column of the `n`th (from 0) occurrence of `needle` in `path`: an
/// oracle independent of the parsers `doctor` takes its positions from.
fn find(path: &Path, needle: &str, n: usize) -> (usize, usize) {
    let text = std::fs::read_to_string(path).unwrap();
    let (offset, _) = text.match_indices(needle).nth(n).unwrap();
    let line = text[..offset].matches('\n').count() + 1;
    let column = offset - text[..offset].rfind('\n').map_or(0, |i| i + 1) + 1;
    (line, column)
}

#[test]
fn a_fresh_install_is_healthy() {
    let home = home();
    let out = doctor_cmd(home.path()).arg("doctor").assert().success();
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    let h = home.path().display();
    assert!(
        stdout.contains(&format!(
            "claude: {h}/.claude.json: kcap installed, 6 of 6 registry servers registered\n"
        )),
        "{stdout}"
    );
    assert!(
        stdout.contains(&format!("copilot: {h}/.copilot/mcp-config.json: no file\n")),
        "{stdout}"
    );
    assert!(stdout.ends_with("ok: no problems found\n"), "{stdout}");
    doctor_cmd(home.path())
        .args(["doctor", "--format", "json"])
        .assert()
        .success()
        .stdout("[]\n");
    doctor_cmd(home.path())
        .args(["doctor", "--format", "github"])
        .assert()
        .success()
        .stdout("");
}

#[test]
fn problems_in_several_clients_are_reported_in_every_format() {
    let home = home();
    let h = home.path();
    // Claude: a canonical duplicate and a conflict in project scopes.
    edit(&h.join(".claude.json"), |v| {
        let review = v["mcpServers"]["kcap-review"].clone();
        let mut other = review.clone();
        other["args"] = serde_json::json!(["mcp", "review", "--mine"]);
        v["projects"] = serde_json::json!({
            "/work/a": {"mcpServers": {"kcap-review": review}},
            "/work/b": {"mcpServers": {"kcap-review": other}},
        });
    });
    // Codex: a stale absolute command.
    let codex = h.join(".codex/config.toml");
    let text = std::fs::read_to_string(&codex).unwrap().replacen(
        "command = \"kcap\"",
        "command = \"/opt/kcap-0.9/kcap\"",
        1,
    );
    std::fs::write(&codex, text).unwrap();
    // Gemini: a registry server removed.
    edit(&h.join(".gemini/settings.json"), |v| {
        v["mcpServers"]
            .as_object_mut()
            .unwrap()
            .remove("kcap-memory");
    });
    // OpenCode: a broken file.
    std::fs::write(h.join(".config/opencode/opencode.json"), "{ \"mcp\": ").unwrap();

    let out = doctor_cmd(h)
        .args(["doctor", "--format", "json"])
        .assert()
        .code(1);
    let got = findings(&out.get_output().stdout);
    // Each at the name of its server (the local scopes' are the second and third
    // `"kcap-review"` of ~/.claude.json), the missing one at its block's key, the broken file
    // where the parser stops.
    let (claude, codex, gemini) = (
        h.join(".claude.json"),
        h.join(".codex/config.toml"),
        h.join(".gemini/settings.json"),
    );
    let at = |path: &Path, (line, column): (usize, usize), len: usize| {
        format!("{}:{line}:{column}-{line}:{}", path.display(), column + len)
    };
    assert_eq!(
        positions(&out.get_output().stdout),
        [
            at(&claude, find(&claude, "\"kcap-review\"", 1), 13),
            at(&claude, find(&claude, "\"kcap-review\"", 2), 13),
            at(&codex, find(&codex, "kcap-analytics]", 0), 14),
            at(&gemini, find(&gemini, "\"mcpServers\"", 0), 12),
            format!("{}/.config/opencode/opencode.json:1:10-1:10", h.display()),
        ]
    );
    let rules: Vec<&str> = got.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        rules,
        [
            "doctor-duplicate",
            "doctor-conflict",
            "doctor-stale-command",
            "doctor-missing",
            "doctor-malformed",
        ],
        "{got:?}"
    );
    assert_eq!(
        got[2].1,
        "MCP server `kcap-analytics` runs `/opt/kcap-0.9/kcap`, which does not exist, so Codex \
         CLI cannot start it"
    );
    assert!(
        got[3].1.contains("`kcap-memory` is not registered"),
        "{got:?}"
    );

    let out = doctor_cmd(h)
        .args(["doctor", "--format", "github"])
        .assert()
        .code(1);
    let github = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert_eq!(github.lines().count(), 5, "{github}");
    let (line, col) = find(&claude, "\"kcap-review\"", 1);
    assert!(
        github.starts_with(&format!(
            "::error file={}/.claude.json,line={line},col={col},endLine={line},endColumn={},\
             title=doctor-duplicate::MCP server `kcap-review` in the local scope of project \
             `/work/a` duplicates",
            h.display(),
            col + 13
        )),
        "{github}"
    );

    let out = doctor_cmd(h).arg("doctor").assert().code(1);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    let (line, col) = find(&claude, "\"kcap-review\"", 2);
    assert!(
        stderr.contains(&format!(
            "error[doctor-conflict]: MCP server `kcap-review` in the local scope of project \
             `/work/b` differs from the user scope's entry of that name; Claude Code runs the \
             local one in that project, so it is kept\n--> {}:{line}:{col}\n",
            claude.display()
        )),
        "{stderr}"
    );
    assert!(stderr.ends_with("error: 5 doctor findings\n"), "{stderr}");
    let stdout = String::from_utf8(out.get_output().stdout.clone()).unwrap();
    assert!(
        stdout.contains(&format!(
            "opencode: {}/.config/opencode/opencode.json: cannot be used (see below)\n",
            h.display()
        )),
        "{stdout}"
    );
}

#[test]
fn fix_removes_only_the_canonical_duplicate() {
    let home = home();
    let h = home.path();
    let claude = h.join(".claude.json");
    edit(&claude, |v| {
        let review = v["mcpServers"]["kcap-review"].clone();
        let mut other = review.clone();
        other["args"] = serde_json::json!(["mcp", "review", "--mine"]);
        v["projects"] = serde_json::json!({
            "/work/a": {"mcpServers": {"kcap-review": review, "mine": {"command": "x"}}},
            "/work/b": {"mcpServers": {"kcap-review": other}},
        });
    });
    let ledger_before = std::fs::read(h.join(".claude.json.kcap-ledger.json")).unwrap();
    let out = doctor_cmd(h)
        .args(["doctor", "--fix", "--client", "claude", "--format", "json"])
        .assert()
        .code(1);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.starts_with("removed kcap-review (project /work/a): identical"),
        "{stderr}"
    );
    // What is left: the conflict, kept.
    let rules: Vec<String> = findings(&out.get_output().stdout)
        .into_iter()
        .map(|(r, _)| r)
        .collect();
    assert_eq!(rules, ["doctor-conflict"]);
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&claude).unwrap()).unwrap();
    assert_eq!(
        v["projects"]["/work/a"]["mcpServers"],
        serde_json::json!({"mine": {"command": "x"}})
    );
    assert_eq!(
        v["projects"]["/work/b"]["mcpServers"]["kcap-review"]["args"],
        serde_json::json!(["mcp", "review", "--mine"])
    );
    assert_eq!(v["mcpServers"].as_object().unwrap().len(), 6);
    // The ledger records the user scope only: untouched.
    assert_eq!(
        std::fs::read(h.join(".claude.json.kcap-ledger.json")).unwrap(),
        ledger_before
    );
    // Nothing left to fix: a second run changes nothing.
    let before = std::fs::read(&claude).unwrap();
    doctor_cmd(h)
        .args(["doctor", "--fix", "--client", "claude"])
        .assert()
        .code(1);
    assert_eq!(std::fs::read(&claude).unwrap(), before);
}

#[test]
fn outdated_command_compares_the_files_commands_resolve_to() {
    let home = home();
    let h = home.path();
    // Reinstall Cursor with an absolute path that is the same file as `kcap` on PATH.
    let kcap = h.join("bin/kcap");
    doctor_cmd(h)
        .args(["install", "--client", "cursor", "--kcap-bin"])
        .arg(&kcap)
        .assert()
        .success();
    doctor_cmd(h)
        .args(["doctor", "--client", "cursor"])
        .assert()
        .success();
    // Another binary that exists: outdated.
    std::fs::write(h.join("bin/kcap-next"), "").unwrap();
    let out = doctor_cmd(h)
        .args([
            "doctor",
            "--client",
            "cursor",
            "--format",
            "json",
            "--kcap-bin",
        ])
        .arg(h.join("bin/kcap-next"))
        .assert()
        .code(1);
    let got = findings(&out.get_output().stdout);
    assert_eq!(got.len(), 6, "{got:?}");
    assert!(got.iter().all(|(r, _)| r == "doctor-outdated-command"));
}

#[test]
fn a_config_override_and_an_unreadable_input_exit_2() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("bin")).unwrap();
    let out = doctor_cmd(home.path())
        .args([
            "doctor",
            "--config",
            "codex=/nonexistent/config.toml",
            "--client",
            "codex",
        ])
        .assert()
        .code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(
        stderr.contains("error[doctor-unreadable]: the file given with --config does not exist"),
        "{stderr}"
    );
    let out = doctor_cmd(home.path())
        .args(["doctor", "--config", "nope=/x"])
        .assert()
        .code(2);
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("unknown client `nope`"), "{stderr}");
    // A CODEX_HOME moves Codex's default file.
    let codex_home = home.path().join("codex-home");
    std::fs::create_dir(&codex_home).unwrap();
    std::fs::write(codex_home.join("config.toml"), "[mcp_servers\n").unwrap();
    let out = doctor_cmd(home.path())
        .env("CODEX_HOME", &codex_home)
        .args(["doctor", "--client", "codex", "--format", "json"])
        .assert()
        .code(1);
    let got = findings(&out.get_output().stdout);
    assert_eq!(got[0].0, "doctor-malformed");
    assert!(got[0].1.contains("is not valid TOML"), "{got:?}");
}

/// Issue #15 review: entries Claude Code runs exactly as kcap's (no `description`, or the
/// `claude mcp add` spelling with `"type": "stdio"` and `"env": {}`) are not divergent for
/// doctor, and install adopts them (exit 0) and is idempotent; one that runs other args is.
#[test]
fn entries_the_client_runs_identically_are_not_divergent() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("bin")).unwrap();
    std::fs::write(home.path().join("bin/kcap"), "#!/bin/sh\n").unwrap();
    let config = home.path().join(".claude.json");
    std::fs::write(
        &config,
        r#"{"mcpServers":{"kcap-review":{"command":"kcap","args":["mcp","review"]},
        "kcap-flows":{"type":"stdio","command":"kcap","args":["mcp","flows"],"env":{}}}}"#,
    )
    .unwrap();
    let out = doctor_cmd(home.path())
        .args(["doctor", "--client", "claude", "--format", "json"])
        .output()
        .unwrap();
    let rules: Vec<String> = findings(&out.stdout).into_iter().map(|(r, _)| r).collect();
    assert!(!rules.iter().any(|r| r == "doctor-divergent"), "{rules:?}");
    let out = doctor_cmd(home.path())
        .args(["install", "--client", "claude"])
        .assert()
        .success();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("adopted kcap-review"), "{stderr}");
    assert!(stderr.contains("adopted kcap-flows"), "{stderr}");
    let after = std::fs::read_to_string(&config).unwrap();
    assert!(
        after.contains(r#""type":"stdio""#),
        "left as written: {after}"
    );
    let out = doctor_cmd(home.path())
        .args(["install", "--client", "claude"])
        .assert()
        .success();
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("needs no change"), "{stderr}");
    doctor_cmd(home.path())
        .args(["doctor", "--client", "claude"])
        .assert()
        .success();

    // Other args are divergent: the loader model runs something else.
    edit(&config, |v| {
        v["mcpServers"]["kcap-review"]["args"] = serde_json::json!(["mcp", "other"]);
    });
    let out = doctor_cmd(home.path())
        .args(["doctor", "--client", "claude", "--format", "json"])
        .output()
        .unwrap();
    let rules: Vec<String> = findings(&out.stdout).into_iter().map(|(r, _)| r).collect();
    assert!(rules.iter().any(|r| r == "doctor-divergent"), "{rules:?}");
}
