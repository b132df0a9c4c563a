//! The hostile configuration `verify copilot` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment this client reads servers or hooks from.

use serde_json::json;

use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer, names};
use crate::clients::plan::EnvVar;

/// `verify copilot`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = VerifySpec {
    hostile: write,
    credential_files: &[],
    prompt: false,
    cache: true,
    servers_run_in_worktree: true,
};

/// Copilot CLI: `$COPILOT_HOME/mcp-config.json` and a `SessionStart` hook in its
/// `settings.json`, trust in the worktree (`config.json`), the worktree's `.mcp.json`,
/// `.github/mcp.json` and `.github/hooks/`; the daemon's environment names that
/// `COPILOT_HOME` and trusts everything (`COPILOT_ALLOW_ALL`).
fn write(w: &mut Writer) -> Setup {
    let typed = |command: &str, args: &[String; 3]| json!({"type": "stdio", "command": command, "args": args});
    let files = [
        (Scope::User, "user", "home/.copilot/mcp-config.json"),
        (Scope::Project, "project", "parent/worktree/.mcp.json"),
        (Scope::Project, "github", "parent/worktree/.github/mcp.json"),
    ];
    for (scope, tag, rel) in files {
        let servers = w.servers(scope, tag, rel, &names(tag, &[]), typed);
        w.write_json(rel, &json!({"mcpServers": servers}))?;
    }
    let hook = |w: &mut Writer, scope, tag: &str, rel: &str| {
        let command = w.hook(scope, tag, rel, "SessionStart");
        json!({"SessionStart": [{"type": "command", "bash": command, "timeoutSec": 10}]})
    };
    let rel = "home/.copilot/settings.json";
    let hooks = hook(w, Scope::User, "user-settings", rel);
    w.write_json(rel, &json!({"hooks": hooks}))?;
    let rel = "parent/worktree/.github/hooks/repo.json";
    let hooks = hook(w, Scope::Project, "repo-hooks", rel);
    w.write_json(rel, &json!({"version": 1, "hooks": hooks}))?;
    w.write_json(
        "home/.copilot/config.json",
        &json!({"trustedFolders": [w.s("parent/worktree"), w.s("parent")]}),
    )?;
    Ok((
        vec![
            ("COPILOT_HOME".into(), w.s("home/.copilot")),
            ("COPILOT_ALLOW_ALL".into(), "true".into()),
        ],
        vec![
            EnvVar::new("COPILOT_OFFLINE", "true"),
            EnvVar::new("COPILOT_PROVIDER_BASE_URL", "http://127.0.0.1:9/v1"),
            EnvVar::new("COPILOT_MODEL", "gpt-4o"),
        ],
    ))
}
