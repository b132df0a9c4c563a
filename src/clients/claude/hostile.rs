//! The hostile configuration `verify claude` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment this client reads servers or hooks from.

use serde_json::json;

use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer, names};
use crate::clients::plan::EnvVar;

/// `verify claude`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = VerifySpec {
    hostile: write,
    credential_files: &[],
    prompt: true,
    cache: false,
    servers_run_in_worktree: false,
};

/// Claude Code: `~/.claude.json` and the worktree's `.mcp.json` declare servers, the
/// user's `~/.claude/settings.json` and the worktree's `.claude/settings.json` a
/// `SessionStart` hook; the daemon's environment names another `CLAUDE_CONFIG_DIR`.
fn write(w: &mut Writer) -> Setup {
    let typed = |command: &str, args: &[String; 3]| json!({"type": "stdio", "command": command, "args": args});
    let rel = "home/.claude.json";
    let user = w.servers(Scope::User, "user", rel, &names("user", &[]), typed);
    let wt = w.s("parent/worktree");
    w.write_json(
        rel,
        &json!({"mcpServers": user, "hasCompletedOnboarding": true,
                "projects": {wt: {"hasTrustDialogAccepted": true, "enableAllProjectMcpServers": true}}}),
    )?;
    let rel = "parent/worktree/.mcp.json";
    let project = w.servers(
        Scope::Project,
        "project",
        rel,
        &names("project", &[]),
        typed,
    );
    w.write_json(rel, &json!({"mcpServers": project}))?;
    let rel = "extra/claude-config/.claude.json";
    let env = w.servers(
        Scope::Environment,
        "config-dir",
        rel,
        &names("config-dir", &[]),
        typed,
    );
    w.write_json(
        rel,
        &json!({"mcpServers": env, "hasCompletedOnboarding": true}),
    )?;
    for (scope, tag, rel) in [
        (Scope::User, "user-settings", "home/.claude/settings.json"),
        (
            Scope::Project,
            "project-settings",
            "parent/worktree/.claude/settings.json",
        ),
    ] {
        let command = w.hook(scope, tag, rel, "SessionStart");
        let hooks = json!({"SessionStart": [{"hooks": [{"type": "command", "command": command}]}]});
        w.write_json(
            rel,
            &json!({"hooks": hooks, "enableAllProjectMcpServers": true}),
        )?;
    }
    Ok((
        vec![
            ("CLAUDE_CONFIG_DIR".into(), w.s("extra/claude-config")),
            ("ANTHROPIC_API_KEY".into(), "kcap-verify-leaked-key".into()),
        ],
        claude_credentials(),
    ))
}

/// A dummy key and the API at a dead port; as root, `IS_SANDBOX=1`, without which Claude Code
/// refuses the plan's `--permission-mode bypassPermissions` (a daemon that runs reviewers as
/// root hands it over the same way).
fn claude_credentials() -> Vec<EnvVar> {
    let mut env = vec![
        EnvVar::new("ANTHROPIC_API_KEY", "kcap-verify-dummy-key"),
        EnvVar::new("ANTHROPIC_BASE_URL", "http://127.0.0.1:9"),
    ];
    if rustix::process::geteuid().is_root() {
        env.push(EnvVar::new("IS_SANDBOX", "1"));
    }
    env
}
