//! The worktree's git configuration from the command line (`clients::git`): `render` of a
//! Codex CLI or Claude Code launch whose worktree's configuration sets a driver command is
//! refused naming the key, the file that sets it (an included one), what the client was
//! measured to run and how to fix it; one git cannot read is refused with git's reason; one
//! with only fixed-name command keys renders, the plan's environment overriding them.
#![cfg(feature = "cli")]

use std::path::Path;
use std::process::Command;

use crate::common::{Run, run};
use tempfile::TempDir;

/// `git args` in `dir`, with no configuration but the repository's.
fn git(dir: &Path, args: &[&str]) {
    let status = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .status()
        .unwrap();
    assert!(status.success(), "git {args:?}");
}

/// A fresh repository `wt` in a new temporary directory (canonical, so its paths are
/// the ones git names).
fn repository() -> (TempDir, std::path::PathBuf) {
    let tmp = TempDir::new().unwrap();
    let wt = tmp.path().canonicalize().unwrap().join("wt");
    std::fs::create_dir_all(&wt).unwrap();
    git(&wt, &["init", "-q"]);
    (tmp, wt)
}

/// `render <client>` of a gated launch into `/run/kcap/l1` with `wt` as the worktree.
fn render(client: &str, wt: &Path, format: &str) -> Run {
    let wt = wt.display().to_string();
    run(&[
        "render",
        client,
        "--agent-id",
        "a1",
        "--launch-dir",
        "/run/kcap/l1",
        "--worktree",
        &wt,
        "--format",
        format,
    ])
}

#[test]
fn a_filter_in_an_included_file_refuses_codex_naming_that_file() {
    let (_tmp, wt) = repository();
    let inc = wt.join(".git/evil.inc");
    std::fs::write(&inc, "[filter \"evil\"]\n\tclean = touch /tmp/x; cat\n").unwrap();
    git(&wt, &["config", "include.path", "evil.inc"]);
    let r = render("codex", &wt, "plan");
    assert_eq!((r.code, r.stdout.as_str()), (1, ""), "{r:?}");
    let inc = inc.display();
    assert!(
        r.stderr.ends_with(&format!(
            "error: cannot launch the Codex CLI reviewer: the worktree's git configuration sets \
             `filter.evil.clean` in {inc}, a command git runs on `git status`, `git diff` and \
             `git add` of a file whose attributes say `filter=<driver>`, and no override in \
             the reviewer's environment can name every driver; Codex CLI runs `git status --porcelain` in the worktree when it starts, \
             which ran the repository's `clean` and `process` filters (0.169.0, 0.171.0); \
             remove it (`git config --file {inc} --unset-all filter.evil.clean`) or give the \
             reviewer a checkout whose git configuration the daemon wrote\n"
        )),
        "{r:?}"
    );
}

#[test]
fn an_external_diff_refuses_claude_with_what_it_ran() {
    let (_tmp, wt) = repository();
    git(&wt, &["config", "diff.external", "touch /tmp/x"]);
    let r = render("claude", &wt, "lines");
    assert_eq!(r.code, 1, "{r:?}");
    let config = wt.join(".git/config");
    let config = config.display();
    assert!(
        r.stderr.ends_with(&format!(
            "error: cannot launch the Claude Code reviewer: the worktree's git configuration \
             sets `diff.external` in {config}, a command git runs on `git diff` of every \
             file, and an empty override does not switch it off (`git diff` fails instead); \
             Claude Code runs `git status` in the worktree when it starts (2.1.197: with no \
             `-c` of its own), which ran the repository's `clean` and `process` filters \
             (2.1.197; 2.1.332 overrides each driver it finds); remove it (`git config --file \
             {config} --unset-all diff.external`) or give the reviewer a checkout whose git \
             configuration the daemon wrote\n"
        )),
        "{r:?}"
    );
}

#[test]
fn a_configuration_git_cannot_read_is_refused_with_its_reason() {
    let (_tmp, wt) = repository();
    std::fs::write(wt.join(".git/config"), "[core]\n\tbare = false\n[filter\n").unwrap();
    let r = render("codex", &wt, "plan");
    assert_eq!(r.code, 1, "{r:?}");
    let config = wt.join(".git/config");
    assert!(
        r.stderr.ends_with(&format!(
            "error: cannot launch the Codex CLI reviewer: `git config --list` in its worktree \
             {} failed (exit status: 128): fatal: bad config line 3 in file .git/config, so \
             which commands git would run there cannot be told; repair the repository's \
             configuration (git names the file) or give the reviewer a fresh checkout\n",
            wt.display()
        )),
        "{r:?}: {}",
        config.display()
    );
}

#[test]
fn fixed_name_command_keys_render_and_the_plan_overrides_them() {
    let (_tmp, wt) = repository();
    for key in [
        "core.fsmonitor",
        "core.pager",
        "core.sshCommand",
        "gpg.program",
    ] {
        git(&wt, &["config", key, "touch /tmp/x"]);
    }
    for client in ["codex", "claude"] {
        let r = render(client, &wt, "plan");
        assert_eq!(r.code, 0, "{client}: {r:?}");
        let plan: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
        let env: Vec<(&str, &str)> = (plan["env"].as_array().unwrap().iter())
            .map(|v| (v["name"].as_str().unwrap(), v["value"].as_str().unwrap()))
            .filter(|(n, _)| n.starts_with("GIT_CONFIG_"))
            .collect();
        assert_eq!(
            env,
            [
                ("GIT_CONFIG_NOSYSTEM", "1"),
                ("GIT_CONFIG_COUNT", "4"),
                ("GIT_CONFIG_KEY_0", "core.fsmonitor"),
                ("GIT_CONFIG_VALUE_0", "false"),
                ("GIT_CONFIG_KEY_1", "core.hooksPath"),
                ("GIT_CONFIG_VALUE_1", "/dev/null"),
                ("GIT_CONFIG_KEY_2", "diff.ignoreSubmodules"),
                ("GIT_CONFIG_VALUE_2", "dirty"),
                ("GIT_CONFIG_KEY_3", "log.showSignature"),
                ("GIT_CONFIG_VALUE_3", "false"),
            ],
            "{client}"
        );
    }
}
