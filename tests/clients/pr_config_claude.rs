//! Issue 35, item 2, on the real Claude Code (2.1.197 and 2.1.328): a pull request that
//! changes `.claude/settings.json` (a `SessionStart` hook) is reviewed with it readable and
//! not applied. The worktree's settings are moved into the launch's `pr_config` by the
//! executor; the stand-in model API (`common::model_api`, 127.0.0.1) answers the first turn
//! with a call of Claude Code's `Bash` tool that prints the kept file, and records the
//! tool's output in the next request. The hook's marker is never made; the bite: the same
//! worktree with the plan's `worktree_remove` emptied (the file left in place, and the
//! settings sources opened again) runs the hook. Offline: dummy keys, a dead proxy.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::model_api::{
    ModelApi, anthropic_tool_output, anthropic_turn, offers_tool, response,
};
use crate::common::peers::peer;
use crate::common::tool_attacks::{self, Scene};
use kcap_mcp_registry::LaunchContext;
use kcap_mcp_registry::clients::Client;
use kcap_mcp_registry::clients::plan::EnvVar;
use kcap_mcp_registry::launch::{self, Options};

pub(crate) fn trials() -> Vec<libtest_mimic::Trial> {
    real_client_tests![
        claude_reads_the_pull_requests_settings_and_does_not_apply_them,
        claude_next_reads_the_pull_requests_settings_and_does_not_apply_them,
    ]
}

fn claude_reads_the_pull_requests_settings_and_does_not_apply_them() {
    kept_not_applied("KCAP_CLAUDE_BIN");
}

fn claude_next_reads_the_pull_requests_settings_and_does_not_apply_them() {
    kept_not_applied("KCAP_CLAUDE_NEXT_BIN");
}

/// The pull request's settings: a `SessionStart` hook that leaves a marker.
fn settings(marker: &Path) -> String {
    serde_json::json!({"hooks": {"SessionStart": [{"hooks": [
        {"type": "command", "command": format!("touch {}", marker.display())}
    ]}]}})
    .to_string()
}

fn kept_not_applied(var: &'static str) {
    let Some(bin) = peer(var) else { return };
    let (output, ran) = review(&bin, false);
    assert!(
        output.contains("\"SessionStart\"") && output.contains("touch "),
        "{var}: the reviewer did not read the kept settings: {output}"
    );
    assert!(!ran, "{var}: the pull request's hook ran");
    // The bite: left in the worktree and loaded, the same settings run their hook.
    let (_, ran) = review(&bin, true);
    assert!(
        ran,
        "{var}: with the settings left in place and loaded, no hook ran"
    );
}

/// One review of a worktree whose `.claude/settings.json` holds [`settings`]: the `Bash`
/// tool's output (the kept file, `cat`), and whether the hook's marker was made. `leave`:
/// the plan neither moves the file out nor keeps Claude Code's settings sources closed.
fn review(bin: &Path, leave: bool) -> (String, bool) {
    let scene = Scene::new();
    let marker = scene.root().join("hooks/ran");
    std::fs::create_dir_all(marker.parent().unwrap()).unwrap();
    let worktree = scene.worktree();
    std::fs::create_dir_all(worktree.join(".claude")).unwrap();
    std::fs::write(worktree.join(".claude/settings.json"), settings(&marker)).unwrap();
    let kept = scene.launch_dir().join("pr-config/.claude/settings.json");
    let input =
        serde_json::json!({"command": format!("cat {}", kept.display()), "description": "read"});
    let api = ModelApi::answering(move |req| {
        let body = req.json().unwrap_or_default();
        let call = offers_tool(&body, "Bash") && anthropic_tool_output(&body).is_none();
        let turn = anthropic_turn("claude-stand-in", call.then_some(("Bash", &input)));
        response("200 OK", "text/event-stream", &turn)
    });
    let mut ctx = LaunchContext {
        agent_id: "a1".into(),
        prompt: Some(tool_attacks::PROMPT.into()),
        worktree: Some(worktree.display().to_string()),
        launch_dir: Some(scene.launch_dir().display().to_string()),
        ..LaunchContext::default()
    };
    ctx.credentials.env = vec![
        EnvVar::new("ANTHROPIC_API_KEY", "sk-ant-dummy-0123456789abcdefghij"),
        EnvVar::new("ANTHROPIC_BASE_URL", &api.url),
        EnvVar::new("IS_SANDBOX", "1"),
    ];
    let mut plan = tool_attacks::offline_plan(Client::Claude, &ctx);
    if leave {
        plan.worktree_remove.clear();
        plan.pr_config = None;
        plan.argv.retain(|a| a != "--setting-sources=");
    }
    let options = crate::common::carry::reach(
        Options::default()
            .with_dialog_quiet(Duration::from_secs(5))
            .with_die_with_parent(true),
        &[],
        &[marker.parent().unwrap()],
    );
    let reviewer = launch::launch_with_parent_env(&plan, bin, &options, &tool_attacks::daemon_env)
        .unwrap_or_else(|e| panic!("{}: {e}", bin.display()));
    let deadline = Instant::now() + Duration::from_secs(90);
    let output = if leave {
        // The hook runs at the session's start; the kept file is not there to read.
        let reviewer = reviewer;
        wait_for(&marker, deadline);
        drop(reviewer);
        String::new()
    } else {
        tool_attacks::until_tool_output(reviewer, &api, anthropic_tool_output, deadline, "claude")
    };
    (output, marker.exists())
}

/// Waits until `path` exists or `deadline` passes.
fn wait_for(path: &Path, deadline: Instant) {
    while !path.exists() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
}
