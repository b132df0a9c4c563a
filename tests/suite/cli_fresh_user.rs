//! What a fresh user of `check --against`, `doctor` and `render` ran into (issue #15 and #14
//! review): paths of undecodable files, the user scope of `~/.claude.json`, duplicate server
//! keys, the compiled-in registry outside a checkout, flags that were silently ignored, and
//! usage errors that exited 1.
#![cfg(feature = "cli")]

use std::path::Path;

use assert_cmd::Command;
use serde_json::{Value, json};

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/registry");

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_in(dir: &Path, args: &[&str]) -> Run {
    let out = Command::cargo_bin("kcap-mcp-registry")
        .unwrap()
        .current_dir(dir)
        .args(args)
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    Run {
        code: out.status.code().unwrap(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

fn run(args: &[&str]) -> Run {
    run_in(Path::new(env!("CARGO_MANIFEST_DIR")), args)
}

/// `check REGISTRY --format json --against path extra…`: exit code and the findings.
fn check_json(path: &Path, extra: &[&str]) -> (i32, Vec<Value>, String) {
    let mut args = vec![
        "check",
        REGISTRY,
        "--format",
        "json",
        "--against",
        path.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let r = run(&args);
    let v: Value = serde_json::from_str(&r.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", r.stdout, r.stderr));
    (r.code, v.as_array().unwrap().clone(), r.stderr)
}

fn kcap_servers() -> Value {
    let r = run(&["export", "claude"]);
    serde_json::from_str::<Value>(&r.stdout).unwrap()["mcpServers"].clone()
}

#[test]
fn a_non_utf8_file_is_named_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    for name in ["bad.json", "bad.toml"] {
        let path = dir.path().join(name);
        std::fs::write(&path, b"{\"mcpServers\": \xff}").unwrap();
        let shown = path.to_str().unwrap();
        let (code, findings, _) = check_json(&path, &[]);
        assert_eq!(code, 1);
        assert_eq!(findings[0]["rule"], "drift-rejected", "{findings:?}");
        assert_eq!(findings[0]["file"], shown, "{findings:?}");
        let human = run(&["check", REGISTRY, "--against", shown]);
        assert!(
            human.stderr.contains(&format!("--> {shown}:1:1")),
            "{}",
            human.stderr
        );
        if name == "bad.json" {
            assert!(
                human
                    .stderr
                    .contains(&format!("rejects this file, {shown}: it is not UTF-8")),
                "{}",
                human.stderr
            );
        }
        let github = run(&["check", REGISTRY, "--format", "github", "--against", shown]);
        assert!(
            github.stdout.contains(&format!("file={shown},")),
            "{}",
            github.stdout
        );
    }
}

#[test]
fn the_user_scope_is_checked_even_when_a_project_overrides_it() {
    let servers = kcap_servers();
    let mut broken = servers.clone();
    broken["kcap-review"]["args"] = json!(["mcp", 5]);
    let text = json!({
        "mcpServers": broken,
        "projects": {"/srv/p": {"mcpServers": servers}}
    });
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".claude.json");
    std::fs::write(&path, serde_json::to_vec(&text).unwrap()).unwrap();
    let (code, findings, _) = check_json(&path, &[]);
    assert_eq!(code, 1, "{findings:?}");
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["rule"], "drift-skipped");
    assert!(
        !findings[0]["message"]
            .as_str()
            .unwrap()
            .contains("(project"),
        "reported for the user scope: {findings:?}"
    );
    // The project alone (its local scope wins) is fine.
    let (code, findings, _) = check_json(&path, &["--project", "/srv/p"]);
    assert_eq!((code, findings.len()), (0, 0), "{findings:?}");
}

#[test]
fn a_shadowed_duplicate_server_is_a_finding() {
    let servers = kcap_servers();
    let good = serde_json::to_string(&servers["kcap-review"]).unwrap();
    let rest = serde_json::to_string(&servers).unwrap();
    // `{"kcap-review": evil, <every kcap server, kcap-review included>}`.
    let text = format!(
        "{{\"mcpServers\": {{\"kcap-review\": {{\"command\": \"/evil\", \"args\": [\"pwn\"]}}, {}}}}}",
        &rest[1..rest.len() - 1]
    );
    assert!(text.contains(&good));
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".mcp.json");
    std::fs::write(&path, &text).unwrap();
    let (code, findings, _) = check_json(&path, &[]);
    assert_eq!(code, 1);
    let rules: Vec<&str> = findings
        .iter()
        .map(|f| f["rule"].as_str().unwrap())
        .collect();
    assert_eq!(rules, ["drift-duplicate"], "{findings:?}");
    assert_eq!(findings[0]["line"], 1);
    assert_eq!(findings[0]["column"], 17);
    // doctor and install agree that the file is not usable as it is.
    let home = tempfile::tempdir().unwrap();
    let config = home.path().join(".claude.json");
    std::fs::write(&config, &text).unwrap();
    let r = run(&[
        "install",
        "--client",
        "claude",
        "--config",
        config.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn check_against_outside_a_checkout_uses_the_compiled_in_registry() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(".mcp.json");
    std::fs::write(&path, run(&["export", "claude"]).stdout).unwrap();
    let r = run_in(dir.path(), &["check", "--against", ".mcp.json"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr.contains("the registry compiled into this binary"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("in the compiled-in registry"),
        "{}",
        r.stdout
    );
    // Without --against, a missing registry directory is still a usage error.
    let r = run_in(dir.path(), &["check"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
}

#[test]
fn ignored_check_and_doctor_flags_are_never_silent() {
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("config.toml");
    std::fs::write(&toml, run(&["export", "codex"]).stdout).unwrap();
    let t = toml.to_str().unwrap();
    let r = run(&["check", REGISTRY, "--against", t, "--project", "/p"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("warning: --project applies to Claude Code files only"),
        "{}",
        r.stderr
    );
    let r = run(&[
        "check",
        REGISTRY,
        "--against",
        t,
        "--codex-profile",
        "nosuch",
    ]);
    assert!(
        r.stderr
            .contains("warning: --codex-profile nosuch: there is no"),
        "{}",
        r.stderr
    );

    let r = run(&["doctor", "--config", "claude=/a", "--config", "claude=/b"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr
            .contains("--config names two files for Claude Code"),
        "{}",
        r.stderr
    );
    let r = run(&["doctor", "--client", "claude", "--config", "codex=/x"]);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("names a client that --client leaves out"),
        "{}",
        r.stderr
    );
}

#[test]
fn render_directory_flags_are_usage_errors() {
    let base = [
        "--agent-id",
        "a1",
        "--server-url",
        "http://127.0.0.1:9",
        "--kcap-bin",
        "/bin/kcap",
    ];
    let render = |client: &str, extra: &[&str]| {
        let mut args = vec!["render", client];
        args.extend_from_slice(&base);
        args.extend_from_slice(extra);
        run(&args)
    };
    for (client, extra) in [
        ("opencode", vec!["--worktree", "/w"]),
        ("opencode", vec!["--worktree", "/w", "--launch-dir", "rel"]),
        ("gemini", vec!["--worktree", "rel"]),
        ("claude", vec![]),
        ("codex", vec!["--launch-dir", "rel"]),
        ("gemini", vec!["--worktree", "/w"]),
        ("claude", vec!["--launch-dir", "/l", "--cache-dir", "cache"]),
        (
            "claude",
            vec!["--launch-dir", "/l", "--worktree", "/w\u{1b}[2J"],
        ),
        ("opencode", vec!["--worktree", "/w", "--launch-dir", "/l\n"]),
    ] {
        let r = render(client, &extra);
        assert_eq!(r.code, 2, "{client} {extra:?}: {}", r.stderr);
    }
    // Every client's launch is rooted in its launch directory.
    for client in ["claude", "codex", "gemini", "opencode"] {
        let r = render(client, &["--worktree", "/w", "--launch-dir", "/l"]);
        assert_eq!(r.code, 0, "{client}: {}", r.stderr);
    }
}

#[test]
fn drift_messages_escape_like_every_other_report() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let text = run(&["export", "codex"]).stdout.replacen(
        "command = \"kcap\"",
        "command = \"kcap\\u001b[2J\"",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let (code, findings, _) = check_json(&path, &[]);
    assert_eq!(code, 1);
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains(r#""kcap\u{1b}[2J""#), "{message}");
    assert!(!message.contains(r"\u001b"), "{message}");
}

/// What a fresh user of `launch` hit (issue 35): each message names the flag, echoes the
/// value, says the OS reason once, and says how to fix it.
#[test]
fn launch_errors_name_the_flag_the_value_the_reason_and_the_fix() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let tree = tree.to_str().unwrap();
    let launch = |launch_dir: &str, bin: &str| {
        run_in(
            dir.path(),
            &[
                "launch",
                "claude",
                "--agent-id",
                "a1",
                "--worktree",
                tree,
                "--launch-dir",
                launch_dir,
                "--client-bin",
                bin,
            ],
        )
    };
    let last = |r: &Run| r.stderr.lines().last().unwrap_or_default().to_owned();

    let r = launch("rel/l1", "/bin/true");
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert_eq!(
        last(&r),
        "error: --launch-dir `rel/l1` is a relative path; give it as an absolute path, e.g. \
         --launch-dir \"$PWD/rel/l1\""
    );

    let missing = dir.path().join("nope/l1");
    let r = launch(missing.to_str().unwrap(), "/bin/true");
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        last(&r),
        format!(
            "error: the launch directory {}: its parent {} is not a directory; create it first \
             (the launch creates the launch directory itself, not its parents)",
            missing.display(),
            dir.path().join("nope").display()
        )
    );

    let l2 = dir.path().join("l2");
    let r = launch(l2.to_str().unwrap(), "/nope");
    assert_eq!(r.code, 2, "{}", r.stderr);
    let reason = "No such file or directory (os error 2)";
    assert_eq!(
        last(&r),
        format!(
            "error: --client-bin: start the client: claude (/nope): {reason}; give the Claude \
             Code binary as a path to an executable file, or as a name on PATH (`--client-bin \
             claude`)"
        )
    );
    assert_eq!(r.stderr.matches(reason).count(), 1, "{}", r.stderr);
    assert!(!l2.exists());

    let r = run(&["launch", "--plan", "/nope", "--client-bin", "/bin/true"]);
    assert_eq!(r.code, 2);
    assert_eq!(
        r.stderr,
        format!("error: --plan /nope: cannot read it: {reason}\n")
    );
    let r = run(&[
        "render",
        "claude",
        "--launch-json",
        "/nope",
        "--launch-dir",
        "/l",
    ]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            format!("error: --launch-json: cannot read /nope: {reason}\n").as_str()
        )
    );
    let r = run(&[
        "render",
        "claude",
        "--agent-id",
        "a1",
        "--launch-dir",
        "/l",
        "--registry",
        "/nope",
    ]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            format!("error: --registry: cannot read /nope: {reason}\n").as_str()
        )
    );
    let r = run(&["check", REGISTRY, "--against", "/nope"]);
    assert_eq!(
        (r.code, r.stderr.as_str()),
        (
            2,
            format!("error: --against: cannot read /nope: {reason}\n").as_str()
        )
    );
}

/// A relative `--client-bin` with a directory in it is the caller's: `./client.sh` runs the
/// script in the directory `launch` was run from, not a `client.sh` the reviewed worktree
/// holds (the client starts there, and the kernel resolved the relative path there: a file
/// a pull request adds became the client; a fresh user's run, issue 36).
#[test]
fn a_relative_client_binary_is_the_callers_not_the_worktrees() {
    let dir = tempfile::tempdir().unwrap();
    let tree = dir.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    std::fs::create_dir(dir.path().join("launches")).unwrap();
    crate::common::stand_in::sh_script(dir.path(), "client.sh", "echo the callers client");
    crate::common::stand_in::sh_script(&tree, "client.sh", "echo the planted client");
    let launch_dir = dir.path().join("launches/l1");
    let r = run_in(
        dir.path(),
        &[
            "launch",
            "claude",
            "--agent-id",
            "a1",
            "--worktree",
            tree.to_str().unwrap(),
            "--launch-dir",
            launch_dir.to_str().unwrap(),
            "--client-bin",
            "./client.sh",
            "--timeout",
            "30",
        ],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.contains("output the callers client"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("planted"), "{}", r.stdout);
}

/// `--credential` takes a variable's name: given `NAME=VALUE` (a fresh user's guess), or a
/// name that is not set, the error says the flag reads the value from the environment and
/// what to run.
#[test]
fn a_credential_given_as_name_and_value_or_unset_says_how_the_flag_reads_it() {
    let render = |credential: &str| {
        let out = Command::cargo_bin("kcap-mcp-registry")
            .unwrap()
            .args([
                "render",
                "claude",
                "--agent-id",
                "a1",
                "--launch-dir",
                "/tmp/l1",
            ])
            .args(["--credential", credential])
            .env_remove("KCAP_UNSET_CREDENTIAL")
            .env_remove("KCAP_GIVEN")
            .output()
            .unwrap();
        (out.status.code(), String::from_utf8(out.stderr).unwrap())
    };
    assert_eq!(
        render("KCAP_GIVEN=sk-dummy"),
        (
            Some(2),
            "error: --credential KCAP_GIVEN: takes a variable's name, not NAME=VALUE (a value \
             given here would show in the process list); its value is read from this \
             environment: `export KCAP_GIVEN=…` and give `--credential KCAP_GIVEN`\n"
                .to_owned()
        )
    );
    assert_eq!(
        render("KCAP_UNSET_CREDENTIAL"),
        (
            Some(2),
            "error: --credential KCAP_UNSET_CREDENTIAL: not set in this environment (or not \
             UTF-8); the flag takes a variable's name and reads its value from this \
             environment: `export KCAP_UNSET_CREDENTIAL=…` first, or leave the flag out\n"
                .to_owned()
        )
    );
}

/// A `--worktree` that is not there: leaving the flag out is offered only to a client that
/// starts without one (Claude Code), not to one that needs it (OpenCode), where leaving it out
/// is refused in turn (a fresh user of stop 53 followed the hint into a second error).
#[test]
fn a_missing_worktree_offers_leaving_it_out_only_where_the_client_starts_without_one() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nowt");
    let missing = missing.to_str().unwrap();
    let launch_dir = dir.path().join("l1");
    for (client, offered) in [("claude", true), ("opencode", false)] {
        let r = run_in(
            dir.path(),
            &[
                "launch",
                client,
                "--agent-id",
                "a1",
                "--worktree",
                missing,
                "--launch-dir",
                launch_dir.to_str().unwrap(),
                "--client-bin",
                "/bin/true",
            ],
        );
        assert_eq!(r.code, 2, "{client}: {}", r.stderr);
        let leave = ", or leave --worktree out (the client then starts in the launch directory)";
        let expected = format!(
            "error: --worktree {missing}: no such directory; check the pull request out there \
             first{}",
            if offered { leave } else { "" }
        );
        assert_eq!(
            r.stderr.lines().last(),
            Some(expected.as_str()),
            "{client}: {}",
            r.stderr
        );
    }
}
