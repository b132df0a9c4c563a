//! Every installable real client starts inside the reviewer's sandbox
//! (`Confinement::Required`, `launch::sandbox`): `--version`, carried out by the executor in a
//! pseudo-terminal with the plan's `HOME` and `TMPDIR` in the launch directory, exits 0 and
//! prints the client's version. Claude Code and OpenCode (their Bun runtime) abort without
//! their own `/proc/<pid>` (`/proc/self/maps`, `statm`, `cgroup`) and `/proc/sys/vm`, which the
//! sandbox gives them and nothing more of `/proc`: without that rule these tests fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::carry::{terminal_plan, until_exit};
use crate::common::peers::{inherited_path, peer, skip};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_starts_in_the_sandbox,
        claude_next_starts_in_the_sandbox,
        codex_starts_in_the_sandbox,
        gemini_starts_in_the_sandbox,
        opencode_starts_in_the_sandbox,
        copilot_starts_in_the_sandbox,
        qwen_starts_in_the_sandbox,
    ]
}

fn claude_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_CLAUDE_BIN", Client::Claude, "(Claude Code)");
}

fn claude_next_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_CLAUDE_NEXT_BIN", Client::Claude, "(Claude Code)");
}

fn codex_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_CODEX_BIN", Client::Codex, "codex-cli ");
}

fn gemini_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_GEMINI_BIN", Client::Gemini, "0.");
}

fn opencode_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_OPENCODE_BIN", Client::OpenCode, "1.");
}

fn copilot_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_COPILOT_BIN", Client::Copilot, "1.");
}

fn qwen_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_QWEN_BIN", Client::Qwen, "0.");
}

/// `var`'s client, `--version` in the sandbox: exit status 0 and `version` in its output.
fn starts_in_the_sandbox(var: &'static str, client: Client, version: &str) {
    let Some(bin) = peer(var) else { return };
    if let Some(missing) = sandbox::missing() {
        assert!(
            std::env::var_os("KCAP_REQUIRE_PEERS").is_none_or(|v| v != "1"),
            "this kernel lacks {missing}; KCAP_REQUIRE_PEERS=1"
        );
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let root = tempfile::tempdir().unwrap();
    let tree = root.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    let launch_dir = root.path().join("launch");
    let mut plan = version_plan(client, &tree, &launch_dir);
    let mut options = Options::default().with_confinement(Confinement::Required);
    // Copilot CLI's npm launcher runs the package it unpacked into the daemon's cache.
    if let Some(cache) =
        std::env::var_os("KCAP_COPILOT_CACHE").filter(|_| client == Client::Copilot)
    {
        let cache = PathBuf::from(cache);
        plan.env.push(EnvVar::new(
            "COPILOT_PKG_CACHE_HOME",
            cache.join("copilot").display().to_string(),
        ));
        options = options.with_sandbox_read_exec(cache);
    }
    let mut reviewer =
        launch::launch(&plan, &bin, &options).unwrap_or_else(|e| panic!("{client}: {e}"));
    let (output, status) = until_exit(&mut reviewer, Duration::from_secs(60));
    reviewer.stop().unwrap();
    assert!(
        status.is_some_and(|s| s.success()),
        "{client} --version in the sandbox ended with {status:?}:\n{output}"
    );
    assert!(
        output.contains(version),
        "{client} --version in the sandbox printed no version ({version:?}):\n{output}"
    );
}

/// A terminal launch of `client --version` in `tree`, `HOME` and `TMPDIR` in `launch_dir`.
fn version_plan(client: Client, tree: &Path, launch_dir: &Path) -> LaunchPlan {
    let dir = launch_dir.display();
    LaunchPlan {
        cwd: Some(tree.display().to_string()),
        argv: vec!["--version".into()],
        env: vec![
            EnvVar::new("HOME", format!("{dir}/home")),
            EnvVar::new("TMPDIR", format!("{dir}/tmp")),
            EnvVar::new("PATH", inherited_path().to_string_lossy()),
        ],
        dirs: vec!["home".into(), "tmp".into()],
        ..terminal_plan(client, launch_dir)
    }
}
