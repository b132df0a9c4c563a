//! The hostile configuration `verify opencode` surrounds a launch with (see
//! [`crate::clients::hostile`]): every file and variable of the user, the repository and the
//! daemon's environment this client reads servers or hooks from.

use serde_json::json;

use crate::clients::hostile::{Scope, Setup, VerifySpec, Writer, names};

/// `verify opencode`: this client's hostile configuration and how its launch is judged.
pub const VERIFY: VerifySpec = VerifySpec {
    hostile: write,
    credential_files: &[],
    prompt: false,
    cache: false,
    servers_run_in_worktree: true,
};

/// OpenCode: its user config (under `XDG_CONFIG_HOME` and the default `~/.config`),
/// `~/.opencode/`, the worktree's `opencode.json` and `.opencode/`, the parent directory's
/// `opencode.json`, and the files and value `OPENCODE_CONFIG`, `OPENCODE_CONFIG_DIR` and
/// `OPENCODE_CONFIG_CONTENT` give.
fn write(w: &mut Writer) -> Setup {
    let local = |command: &str, args: &[String; 3]| json!({"type": "local", "command": [command, &args[0], &args[1], &args[2]], "enabled": true});
    let config = |w: &mut Writer, scope, tag: &str, rel: &str| {
        let servers = w.servers(scope, tag, rel, &names(tag, &[]), local);
        json!({"$schema": "https://opencode.ai/config.json", "mcp": servers})
    };
    let files = [
        (Scope::User, "user", "xdg-config/opencode/opencode.json"),
        (
            Scope::User,
            "user-default",
            "home/.config/opencode/opencode.json",
        ),
        (Scope::User, "homedot", "home/.opencode/opencode.json"),
        (Scope::Project, "project", "parent/worktree/opencode.json"),
        (
            Scope::Project,
            "projectdot",
            "parent/worktree/.opencode/opencode.json",
        ),
        (Scope::Project, "parent", "parent/opencode.json"),
        (Scope::Environment, "envfile", "extra/opencode-config.json"),
        (
            Scope::Environment,
            "envdir",
            "extra/opencode-dir/opencode.json",
        ),
    ];
    for (scope, tag, rel) in files {
        let value = config(w, scope, tag, rel);
        w.write_json(rel, &value)?;
    }
    let content = config(
        w,
        Scope::Environment,
        "envcontent",
        "OPENCODE_CONFIG_CONTENT",
    );
    Ok((
        vec![
            ("OPENCODE_CONFIG".into(), w.s("extra/opencode-config.json")),
            ("OPENCODE_CONFIG_DIR".into(), w.s("extra/opencode-dir")),
            ("OPENCODE_CONFIG_CONTENT".into(), content.to_string()),
        ],
        Vec::new(),
    ))
}
