//! Every installable real client starts inside the reviewer's sandbox
//! (`Confinement::Required`, `launch::sandbox`): `--version`, carried out by the executor in a
//! pseudo-terminal with the plan's `HOME` and `TMPDIR` in the launch directory, exits 0 and
//! prints the client's version. Claude Code and OpenCode (their Bun runtime) abort without
//! their own `/proc/<pid>` (`/proc/self/maps`, `statm`, `cgroup`) and `/proc/sys/vm`, which the
//! sandbox gives them and nothing more of `/proc`: without that rule these tests fail.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::carry::{until_exit, worktree_plan};
use crate::common::peers::{inherited_path, peer, skip};
use crate::common::tool_attacks::{self, Scene};
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::{EnvVar, LaunchPlan};
use kcap_mcp_registry::launch::sandbox::{self, Confinement};
use kcap_mcp_registry::launch::{self, Options};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_starts_in_the_sandbox,
        claude_next_starts_in_the_sandbox,
        claude_native_install_starts_in_the_sandbox,
        codex_starts_in_the_sandbox,
        codex_next_starts_in_the_sandbox,
        gemini_starts_in_the_sandbox,
        opencode_starts_in_the_sandbox,
        copilot_starts_in_the_sandbox,
        qwen_starts_in_the_sandbox,
        claude_tool_commands_are_confined,
        claude_next_tool_commands_are_confined,
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

fn codex_next_starts_in_the_sandbox() {
    starts_in_the_sandbox("KCAP_CODEX_NEXT_BIN", Client::Codex, "codex-cli ");
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

/// Claude Code laid out as its native installer lays it out: one executable file,
/// `~/.local/share/claude/versions/<version>`, behind the link `~/.local/bin/claude`, each
/// directory holding other files too (here the pinned package's `claude.exe`, a Bun
/// single-file executable, copied there). The sandbox gives the reviewer that file, not a
/// directory of it, and the client starts.
fn claude_native_install_starts_in_the_sandbox() {
    let Some(bin) = peer("KCAP_CLAUDE_BIN") else {
        return;
    };
    if !kernel_gives_sandbox() {
        return;
    }
    let home = tempfile::tempdir().unwrap();
    let versions = home.path().join(".local/share/claude/versions");
    let links = home.path().join(".local/bin");
    for dir in [&versions, &links] {
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(dir.join("secret"), "beside the client").unwrap();
    }
    let native = versions.join("pinned");
    std::fs::copy(std::fs::canonicalize(&bin).unwrap(), &native).unwrap();
    let link = links.join("claude");
    std::os::unix::fs::symlink(&native, &link).unwrap();
    assert_eq!(
        sandbox::installation(&link, None),
        vec![std::fs::canonicalize(&native).unwrap()]
    );
    version_in_the_sandbox(&link, Client::Claude, "(Claude Code)");
}

/// Whether this kernel gives the whole sandbox; a test without it reports itself skipped
/// (and fails under `KCAP_REQUIRE_PEERS=1`).
fn kernel_gives_sandbox() -> bool {
    let Some(missing) = sandbox::missing() else {
        return true;
    };
    assert!(
        std::env::var_os("KCAP_REQUIRE_PEERS").is_none_or(|v| v != "1"),
        "this kernel lacks {missing}; KCAP_REQUIRE_PEERS=1"
    );
    skip(format!("this kernel lacks {missing}"));
    false
}

/// `var`'s client, `--version` in the sandbox: exit status 0 and `version` in its output.
fn starts_in_the_sandbox(var: &'static str, client: Client, version: &str) {
    let Some(bin) = peer(var) else { return };
    if kernel_gives_sandbox() {
        version_in_the_sandbox(&bin, client, version);
    }
}

/// `client` run from `bin`, `--version` in the sandbox: exit status 0 and `version` in its
/// output.
fn version_in_the_sandbox(bin: &Path, client: Client, version: &str) {
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
        launch::launch(&plan, bin, &options).unwrap_or_else(|e| panic!("{client}: {e}"));
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
    let path = inherited_path();
    LaunchPlan {
        argv: vec!["--version".into()],
        ..worktree_plan(client, tree, launch_dir, &path.to_string_lossy())
    }
}

fn claude_tool_commands_are_confined() {
    tool_commands_are_confined("KCAP_CLAUDE_BIN");
}

fn claude_next_tool_commands_are_confined() {
    tool_commands_are_confined("KCAP_CLAUDE_NEXT_BIN");
}

/// Issue 31, from a command the client runs as a tool: a stand-in model API
/// (`common::model_api`, 127.0.0.1) answers the real Claude Code's first turn with a call of
/// its `Bash` tool, whose command tries each attack of `common::tool_attacks`; the client
/// runs it (`bypassPermissions`) and sends its output back in the next turn, which the
/// stand-in records. In the default sandbox every attack is denied and the reviewer's own
/// work is done; with the sandbox off every attack succeeds (the bite).
fn tool_commands_are_confined(var: &'static str) {
    let Some(bin) = peer(var) else { return };
    if let Some(missing) = sandbox::missing() {
        skip(format!("this kernel lacks {missing}"));
        return;
    }
    let confined = run_tool_attacks(&bin, Confinement::BestEffort);
    let open = run_tool_attacks(&bin, Confinement::Off);
    tool_attacks::assert_confined(var, &confined, &open);
}

/// One Claude Code launch under `confinement` whose first turn runs the probe as its `Bash`
/// tool; each probe's answer, read from the turn that carries the tool's output.
fn run_tool_attacks(
    bin: &Path,
    confinement: Confinement,
) -> std::collections::BTreeMap<String, bool> {
    use crate::common::model_api::{
        ModelApi, anthropic_tool_output, anthropic_turn, offers_tool, response,
    };
    use kcap_mcp_registry::LaunchContext;
    use kcap_mcp_registry::clients::root::Credentials;
    use kcap_mcp_registry::launch::Reviewer;

    let scene = Scene::new();
    let command = scene.command();
    let input = serde_json::json!({"command": command, "description": "probe"});
    let api = ModelApi::answering(move |req| {
        let body = req.json().unwrap_or_default();
        let offers_bash = offers_tool(&body, "Bash");
        let answered = req.body.contains("\"tool_result\"");
        let turn = anthropic_turn(
            "claude-stand-in",
            (offers_bash && !answered).then_some(("Bash", &input)),
        );
        response("200 OK", "text/event-stream", &turn)
    });
    let ctx = LaunchContext {
        agent_id: "a1".into(),
        prompt: Some(tool_attacks::PROMPT.into()),
        worktree: Some(scene.worktree().display().to_string()),
        launch_dir: Some(scene.launch_dir().display().to_string()),
        credentials: Credentials {
            env: vec![
                EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
                EnvVar::new("ANTHROPIC_BASE_URL", &api.url),
                EnvVar::new("IS_SANDBOX", "1"),
            ],
            files: Vec::new(),
        },
        ..LaunchContext::default()
    };
    let plan = tool_attacks::offline_plan(Client::Claude, &ctx);
    let options = Options::default()
        .with_confinement(confinement)
        .with_dialog_quiet(Duration::from_secs(5))
        .with_die_with_parent(true);
    let deadline = std::time::Instant::now() + Duration::from_secs(90);
    let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    assert!(
        matches!(reviewer, Reviewer::Terminal(_)),
        "Claude Code runs in a terminal"
    );
    let who = format!("{} ({confinement:?})", bin.display());
    let result =
        tool_attacks::until_tool_output(reviewer, &api, anthropic_tool_output, deadline, &who);
    tool_attacks::answers(&result)
}
